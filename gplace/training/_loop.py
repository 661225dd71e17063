"""Pieces every training loop shares (REINFORCE, PPO, multi-graph): run state, resume, rollouts, metrics, warm
start, the end.

A trainer's ``fit`` stays a loop that reads top to bottom; what is the same in every loop lives here:

- :func:`start_loop` builds Adam, the seeded sample generator and the logger, and restores a :class:`Loop`
  (counters, history, time limit, checkpoint cadence) from ``checkpoint.pt``; :func:`start_run` does so for a
  search on one graph (a :class:`Run`: a loop with the EMA baseline and the best placement);
- :func:`measure_rollout` measures K sampled placements and turns them into penalised step times and rewards;
  :func:`log_failures` logs the failed ones, a line per rollout;
- :meth:`Run.observe`, :meth:`Loop.log` and :meth:`Run.checkpoint` keep the best placement, the history and the
  checkpoint, in one format for every trainer, each resuming its own runs exactly (a checkpoint records which
  trainer wrote it: another one refuses it; a resume keeps its own learning rate and baseline decay);
- :func:`imitate` pulls the policy towards a warm-start placement, :func:`compare_greedy` ends the search.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import math
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gplace.baselines._common import PlacementInfeasibleError
from gplace.interfaces import TrainablePlacer
from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.errors import short_repr
from gplace.loggers import (
    JsonlLogger,
    Logger,
    MultiLogger,
    NullLogger,
    check_logger,
    close_as_failed,
    finish_logger,
)
from gplace.placer import ContractError
from gplace.run_dir import hold_dir, keep_previous, previous_name
from gplace.runtime.base import Measurement, Runtime, check_runtime, measure_each
from gplace.search_result import TrainResult
from gplace.training.baseline import EMABaseline
from gplace.training.checkpoint import load_checkpoint, restoring, save_checkpoint
from gplace.training.reinforce import step_time_reward
from gplace.training.settings import LoopSettings, SearchSettings

log = logging.getLogger(__name__)

Best = tuple[Placement, Measurement]
"""The best placement seen and its measurement."""


# ---------------------------------------------------------------------- rollouts
@dataclass
class Rollout:
    """K sampled placements and what measuring them gave."""

    placements: list[Placement]
    measurements: list[Measurement]
    ok: torch.Tensor
    """(K,) bool: the placement ran."""
    step_time: torch.Tensor
    """(K,) float64 seconds; a failed placement is charged the penalty step time."""
    reward: torch.Tensor
    """(K,) float64 ``-sqrt(step_time)``."""

    def batch_mean(self) -> float:
        """Mean reward of the successful samples (of all when none succeeded): the per-batch baseline."""
        return float(self.reward[self.ok].mean()) if self.ok.any() else float(self.reward.mean())


def measure_rollout(devices: np.ndarray, runtime: Runtime, graph: OpGraph, cluster: Cluster,
                    penalty_step_time: float) -> Rollout:
    """Measure sampled placements through ``runtime.measure_many``.

    Shapes:
        devices (K, N) int device per op; the returned tensors are (K,).
    """
    placements = [Placement.for_graph(graph, d) for d in np.asarray(devices)]
    measurements = measure_each(runtime, graph, cluster, placements)
    ok = torch.tensor([m.ok for m in measurements])
    step_time = torch.tensor([m.step_time if m.ok else penalty_step_time for m in measurements], dtype=torch.float64)
    return Rollout(placements, measurements, ok, step_time, step_time_reward(step_time))


# ---------------------------------------------------------------------- run state
@dataclass
class Loop:
    """What every training loop keeps (one graph or many): what a checkpoint saves and a resume restores."""

    optimizer: torch.optim.Optimizer
    generator: torch.Generator
    """Draws every sample, so a resumed run draws what an uninterrupted one would."""
    logger: Logger
    run_id: str
    """What the run is on (fingerprints); a checkpoint of another run is refused."""
    runtime_id: str | None = None
    """What measures the run's placements; a checkpoint measured by another runtime is refused."""
    grouping_id: str | None = None
    """The grouping the policy decodes (number of groups and a digest); a checkpoint of another is refused."""
    seed: int | None = None
    """Seeds the samples (and the weights of the networks :func:`gplace.place` builds); a checkpoint of another seed
    is refused."""
    trainer_id: str | None = None
    """The algorithm (the trainer's class name); a checkpoint another algorithm wrote is refused."""
    settings: dict[str, Any] | None = None
    """The encoder's and policy's constructor settings and the trainer's; a resume with others is warned about."""
    ckpt: Path | None = None
    started: float = field(default_factory=time.monotonic)
    earlier_seconds: float = 0.0
    """Wall seconds the earlier processes of a resumed run spent, up to its checkpoint."""
    samples: int = 0
    """Placements sampled, over every run of a resumed search."""
    first_update: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    resumed: bool = False
    held: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, repr=False)
    """The run directory's lock (:func:`gplace.run_dir.hold_dir`), held until :meth:`close`."""

    def close(self, failed: bool = False) -> None:
        """Finish the logger (a ``failed`` run's with exit code 1, where its ``finish`` takes one:
        :func:`gplace.loggers.finish_logger`) and let go of the run directory."""
        try:
            finish_logger(self.logger, 1 if failed else None)
        finally:
            self.held.close()

    @contextlib.contextmanager
    def closed_on_error(self):
        """Close the loop, marking its run failed, when the block raises (the run directory let go at once, not
        when the loop is collected); on success the caller closes it, as :meth:`Run.finish` does."""
        try:
            yield self
        except BaseException:
            close_as_failed(self)
            raise

    def log(self, update: int, metrics: dict[str, float]) -> None:
        """Append to the history and send to the logger."""
        self.history.append({"update": update, **metrics})
        self.logger.log_scalars(update, metrics)

    @property
    def seconds(self) -> float:
        """Wall seconds the run has spent, over every process of a resumed run."""
        return self.earlier_seconds + time.monotonic() - self.started

    def out_of_time(self, max_seconds: float | None) -> bool:
        """Whether this run has used ``max_seconds`` of wall time (over every process of a resumed run)."""
        return max_seconds is not None and self.seconds >= max_seconds

    def updates_left(self, settings: LoopSettings) -> range:
        """The updates still to run: from the first not done to ``settings.updates``, none once out of time (a
        finished run resumed with the same budget runs none)."""
        if self.first_update < settings.updates and self.out_of_time(settings.max_seconds):
            if self.first_update == 0:  # spent before the first update (a warm start): one update, as promised
                return range(0, 1)
            log.warning("the time budget of %.6g s was spent by the earlier run(s) of this run directory (%.1f s, "
                        "%d updates): no update runs; give a larger budget (max_seconds) to search on",
                        settings.max_seconds, self.seconds, self.first_update)
            return range(self.first_update, self.first_update)
        return range(self.first_update, settings.updates)

    def is_last(self, update: int, settings: LoopSettings) -> bool:
        """Whether ``update`` ends the run: the last one, or out of time (said at INFO)."""
        if update + 1 == settings.updates:
            return True
        if self.out_of_time(settings.max_seconds):
            log.info("time budget of %.6g s reached after %d of %d updates (%d placements sampled)",
                     settings.max_seconds, update + 1, settings.updates, self.samples)
            return True
        return False

    def due(self, update: int, every: int, done: bool) -> bool:
        """Whether to checkpoint after ``update``: every ``every``-th, and the last."""
        return self.ckpt is not None and ((update + 1) % every == 0 or done)

    def state(self, update: int) -> dict[str, Any]:
        """The checkpoint fields every loop has, after ``update``."""
        return {"fingerprint": self.run_id, "runtime": self.runtime_id, "param_shapes": self.param_shapes(),
                "grouping": self.grouping_id, "seed": self.seed, "trainer": self.trainer_id, "settings": self.settings,
                "update": update + 1, "samples": self.samples, "seconds": self.seconds,
                "optimizer": self.optimizer.state_dict(),
                "generator": self.generator.get_state(), "history": self.history}

    def param_shapes(self) -> list[tuple[int, ...]]:
        """The shape of each trained tensor, in the optimizer's order (a checkpoint of another model is refused)."""
        return [tuple(p.shape) for group in self.optimizer.param_groups for p in group["params"]]

    def restore(self, state: dict[str, Any]) -> None:
        """Load what :meth:`state` saved; the learning rate stays this run's (a resume may change it)."""
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        self.optimizer.load_state_dict(state["optimizer"])
        for group, lr in zip(self.optimizer.param_groups, lrs, strict=True):
            if group["lr"] != lr:
                log.info("resuming with learning rate %g (the checkpoint's run used %g)", lr, group["lr"])
            group["lr"] = lr
        self.generator.set_state(state["generator"])
        self.samples, self.first_update, self.history = state["samples"], state["update"], state["history"]
        self.earlier_seconds = float(state.get("seconds", 0.0))  # older checkpoints did not keep it
        self.resumed = True


def start_loop(params: Any, *, lr: float, seed: int, run_dir: str | Path | None, logger: Logger | None,
               run_id: str, runtime_id: str | None = None, grouping_id: str | None = None,
               trainer_id: str | None = None, settings: dict[str, Any] | None = None, kind: type[Loop] = Loop,
               **fields: Any) -> tuple[Loop, dict[str, Any] | None]:
    """Build Adam over ``params``, the sample generator (seeded with ``seed``; torch's global generator, which the
    networks were built from, is left as it is) and the logger (plus ``run_dir/metrics.jsonl``);
    restore the loop from ``run_dir/checkpoint.pt`` if it exists (dropping the metrics a killed run logged after it;
    on a fresh start, every update a run killed before its first checkpoint logged).

    Returns:
        The loop (of class ``kind``, with ``fields``) and the checkpoint's state, ``None`` on a fresh run.

    Raises:
        ValueError: the checkpoint belongs to another run (graph, cluster, runtime, model, grouping, seed or
            trainer).
        TypeError: ``logger`` is no gplace Logger (before anything is trained or claimed).
    """
    check_logger(logger)
    held = contextlib.ExitStack()
    try:  # whatever raises (an empty parameter list for Adam, Ctrl-C) gives the directory back at once
        if run_dir is not None:  # one process a directory, whichever trainer; a caller's own hold is kept
            held.enter_context(hold_dir(run_dir))
        logger = NullLogger() if logger is None else logger
        jsonl = None if run_dir is None else JsonlLogger(Path(run_dir) / "metrics.jsonl")
        loop = kind(optimizer=torch.optim.Adam(params, lr=lr), generator=torch.Generator().manual_seed(seed),
                    logger=logger if jsonl is None else MultiLogger(logger, jsonl), run_id=run_id,
                    runtime_id=runtime_id, grouping_id=grouping_id, seed=seed, trainer_id=trainer_id,
                    settings=settings, ckpt=None if run_dir is None else Path(run_dir) / "checkpoint.pt", held=held,
                    **fields)
        state = None if loop.ckpt is None else load_checkpoint(loop.ckpt, run_id, runtime_id=runtime_id,
                                                               param_shapes=loop.param_shapes(), grouping=grouping_id,
                                                               seed=seed, trainer=trainer_id, settings=settings)
        with restoring(loop.ckpt):
            if state is not None:
                loop.restore(state)
            if jsonl is not None:  # a file that cannot be rewritten (a full disk) gives the directory back too
                _resume_metrics(jsonl, state)
    except BaseException:
        held.close()
        raise
    return loop, state


def _resume_metrics(jsonl: JsonlLogger, state: dict[str, Any] | None) -> None:
    """Drop the step records a killed run logged after its checkpoint (every one, without a checkpoint: its
    imitation and updates run again) and write back the checkpointed ones the file lost."""
    if state is None:
        _keep_a_finished_runs_metrics(jsonl.path)
        jsonl.drop_from(-math.inf)
        return
    jsonl.drop_from(state["update"])
    restored = jsonl.restore_steps(state["history"])
    if restored:
        log.warning("%s lacked %d of the %d updates checkpointed (truncated or replaced since): written back from the "
                    "checkpoint's history", jsonl.path, restored, len(state["history"]))


def _keep_a_finished_runs_metrics(path: Path) -> None:
    """Move ``metrics.jsonl`` of a finished run whose checkpoint is gone (a ``placement.json`` beside it) to
    ``metrics.previous.jsonl``, where none is kept yet, with a WARNING: a run starting afresh there emptied it."""
    if path.with_name("placement.json").is_file() and path.is_file() and path.stat().st_size > 0 and \
            not os.path.lexists(previous_name(path)):
        keep_previous(path, "the metrics of a finished run whose checkpoint is gone, and this run starts afresh")


class ProjectionCache:
    """``placer.project(placement).devices`` of the last placement given, computed again only when another one is
    given (the best placement so far, imitated every update, rarely changes). Shapes: returns (N,) int64."""

    def __init__(self) -> None:
        self._last: tuple[Placement, np.ndarray] | None = None

    def __call__(self, placer: Any, placement: Placement) -> np.ndarray:
        if self._last is None or self._last[0] is not placement:
            self._last = (placement, placer.project(placement).devices)
        return self._last[1]


@dataclass
class Run(Loop):
    """A search on one graph: a :class:`Loop` with the EMA baseline and the best placement measured."""

    baseline: EMABaseline = field(default_factory=EMABaseline, kw_only=True)
    best: Best | None = field(default=None, kw_only=True)
    sample_step_times: list[float] = field(default_factory=list, kw_only=True, repr=False)
    """Each sample's step time in the order measured (``inf`` where it failed)."""
    _projection: ProjectionCache = field(default_factory=ProjectionCache, kw_only=True, repr=False)
    _warned_penalty: bool = field(default=False, kw_only=True, repr=False)
    returned: Best | None = field(default=None, kw_only=True)
    """The trained policy's greedy placement where an earlier :meth:`finish` returned it (it beat every sample): a
    resumed search returns nothing slower; it is neither imitated nor charted, as :attr:`best` is."""
    _saved_update: int | None = field(default=None, kw_only=True, repr=False)
    """The update after which this process last wrote the checkpoint."""

    def imitation_target(self, placer: Any) -> np.ndarray | None:
        """The best placement so far projected onto the policy's groups (``placer.project``), ``None`` before
        any placement succeeded. Shapes: returns (N,) int64."""
        return None if self.best is None else self._projection(placer, self.best[0])

    def observe(self, rollout: Rollout, penalty_step_time: float) -> None:
        """Count the samples, log the failed measurements with their placements, keep the fastest successful one;
        warn once when a placement that ran was slower than ``penalty_step_time``, a failure's charge."""
        self.samples += len(rollout.placements)
        slowest = max((m.step_time for m in rollout.measurements if m.ok), default=0.0)
        if slowest > penalty_step_time and not self._warned_penalty:
            self._warned_penalty = True
            log.warning("a placement that ran took %.4g s, more than the penalty_step_time (%.4g s) a failed one is "
                        "charged, so failing is rewarded above it: set penalty_step_time above the step times",
                        slowest, penalty_step_time)
        self.sample_step_times.extend(m.step_time if m.ok else math.inf for m in rollout.measurements)
        log_failures(rollout.placements, rollout.measurements)
        i = int(torch.argmin(torch.where(rollout.ok, rollout.step_time, math.inf)))  # failures are charged a penalty
        m = rollout.measurements[i]
        if m.ok and (self.best is None or m.step_time < self.best[1].step_time):
            self.best = (rollout.placements[i], m)

    def rollout_metrics(self, rollout: Rollout, baseline: float) -> dict[str, float]:
        """The ``charts/…`` and ``rollout/…`` metrics of an update."""
        ok = rollout.ok
        return {
            "charts/best_step_time": self.best[1].step_time if self.best else math.inf,
            "charts/baseline": baseline,
            "charts/samples": self.samples,
            "rollout/mean_step_time": float(rollout.step_time[ok].mean()) if ok.any() else math.inf,
            "rollout/min_step_time": float(rollout.step_time[ok].min()) if ok.any() else math.inf,
            "rollout/failures": int((~ok).sum()),
        }

    def end_update(self, placer: Any, update: int, metrics: dict[str, float], settings: SearchSettings) -> bool:
        """Log ``metrics`` (and a DEBUG line), checkpoint when due, and say whether the search is done (last update
        or out of time)."""
        self.log(update, metrics)
        log.debug("update %d: best step time %.6g s, rollout mean %.6g s (of the successful), %d failed", update,
                  metrics["charts/best_step_time"], metrics["rollout/mean_step_time"], metrics["rollout/failures"])
        done = self.is_last(update, settings)
        self.checkpoint(placer, update, every=settings.checkpoint_every, done=done)
        return done

    def finish(self, placer: Any, runtime: Runtime, graph: OpGraph, cluster: Cluster) -> TrainResult:
        """The best placement seen, the trained policy's greedy one or what an earlier run of this search returned
        (:attr:`returned`), whichever is fastest; closes the logger."""
        times = np.array(self.sample_step_times, dtype=np.float64)
        with self.closed_on_error():  # nothing that fits is a failed run too
            try:
                best = compare_greedy(placer, runtime, graph, cluster, self.best or self.returned)
            except PlacementInfeasibleError as err:
                failed = TrainResult(Placement.single(graph, 0), Measurement.failure(runtime.id, str(err)),
                                     self.samples, self.seconds, self.history, times)
                raise NothingFitError(str(err), failed) from None
            if self.returned is not None and self.returned[1].step_time < best[1].step_time:
                best = self.returned  # what an earlier run of this directory returned
            elif best is not self.best and self._saved_update is not None:  # the greedy placement won: kept for a
                self.returned = best                                         # resumed search to end no slower
                self.checkpoint(placer, self._saved_update, every=1, done=True)
        self.close()
        return TrainResult(best[0], best[1], self.samples, self.seconds, self.history, times)

    def checkpoint(self, placer: Any, update: int, *, every: int, done: bool) -> None:
        """Save after every ``every``-th update and at the end, also before any placement has succeeded (the best
        placement then ``None``: a rerun of a search whose samples all failed resumes it, or samples nothing more)."""
        if not self.due(update, every, done):
            return
        save_checkpoint(self.ckpt, {**self.state(update), "policy": placer.state_dict(),
                                    "baseline": self.baseline.state_dict(),
                                    "best_devices": None if self.best is None else self.best[0].devices.tolist(),
                                    "returned_devices": None if self.returned is None
                                    else self.returned[0].devices.tolist(),
                                    "sample_step_times": [float(t) for t in self.sample_step_times]})
        self._saved_update = update


def start_run(placer: Any, runtime: Runtime, graph: OpGraph, cluster: Cluster, *, lr: float, seed: int,
              baseline_decay: float, run_dir: str | Path | None, logger: Logger | None,
              trainer_id: str | None = None, trainer_settings: dict[str, Any] | None = None) -> Run:
    """Build Adam, the sample generator, the baseline and the logger, and resume from ``run_dir/checkpoint.pt`` if
    it exists.

    With ``run_dir``, metrics also go to ``run_dir/metrics.jsonl``. On resume the best placement is measured
    again (its measurement is not stored; a run whose samples all failed has none).

    Raises:
        ValueError: the placer was made for another graph or cluster than ``graph`` and ``cluster``, or the
            checkpoint belongs to another graph, cluster, runtime, model, grouping, seed or trainer.
    """
    for what, given in (("graph", graph), ("cluster", cluster)):
        own = getattr(placer, what, None)
        if own is not None and own.fingerprint != given.fingerprint:
            raise ValueError(f"the placer was made for {what} {own.name!r} ({own.fingerprint}), not the {what} "
                             f"{given.name!r} ({given.fingerprint}) given to the trainer: its samples would be "
                             f"measured on another {what}")
    run, state = start_loop(placer.parameters(), lr=lr, seed=seed, run_dir=run_dir, logger=logger,
                            run_id=f"{graph.fingerprint}/{cluster.fingerprint}", runtime_id=runtime.id,
                            grouping_id=grouping_id(placer), trainer_id=trainer_id,
                            settings=_run_settings(placer, trainer_id, trainer_settings), kind=Run,
                            baseline=EMABaseline(baseline_decay))
    if state is not None:
        with run.closed_on_error():
            with restoring(run.ckpt):  # the checkpoint's parts; the runtime's own errors are not the file's
                placer.load_state_dict(state["policy"])
                run.baseline.load_state_dict(state["baseline"])
                best = _placement_of(graph, state["best_devices"])
                returned = _placement_of(graph, state.get("returned_devices"))
            run.best = _measured_best(runtime, graph, cluster, best)
            returned = _measured_best(runtime, graph, cluster, returned)
            run.returned = returned if returned is not None and returned[1].ok else None  # a real run may fail now
            kept = state.get("sample_step_times", np.full(run.samples, np.nan))  # older checkpoints lacked them
            run.sample_step_times = [float(t) for t in kept]
    return run


def _placement_of(graph: OpGraph, devices: Sequence[int] | None) -> Placement | None:
    """A checkpoint's placement of ``graph``; ``None`` where it kept none. Shapes: devices (N,) int."""
    return None if devices is None else Placement.for_graph(graph, devices)


def _measured_best(runtime: Runtime, graph: OpGraph, cluster: Cluster, placement: Placement | None) -> Best | None:
    """A checkpoint's best placement measured again; ``None`` where none had succeeded (its measurement not
    taken)."""
    return None if placement is None else (placement, runtime.measure(graph, cluster, placement))


_RESUMABLE = frozenset({"updates", "lr", "baseline_decay", "checkpoint_every", "max_seconds", "progress", "seed",
                        "imitation_steps"})
"""Trainer settings a resume may change without a warning (the budget, the learning rate, ...; seed is checked)."""


def _run_settings(placer: Any, trainer_id: str | None, trainer: dict[str, Any] | None) -> dict[str, Any] | None:
    """:func:`run_settings` of the placer's encoder and policy."""
    return run_settings(getattr(placer, "encoder", None), getattr(placer, "policy", None), trainer_id, trainer)


def run_settings(encoder: Any, policy: Any, trainer_id: str | None,
                 trainer: dict[str, Any] | None) -> dict[str, Any] | None:
    """The encoder's, policy's and trainer's settings a checkpoint records (a resume with others is warned about)."""
    settings = model_settings(encoder, policy) or {}
    if trainer is not None:
        settings["trainer"] = {"class": trainer_id, "kwargs": {k: v for k, v in trainer.items() if k not in _RESUMABLE}}
    if isinstance(encoder, torch.nn.Module) and isinstance(policy, torch.nn.Module):
        settings["parameters"] = {"class": None, "kwargs": {"frozen": _frozen(encoder, policy)}}
    return settings or None


def _frozen(encoder: torch.nn.Module, policy: torch.nn.Module) -> str:
    """Which parameters are not trained (``requires_grad`` off: ``finetune(conditioning_only=True)``'s), in words:
    ``"none"``, or how many tensors and a digest of their names."""
    names = [f"{part}.{name}" for part, module in (("encoder", encoder), ("policy", policy))
             for name, p in module.named_parameters() if not p.requires_grad]
    if not names:
        return "none"
    total = sum(1 for module in (encoder, policy) for _ in module.parameters())
    return f"{len(names)} of {total} tensors ({hashlib.sha1(' '.join(names).encode()).hexdigest()[:12]})"


def model_settings(encoder: Any, policy: Any) -> dict[str, Any] | None:
    """``{"encoder": config, "policy": config}`` where both modules record their settings
    (:class:`gplace.configurable.Configurable`), else ``None``."""
    modules = {"encoder": encoder, "policy": policy}
    if not all(hasattr(module, "config") for module in modules.values()):
        return None
    return {name: module.config() for name, module in modules.items()}


def grouping_id(placer: Any) -> str | None:
    """``"<groups> groups/<digest>"`` of the placer's grouping (``None`` for a placer without one)."""
    grouping = getattr(placer, "grouping", None)
    if grouping is None:
        return None
    digest = hashlib.sha1(np.ascontiguousarray(grouping.op_group, dtype=np.int64).tobytes()).hexdigest()[:12]
    return f"{grouping.num_groups} groups/{digest}"


def start_search(placer: Any, runtime: Runtime, graph: OpGraph, cluster: Cluster, settings: SearchSettings, *,
                 run_dir: str | Path | None, logger: Logger | None, warm_start: Placement | None) -> Run:
    """:func:`start_run` with ``settings``, then, on a fresh run with a ``warm_start``, :func:`imitate` it and
    checkpoint (a run killed after the imitation does not repeat it); a resumed run ignores ``warm_start``, with a
    WARNING.

    The warm start itself is measured first and kept as the best placement unless its projection onto the
    policy's groups (or, later, a sample) beats it: a warm-started search never ends worse than its start.
    Imitation stops early once half of ``settings.max_seconds`` is spent.
    """
    check_rescores(placer, settings, warm_start)
    run = start_run(placer, runtime, graph, cluster, lr=settings.lr, seed=settings.seed,
                    baseline_decay=settings.baseline_decay, run_dir=run_dir, logger=logger,
                    trainer_id=type(settings).__name__, trainer_settings=dataclasses.asdict(settings))
    if run.resumed and warm_start is not None:
        log.warning("warm_start is ignored: the search resumes from its checkpoint %s at update %d, which the warm "
                    "start cannot change (it starts a fresh run only: use a new run directory to search from it)",
                    run.ckpt, run.first_update)
    elif warm_start is not None:
        with run.closed_on_error():
            _start_from(run, placer, runtime, graph, cluster, settings, warm_start)
    return run


def _start_from(run: Run, placer: Any, runtime: Runtime, graph: OpGraph, cluster: Cluster, settings: SearchSettings,
                warm_start: Placement) -> None:
    """Measure ``warm_start``, imitate it and checkpoint: the best placement is the faster of it and its
    projection onto the policy's groups."""
    given = runtime.measure(graph, cluster, warm_start)
    if not (given.ok or given.transient):  # imitated, it held the policy on placements that fail, and the search
        # found none that ran (a transient failure, a worker that died, says nothing of the placement: imitated)
        log.warning("warm_start does not run on %r (%s): the search starts from the policy as it is, without it",
                    cluster.name, given.reason)
        return
    half = None if settings.max_seconds is None else run.started + settings.max_seconds / 2
    projected = imitate(placer, run.optimizer, runtime, graph, cluster, warm_start, run.logger,
                        steps=settings.imitation_steps, grad_clip=settings.grad_clip, deadline=half)
    seen = [b for b in ((warm_start, given), projected) if b is not None and b[1].ok]
    run.best = min(seen, key=lambda b: b[1].step_time, default=None)  # the given one on a tie
    run.checkpoint(placer, -1, every=1, done=True)  # a run killed later resumes after the imitation


def check_trainer_inputs(placer: Any, runtime: Any, who: str) -> None:
    """Refuse a ``placer`` that is no :class:`~gplace.interfaces.TrainablePlacer` (a bare policy, say) or a
    ``runtime`` that is no gplace runtime, naming the argument, before anything deeper trips on it.

    Raises:
        TypeError: either is of the wrong type.
    """
    check_runtime(runtime, optional=False)
    if not isinstance(placer, TrainablePlacer) or isinstance(placer, type):
        raise TypeError(f"{who}: placer must be a trainable placer, e.g. gplace.placer.PolicyPlacer(graph, cluster, "
                        f"encoder, policy) (gplace.interfaces.TrainablePlacer), got {_kind_of(placer)}")


def _kind_of(value: Any) -> str:
    """What ``value`` is, for a refusal: a class, an object's type, or a short repr of a plain value."""
    if isinstance(value, type):
        return f"the class {value.__name__} (not an instance)"
    return short_repr(value) if value is None or isinstance(value, str | int | float) else f"a {type(value).__name__}"


def check_rescores(placer: Any, settings: SearchSettings, warm_start: Placement | None) -> None:
    """Refuse, before the first sample, what needs ``placer.evaluate``/``project`` of a placer without them.

    Raises:
        NotImplementedError: ``placer.rescores`` is false and the trainer re-scores its samples (PPO), or is given a
            warm start or ``self_imitation``.
    """
    if getattr(placer, "rescores", True):
        return
    needs = [what for what, used in ((type(settings).__name__, getattr(settings, "rescores_samples", False)),
                                     ("a warm start", warm_start is not None),
                                     ("self_imitation", bool(getattr(settings, "self_imitation", 0)))) if used]
    if needs:
        raise NotImplementedError(f"{type(placer).__name__} cannot re-score or project placements, which "
                                  f"{' and '.join(needs)} need; train it with ReinforceTrainer without them")


def check_trainable(log_prob: torch.Tensor, placer: Any, method: str, trainer: str) -> None:
    """Raise where gradients are on and ``log_prob``, what the placer's ``method`` gave, carries none (a detached
    log-probability, a policy without parameters): the search's backward would fail with torch's "element 0 of
    tensors does not require grad".

    Raises:
        ContractError: (a ValueError) naming the policy.
    """
    if torch.is_grad_enabled() and not log_prob.requires_grad:
        name = type(getattr(placer, "policy", placer)).__name__
        raise ContractError(f"policy {name}'s {method} must give log_prob carrying a gradient to the policy's "
                            f"parameters for {trainer} to train it, got one without (detached, or a policy without "
                            "parameters?)")


def optimizer_step(optimizer: torch.optim.Optimizer, parameters: Any, grad_clip: float) -> torch.Tensor:
    """Clip the gradients of ``parameters`` to norm ``grad_clip`` and step, unless their norm is not finite (a
    NaN or inf loss): then the step is skipped with a warning, so that no weight becomes NaN (and no checkpoint
    holds one). Returns the norm before clipping."""
    norm = torch.nn.utils.clip_grad_norm_(list(parameters), grad_clip)
    if torch.isfinite(norm):
        optimizer.step()
    else:
        optimizer.zero_grad()
        log.warning("the gradient norm is %s: this update is skipped, the weights stay as they were", float(norm))
    return norm


# ---------------------------------------------------------------------- warm start and the end
def imitate(placer: Any, optimizer: torch.optim.Optimizer, runtime: Runtime, graph: OpGraph, cluster: Cluster,
            warm_start: Placement, logger: Logger, *, steps: int, grad_clip: float,
            deadline: float | None = None) -> Best | None:
    """Pull the policy towards ``warm_start`` (projected onto its groups) by maximum likelihood, for ``steps``
    steps or until ``time.monotonic()`` passes ``deadline``.

    Logs ``losses/imitation`` at steps ``-steps..-1``.

    Returns:
        The projection and its measurement if it ran, else ``None``.
    """
    target = placer.project(warm_start)
    for step in range(steps):
        log_prob, _ = placer.evaluate(target.devices[None])
        check_trainable(log_prob, placer, "evaluate", "the warm start's imitation")
        loss = -log_prob.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer_step(optimizer, placer.parameters(), grad_clip)
        late = deadline is not None and time.monotonic() >= deadline
        if step % 10 == 0 or step + 1 == steps or late:
            logger.log_scalars(-steps + step, {"losses/imitation": float(loss.detach())})
        if late:
            break
    m = runtime.measure(graph, cluster, target)
    return (target, m) if m.ok else None


class NothingFitError(PlacementInfeasibleError):
    """No placement a search measured succeeded, its policy's greedy one included; :attr:`result` keeps what the
    search did (its samples, seconds and history; its placement a stand-in that failed)."""

    def __init__(self, message: str, result: TrainResult) -> None:
        super().__init__(message)
        self.result = result

    def __reduce__(self):
        return type(self), (str(self), self.result)


def compare_greedy(placer: Any, runtime: Runtime, graph: OpGraph, cluster: Cluster, best: Best | None) -> Best:
    """The greedy decode of the trained policy if it beats ``best``, else ``best``.

    Raises:
        RuntimeError: no placement succeeded, the greedy one included.
    """
    with torch.no_grad():
        greedy = placer.greedy()
    m = runtime.measure(graph, cluster, greedy)
    if m.ok and (best is None or m.step_time < best[1].step_time):
        return greedy, m
    if best is None:
        raise PlacementInfeasibleError(f"no placement of {graph.name!r} succeeded; the last failure: {m.reason}")
    return best


class progress_bar:  # noqa: N801 - used as a context manager
    """A rich progress bar over updates, showing the best step time, on stderr (as tqdm's: a closed stdout pipe,
    ``gplace ... | head -1``, ended a finished run before its files were written); silent when disabled, and where
    stderr is neither a terminal nor a notebook (rich drew nothing there but ended with an empty line).

    ``with progress_bar(...) as advance:`` gives ``advance(best_step_time)``, called once per update. While the bar
    is drawn, the log handlers (of the root and ``gplace`` loggers) writing to its terminal write above it, through
    rich's redirected ``sys.stderr``/``sys.stdout`` (:func:`redirect_log_streams`), not glued onto its line.
    """

    def __init__(self, enabled: bool, total: int, completed: int) -> None:
        self.enabled, self.total, self.completed = enabled, total, completed

    def __enter__(self):
        if not self.enabled:
            return lambda best: None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        console = Console(file=_Unfailing(sys.stderr))
        if not (console.is_terminal or console.is_jupyter):
            self.enabled = False
            return lambda best: None
        self._bar = Progress(TextColumn("[bold]placing"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("best {task.fields[best]}"), TimeRemainingColumn(), transient=True,
                             console=console)
        streams, self._moved = (sys.stdout, sys.stderr), []
        try:  # __exit__ is not called where __enter__ raises (Ctrl-C): the host's streams and handlers are put back
            self._bar.__enter__()  # on a terminal, sys.stdout and sys.stderr now print above the bar
            moves = [(old, new) for old, new in zip(streams, (sys.stdout, sys.stderr), strict=True)
                     if new is not old and (old is streams[1] or _isatty(old))]  # the bar's terminal, not a pipe
            self._moved = redirect_log_streams(moves)
            task = self._bar.add_task("train", total=self.total, completed=self.completed, best="-")
        except BaseException:
            with contextlib.suppress(Exception):
                self.__exit__(*sys.exc_info())
            sys.stdout, sys.stderr = streams
            raise
        return lambda best: self._bar.update(task, advance=1, best=f"{best * 1e3:.3f} ms")

    def __exit__(self, *exc) -> None:
        if self.enabled:
            try:
                restore_log_streams(self._moved)
            finally:
                self._bar.__exit__(*exc)


class _Unfailing:
    """A stream that drops what it cannot write (a closed or broken stderr, ``gplace ... 2>&1 | head -1``): the
    progress bar is no result, and its OSError at the end of a search lost the search's files."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError, AttributeError):  # closed (ValueError), or none at all (fd 2 closed at start)
            return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self._stream.flush()

    def isatty(self) -> bool:
        return _isatty(self._stream)

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", None) or "utf-8"


def _isatty(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (a closed or odd stream is not)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


Moved = list[tuple[logging.StreamHandler, Any, Any]]
"""Log handlers whose stream was redirected: each with its own stream and the one it writes to meanwhile."""


def redirect_log_streams(moves: Sequence[tuple[Any, Any]]) -> Moved:
    """Point every stream handler of the root and ``gplace`` loggers that writes to an ``old`` stream of ``moves``
    at its ``new`` one (file handlers are left alone); :func:`restore_log_streams` undoes it."""
    loggers = [logging.getLogger(), *(logger for name, logger in list(logging.Logger.manager.loggerDict.items())
                                      if isinstance(logger, logging.Logger) and name.split(".")[0] == "gplace")]
    handlers = dict.fromkeys(h for logger in loggers for h in logger.handlers
                             if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler))
    moved = []
    for handler in handlers:
        new = next((new for old, new in moves if handler.stream is old), None)
        if new is not None:
            moved.append((handler, handler.setStream(new), new))
    return moved


def restore_log_streams(moved: Moved) -> None:
    """Give each handler :func:`redirect_log_streams` moved its own stream back, unless it was changed since."""
    for handler, own, redirected in reversed(moved):
        if handler.stream is redirected:
            handler.setStream(own)


_QUANTITY = re.compile(r"(?<![\w:/.-])(?<!GPU )(?<!gpu )(?<!CPU )(?<!cpu )(?<!device )"
                       r"\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?(?:\s?(?:[kKMGTP]i?)?B\b)?")
"""A number in a failure reason (bytes with their unit, seconds), not a device's (``/GPU:1``, torch's ``GPU 0``)."""


def failure_kind(reason: str) -> str:
    """``reason`` with its numbers as ``N``: what :func:`log_failures` groups by (``out of memory on /GPU:1: needs
    N, has N`` for every shortfall of ``/GPU:1``)."""
    return _QUANTITY.sub("N", reason)


def log_failures(placements: list[Placement], measurements: list[Measurement], reasons_shown: int = 3, *,
                 task: str | None = None) -> None:
    """Log a rollout's failed measurements: one short WARNING line grouping them by kind of reason
    (:func:`failure_kind`; the first ``reasons_shown`` kinds), each with its first reason, how many placements
    failed so and the first devices of one, and every failure with its whole placement at DEBUG. ``task``
    (e.g. ``"task g on c"``) starts the lines. A search in a tight memory, where most samples fail, logs a line
    per rollout."""
    failed = [(p, m.reason) for p, m in zip(placements, measurements, strict=True) if not m.ok]
    if not failed:
        return
    head = f"{task}: " if task else ""
    by_kind: dict[str, list[tuple[Placement, str]]] = {}
    for placement, reason in failed:
        by_kind.setdefault(failure_kind(reason), []).append((placement, reason))
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%sfailed measurement (%s) of placement %s", head, reason, placement.devices.tolist())
    shown = [_failure_group(group) for group in list(by_kind.values())[:reasons_shown]]
    more = len(by_kind) - len(shown)
    log.warning("%sfailed measurements, %d of %d placements: %s%s", head, len(failed), len(placements),
                "; ".join(shown), f"; and {more} other kind(s) of reason (DEBUG lists every one)" if more else "")


def _failure_group(group: list[tuple[Placement, str]]) -> str:
    """``<the first reason>[ and the like] (<n>x; e.g. placement <its first 16 devices>)``: "the like" where the
    others differ in their numbers."""
    placement, reason = group[0]
    like = "" if all(r == reason for _, r in group) else " and the like"
    return f"{reason}{like} ({len(group)}x; e.g. placement {describe_devices(placement, limit=16)})"


def describe_devices(placement: Placement, limit: int = 64) -> str:
    """The device index of each op, the first ``limit`` of them, for a log line."""
    devices = placement.devices.tolist()
    more = f" ... ({len(devices)} ops)" if len(devices) > limit else ""
    return f"{devices[:limit]}{more}"
