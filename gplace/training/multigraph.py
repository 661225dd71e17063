"""One policy trained over many (graph, cluster) tasks, then fine-tuned on a new one (GDP, Zhou et al. 2019).

:class:`MultiGraphTrainer` shares one encoder and one policy between a :class:`~gplace.placer.PolicyPlacer` per
task. Step times of different graphs differ by orders of magnitude, so each task's reward is normalised by a
reference step time of that task, the best single-device one: ``reward = -sqrt(step time / reference)``. Each
task keeps its own EMA baseline, and advantages are normalised within each task's batch of samples.
:func:`finetune` then runs a plain :class:`~gplace.training.ReinforceTrainer` on a new graph from the
pretrained weights.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from gplace.defaults import MAX_GROUPS
from gplace.ir import Cluster, OpGraph, Placement
from gplace.loggers import Logger
from gplace.runtime.base import Runtime, check_runtime, measure_each
from gplace.training._loop import (
    NothingFitError,
    ProjectionCache,
    check_trainable,
    grouping_id,
    log_failures,
    optimizer_step,
    run_settings,
    start_loop,
)
from gplace.training.baseline import EMABaseline
from gplace.training.checkpoint import restoring, save_checkpoint
from gplace.training.ppo import PPOTrainer
from gplace.training.reinforce import reinforce_loss
from gplace.training.settings import MultiGraphSettings
from gplace.training.trainer import ReinforceTrainer, TrainResult, autograd_on, check_modules

__all__ = ["MultiGraphResult", "MultiGraphTrainer", "Rollout", "Task", "TaskRollout", "TaskResult", "finetune",
           "reference_step_time"]

log = logging.getLogger(__name__)

Task = tuple[OpGraph, Cluster]
"""A graph to place and the cluster to place it on."""


@dataclass
class TaskResult:
    """The outcome of multi-graph training on one task."""

    graph: str
    cluster: str
    reference_step_time: float
    """The step time rewards are normalised by: the best single-device one (see :func:`reference_step_time`)."""
    best_step_time: float
    """Best step time of the task's placements measured in training, its start (``fit(starts=...)``) included
    (``inf`` if none was measured or none succeeded)."""
    best_placement: Placement | None
    greedy_step_time: float
    """Step time of the trained policy's greedy placement (``inf`` if it failed)."""
    samples: int
    """Placements of this task measured in training."""


@dataclass
class MultiGraphResult:
    """The outcome of :meth:`MultiGraphTrainer.fit`."""

    tasks: list[TaskResult]
    samples: int
    """Placements measured, over all tasks and all runs of a resumed training."""
    updates: int
    """Updates done, over all runs of a resumed training."""
    seconds: float
    """Wall time of training, over all runs of a resumed training."""
    history: list[dict[str, float]] = field(default_factory=list, repr=False)

    @property
    def mean_greedy_ratio(self) -> float:
        """Mean over tasks of greedy step time over reference step time (lower is better)."""
        return float(np.mean([t.greedy_step_time / t.reference_step_time for t in self.tasks]))


class TaskRollout(NamedTuple):
    """K placements of one task sampled and measured, with their normalised rewards."""

    placements: list[Placement]
    step_time: torch.Tensor
    """(K,) float64 measured step time, ``nan`` where the placement failed."""
    ok: torch.Tensor
    """(K,) bool, the placement ran."""
    reward: torch.Tensor
    """(K,) float64 ``-sqrt(step time / reference)``; a failure counts as ``penalty_ratio`` times the reference."""
    log_prob: torch.Tensor
    entropy: torch.Tensor


Rollout = TaskRollout
"""The old name of :class:`TaskRollout` (it shadowed :class:`gplace.training._loop.Rollout`)."""


class _TaskState:
    """A task's placer (built on first use, sharing the modules), reference step time, baseline and best."""

    def __init__(self, graph: OpGraph, cluster: Cluster, baseline_decay: float) -> None:
        self.graph, self.cluster = graph, cluster
        self.baseline = EMABaseline(baseline_decay)
        self.best: tuple[Placement, float] | None = None
        self._projection = ProjectionCache()
        self.samples = 0
        self.reference_time: float | None = None
        """The reference step time, once measured."""
        self._placer: nn.Module | None = None
        self._warned_penalty = False

    def warn_if_failing_pays(self, ratio: torch.Tensor, ok: torch.Tensor, penalty_ratio: float) -> None:
        """Warn once when a placement that ran scored worse than ``penalty_ratio``, a failure's charge."""
        slowest = float(ratio[ok].max()) if ok.any() else 0.0
        if slowest > penalty_ratio and not self._warned_penalty:
            self._warned_penalty = True
            log.warning("task %s on %s: a placement that ran took %.4g times the reference step time, more than the "
                        "penalty_ratio (%.4g) a failed one is charged, so failing is rewarded above it: set "
                        "penalty_ratio above the ratios", self.graph.name, self.cluster.name, slowest, penalty_ratio)

    def placer(self, encoder: nn.Module, policy: nn.Module, max_groups: int, runtime: Runtime) -> nn.Module:
        """The task's placer, built on first use on the groups a search measured by ``runtime`` uses."""
        from gplace.placer import PolicyPlacer, merge_for

        if self._placer is None:
            self._placer = PolicyPlacer(self.graph, self.cluster, encoder, policy, max_groups=max_groups,
                                        merge_consumers=merge_for(runtime))
        return self._placer

    def best_log_prob(self) -> torch.Tensor:
        """Log-probability under the policy of the best placement so far, projected onto the placer's groups
        (the projection cached until the best changes); the placer and a best placement must exist."""
        return self._placer.evaluate(self._projection(self._placer, self.best[0])[None])[0][0]

    def start_from(self, placement: Placement | None, runtime: Runtime) -> None:
        """Make ``placement`` (measured now) the best so far, if it is given and runs."""
        if placement is None:
            return
        measurement = runtime.measure(self.graph, self.cluster, placement)
        if measurement.ok:
            self.best = (placement, measurement.step_time)

    def reference(self, runtime: Runtime) -> float:
        if self.reference_time is None:
            self.reference_time = reference_step_time(self.graph, self.cluster, runtime)
        return self.reference_time

    def state_dict(self) -> dict[str, Any]:
        best = None if self.best is None else (self.best[0].devices.tolist(), float(self.best[1]))
        return {"baseline": self.baseline.state_dict(), "best": best, "samples": self.samples,
                "reference": self.reference_time}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.baseline.load_state_dict(state["baseline"])
        self.samples, self.reference_time = state["samples"], state["reference"]
        if state["best"] is not None:
            self.best = (Placement.for_graph(self.graph, state["best"][0]), state["best"][1])


@dataclass(frozen=True, kw_only=True)
class MultiGraphTrainer(MultiGraphSettings):
    """REINFORCE over many tasks with one shared encoder and policy (GDP's batch training).

    Each update draws ``tasks_per_update`` tasks uniformly without replacement (all of them when there are
    fewer), samples K placements of each, measures them, and
    takes one Adam step on the mean over the drawn tasks of their REINFORCE losses (with ``self_imitation``, each
    also minus that weight times the log-likelihood of the task's best placement so far). Settings: see
    :class:`~gplace.training.settings.MultiGraphSettings` (``seed`` also seeds the task draws).
    """

    def fit(self, encoder: nn.Module, policy: nn.Module, tasks: Sequence[Task], runtime: Runtime, *,
            run_dir: str | Path | None = None, logger: Logger | None = None,
            starts: Sequence[Placement | None] | None = None) -> MultiGraphResult:
        """Train ``encoder`` and ``policy`` (in place) over ``tasks``.

        ``starts`` gives a placement per task (or None) that the task's best placement starts from, e.g. a
        heuristic's: with ``self_imitation`` the policy imitates it from the first update until a sample beats it.

        With ``run_dir``, metrics go to ``run_dir/metrics.jsonl`` and a checkpoint to ``run_dir/checkpoint.pt``;
        calling again with the same ``run_dir`` and tasks resumes exactly where the last run stopped.

        Every task's placer and reference step time are made before the first update, so a task the policy cannot
        place (a fixed-size policy on a cluster of another size) is refused before any training, not when drawn.

        Raises:
            ValueError: no tasks, ``starts`` not one per task, a task the policy cannot place or whose reference
                step time is not positive, or a checkpoint in ``run_dir`` for another task set, runtime, model or
                grouping (``max_groups``); other model settings of the same shapes are named in a WARNING.
            TypeError: a task is not a ``(graph, cluster)`` pair (names its index).
            RuntimeError: ``encoder`` or ``policy`` was made under ``torch.inference_mode()`` (gradients are on
                whatever the caller's mode: :func:`~gplace.training.trainer.autograd_on`).
        """
        tasks = _checked_tasks(tasks)
        check_modules("MultiGraphTrainer.fit", encoder=encoder, policy=policy)
        check_runtime(runtime, optional=False)
        if starts is not None and len(starts) != len(tasks):
            raise ValueError(f"MultiGraphTrainer.fit: {len(starts)} starts for {len(tasks)} tasks (one per task, "
                             "None for none)")
        with autograd_on(encoder, policy, who="MultiGraphTrainer.fit"):
            return self._train(encoder, policy, tasks, runtime, run_dir=run_dir, logger=logger, starts=starts)

    def _train(self, encoder: nn.Module, policy: nn.Module, tasks: list[Task], runtime: Runtime, *,
               run_dir: str | Path | None, logger: Logger | None,
               starts: Sequence[Placement | None] | None) -> MultiGraphResult:
        """:meth:`fit`'s training, with gradients on."""
        states = [_TaskState(g, c, self.baseline_decay) for g, c in tasks]
        placers = [_task_placer(i, task, encoder, policy, self.max_groups, runtime) for i, task in enumerate(states)]
        params = [*encoder.parameters(), *policy.parameters()]
        loop, state = start_loop(params, lr=self.lr, seed=self.seed, run_dir=run_dir, logger=logger,
                                 run_id=_run_id(tasks), runtime_id=runtime.id, trainer_id=type(self).__name__,
                                 grouping_id=_tasks_grouping_id(placers),
                                 settings=run_settings(encoder, policy, type(self).__name__, dataclasses.asdict(self)))
        with loop.closed_on_error():  # the run directory let go at once if training raises
            draws = np.random.default_rng(self.seed)
            if state is not None:  # the checkpoint holds each task's best, the starts' included
                with restoring(loop.ckpt):
                    _restore(state, encoder, policy, draws, states)
            elif starts is not None:
                for task, start in zip(states, starts, strict=True):
                    task.start_from(start, runtime)
            for task in states:
                task.reference(runtime)  # measured once (kept in the checkpoint); a task without one fails here

            done_updates = loop.first_update
            for update in loop.updates_left(self):
                # rollout: draw tasks, sample K placements of each, measure them
                chosen = draws.choice(len(states), size=min(self.tasks_per_update, len(states)), replace=False)
                rollouts = [self._rollout(states[i], encoder, policy, runtime, loop.generator) for i in chosen]
                loop.samples += sum(len(r.placements) for r in rollouts)

                # baseline and loss: per task, then the mean over the drawn tasks
                terms = [self._loss(states[i], r) for i, r in zip(chosen, rollouts, strict=True)]
                mean_terms = {k: torch.stack([t[k] for t in terms]).mean() for k in terms[0]}
                loss = sum(v for k, v in mean_terms.items() if k.startswith("loss_"))

                # update
                loop.optimizer.zero_grad()
                loss.backward()
                grad_norm = optimizer_step(loop.optimizer, params, self.grad_clip)
                for i, r in zip(chosen, rollouts, strict=True):
                    states[i].baseline.update(r.reward[r.ok].tolist())

                # log, checkpoint when due
                loop.log(update, {
                    "charts/samples": loop.samples,
                    "charts/mean_best_ratio": _mean_best_ratio(states),
                    "rollout/mean_reward": float(torch.cat([r.reward for r in rollouts]).mean()),
                    "rollout/mean_ratio": _mean_ratio(states, chosen, rollouts),
                    "rollout/failures": int(sum(int((~r.ok).sum()) for r in rollouts)),
                    "losses/grad_norm": float(grad_norm),
                    **{f"losses/{k}": float(v.detach()) for k, v in mean_terms.items()},
                })
                done_updates, done = update + 1, loop.is_last(update, self)
                if loop.due(update, self.checkpoint_every, done):
                    save_checkpoint(loop.ckpt, {
                        **loop.state(update), "encoder": encoder.state_dict(), "policy": policy.state_dict(),
                        "draws": draws.bit_generator.state, "tasks": [s.state_dict() for s in states]})
                if done:
                    break

            results = [self._task_result(s, encoder, policy, runtime) for s in states]
        loop.close()
        return MultiGraphResult(results, loop.samples, done_updates, loop.seconds, loop.history)

    def _rollout(self, task: _TaskState, encoder: nn.Module, policy: nn.Module, runtime: Runtime,
                 generator: torch.Generator) -> TaskRollout:
        """Sample K placements of ``task``, measure them, normalise their rewards and track the best."""
        placer = task.placer(encoder, policy, self.max_groups, runtime)
        devices, log_prob, entropy = placer.sample(self.samples_per_update, generator=generator)
        check_trainable(log_prob, placer, "sample", type(self).__name__)
        placements = [Placement.for_graph(task.graph, d) for d in np.asarray(devices)]
        measurements = measure_each(runtime, task.graph, task.cluster, placements)
        log_failures(placements, measurements, task=f"task {task.graph.name} on {task.cluster.name}")
        task.samples += len(placements)
        ok = torch.tensor([m.ok for m in measurements])
        step_time = torch.tensor([m.step_time if m.ok else math.nan for m in measurements], dtype=torch.float64)
        ratio = torch.where(ok, step_time / task.reference(runtime), torch.full_like(step_time, self.penalty_ratio))
        task.warn_if_failing_pays(ratio, ok, self.penalty_ratio)
        if ok.any():
            i = int(torch.argmin(torch.where(ok, step_time, math.inf)))
            if task.best is None or float(step_time[i]) < task.best[1]:
                task.best = (placements[i], float(step_time[i]))
        return TaskRollout(placements, step_time, ok, -torch.sqrt(ratio), log_prob, entropy)

    def _loss(self, task: _TaskState, rollout: TaskRollout) -> dict[str, torch.Tensor]:
        """The REINFORCE terms of one task's rollout against its own EMA baseline."""
        reward, ok = rollout.reward, rollout.ok
        batch_mean = float(reward[ok].mean()) if ok.any() else float(reward.mean())
        terms = reinforce_loss(rollout.log_prob, reward, task.baseline(fallback=batch_mean),
                               rollout.entropy, entropy_coef=self.entropy_coef, normalize_advantage=True)
        if self.self_imitation:  # maximum likelihood on the task's best placement (none yet: a zero term)
            terms["loss_self_imitation"] = rollout.log_prob.new_zeros(()) if task.best is None else (
                -self.self_imitation * task.best_log_prob())
        return terms

    def _task_result(self, task: _TaskState, encoder: nn.Module, policy: nn.Module, runtime: Runtime) -> TaskResult:
        """The task's best sample and the trained policy's greedy step time."""
        with torch.no_grad():
            greedy = task.placer(encoder, policy, self.max_groups, runtime).greedy()
        m = runtime.measure(task.graph, task.cluster, greedy)
        best_placement, best_time = task.best if task.best is not None else (None, math.inf)
        return TaskResult(task.graph.name, task.cluster.name, task.reference(runtime), best_time, best_placement,
                          m.step_time if m.ok else math.inf, task.samples)


def reference_step_time(graph: OpGraph, cluster: Cluster, runtime: Runtime) -> float:
    """A task's scale: its best single-device step time, or the step-time lower bound if every device fails.

    Raises:
        ValueError: the reference is not a finite positive number.
    """
    from gplace.baselines import step_time_lower_bound
    from gplace.experiment import single_device_baselines

    times = [m.step_time for m in single_device_baselines(graph, cluster, runtime).values() if m.ok]
    reference = min(times) if times else step_time_lower_bound(graph, cluster)
    if not (math.isfinite(reference) and reference > 0):
        raise ValueError(f"graph {graph.name!r} on {cluster.name!r} has reference step time {reference}; "
                         "rewards cannot be normalised by it")
    return float(reference)


def finetune(encoder: nn.Module, policy: nn.Module, graph: OpGraph, cluster: Cluster, runtime: Runtime, *,
             trainer: ReinforceTrainer | PPOTrainer | None = None, max_groups: int = MAX_GROUPS,
             copy_modules: bool = True, conditioning_only: bool = False, run_dir: str | Path | None = None,
             logger: Logger | None = None) -> TrainResult:
    """Search for a placement of ``graph`` with a plain :class:`ReinforceTrainer` started from trained weights.

    Args:
        encoder: the pretrained encoder.
        policy: the pretrained policy.
        graph: the graph to place.
        cluster: the devices.
        runtime: measures placements.
        trainer: the search (default: ``ReinforceTrainer()``); its optimizer starts fresh.
        max_groups: coarsen the graph to at most this many groups (default: 256).
        copy_modules: fine-tune deep copies, leaving the pretrained modules as they are (default: True).
        conditioning_only: train only the policy's ``conditioning_parameters()`` (a
            :class:`~gplace.policies.SuperpositionPolicy`'s graph conditioning), the rest frozen (default: False).
        run_dir: metrics and checkpoints, as in :meth:`ReinforceTrainer.fit`.
        logger: metrics logger (default: none).

    Only the trained parameters require gradients while it runs (all of them unless ``conditioning_only``, even
    those an earlier call or the caller froze); each parameter's ``requires_grad`` is as it was afterwards.
    The result is never behind the start: the pretrained policy's greedy placement is measured first (uncounted)
    and returned where the search found nothing faster, or nothing that ran (the search itself then failed: its
    ``logger`` and ``run_dir`` record it so); its step time is the result's ``start_step_time``, reached after 0
    samples (:meth:`~gplace.search_result.TrainResult.samples_to_reach`).

    Raises:
        TypeError: ``trainer`` is not a REINFORCE or PPO trainer instance, ``runtime`` not a runtime, ``graph``
            or ``cluster`` not gplace's, ``encoder`` or ``policy`` no torch module, ``logger`` no gplace Logger
            (each named).
        ValueError: ``conditioning_only`` with a policy without ``conditioning_parameters()``.
        NothingFitError: no placement ran, the start included.
        RuntimeError: ``encoder`` or ``policy`` was made under ``torch.inference_mode()`` (gradients are on
            whatever the caller's mode: :func:`~gplace.training.trainer.autograd_on`).
    """
    from gplace.ir.placement import check_graph_and_cluster
    from gplace.placer import PolicyPlacer, merge_for

    check_graph_and_cluster(graph, cluster)
    check_modules("finetune", encoder=encoder, policy=policy)
    check_runtime(runtime, optional=False)
    if trainer is not None and not isinstance(trainer, ReinforceTrainer | PPOTrainer):
        raise TypeError(f"trainer must be a ReinforceTrainer or PPOTrainer instance (one graph's search), got "
                        f"{trainer!r}")
    trained = _trained_parameters(policy, conditioning_only)
    with autograd_on(encoder, policy, who="finetune"):  # the placer's buffers made with them, for autograd
        if copy_modules:
            encoder, policy = copy.deepcopy(encoder), copy.deepcopy(policy)
        placer = PolicyPlacer(graph, cluster, encoder, policy, max_groups=max_groups,
                              merge_consumers=merge_for(runtime))
        start = placer.greedy()
        started = runtime.measure(graph, cluster, start)
        with _training_only(encoder, policy, trained):
            try:
                fitter = ReinforceTrainer() if trainer is None else trainer
                result = fitter.fit(placer, runtime, graph, cluster, run_dir=run_dir, logger=logger)
            except NothingFitError as err:  # no sample ran, but the start did: it is the result
                if not started.ok:
                    raise
                result = err.result
    if started.ok and not (result.best_measurement.ok and result.best_step_time <= started.step_time):
        log.info("fine-tuning on %s found nothing faster than the pretrained policy's greedy placement (%.6g s)",
                 graph.name, started.step_time)
        result = dataclasses.replace(result, best_placement=start, best_measurement=started)
    return dataclasses.replace(result, start_step_time=started.step_time) if started.ok else result


def _trained_parameters(policy: nn.Module, conditioning_only: bool) -> set[str] | None:
    """The names of the policy's parameters ``finetune`` trains, or None for every parameter of both modules."""
    if not conditioning_only:
        return None
    if not hasattr(policy, "conditioning_parameters"):
        raise ValueError(f"conditioning_only needs a policy with conditioning_parameters() (e.g. "
                         f"SuperpositionPolicy), got {type(policy).__name__}")
    conditioning = {id(p) for p in policy.conditioning_parameters()}
    return {name for name, p in policy.named_parameters() if id(p) in conditioning}


@contextlib.contextmanager
def _training_only(encoder: nn.Module, policy: nn.Module, trained: set[str] | None):
    """Train the named policy parameters (every parameter when None), the others frozen; each parameter's
    ``requires_grad`` as it was afterwards (a frozen module handed on trained nothing but what was left on)."""
    params = [("", p) for p in encoder.parameters()] + list(policy.named_parameters())
    before = [p.requires_grad for _, p in params]
    for name, p in params:
        p.requires_grad_(trained is None or name in trained)
    try:
        yield
    finally:
        for (_, p), flag in zip(params, before, strict=True):
            p.requires_grad_(flag)


def _restore(state: dict[str, Any], encoder: nn.Module, policy: nn.Module, draws: np.random.Generator,
             tasks: Sequence[_TaskState]) -> None:
    """Load the modules, the task draws and each task's state from a checkpoint."""
    encoder.load_state_dict(state["encoder"])
    policy.load_state_dict(state["policy"])
    draws.bit_generator.state = state["draws"]
    for task, task_state in zip(tasks, state["tasks"], strict=True):
        task.load_state_dict(task_state)


def _checked_tasks(tasks: Any) -> list[Task]:
    """``tasks`` as a list of ``(graph, cluster)`` pairs, else a ``TypeError`` naming the first that is not one."""
    from gplace.ir.placement import check_graph_and_cluster

    if not isinstance(tasks, Sequence) or isinstance(tasks, str):
        raise TypeError(f"tasks must be a list of (graph, cluster) pairs, got {type(tasks).__name__}")
    if not tasks:
        raise ValueError("MultiGraphTrainer.fit needs at least one (graph, cluster) task")
    for i, task in enumerate(tasks):
        if not isinstance(task, Sequence) or len(task) != 2:
            raise TypeError(f"tasks[{i}] must be a (graph, cluster) pair, got {type(task).__name__}")
        try:
            check_graph_and_cluster(*task)
        except TypeError as err:
            raise TypeError(f"tasks[{i}]: {err}") from None
    return [tuple(task) for task in tasks]


def _task_placer(index: int, task: _TaskState, encoder: nn.Module, policy: nn.Module, max_groups: int,
                 runtime: Runtime) -> nn.Module:
    """``task.placer(...)``, whose refusal (an op no device of the task's cluster can run, a policy of another
    number of devices) names the task: ``tasks[3]: ...``."""
    try:
        return task.placer(encoder, policy, max_groups, runtime)
    except ValueError as err:
        err.args = (f"tasks[{index}]: {err}", *err.args[1:])  # its own type, whatever its constructor takes
        raise


def _tasks_grouping_id(placers: Sequence[Any]) -> str:
    """One id of every task's grouping (a checkpoint of other groupings, another ``max_groups``, is refused)."""
    ids = "|".join(str(grouping_id(placer)) for placer in placers)
    return f"{len(placers)} tasks/{hashlib.sha256(ids.encode()).hexdigest()[:12]}"


def _run_id(tasks: Sequence[Task]) -> str:
    """Content hash of the task list, so a checkpoint is never resumed on other tasks."""
    h = hashlib.sha256()
    for graph, cluster in tasks:
        h.update(f"{graph.fingerprint}/{cluster.fingerprint};".encode())
    return f"multigraph:{len(tasks)}:{h.hexdigest()[:16]}"


def _mean_best_ratio(states: Sequence[_TaskState]) -> float:
    """Mean over the tasks with a best placement so far (drawn, or given a start) of best step time over
    reference."""
    ratios = [s.best[1] / s.reference_time for s in states if s.best is not None and s.reference_time is not None]
    return float(np.mean(ratios)) if ratios else math.inf


def _mean_ratio(states: Sequence[_TaskState], chosen: np.ndarray, rollouts: Sequence[TaskRollout]) -> float:
    """Mean step time over reference of this update's successful samples."""
    ratios = [r.step_time[r.ok] / states[i].reference_time for i, r in zip(chosen, rollouts, strict=True)]
    flat = torch.cat(ratios)
    return float(flat.mean()) if flat.numel() else math.inf
