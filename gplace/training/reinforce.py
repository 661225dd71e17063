"""The REINFORCE loss with a baseline and an entropy bonus."""

from __future__ import annotations

import torch


def step_time_reward(step_time: torch.Tensor) -> torch.Tensor:
    """The paper's reward, ``-sqrt(step time)``.

    Shapes:
        step_time (K,) seconds -> (K,)
    """
    return -torch.sqrt(step_time)


def reinforce_loss(
    log_prob: torch.Tensor,
    reward: torch.Tensor,
    baseline: float,
    entropy: torch.Tensor,
    *,
    entropy_coef: float = 0.0,
    normalize_advantage: bool = False,
) -> dict[str, torch.Tensor]:
    """REINFORCE terms for K sampled placements.

    ``loss_policy = -mean((reward - baseline) * log_prob)`` and ``loss_entropy = -entropy_coef * mean(entropy)``;
    the trainer minimises the sum of the ``loss_*`` terms.

    Args:
        log_prob: log-probability of each sample under the policy (with gradient).
        reward: reward of each sample (no gradient).
        baseline: the baseline subtracted from the reward.
        entropy: entropy of the policy's distribution for each sample (with gradient).
        entropy_coef: weight of the entropy bonus (default: 0).
        normalize_advantage: divide the advantages by their standard deviation over the K samples, so the
            gradient's scale does not depend on the scale of step times (default: False, the paper's loss).

    Shapes:
        log_prob (K,), reward (K,), entropy (K,) -> scalars.

    Returns:
        ``loss_policy``, ``loss_entropy`` and the diagnostics ``advantage_mean`` and ``entropy``.
    """
    advantage = (reward - baseline).detach()
    if normalize_advantage and advantage.numel() > 1:
        advantage = advantage / (advantage.std() + 1e-8)
    return {
        "loss_policy": -(advantage * log_prob).mean(),
        "loss_entropy": -entropy_coef * entropy.mean(),
        "advantage_mean": advantage.mean(),
        "entropy": entropy.mean().detach(),
    }
