"""REINFORCE training of a placement policy against a runtime (Mirhoseini et al. 2017)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from gplace.interfaces import TrainablePlacer
from gplace.ir import Cluster, OpGraph, Placement
from gplace.loggers import Logger
from gplace.runtime.base import Runtime
from gplace.training._loop import (
    TrainResult,
    compare_greedy,
    imitate,
    measure_rollout,
    progress_bar,
    start_run,
)
from gplace.training.reinforce import reinforce_loss

__all__ = ["ReinforceTrainer", "TrainResult", "TrainablePlacer"]


class ReinforceTrainer:
    """Samples K placements per update, measures them, and takes a REINFORCE step.

    Args:
        updates: policy updates (default: 200).
        samples_per_update: K placements sampled per update (default: 8).
        lr: Adam learning rate (default: 1e-3).
        entropy_coef: weight of the entropy bonus (default: 1e-2).
        normalize_advantage: scale advantages by their batch standard deviation (default: True).
        grad_clip: gradient norm clip (default: 1.0).
        baseline_decay: EMA baseline decay (default: 0.9).
        penalty_step_time: step time (s) charged to a failed placement (default: 100, the paper's).
        checkpoint_every: updates between checkpoints (default: 10).
        max_seconds: stop after this much wall time (default: no limit).
        imitation_steps: with a ``warm_start`` placement, supervised steps that pull the policy towards it
            before the search (default: 100).
        seed: seeds sampling and initial weights (default: 0).
        progress: show a progress bar (default: False).
    """

    def __init__(
        self, updates: int = 200, samples_per_update: int = 8, lr: float = 1e-3, entropy_coef: float = 1e-2,
        normalize_advantage: bool = True, grad_clip: float = 1.0, baseline_decay: float = 0.9,
        penalty_step_time: float = 100.0,
        checkpoint_every: int = 10, max_seconds: float | None = None, imitation_steps: int = 100, seed: int = 0,
        progress: bool = False,
    ) -> None:
        if updates < 0 or samples_per_update < 1:
            raise ValueError(f"need updates >= 0 and samples_per_update >= 1, got {updates}, {samples_per_update}")
        self.updates, self.samples_per_update, self.lr = updates, samples_per_update, lr
        self.normalize_advantage = normalize_advantage
        self.entropy_coef, self.grad_clip, self.baseline_decay = entropy_coef, grad_clip, baseline_decay
        self.penalty_step_time, self.checkpoint_every = penalty_step_time, checkpoint_every
        self.max_seconds, self.seed, self.progress = max_seconds, seed, progress
        self.imitation_steps = imitation_steps

    def fit(
        self, placer: TrainablePlacer, runtime: Runtime, graph: OpGraph, cluster: Cluster, *,
        run_dir: str | Path | None = None, logger: Logger | None = None, warm_start: Placement | None = None,
    ) -> TrainResult:
        """Search for a fast placement of ``graph`` on ``cluster``.

        With ``run_dir``, metrics go to ``run_dir/metrics.jsonl`` and a checkpoint to ``run_dir/checkpoint.pt``;
        calling again with the same ``run_dir`` resumes where the last run stopped. A ``warm_start`` placement
        (e.g. the best heuristic's) is projected onto the policy's groups, counted as seen, and imitated for
        ``imitation_steps`` before the search.
        """
        run = start_run(placer, runtime, graph, cluster, lr=self.lr, seed=self.seed,
                        baseline_decay=self.baseline_decay, run_dir=run_dir, logger=logger)
        if not run.resumed and warm_start is not None:
            run.best = imitate(placer, run.optimizer, runtime, graph, cluster, warm_start, run.logger,
                               steps=self.imitation_steps, grad_clip=self.grad_clip)

        with progress_bar(self.progress, self.updates, run.first_update) as advance:
            for update in range(run.first_update, self.updates):
                # rollout: sample K placements and measure each
                devices, log_prob, entropy = placer.sample(self.samples_per_update, generator=run.generator)
                rollout = measure_rollout(np.asarray(devices), runtime, graph, cluster, self.penalty_step_time)
                run.observe(rollout)

                # baseline: EMA of successful rewards; failures stay out of it
                b = run.baseline(fallback=rollout.batch_mean())

                # update
                terms = reinforce_loss(log_prob, rollout.reward.to(log_prob.dtype), b, entropy,
                                       entropy_coef=self.entropy_coef, normalize_advantage=self.normalize_advantage)
                loss = sum(v for k, v in terms.items() if k.startswith("loss_"))
                run.optimizer.zero_grad()
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(placer.parameters(), self.grad_clip)
                run.optimizer.step()
                run.baseline.update(rollout.reward[rollout.ok].tolist())

                # log
                metrics = {**run.rollout_metrics(rollout, b), "losses/grad_norm": float(grad_norm),
                           **{f"losses/{k}": float(v.detach()) for k, v in terms.items()}}
                run.log(update, metrics)
                advance(metrics["charts/best_step_time"])

                # checkpoint
                done = update + 1 == self.updates or run.out_of_time(self.max_seconds)
                run.checkpoint(placer, update, every=self.checkpoint_every, done=done)
                if done:
                    break

        best = compare_greedy(placer, runtime, graph, cluster, run.best)
        run.logger.finish()
        return TrainResult(best[0], best[1], run.samples, time.monotonic() - run.started, run.history)
