"""The REINFORCE loss with a baseline and an entropy bonus."""

from __future__ import annotations

import torch

EQUAL_REWARDS = 1e-6
"""Rewards whose standard deviation is below this fraction of their largest size count as equal."""


def step_time_reward(step_time: torch.Tensor) -> torch.Tensor:
    """The paper's reward, ``-sqrt(step time)``.

    Shapes:
        step_time (K,) seconds -> (K,)
    """
    return -torch.sqrt(step_time)


def batch_advantage(reward: torch.Tensor, baseline: float, *, normalize: bool = False,
                    best_only: bool = False, ran: torch.Tensor | None = None) -> torch.Tensor:
    """``reward - baseline`` of K samples.

    Args:
        reward: reward of each sample.
        baseline: subtracted from the rewards.
        normalize: divide by the standard deviation of the K rewards, so the scale of step times does not matter
            while every placement runs (a failed one is charged ``penalty_step_time``, a fixed number of seconds,
            whose size against the step times changes the search: times in ms or s sample otherwise); not where
            the rewards are equal to a millionth of their size (a collapsed policy's batch): dividing by that
            spread gave advantages of 1e6, set the step by the gradient clip alone and drowned the entropy bonus
            (default: False).
        best_only: samples below ``baseline`` get no advantage: with :func:`risk_seeking_baseline` as the
            baseline, the risk-seeking advantage (default: False).
        ran: which samples ran (not out of memory, not failed); with ``normalize`` and ``best_only``, the spread
            is of these where at least two ran and the baseline is not below all of them: a failure's penalty
            reward, which gets no advantage there, had shrunk the kept samples' by its size (28x for one
            out-of-memory sample in 8); where the baseline is below every sample that ran (few ran: it is a
            penalty or between one and a sample), the spread of all samples is its scale (that of two that ran
            gave advantages of 5,000) (default: all).

    Shapes:
        reward (K,), ran (K,) bool -> (K,), without gradient.
    """
    out = reward.detach() - baseline
    if normalize and out.numel() > 1:
        among = torch.ones_like(out, dtype=torch.bool)
        if best_only and ran is not None and int(ran.sum()) > 1 and float(out[ran].min()) <= 0.0:
            among = ran  # the baseline lies among the samples that ran, so their spread is the scale
        spread = out[among].std()
        if spread > EQUAL_REWARDS * reward.detach()[among].abs().max():
            out = out / (spread + 1e-8)
    return out.clamp(min=0.0) if best_only else out


def risk_seeking_baseline(reward: torch.Tensor, risk_seeking: float) -> float:
    """The ``1 - risk_seeking`` quantile of the K rewards, the baseline of the risk-seeking advantage.

    With it and ``best_only``, an update improves the best ``risk_seeking`` fraction of the samples rather than
    their mean (Petersen et al., ICLR 2021), which is what a search that keeps its best placement needs.

    Shapes:
        reward (K,) -> scalar.
    """
    return float(torch.quantile(reward.detach(), 1.0 - risk_seeking))


def reinforce_loss(
    log_prob: torch.Tensor,
    reward: torch.Tensor,
    baseline: float,
    entropy: torch.Tensor,
    *,
    entropy_coef: float = 0.0,
    normalize_advantage: bool = False,
    best_only: bool = False,
    ran: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """REINFORCE terms for K sampled placements.

    ``loss_policy = -mean((reward - baseline) * log_prob)`` and ``loss_entropy = -entropy_coef * mean(entropy)``;
    the trainer minimises the sum of the ``loss_*`` terms.

    Args:
        log_prob: log-probability of each sample under the policy (with gradient).
        reward: reward of each sample (no gradient), best in float64 on the CPU: the advantages are computed in
            its dtype and only then cast to ``log_prob``'s (rewards rounded to bfloat16 first tied most of a batch
            of placements 0.2 % apart).
        baseline: the baseline subtracted from the reward.
        entropy: entropy of the policy's distribution for each sample (with gradient).
        entropy_coef: weight of the entropy bonus (default: 0).
        normalize_advantage: divide the advantages by the standard deviation of the K rewards, so the
            gradient's scale does not depend on the scale of step times while every placement runs (a failure's
            penalty is a fixed number of seconds; see :func:`batch_advantage`) (default: False, the paper's loss).
        best_only: learn only from the samples at or above ``baseline`` (risk-seeking, with
            :func:`risk_seeking_baseline` as the baseline; see :func:`batch_advantage`; default: False).
        ran: which samples ran (see :func:`batch_advantage`; default: all).

    Shapes:
        log_prob (K,), reward (K,), entropy (K,) -> scalars.

    Returns:
        ``loss_policy``, ``loss_entropy`` and the diagnostics ``advantage_mean`` and ``entropy``.
    """
    adv = batch_advantage(reward, baseline, normalize=normalize_advantage, best_only=best_only, ran=ran).to(log_prob)
    return {
        "loss_policy": -(adv * log_prob).mean(),
        "loss_entropy": -entropy_coef * entropy.mean(),
        "advantage_mean": adv.mean(),
        "entropy": entropy.mean().detach(),
    }
