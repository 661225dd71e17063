"""REINFORCE training of a placement policy against a runtime (Mirhoseini et al. 2017)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn.parameter import is_lazy

from gplace.interfaces import TrainablePlacer
from gplace.ir import Cluster, OpGraph, Placement
from gplace.loggers import Logger
from gplace.runtime.base import Runtime
from gplace.torch_modes import gradients_on
from gplace.training._loop import (
    Run,
    TrainResult,
    check_trainable,
    check_trainer_inputs,
    measure_rollout,
    optimizer_step,
    progress_bar,
    start_search,
)
from gplace.training.reinforce import reinforce_loss, risk_seeking_baseline
from gplace.training.settings import SearchSettings

__all__ = ["ReinforceTrainer", "TrainResult", "TrainablePlacer", "autograd_on"]


def check_modules(who: str, **modules: Any) -> None:
    """Raise a ``TypeError`` naming the argument (``encoder=``, ``policy=``) that is no ``torch.nn.Module``."""
    for role, module in modules.items():
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"{who}: {role} must be a torch nn.Module, got {type(module).__name__}")


@contextlib.contextmanager
def autograd_on(*trained: Any, who: str) -> Iterator[None]:
    """Gradients recorded in the block whatever the caller's mode (``torch.no_grad()``, ``torch.inference_mode()``,
    ``torch.set_grad_enabled(False)``), which is back after it: training runs the same in a host that infers.

    Raises:
        RuntimeError: a weight or buffer of the ``trained`` modules (or placers) was made under
            ``torch.inference_mode()``, which autograd cannot use (names the first and ``who`` trains it).
    """
    with gradients_on():
        for module in trained:
            named = [*module.named_parameters(), *module.named_buffers()] if isinstance(module, torch.nn.Module) \
                else enumerate(module.parameters())
            # a lazy module's parameter is made at its first forward (here, under autograd): none to look at yet
            made = [str(name) for name, tensor in named if not is_lazy(tensor) and tensor.is_inference()]
            if made:
                raise RuntimeError(
                    f"{who}: {type(module).__name__} tensor {made[0]!r} ({len(made)} in all) was made under "
                    "torch.inference_mode(), and autograd cannot train through inference tensors; build the "
                    "encoder, policy and placer outside inference_mode (torch.no_grad() is fine)")
        yield


@dataclass(frozen=True, kw_only=True)
class ReinforceTrainer(SearchSettings):
    """Samples K placements per update, measures them, and takes a REINFORCE step.

    Configured by the fields of :class:`~gplace.training.settings.SearchSettings` (keywords only), e.g.
    ``ReinforceTrainer(updates=100, lr=1e-2)``.
    """

    def fit(
        self, placer: TrainablePlacer, runtime: Runtime, graph: OpGraph, cluster: Cluster, *,
        run_dir: str | Path | None = None, logger: Logger | None = None, warm_start: Placement | None = None,
    ) -> TrainResult:
        """Search for a fast placement of ``graph`` on ``cluster``.

        With ``run_dir``, metrics go to ``run_dir/metrics.jsonl`` and a checkpoint to ``run_dir/checkpoint.pt``;
        calling again with the same ``run_dir`` resumes where the last run stopped. A ``warm_start`` placement
        (e.g. the best heuristic's) is measured and kept as the best placement unless beaten; its projection onto
        the policy's groups is counted as seen and imitated for ``imitation_steps`` before the search.
        Gradients are on whatever the caller's mode (``torch.no_grad()``, ``torch.inference_mode()``): see
        :func:`autograd_on`, whose ``RuntimeError`` a placer made under ``inference_mode`` raises.
        """
        check_trainer_inputs(placer, runtime, "ReinforceTrainer.fit")
        with autograd_on(placer, who="ReinforceTrainer.fit"):
            run = start_search(placer, runtime, graph, cluster, self, run_dir=run_dir, logger=logger,
                               warm_start=warm_start)
            return self._search(run, placer, runtime, graph, cluster)

    def _search(self, run: Run, placer: TrainablePlacer, runtime: Runtime, graph: OpGraph,
                cluster: Cluster) -> TrainResult:
        """:meth:`fit`'s updates of the started ``run``, with gradients on."""
        with run.closed_on_error(), progress_bar(self.progress, self.updates, run.first_update) as advance:
            for update in run.updates_left(self):
                # rollout: sample K placements and measure each
                devices, log_prob, entropy = placer.sample(self.samples_per_update, generator=run.generator)
                check_trainable(log_prob, placer, "sample", "ReinforceTrainer")
                rollout = measure_rollout(np.asarray(devices), runtime, graph, cluster, self.penalty_step_time)
                run.observe(rollout, self.penalty_step_time)

                # baseline: EMA of successful rewards (failures stay out of it), or the risk-seeking quantile
                b = run.baseline(fallback=rollout.batch_mean())
                if self.risk_seeking is not None:
                    b = risk_seeking_baseline(rollout.reward, self.risk_seeking)

                # update (advantages from the float64 rewards, then in the policy's dtype)
                terms = reinforce_loss(log_prob, rollout.reward, b, entropy,
                                       entropy_coef=self.entropy_coef, normalize_advantage=self.normalize_advantage,
                                       best_only=self.risk_seeking is not None, ran=rollout.ok)
                target = run.imitation_target(placer) if self.self_imitation else None
                if target is not None:  # maximum likelihood on the best placement so far
                    terms["loss_self_imitation"] = -self.self_imitation * placer.evaluate(target[None])[0][0]
                loss = sum(v for k, v in terms.items() if k.startswith("loss_"))
                run.optimizer.zero_grad()
                loss.backward()
                grad_norm = optimizer_step(run.optimizer, placer.parameters(), self.grad_clip)
                run.baseline.update(rollout.reward[rollout.ok].tolist())

                # log
                metrics = {**run.rollout_metrics(rollout, b), "losses/grad_norm": float(grad_norm),
                           **{f"losses/{k}": float(v.detach()) for k, v in terms.items()}}
                done = run.end_update(placer, update, metrics, self)  # log, checkpoint when due
                advance(metrics["charts/best_step_time"])
                if done:
                    break

        return run.finish(placer, runtime, graph, cluster)
