"""REINFORCE training of a placement policy against a runtime (Mirhoseini et al. 2017)."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from gplace.ir import Cluster, OpGraph, Placement
from gplace.loggers import JsonlLogger, Logger, MultiLogger, NullLogger
from gplace.runtime.base import Measurement, Runtime
from gplace.training.baseline import EMABaseline
from gplace.training.checkpoint import load_checkpoint, save_checkpoint
from gplace.training.reinforce import reinforce_loss, step_time_reward

log = logging.getLogger(__name__)


class TrainablePlacer(Protocol):
    """What the trainer needs of a policy: sampling with log-probabilities, greedy decoding, parameters."""

    def sample(self, num_samples: int, generator: torch.Generator | None = None) -> Any:
        """``(devices (K, N) int64 per op, log_prob (K,), entropy (K,))``."""

    def greedy(self) -> Placement:
        """The most likely placement."""

    def parameters(self) -> Any:
        """Trainable parameters."""

    def state_dict(self) -> dict[str, Any]:
        """Weights."""

    def load_state_dict(self, state: dict[str, Any]) -> Any:
        """Restore weights."""


@dataclass
class TrainResult:
    """The outcome of a search."""

    best_placement: Placement
    best_measurement: Measurement
    samples: int
    """Placements measured, over all runs of a resumed search."""
    seconds: float
    """Wall time of this run (not counting earlier runs of a resumed search)."""
    history: list[dict[str, float]] = field(default_factory=list, repr=False)

    @property
    def best_step_time(self) -> float:
        """Step time of the best placement."""
        return self.best_measurement.step_time


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
        started = time.monotonic()
        torch.manual_seed(self.seed)
        generator = torch.Generator().manual_seed(self.seed)
        optimizer = torch.optim.Adam(placer.parameters(), lr=self.lr)
        baseline = EMABaseline(self.baseline_decay)
        logger = _with_jsonl(logger or NullLogger(), run_dir)
        ckpt = None if run_dir is None else Path(run_dir) / "checkpoint.pt"
        run_id = f"{graph.fingerprint}/{cluster.fingerprint}"
        best, samples, first_update, history = None, 0, 0, []

        state = None if ckpt is None else load_checkpoint(ckpt, run_id)
        if state is not None:
            placer.load_state_dict(state["policy"])
            optimizer.load_state_dict(state["optimizer"])
            baseline.load_state_dict(state["baseline"])
            generator.set_state(state["generator"])
            samples, first_update, history = state["samples"], state["update"], state["history"]
            best_placement = Placement.for_graph(graph, state["best_devices"])
            best = (best_placement, runtime.measure(graph, cluster, best_placement))
        elif warm_start is not None:
            best = self._imitate(placer, optimizer, runtime, graph, cluster, warm_start, logger)

        with _progress_bar(self.progress, self.updates, first_update) as advance:
            for update in range(first_update, self.updates):
                # rollout: sample K placements and measure each
                devices, log_prob, entropy = placer.sample(self.samples_per_update, generator=generator)
                placements = [Placement.for_graph(graph, d) for d in np.asarray(devices)]
                measurements = runtime.measure_many(graph, cluster, placements)
                samples += len(placements)
                ok = torch.tensor([m.ok for m in measurements])
                step_time = torch.tensor([m.step_time if m.ok else self.penalty_step_time for m in measurements],
                                         dtype=torch.float64)
                reward = step_time_reward(step_time)

                # best placement seen
                i = int(torch.argmin(step_time))
                if measurements[i].ok and (best is None or measurements[i].step_time < best[1].step_time):
                    best = (placements[i], measurements[i])

                # baseline: EMA of successful rewards; failures stay out of it
                batch_mean = float(reward[ok].mean()) if ok.any() else float(reward.mean())
                b = baseline(fallback=batch_mean)

                # update
                terms = reinforce_loss(log_prob, reward.to(log_prob.dtype), b, entropy,
                                       entropy_coef=self.entropy_coef,
                                       normalize_advantage=self.normalize_advantage)
                loss = sum(v for k, v in terms.items() if k.startswith("loss_"))
                optimizer.zero_grad()
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(placer.parameters(), self.grad_clip)
                optimizer.step()
                baseline.update(reward[ok].tolist())

                # log
                metrics = {
                    "charts/best_step_time": best[1].step_time if best else math.inf,
                    "charts/baseline": b,
                    "charts/samples": samples,
                    "rollout/mean_step_time": float(step_time[ok].mean()) if ok.any() else math.inf,
                    "rollout/min_step_time": float(step_time.min()) if ok.any() else math.inf,
                    "rollout/failures": int((~ok).sum()),
                    "losses/grad_norm": float(grad_norm),
                    **{f"losses/{k}": float(v.detach()) for k, v in terms.items()},
                }
                history.append({"update": update, **metrics})
                logger.log_scalars(update, metrics)
                advance(metrics["charts/best_step_time"])

                # checkpoint
                done = update + 1 == self.updates or self._out_of_time(started)
                if ckpt is not None and best is not None and ((update + 1) % self.checkpoint_every == 0 or done):
                    save_checkpoint(ckpt, {
                        "fingerprint": run_id, "update": update + 1, "samples": samples,
                        "policy": placer.state_dict(), "optimizer": optimizer.state_dict(),
                        "baseline": baseline.state_dict(), "generator": generator.get_state(),
                        "best_devices": best[0].devices, "history": history,
                    })
                if done:
                    break

        best = self._compare_greedy(placer, runtime, graph, cluster, best)
        logger.finish()
        return TrainResult(best[0], best[1], samples, time.monotonic() - started, history)

    def _imitate(self, placer, optimizer, runtime, graph, cluster, warm_start, logger):
        """Pull the policy towards ``warm_start`` (projected onto its groups); the projection's measurement."""
        target = placer.project(warm_start)
        for step in range(self.imitation_steps):
            log_prob, _ = placer.evaluate(target.devices[None])
            loss = -log_prob.mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(placer.parameters(), self.grad_clip)
            optimizer.step()
            if step % 10 == 0 or step + 1 == self.imitation_steps:
                logger.log_scalars(-self.imitation_steps + step, {"losses/imitation": float(loss.detach())})
        m = runtime.measure(graph, cluster, target)
        return (target, m) if m.ok else None

    def _out_of_time(self, started: float) -> bool:
        return self.max_seconds is not None and time.monotonic() - started >= self.max_seconds

    @staticmethod
    def _compare_greedy(placer, runtime, graph, cluster, best):
        """The greedy decode of the trained policy, if it beats the best sample."""
        with torch.no_grad():
            greedy = placer.greedy()
        m = runtime.measure(graph, cluster, greedy)
        if m.ok and (best is None or m.step_time < best[1].step_time):
            return greedy, m
        if best is None:
            raise RuntimeError(f"no placement of {graph.name!r} succeeded; the last failure: {m.reason}")
        return best


def _with_jsonl(logger: Logger, run_dir: str | Path | None) -> Logger:
    return logger if run_dir is None else MultiLogger(logger, JsonlLogger(Path(run_dir) / "metrics.jsonl"))


class _progress_bar:  # noqa: N801 - used as a context manager
    """A rich progress bar over updates, showing the best step time; silent when disabled."""

    def __init__(self, enabled: bool, total: int, completed: int) -> None:
        self.enabled, self.total, self.completed = enabled, total, completed

    def __enter__(self):
        if not self.enabled:
            return lambda best: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._bar = Progress(TextColumn("[bold]placing"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("best {task.fields[best]}"), TimeRemainingColumn(), transient=True)
        self._bar.__enter__()
        task = self._bar.add_task("train", total=self.total, completed=self.completed, best="-")
        return lambda best: self._bar.update(task, advance=1, best=f"{best * 1e3:.3f} ms")

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self._bar.__exit__(*exc)
