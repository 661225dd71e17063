"""PPO training of a placement policy: the clipped surrogate over K measured placements, several passes each.

Each update samples K placements, measures them once, and then takes ``epochs`` Adam steps on the clipped
surrogate of Schulman et al. 2017, re-scoring the same placements with ``placer.evaluate``. A placement is one
action of a one-step episode, so the return is the reward itself and the value baseline needs no critic
network: it is the EMA of past batches' rewards (as in :class:`~gplace.training.ReinforceTrainer`) or the mean
reward of the batch itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal  # noqa: F401  (Literal: the inherited settings' hints resolve here)

import numpy as np
import torch

from gplace.interfaces import TrainablePlacer
from gplace.ir import Cluster, OpGraph, Placement
from gplace.loggers import Logger
from gplace.runtime.base import Runtime
from gplace.training._loop import (
    Rollout,
    Run,
    TrainResult,
    check_trainable,
    check_trainer_inputs,
    measure_rollout,
    optimizer_step,
    progress_bar,
    start_search,
)
from gplace.training.reinforce import batch_advantage, risk_seeking_baseline
from gplace.training.settings import PPOSettings
from gplace.training.trainer import autograd_on


def ppo_loss(
    new_log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantage: torch.Tensor,
    entropy: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    entropy_coef: float = 0.0,
) -> dict[str, torch.Tensor]:
    """PPO's clipped surrogate terms for K samples.

    With ``ratio = exp(new_log_prob - old_log_prob)``:
    ``loss_policy = -mean(min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A))`` and
    ``loss_entropy = -entropy_coef * mean(entropy)``; the trainer minimises the sum of the ``loss_*`` terms.

    Args:
        new_log_prob: log-probability of each sample under the policy being updated (with gradient).
        old_log_prob: log-probability under the policy that sampled it (no gradient is taken).
        advantage: advantage of each sample (no gradient is taken).
        entropy: entropy of the current policy along each sample (with gradient).
        clip_eps: the ratio is clipped to ``[1 - clip_eps, 1 + clip_eps]`` (default: 0.2).
        entropy_coef: weight of the entropy bonus (default: 0).

    Shapes:
        new_log_prob (K,), old_log_prob (K,), advantage (K,), entropy (K,) -> scalars.

    Returns:
        ``loss_policy``, ``loss_entropy`` and the diagnostics ``approx_kl`` (``mean((ratio - 1) - log ratio)``,
        an estimate of KL(old || new)), ``clip_fraction`` (share of samples whose ratio is outside the clip
        range), ``advantage_mean`` and ``entropy``.
    """
    if not clip_eps > 0:
        raise ValueError(f"clip_eps must be > 0, got {clip_eps}")
    advantage = advantage.detach()
    log_ratio = new_log_prob - old_log_prob.detach()
    ratio = log_ratio.exp()
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps)
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - log_ratio).mean()
        clip_fraction = ((ratio - 1.0).abs() > clip_eps).to(ratio.dtype).mean()
    return {
        "loss_policy": -torch.min(ratio * advantage, clipped * advantage).mean(),
        "loss_entropy": -entropy_coef * entropy.mean(),
        "approx_kl": approx_kl,
        "clip_fraction": clip_fraction,
        "advantage_mean": advantage.mean(),
        "entropy": entropy.mean().detach(),
    }


@dataclass(frozen=True, kw_only=True)
class PPOTrainer(PPOSettings):
    """Samples K placements per update, measures them, and takes ``epochs`` clipped-surrogate steps on them.

    The placer must offer ``evaluate(devices) -> (log_prob, entropy)`` (e.g. :class:`~gplace.placer.PolicyPlacer`),
    to re-score stored placements after each step. Metrics, checkpoints (``run_dir/checkpoint.pt``), exact
    resume and warm start are those of :class:`~gplace.training.ReinforceTrainer`; ``losses/…`` also carries
    ``approx_kl`` and ``clip_fraction`` of the last epoch.

    Configured by the fields of :class:`~gplace.training.settings.PPOSettings` (keywords only), e.g.
    ``PPOTrainer(updates=50, epochs=2)``.
    """

    rescores_samples: ClassVar[bool] = True
    """PPO re-scores its samples with ``placer.evaluate`` (see :func:`~gplace.training._loop.check_rescores`)."""

    def fit(
        self, placer: TrainablePlacer, runtime: Runtime, graph: OpGraph, cluster: Cluster, *,
        run_dir: str | Path | None = None, logger: Logger | None = None, warm_start: Placement | None = None,
    ) -> TrainResult:
        """Search for a fast placement of ``graph`` on ``cluster``: run directory, resume and warm start as in
        :meth:`gplace.training.ReinforceTrainer.fit`."""
        check_trainer_inputs(placer, runtime, "PPOTrainer.fit")
        with autograd_on(placer, who="PPOTrainer.fit"):
            run = start_search(placer, runtime, graph, cluster, self, run_dir=run_dir, logger=logger,
                               warm_start=warm_start)
            return self._search(run, placer, runtime, graph, cluster)

    def _search(self, run: Run, placer: TrainablePlacer, runtime: Runtime, graph: OpGraph,
                cluster: Cluster) -> TrainResult:
        """:meth:`fit`'s updates of the started ``run``, with gradients on."""
        with run.closed_on_error(), progress_bar(self.progress, self.updates, run.first_update) as advance:
            for update in run.updates_left(self):
                # rollout: sample K placements with the current policy (no gradient) and measure each
                with torch.no_grad():
                    devices, old_log_prob, _ = placer.sample(self.samples_per_update, generator=run.generator)
                devices = np.asarray(devices)
                rollout = measure_rollout(devices, runtime, graph, cluster, self.penalty_step_time)
                run.observe(rollout, self.penalty_step_time)

                # baseline and advantages, fixed for all epochs; failures stay out of the EMA
                b = self._baseline_value(run.baseline(fallback=rollout.batch_mean()), rollout)
                advantage = self._advantage(rollout, b).to(old_log_prob)  # the policy's dtype and device

                # update: `epochs` steps of the clipped surrogate on the same K placements (and, with
                # self-imitation, maximum likelihood on the best placement so far, scored in the same pass)
                target = run.imitation_target(placer) if self.self_imitation else None
                scored = devices if target is None else np.concatenate([devices, target[None]])
                sampled = len(devices)
                for _ in range(self.epochs):
                    log_prob, entropy = placer.evaluate(scored)
                    check_trainable(log_prob, placer, "evaluate", "PPOTrainer")
                    terms = ppo_loss(log_prob[:sampled], old_log_prob, advantage, entropy[:sampled],
                                     clip_eps=self.clip_eps, entropy_coef=self.entropy_coef)
                    if self.target_kl is not None and float(terms["approx_kl"]) > self.target_kl:
                        break  # past the target before this step (the first epoch's KL is 0: one step at least)
                    if target is not None:
                        terms["loss_self_imitation"] = -self.self_imitation * log_prob[sampled]
                    loss = sum(v for k, v in terms.items() if k.startswith("loss_"))
                    run.optimizer.zero_grad()
                    loss.backward()
                    grad_norm = optimizer_step(run.optimizer, placer.parameters(), self.grad_clip)
                    if run.out_of_time(self.max_seconds):  # a seconds budget ends the epochs too
                        break
                run.baseline.update(rollout.reward[rollout.ok].tolist())

                # log
                metrics = {
                    **run.rollout_metrics(rollout, b),
                    "losses/grad_norm": float(grad_norm),
                    **{f"losses/{k}": float(v.detach()) for k, v in terms.items()},
                }
                done = run.end_update(placer, update, metrics, self)  # log, checkpoint when due
                advance(metrics["charts/best_step_time"])
                if done:
                    break

        return run.finish(placer, runtime, graph, cluster)

    def _baseline_value(self, ema: float, rollout: Rollout) -> float:
        """The baseline subtracted from this batch's rewards."""
        if self.risk_seeking is not None:
            return risk_seeking_baseline(rollout.reward, self.risk_seeking)
        return rollout.batch_mean() if self.baseline == "mean" else ema

    def _advantage(self, rollout: Rollout, baseline: float) -> torch.Tensor:
        """The batch's advantages (see :func:`~gplace.training.reinforce.batch_advantage`).

        Shapes:
            returns (K,) float64.
        """
        return batch_advantage(rollout.reward, baseline, normalize=self.normalize_advantage,
                               best_only=self.risk_seeking is not None, ran=rollout.ok)
