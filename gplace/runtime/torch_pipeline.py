"""Run a pipeline placement for real: ``torch.distributed.pipelining`` stages, one process per device.

Runtime ``torch-pipeline-v1`` measures what ``pipe-v3`` (:mod:`gplace.pipeline.simulator`) models: one training
mini-batch of ``M`` micro-batches through the stages of a placement, under the GPipe or 1F1B schedule.

How it runs
    The graph must come from :func:`gplace.from_torch` on ``module`` (its ops name the modules they belong to; on a
    training graph, ``training=True``, torch runs each backward op in its forward op's stage whatever the placement says
    of it, as :func:`gplace.pipeline.stages.align_to_modules` places them, and ``bytes_moved`` also counts the gradients
    sent back, the graph's backward values that cross devices). The placement's stages are the runs of consecutive
    modules on one device; the split is :func:`gplace.export.torch.pipeline_split`'s (``{module path:
    SplitPoint.BEGINNING}`` where the device changes), checked in this process, so a placement that changes device
    inside a module raises :class:`~gplace.ir.InvalidPlacementError` naming the op and the module (from :meth:`run`;
    a failed measurement of :meth:`measure`). Then one process per
    device (rank, numbered by the device's first stage) is spawned; they join a process group (``backend``: by default
    ``gloo`` when every stage is on a CPU, ``nccl`` when every stage is on a CUDA device) over localhost, each traces
    the module with ``torch.distributed.pipelining.pipeline``, builds its stages on its device and runs the schedule:
    stage 0 feeds the mini-batch ``inputs``, the last stage computes ``loss_fn(output, target)`` per micro-batch.
    Gradients are those of the mean micro-batch loss, the gradients of the unsplit model on the whole mini-batch. The
    processes get a copy of ``module``, ``inputs`` and ``target`` (sending tensors to a process moves them into shared
    memory) and each runs its own copy, so the caller's module, its buffers (BatchNorm's running statistics) included,
    is left as it was and every measurement starts from it.
Schedules
    With one stage per device, torch's ``ScheduleGPipe`` or ``Schedule1F1B``. A non-contiguous placement gives
    a device several stages (NCCL allows one process per GPU), and ``Schedule1F1B`` refuses fewer micro-batches
    than stages; in those cases each device runs its stages' passes in the order
    :func:`gplace.pipeline.stage_order.stage_orders` gives (``pipe-v2``'s rules applied to whole stages), through
    torch's multi-stage schedule runtime (``ScheduleLoopedBFS`` with that order in place of its own: the one use
    here of torch's private ``_Action``).
What it reports
    The median over ``steps`` timed steps (after ``warmup`` steps) of the wall time of one ``schedule.step``,
    between two barriers of all stages, and their spread; ``bytes_moved`` is counted from the graph, read as one
    micro-batch's (imported at the micro-batch size, ``batch / M``), not from torch's sends: ``M`` times the values
    crossing devices, each once per (producer, destination device) (:func:`gplace.pipeline.pipeline_bytes_moved`
    with one micro-batch): an inference graph's forward values only (the gradients torch sends back are then not
    counted), a training graph's backward values too. ``pipe-v3`` reads a graph as the whole mini-batch's, so its
    count on the graph imported at the mini-batch size is the same (up to rounding each value up to whole bytes
    per micro-batch). :meth:`TorchPipelineRuntime.run` also returns the mean
    loss and every parameter's gradient (for checks against the unsplit model; a weight tied between modules of
    different stages, which each stage holds a copy of, gets the sum of their gradients).
Devices
    Before any process starts, every stage device must be on this machine and each CUDA device must hold one
    cluster device's stages (:func:`gplace.runtime.torch_runtime.cluster_problems`' checks, applied to the stage
    devices): a placement onto ``cuda:3`` on a machine with fewer GPUs is a failed measurement naming the device
    and its stages (``run`` raises :class:`~gplace.runtime.torch_runtime.TorchRunError`), not a stage process that
    crashes or hangs. Under ``nccl`` a GPU holds one process (NCCL refuses two ranks on one GPU), so two cluster
    devices on one GPU are refused even with ``device_map`` entries for both. :meth:`TorchPipelineRuntime.check_cluster`
    applies the same checks to a whole cluster, before a search.
Failures
    An exception in a stage, a stage process that dies, or no result within ``time_limit`` seconds (the processes
    are then killed) is a failed measurement naming the stage (one raised inside torch's pipelining says so);
    nothing hangs. A module torch's pipelining cannot trace with the placement's split is a failed measurement
    naming its class and torch's reason; so is, before any process starts, a split with a stage output that two or
    more later stages read (a skip connection over a stage, which torch cannot run backward through:
    ``PipeliningMetadataError: Backward of skip connections not supported yet``), naming the value and the stages;
    :meth:`TorchPipelineRuntime.check_graph` refuses, once before a search, one it cannot trace at
    all (``torch.cond``, a keyword-only input, a ``torch.no_grad`` block).
Processes
    By default (``processes="spawn"``) gplace starts the stage processes itself for each measurement; they are
    spawned, so each imports the caller's ``__main__``: a script must guard its entry point with
    ``if __name__ == "__main__":`` (else every stage re-runs the script and dies, exit code 1). Under
    ``torchrun`` (``processes="torchrun"``), the processes it launched are the stages: every rank calls
    ``measure`` with the same graph and placement, runs the stages of device ``RANK`` in its own process (the
    world size must equal the number of devices holding stages) and gets the same result, gathered from all
    ranks. The process group is made
    on the first measurement (with its ``time_limit`` as timeout) and kept until the process exits, unless the
    caller made one first. A stage that fails there is a failed measurement on every rank; one that dies or
    hangs ends the run at the process group's timeout, as ``torchrun`` decides.
GPUs
    With stage devices of kind ``cuda`` the backend (by default) is ``nccl``; each process makes its device (its
    first stage's) current before it joins the process group and, under ``nccl``, binds it to the group
    (``device_id``), so that the barriers around each step run on that GPU (written from the PyTorch
    documentation, never run on a GPU). A rank whose process group is bound to another CUDA device than its
    stages' (``ProcessGroup.bound_device_id``: a group the caller made under ``torchrun`` for another GPU, or
    the group kept from an earlier measurement whose placement gave this rank another GPU) fails the measurement,
    naming the rank and both devices, before its stages are built: its barriers and NCCL communicator would be on
    the bound GPU, its stages' tensors on the other (until 2026-12-02 it ran on; never run on a GPU).
    Stages on CPUs and on CUDA devices in one placement are refused (:class:`~gplace.ir.InvalidPlacementError`
    naming them) unless a ``backend`` is given: the PyTorch documentation's backend table has ``gloo`` send and
    receive CPU tensors only and ``nccl`` CUDA tensors only, so neither carries both. Ran on one GPU (one stage,
    one rank, H200, with ``backend="nccl"`` given); stages on several GPUs, and the ``nccl`` default, were written
    from the PyTorch documentation and have never run.
"""

from __future__ import annotations

import atexit
import copy
import dataclasses
import logging
import math
import os
import pickle
import queue
import signal
import socket
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

import numpy as np
import torch
from torch import nn
from torch.utils import _pytree as pytree

from gplace.defaults import MICROBATCHES, SCHEDULE
from gplace.ir import Cluster, InvalidPlacementError, OpGraph, Placement
from gplace.ir.errors import check_sizes, error_summary, short_repr
from gplace.pipeline.simulator import check_microbatches
from gplace.pipeline.steady import pipeline_bytes_moved
from gplace.runtime.base import ClusterMismatchError, Measurement, ReadOnlySetting, Runtime
from gplace.runtime.torch_devices import runnable_device_map
from gplace.runtime.torch_runtime import TorchRunError, cluster_problems
from gplace.runtime.torch_step import STEP_SEED
from gplace.runtime.wrapper import check_time_limit
from gplace.torch_modes import forked_rng

NO_TIMEOUT = timedelta(days=365)
"""The process group's timeout with no ``time_limit`` (torch takes a finite one)."""

logger = logging.getLogger(__name__)

__all__ = ["PipelineRun", "TorchPipelineRuntime"]


@dataclass(frozen=True)
class PipelineRun:
    """One measured pipelined mini-batch."""

    times: tuple[float, ...]
    """Seconds of each timed step."""
    loss: float
    """Mean micro-batch loss of the last step."""
    grads: dict[str, np.ndarray]
    """Each parameter's gradient after the last step, by its name in ``module``."""
    processes: int
    """Processes that ran the stages: one per device holding stages."""


@dataclass(frozen=True)
class _Job:
    """What every stage process needs (pickled once per process)."""

    module: nn.Module
    inputs: tuple[torch.Tensor, ...]
    target: torch.Tensor
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    split: tuple[str, ...]
    devices: tuple[str, ...]
    """The torch device of each stage."""
    ranks: tuple[int, ...]
    """The process (rank) of each stage: one per cluster device holding stages, numbered by its first stage."""
    microbatches: int
    schedule: str
    backend: str
    steps: int
    warmup: int
    timeout: float
    threads: int | None

    @property
    def world(self) -> int:
        """Processes: devices holding stages."""
        return max(self.ranks) + 1

    def stages_of(self, rank: int) -> list[int]:
        """The stages process ``rank`` runs, in order."""
        return [k for k, r in enumerate(self.ranks) if r == rank]

    @property
    def example(self) -> tuple[torch.Tensor, ...]:
        """One micro-batch of the inputs (what the pipeline is traced with)."""
        return _one_microbatch(self.inputs, self.microbatches)


def _one_microbatch(inputs: tuple[torch.Tensor, ...], microbatches: int) -> tuple[torch.Tensor, ...]:
    """The first of ``microbatches`` micro-batches of ``inputs`` (what the pipeline is traced with)."""
    return tuple(t[: t.shape[0] // microbatches] for t in inputs)


def _batch_size(inputs: tuple[torch.Tensor, ...], target: torch.Tensor) -> int:
    """The mini-batch's size: the first dimension every input and the target share (else they fail mid-run)."""
    named = [*((f"inputs[{i}]", t) for i, t in enumerate(inputs)), ("target", target)]
    for what, tensor in named:
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{what} must be a torch.Tensor, got {type(tensor).__name__}")
    if not inputs or inputs[0].dim() == 0:
        raise ValueError("inputs[0] must be a tensor with a batch dimension: each micro-batch is cut from the first "
                         "dimension of every input and of the target")
    batch = inputs[0].shape[0]
    for what, tensor in named[1:]:
        if tensor.dim() == 0 or tensor.shape[0] != batch:
            size = "no batch dimension" if tensor.dim() == 0 else f"a batch of {tensor.shape[0]}"
            raise ValueError(f"{what} has {size} but inputs[0] has a batch of {batch}: each micro-batch is cut from "
                             "the first dimension of every input and of the target")
    return batch


def _check_loss_fn(loss_fn: object, *, pickled: bool) -> None:
    """Refuse a ``loss_fn`` that is not callable or, sent to spawned stage processes, does not pickle (every
    measurement failed after the processes started, naming neither)."""
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be a function loss_fn(output, target) -> scalar, got {short_repr(loss_fn)}")
    if pickled:
        try:
            pickle.dumps(loss_fn)
        except (pickle.PicklingError, AttributeError, TypeError) as err:
            raise TypeError(f"loss_fn must pickle, to be sent to the stage processes (a function of a module, not a "
                            f"lambda or a local function): {err}") from None


class TorchPipelineRuntime(Runtime):
    """Measures pipeline placements of ``module`` by running them (see the module docstring).

    Args:
        module: the model; the graphs it measures are imported from it with :func:`gplace.from_torch`, at the
            micro-batch size for ``bytes_moved`` (see the module docstring).
        inputs: the mini-batch's positional inputs (batch first; ``microbatches`` must divide the batch).
        target: the mini-batch's target (batch first, the inputs' batch size), passed to ``loss_fn`` per
            micro-batch.
        loss_fn: ``loss_fn(output, target) -> scalar`` of one micro-batch; must pickle (a function of a module).
        microbatches: micro-batches M per mini-batch. (default: 4)
        schedule: ``"gpipe"`` or ``"1f1b"``. (default: "1f1b")
        backend: process-group backend, e.g. ``"gloo"`` (CPUs) or ``"nccl"`` (GPUs), used as given. (default: None:
            ``"nccl"`` when every stage of a placement is on a CUDA device, ``"gloo"`` when every stage is on a CPU;
            a placement with stages on both is an :class:`~gplace.ir.InvalidPlacementError`)
        steps: timed steps. (default: 3)
        warmup: untimed steps first. (default: 1)
        time_limit: seconds the whole run may take before it is a failure; ``None`` or ``inf``: no limit.
            (default: 120)
        device_map: cluster device name -> torch device; default: ``/CPU:k`` -> ``cpu``, ``/GPU:k`` -> ``cuda:k``.
        threads_per_stage: torch intra-op threads of each process, >= 1 (e.g. cores // devices, so that processes
            sharing a machine's cores do not oversubscribe them). (default: None: torch's default)
        processes: ``"spawn"`` (gplace starts one process per device holding stages) or ``"torchrun"`` (the ranks
            ``torchrun`` started are those processes; see the module docstring). (default: "spawn")
    """

    semantics = "torch-pipeline-v1"
    deterministic = False
    microbatches = ReadOnlySetting[int]()
    """Micro-batches per mini-batch (read-only: :attr:`id` is made from it)."""
    schedule = ReadOnlySetting[str]()
    """``"gpipe"`` or ``"1f1b"`` (read-only, as ``microbatches``)."""

    def __init__(self, module: nn.Module, inputs: tuple[torch.Tensor, ...] | torch.Tensor, target: torch.Tensor,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *, microbatches: int = MICROBATCHES,
                 schedule: Literal["gpipe", "1f1b"] = SCHEDULE, backend: str | None = None, steps: int = 3,
                 warmup: int = 1, time_limit: float | None = 120.0, device_map: Mapping[str, str] | None = None,
                 threads_per_stage: int | None = None, processes: Literal["spawn", "torchrun"] = "spawn") -> None:
        inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
        if schedule not in ("gpipe", "1f1b"):
            raise ValueError(f"schedule must be 'gpipe' or '1f1b', got {schedule!r}")
        if processes not in ("spawn", "torchrun"):
            raise ValueError(f"processes must be 'spawn' or 'torchrun', got {processes!r}")
        microbatches = check_microbatches(microbatches)
        _check_loss_fn(loss_fn, pickled=processes == "spawn")
        if threads_per_stage is not None:
            check_sizes(type(self).__name__, 1, threads_per_stage=threads_per_stage)
        check_sizes(type(self).__name__, 1, steps=steps)
        check_sizes(type(self).__name__, 0, warmup=warmup)
        limit = check_time_limit(type(self).__name__, time_limit)
        batch = _batch_size(inputs, target)
        if batch % microbatches:
            raise ValueError(f"microbatches ({microbatches}) must divide the batch ({batch})")
        self.module, self.inputs, self.target, self.loss_fn = module, inputs, target, loss_fn
        self._microbatches, self._schedule, self.backend = microbatches, schedule, backend
        self.steps, self.warmup, self.time_limit = steps, warmup, limit
        self.device_map = runnable_device_map(device_map) or None
        self.threads_per_stage = threads_per_stage
        self.processes = processes
        self.id = f"{self.semantics}/{schedule}/m{microbatches}"
        """As ``pipe-v3``'s, the schedule and micro-batch count in it, so caches and resumed runs keep them apart."""

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        from gplace.export.torch import PipelineTraceError

        try:
            result = self.run(graph, cluster, placement)
        except (_StageError, TorchRunError, PipelineTraceError, InvalidPlacementError) as err:  # no split gives it
            logger.debug("pipelined measurement of %r failed: %s", graph.name, err)
            return Measurement.failure(self.id, str(err))
        median = statistics.median(result.times)
        spread = (max(result.times) - min(result.times)) / median if median > 0 else 0.0
        moved = self.microbatches * pipeline_bytes_moved(graph, cluster, placement, microbatches=1)
        return Measurement(ok=True, step_time=median, runtime=self.id, spread=spread, bytes_moved=moved)

    def run(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> PipelineRun:
        """Run the placement's pipeline; the step times, the loss and the gradients.

        Raises:
            _StageError: a stage failed, died or timed out.
            TorchRunError: a stage device is not on this machine, or two cluster devices' stages would share a GPU
                (raised before any process starts).
            InvalidPlacementError: the placement is not for ``graph`` or changes device inside a module, or (with
                no ``backend`` given) has stages on CPUs and on CUDA devices.
            UnsupportedGraphError: ``graph`` was not imported from a torch module, or torch's pipelining cannot
                trace ``module`` with the placement's split (names the module's class and torch's reason).
            PipelineSkipError: (an ``InvalidPlacementError``) a stage output that two or more later stages read,
                which torch's pipelining cannot run backward through (names the value and the stages; raised
                before any process starts, a failed measurement of :meth:`measure`).
        """
        from gplace.export.torch import pipeline_split
        from gplace.pipeline.stage_order import device_ranks

        job = _Job(self.module, self.inputs, self.target, self.loss_fn, (), (), (), self.microbatches, self.schedule,
                   "", self.steps, self.warmup, self.time_limit, self.threads_per_stage)
        split = pipeline_split(graph, cluster, placement, self.module, job.example, device_map=self.device_map,
                               training=True, stage_backward=True, sums_shared_gradients=True)
        names = [cluster.devices[d].name for d in split.cluster_devices]
        backend = _backend(self.backend, split.devices, names)
        problems = _device_problems(names, split.devices, backend, self.device_map)
        if problems:
            raise TorchRunError("; ".join(problems))
        job = dataclasses.replace(job, split=tuple(split.split_points),
                                  devices=tuple(str(d) for d in split.devices),
                                  ranks=tuple(device_ranks(split.cluster_devices)), backend=backend)
        return _run_launched(job) if self.processes == "torchrun" else _run_stages(job)

    def check_graph(self, graph: OpGraph) -> None:
        """Raise :class:`~gplace.ir.UnsupportedGraphError` when no placement of ``graph`` can run: it was not
        imported from a torch module, or torch's pipelining cannot trace ``module`` (traced once, unsplit: a
        ``torch.cond``, a keyword-only input, a ``torch.no_grad`` block). A module traced unsplit whose placement's
        split torch cannot trace is a failed measurement."""
        from gplace.export.torch import check_pipeline_split

        check_pipeline_split(graph, self.module, _one_microbatch(self.inputs, self.microbatches))

    def check_cluster(self, cluster: Cluster) -> None:
        """Raise :class:`~gplace.runtime.base.ClusterMismatchError` naming every cluster device that maps to no
        torch device or to one this machine lacks, and every GPU two cluster devices share (under ``nccl``, the
        default for GPUs, even with ``device_map`` entries for both); measurements fail on such devices."""
        unshared = _ONE_RANK_PER_GPU if self.backend is None or "nccl" in self.backend else ""
        ClusterMismatchError.check(cluster, cluster_problems(cluster, self.device_map, unshared=unshared))


_ONE_RANK_PER_GPU = "torch-pipeline-v1 runs one process per cluster device, and NCCL refuses two on one GPU"


def _device_problems(names: list[str], devices: list[torch.device], backend: str,
                     device_map: Mapping[str, str] | None) -> list[str]:
    """Why the stages (cluster device ``names[k]`` and torch device ``devices[k]`` of stage ``k``) cannot run on
    this machine: a device it lacks, a GPU that two cluster devices' processes would share (torch-v1's checks)."""
    from gplace.runtime import torch_runtime

    stages: dict[str, list[int]] = {}
    mapped: dict[str, torch.device] = {}
    for k, (name, dev) in enumerate(zip(names, devices, strict=True)):
        stages.setdefault(name, []).append(k)
        mapped[name] = dev
    problems = []
    for name, dev in mapped.items():
        why = torch_runtime.unavailable_reason(dev)
        if why:
            which = ", ".join(map(str, stages[name]))
            problems.append(f"device {name} ({dev}) of stage{'s' * (len(stages[name]) > 1)} {which} is not "
                            f"available ({why})")
    unshared = _ONE_RANK_PER_GPU if "nccl" in backend else ""
    return problems + torch_runtime.shared_gpu_problems(mapped, device_map, unshared=unshared)


def _backend(backend: str | None, devices: list[torch.device], names: list[str]) -> str:
    """The process-group backend for stages on ``devices`` (the torch device of each stage; ``names``: its cluster
    device): ``backend`` when given, else ``nccl`` when every stage is on a CUDA device and ``gloo`` when every
    stage is on a CPU.

    Raises:
        InvalidPlacementError: no ``backend`` given and the stages are on CPUs and CUDA devices (``gloo`` sends
            CPU tensors only, ``nccl`` CUDA tensors only), or on a kind of device with no default here.
    """
    if backend is not None:
        return backend
    kinds = {d.type for d in devices}
    if kinds == {"cpu"}:
        return "gloo"
    if kinds == {"cuda"}:
        return "nccl"
    stages = ", ".join(f"stage {k} on {name} ({d})" for k, (name, d) in enumerate(zip(names, devices, strict=True)))
    if kinds == {"cpu", "cuda"}:
        raise InvalidPlacementError(f"the placement has stages on CPUs and on CUDA devices ({stages}): no one "
                                    "process-group backend carries both (gloo sends CPU tensors, nccl CUDA tensors); "
                                    "put every stage on one kind of device, or pass backend= to try one")
    raise InvalidPlacementError(f"no default process-group backend for these stages ({stages}); pass backend=")


class _StageError(RuntimeError):
    """A stage failed, died or timed out (the reason a measurement reports)."""


# ---------------------------------------------------------------------- the parent: spawn, collect, clean up
def _run_stages(job: _Job) -> PipelineRun:
    """Spawn one process per rank and combine their reports. They get copies of the module, inputs and target on
    the CPU (:func:`_cpu_copy`): sending tensors to a process moves them into shared memory, which the caller's
    would otherwise be left in."""
    job = dataclasses.replace(job, module=_cpu_copy(job.module), inputs=tuple(_cpu_copy(t) for t in job.inputs),
                              target=_cpu_copy(job.target))
    ctx = torch.multiprocessing.get_context("spawn")
    results = ctx.Queue()
    world, port = job.world, _free_port()
    procs = [ctx.Process(target=_stage_main, args=(rank, world, port, job, results), daemon=True)
             for rank in range(world)]
    try:  # Ctrl-C between two starts: the stages started are stopped too (one ran on, then a zombie)
        for p in procs:
            p.start()
        reports = _collect(results, procs, job)
    finally:
        for p in procs:
            if p.pid is None:  # never started
                continue
            if p.is_alive():
                p.kill()
            p.join(timeout=5)
    return _combined(reports, job)


def _cpu_copy(value: Any) -> Any:
    """A copy of a module or tensor on the CPU, made without a copy on its own device (a CUDA module is not cloned
    on its GPU first; the stage processes build their stages on their devices). Sent to a process, a CUDA tensor
    would stay alive in this one as long as it runs, for good if the receiver is killed (torch's docs)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    memo: dict[int, Any] = {}
    for tensor in [*value.parameters(), *value.buffers()]:
        cpu = tensor.detach().to("cpu", copy=True)
        memo[id(tensor)] = nn.Parameter(cpu, tensor.requires_grad) if isinstance(tensor, nn.Parameter) else cpu
    return copy.deepcopy(value, memo)


def _run_launched(job: _Job) -> PipelineRun:
    """Run this process's stages (rank ``RANK`` of the ``torchrun`` world) and gather every rank's report."""
    import torch.distributed as dist

    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise ValueError("processes='torchrun' needs the RANK and WORLD_SIZE that torchrun sets; run under torchrun "
                         "or use processes='spawn'")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if world != job.world:
        raise _StageError(f"the placement's stages are on {job.world} devices but torchrun started {world} "
                          "processes")
    if not dist.is_initialized():  # kept for the next measurement: gloo cannot re-initialise reliably
        _init_group(job, _process_device(job, rank))
        atexit.register(dist.destroy_process_group)
    threads = torch.get_num_threads()
    try:
        report = {"rank": rank, **_run_stage(rank, job)}
    except Exception as err:  # every rank learns of it through the gather
        report = {"rank": rank, "error": _stage_error(err)}
    finally:  # the caller's own process: its thread count as it was (threads_per_stage set it for the stages)
        torch.set_num_threads(threads)
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, report)
    failed = [r for r in gathered if "error" in r]
    if failed:
        raise _StageError(f"pipeline {_named(job, failed[0]['rank'])} failed: {failed[0]['error']}")
    return _combined({r["rank"]: r for r in gathered}, job)


def _combined(reports: Mapping[int, dict], job: _Job) -> PipelineRun:
    """One run from every rank's report: rank 0's times, the last stage's loss, all gradients. A parameter that
    several stages use (tied weights, or a module called in two stages: each stage holds its own copy, under the
    name it has there, ``s@1`` for a second call's) gets the sum of their gradients, under its first name in
    ``job.module``."""
    from gplace.export.torch import first_call_name, first_names

    canonical = first_names(job.module)
    grads: dict[str, np.ndarray] = {}
    for report in reports.values():
        for name, grad in report["grads"].items():
            key = canonical.get(name) or canonical.get(first_call_name(name), name)
            grads[key] = grads[key] + grad if key in grads else grad
    return PipelineRun(tuple(reports[0]["times"]), reports[job.ranks[-1]]["loss"], grads, job.world)


def _named(job: _Job, rank: int) -> str:
    """``stage k`` for a process that runs one stage, ``stages k, l (one process)`` for one that runs several."""
    mine = job.stages_of(rank)
    return f"stage {mine[0]}" if len(mine) == 1 else f"stages {', '.join(map(str, mine))} (one process)"


def _collect(results: Any, procs: list, job: _Job) -> dict[int, dict]:
    """Every rank's report; raises :class:`_StageError` at the first error, death or after ``job.timeout`` s."""
    world, timeout = job.world, job.timeout
    deadline, reports = time.monotonic() + timeout, {}
    while len(reports) < world:
        try:
            report = results.get(timeout=min(1.0, max(0.0, deadline - time.monotonic())))
        except queue.Empty:
            dead = _dead(procs, set(reports))
            if dead:
                code = procs[dead[0]].exitcode
                raise _StageError(f"pipeline {_named(job, dead[0])} died (exit code {code})") from None
            if time.monotonic() >= deadline:
                missing = sorted(k for rank in range(world) if rank not in reports for k in job.stages_of(rank))
                raise _StageError(f"pipeline timed out after {timeout:g} s; stages without a result: "
                                  f"{missing}") from None
            continue
        if "error" in report:  # blame a stage that died first: the others then fail on their closed connections
            dead = _dead(procs, {report["rank"], *reports}, wait=2.0)
            cause = f"pipeline {_named(job, dead[0])} died (exit code {procs[dead[0]].exitcode}); " if dead else ""
            raise _StageError(f"{cause}pipeline {_named(job, report['rank'])} failed: {report['error']}")
        reports[report["rank"]] = report
    return reports


def _dead(procs: list, reported: set[int], wait: float = 0.0) -> list[int]:
    """Stages that exited with an error code without a report (after waiting up to ``wait`` s for them)."""
    deadline = time.monotonic() + wait
    while True:
        dead = [rank for rank, p in enumerate(procs) if rank not in reported and p.exitcode not in (None, 0)]
        if dead or time.monotonic() >= deadline:
            return dead
        time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------- a stage process
def _stage_main(rank: int, world: int, port: int, job: _Job, results: Any) -> None:
    import torch.distributed as dist

    from gplace.runtime.parallel import end_with_parent

    signal.signal(signal.SIGINT, signal.default_int_handler)  # a pool worker that spawned it ignores Ctrl-C
    end_with_parent()  # a caller killed with SIGKILL: its stages ran on, holding their ports
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        _init_group(job, _process_device(job, rank), rank=rank, world_size=world)
        results.put({"rank": rank, **_run_stage(rank, job)})
    except Exception as err:  # reported to the parent, which fails the measurement
        results.put({"rank": rank, "error": _stage_error(err)})
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _stage_error(err: Exception) -> str:
    """A stage's error on one line; one raised inside ``torch.distributed.pipelining`` says so (its bare messages,
    such as "zip() argument 2 is longer than argument 1", name neither torch's pipelining nor the stage)."""
    text = f"{type(err).__name__}: {error_summary(err)}"
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = "" if tb is None else tb.tb_frame.f_code.co_filename.replace(os.sep, "/")
    if "torch/distributed/pipelining/" not in where:
        return text
    cause, seen = err.__cause__ or err.__context__, {id(err)}  # torch's "[Stage 1] failed to run forward" wraps
    while cause is not None and id(cause) not in seen and (cause.__cause__ or cause.__context__) is not None:
        seen.add(id(cause))  # the op's own error, at the end of the chain (a chain may loop back on itself)
        cause = cause.__cause__ or cause.__context__
    caused = "" if cause is None else f", from {type(cause).__name__}: {error_summary(cause)}"
    return f"torch.distributed.pipelining raised {text}{caused}"


def _process_device(job: _Job, rank: int) -> torch.device:
    """The torch device of process ``rank``: its first stage's (all its stages are on one cluster device)."""
    return torch.device(job.devices[job.stages_of(rank)[0]])


def _init_group(job: _Job, device: torch.device, **where: Any) -> None:
    """Join the default process group (``where``: rank and world size, unless the environment has them) from the
    process of ``device``. A CUDA device is made current first, and under NCCL also bound to the group
    (``init_process_group(device_id=...)``, torch >= 2.3), so that barriers and object collectives use it instead
    of guessing one (the current device, cuda:0 unless set, or the rank modulo the GPUs). CPU devices and other
    backends join as before. The CUDA part was written from the PyTorch documentation of ``init_process_group``
    and ``barrier`` and has never run on a GPU (one GPU ran before it existed, setting the device after joining).
    """
    import torch.distributed as dist

    bound: dict[str, Any] = {}
    if device.type == "cuda":
        torch.cuda.set_device(device)
        if "nccl" in job.backend:
            bound["device_id"] = device
    wait = timedelta(seconds=job.timeout) if math.isfinite(job.timeout) else NO_TIMEOUT
    dist.init_process_group(job.backend, timeout=wait, **where, **bound)


def _bound_device() -> torch.device | None:
    """The device the default process group is bound to (``init_process_group(device_id=...)``, read back as
    ``ProcessGroup.bound_device_id``, torch >= 2.3), or ``None``: no group, or not bound to a device."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return None
    bound = getattr(dist.group.WORLD, "bound_device_id", None)
    return None if bound is None else torch.device(bound)


def _group_device_problem(rank: int, stages: list[int], device: torch.device, bound: torch.device | None) -> str:
    """Why rank ``rank``, running ``stages`` on ``device``, cannot use a process group bound to ``bound`` (another
    CUDA device: its barriers and NCCL communicator would be there, its stages' tensors on ``device``), or ``""``."""
    if bound is None or bound.type != "cuda":
        return ""
    bound = torch.device("cuda", 0) if bound.index is None else bound
    if bound == device:
        return ""
    which = f"stages {', '.join(map(str, stages))} run" if len(stages) > 1 else f"stage {stages[0]} runs"
    return (f"rank {rank}'s process group is bound to {bound} (init_process_group(device_id=...)) but its {which} "
            f"on {device}: expected {device}, got {bound}. A group stays bound to its GPU: under torchrun, bind "
            "each rank to its stages' device (or let gplace make the group), and keep each rank on the same GPU from "
            "one measured placement to the next")


def _run_stage(rank: int, job: _Job) -> dict[str, Any]:
    """Build this rank's stages, run ``warmup + steps`` mini-batches; their times, loss and gradients.

    Raises:
        RuntimeError: the process group is bound to another CUDA device than this rank's stages'
            (:func:`_group_device_problem`; checked before this rank's device is made current).
    """
    import torch.distributed as dist
    from torch.distributed.pipelining import SplitPoint, pipeline

    mine = job.stages_of(rank)
    device = _process_device(job, rank)
    problem = _group_device_problem(rank, mine, device, _bound_device())
    if problem:
        raise RuntimeError(problem)
    if job.threads is not None:
        torch.set_num_threads(job.threads)
    if device.type == "cuda":  # again: under torchrun the caller may have made the process group
        torch.cuda.set_device(device)
    module = copy.deepcopy(job.module)  # this process's own: pipeline() patches the module it traces, and the
    # stages' in-place buffer updates (BatchNorm's statistics) would land in the shared tensors it was sent
    pipe = pipeline(module, mb_args=job.example, split_spec={path: SplitPoint.BEGINNING for path in job.split})
    _contiguous_boundaries(pipe.split_gm)  # gloo sends and receives only contiguous tensors: an
    stages = [pipe.build_stage(k, device) for k in mine]  # nn.LSTM(batch_first=True)'s output is not
    for stage in stages:
        stage.submod.register_forward_hook(_contiguous_outputs)
    schedule = _schedule(stages, job)
    first, last = mine[0] == 0, mine[-1] == len(job.ranks) - 1
    times, losses = [], []
    for step in range(job.warmup + job.steps):
        for stage in stages:
            stage.submod.zero_grad(set_to_none=True)
        losses = []
        args = tuple(t.to(device) for t in job.inputs) if first else ()
        kwargs = {"target": job.target.to(device), "losses": losses} if last else {}
        dist.barrier()
        start = time.perf_counter()
        with forked_rng(STEP_SEED, [device.index] if device.type == "cuda" else []):  # as torch-v1: a step repeats
            schedule.step(*args, **kwargs)  # (Dropout's masks), the caller's generators left as they were
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        dist.barrier()
        if step >= job.warmup:
            times.append(time.perf_counter() - start)
    grads = {name: p.grad.detach().cpu().numpy().copy() for stage in stages
             for name, p in stage.submod.named_parameters() if p.grad is not None}
    loss = float(torch.stack([torch.as_tensor(v).detach().cpu() for v in losses]).mean()) if losses else math.nan
    return {"times": times, "loss": loss, "grads": grads}


def _contiguous_boundaries(split_gm: torch.fx.GraphModule) -> None:
    """Every stage's inputs and outputs recorded as contiguous in the traced metadata, from which torch makes the
    buffers a stage receives activations and gradients into (with the traced strides)."""
    for submod in split_gm.children():
        if not isinstance(submod, torch.fx.GraphModule):
            continue
        outputs = [n for out in submod.graph.find_nodes(op="output") for n in out.all_input_nodes]
        for node in [*submod.graph.find_nodes(op="placeholder"), *outputs]:
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor) and not val.is_contiguous():
                node.meta["val"] = val.contiguous()


def _contiguous_outputs(module: nn.Module, args: Any, output: Any) -> Any:
    """A stage's ``output`` with every tensor contiguous (a forward hook): what a stage sends must be."""
    return pytree.tree_map(lambda t: t.contiguous() if isinstance(t, torch.Tensor) else t, output)


def _schedule(stages: list, job: _Job) -> Any:
    """torch's single-stage schedule when every device holds one stage (and, under 1F1B, there are at least as
    many micro-batches as stages: ``Schedule1F1B`` refuses fewer); else each device's stages run in the order of
    :func:`~gplace.pipeline.stage_order.stage_orders`, through ``ScheduleLoopedBFS``'s runtime."""
    from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe, ScheduleLoopedBFS
    from torch.distributed.pipelining.schedules import _Action, _ComputationType

    from gplace.pipeline.stage_order import stage_orders

    count = len(job.ranks)
    if job.world == count and (job.schedule == "gpipe" or job.microbatches >= count):
        kind = ScheduleGPipe if job.schedule == "gpipe" else Schedule1F1B
        return kind(stages[0], n_microbatches=job.microbatches, loss_fn=job.loss_fn)
    orders = {rank: [_Action(p.stage, _ComputationType.FULL_BACKWARD if p.backward else _ComputationType.FORWARD,
                             p.microbatch) for p in order]
              for rank, order in stage_orders(job.ranks, job.microbatches, job.schedule).items()}

    class GivenOrder(ScheduleLoopedBFS):
        def _calculate_single_rank_operations(self, rank: int) -> list:
            return orders[rank]

    return GivenOrder(stages, n_microbatches=job.microbatches, loss_fn=job.loss_fn)
