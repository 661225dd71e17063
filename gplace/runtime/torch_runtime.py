"""``torch-v1``: run a ``torch.export`` program op by op on the devices of a placement, and time it.

The semantics below are those of runtime id ``torch-v1``; any change to them needs a new id.

Program
    The graph's ``source`` is the :class:`~gplace.importers.torch_export.TorchSource` that
    :func:`~gplace.importers.torch_export.from_torch` attached (each op is the FX node of the same name), or the
    :class:`~gplace.importers.onnx.OnnxSource` of :func:`~gplace.importers.onnx.from_onnx`, whose model
    :func:`~gplace.runtime.onnx.program.onnx_program` converts to an FX program, once per model (each ONNX node a
    call of a torch function; each FX node names its op in ``node.meta["gplace_op"]``). A model with an op the
    converter lacks fails every measurement, naming the node. An FX node that is not an op takes a device from
    the ops around it: an ``operator.getitem`` runs where its tuple was made, a parameter, folded initialiser or
    constant value lives on the device of its one reader.
Values
    Parameters, buffers and constants come from the ``ExportedProgram``; user inputs from its example inputs.
    A joint training graph's parameters, buffers and example inputs come from the module it was imported from
    (``TorchSource.values``); its tangents, and any input without a value, are made from their metadata:
    floats uniform in ``[0, 1)`` from a generator seeded by the node name, integers and booleans 0 (an input
    nothing reads and whose metadata holds no value, such as a flag, is ``None``). An ONNX model's
    initialisers come from the model, external data from the model's directory; its inputs (and initialisers
    without data) are made the same way, seeded by the tensor name. (Until 2026-11-27 a training graph's
    parameters and inputs, and external initialisers, were made up too; the id stayed, as the ops, shapes and
    devices timed are the same, only the numbers in them changed, which made up could overflow to nan.)
    :meth:`TorchRuntime.run` takes other inputs. All of them are moved to their device before timing starts.
    Every one of them that an op writes in place (an argument its schema marks as written, through views and
    higher-order-op subgraphs: :func:`~gplace.importers.torch_export.written_inputs`) is copied afresh at the
    start of each step, so every step starts from the same values and the user's tensors are never written.
    Random ops draw from the host's and the plan's CUDA devices' generators, seeded with :data:`STEP_SEED` at
    the start of each step inside ``torch.random.fork_rng`` (the caller's random state is given back). (Until
    2026-11-29 in-place ops wrote the user's tensors, so values drifted from run to run, and random ops drew
    from the caller's generators; the id stayed, as the ops, shapes and devices timed are the same.)
Devices
    A cluster device name maps to a torch device: ``"/CPU:i"`` to ``cpu``, ``"/GPU:i"`` to ``cuda:i`` (a
    TensorFlow-style ``".../device:GPU:i"`` too), and a torch device string (``"cpu"``, ``"cuda:1"``) is used
    as it is; ``device_map`` overrides. ``device=`` arguments of factory ops follow the op's placement.
    Two cluster devices on one CUDA device are an error (a failed measurement, and
    :meth:`TorchRuntime.check_cluster` raises) unless ``device_map`` names both.
Transfers
    A value read on another cluster device is copied once per (producer, device) and step. Two cluster devices
    on one torch device (logical CPU devices) share the value without copying, but the transfer still counts
    in ``bytes_moved``. Each CUDA device has a compute stream and a copy stream, made once per runtime; its ops
    run on the compute stream, made current when a call's device changes (the caller's current streams and
    device are given back after the step). A copy
    into a GPU runs on the copy streams of both GPUs after an event recorded behind its producer, and the
    reader's compute stream waits on an event recorded behind the copy; a value made on a GPU and read on the
    host is sent into pinned memory as soon as it is made, and the host waits for it only when a CPU op reads
    it. So GPUs, copies and the host run concurrently. Ops on CPU devices run one after another in the calling
    thread. ONNX programs get their shape-like inputs as host values computed when the step is planned
    (:mod:`gplace.runtime.onnx.known`), so no step reads a device tensor on the host for them.
Step time
    The median wall time of ``steps`` steps after ``warmup`` steps, every CUDA device synchronised at the end
    of each; ``spread = (max - min) / median``. The first measurement of a runtime that uses a GPU first runs
    steps back to back for :data:`~gplace.runtime.calibration.GPU_WARMUP_SECONDS`: a GPU that idled runs at low
    clocks (on an H200 the first measurement of a process, after two warm-up steps only, took 12.3 ms where the
    next four took 6.7-7.1 ms; with it, 9.67 and 7.05 ms in two processes against 9.64-10.50 and 6.17-10.67).
Peak memory
    When every device in use is a CUDA device of its own: per device, the bytes of the values placed there
    (parameters, inputs) plus the most a timed step allocated above what the device held after the warm-up
    steps, the GPU warm-up's above included (so library workspaces and other programs' tensors do not count;
    until 2026-11-29, with ``warmup=0``, the first measurement on a GPU counted what its GPU warm-up allocated
    and kept, against this definition: the id stayed). With ``enforce_memory`` each GPU's caching allocator is
    capped at its cluster device's ``memory`` during a measurement or run, and given back the cap it had
    before when it ends, failed or not (until 2026-12-02 the cap stayed on the process after it).
Failures
    Out of memory, an unavailable device, an exception inside an op, a CUDA error outside the ops and the time
    limit (checked between top-level ops, set-up included: a ``while_loop`` runs to its end unchecked) give
    ``ok=False`` and a reason naming the op or device, never
    an exception. After a sticky CUDA error :meth:`TorchRuntime.usable` is false; a pool worker then exits and
    is replaced.
"""

from __future__ import annotations

import logging
import math
import operator
import re
import statistics
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import torch
from torch.fx.node import map_aggregate, map_arg
from torch.utils import _pytree as pytree

from gplace.importers.onnx import OnnxSource
from gplace.importers.torch_export import TorchSource, exported_values, written_inputs
from gplace.ir import Cluster, OpGraph, Placement, UnsupportedGraphError
from gplace.ir.errors import check_sizes, error_summary
from gplace.ir.placement import check_placement
from gplace.runtime.base import ClusterMismatchError, Measurement, Runtime
from gplace.runtime.calibration import GPU_WARMUP_SECONDS
from gplace.runtime.synthetic import synthesised

logger = logging.getLogger(__name__)

__all__ = ["Plan", "Step", "TorchRunError", "TorchRuntime", "cluster_problems", "execute_step",
           "memory_fractions", "op_name_of", "pinned_copy", "shared_gpu_problems", "streams_restored", "torch_device",
           "unavailable_reason"]

_DEVICE_NAME = re.compile(r"(?:^|/)(?:device:)?(CPU|GPU):(\d+)$", re.IGNORECASE)
"""``/CPU:0``, ``/GPU:1``, ``/job:localhost/replica:0/task:0/device:GPU:1``."""

STEP_SEED = 0
"""The seed of the generators random ops (dropout) draw from in each step (module docstring, Values)."""

Known = Mapping[str, Mapping[int, Any]]
"""Call name -> {argument position: host value} for shape-like inputs known when the step is planned."""


class TorchRunError(RuntimeError):
    """Running a placed program failed; the message is the reason a measurement reports."""


def torch_device(name: str, device_map: Mapping[str, str] | None = None) -> torch.device:
    """The torch device behind a cluster device name (see the module docstring).

    Raises:
        ValueError: the name maps to no torch device.
    """
    if device_map is not None and name in device_map:
        return torch.device(_parse_device(name, device_map[name]))
    match = _DEVICE_NAME.search(name)
    if match:
        return torch.device("cpu") if match[1].upper() == "CPU" else torch.device("cuda", int(match[2]))
    try:
        return _normalise(torch.device(name))
    except RuntimeError:
        raise ValueError(f"device {name!r} maps to no torch device; give it a device_map entry") from None


def _parse_device(name: str, value: str) -> str:
    try:
        device = _normalise(torch.device(value))
    except RuntimeError:
        raise ValueError(f"device_map[{name!r}] = {value!r} is not a torch device") from None
    return str(device)


_NO_DATA = frozenset({"meta"})
"""Torch devices whose tensors hold no data (ops on them compute nothing)."""


def _normalise(device: torch.device) -> torch.device:
    return torch.device("cuda", 0) if device.type == "cuda" and device.index is None else device


class TorchRuntime(Runtime):
    """The ``torch-v1`` runtime: executes graphs imported by ``from_torch`` or ``from_onnx`` (module docstring).

    Args:
        steps: timed steps per measurement. (default: 5)
        warmup: untimed steps before them. (default: 2)
        time_limit: seconds a measurement may take, set-up and warm-up included. (default: 60.0)
        device_map: cluster device name -> torch device string, overriding the default mapping, e.g.
            ``{"/CPU:0": "cpu", "/CPU:1": "cpu"}``. (default: None)
        enforce_memory: limit each CUDA device's caching allocator to its cluster device's ``memory``
            (``torch.cuda.set_per_process_memory_fraction``) while a measurement or run lasts, so that a placement
            that would not fit the modelled device fails as out of memory on a larger card; the process's cap
            before it is given back after it. (default: False)
    """

    id = "torch-v1"
    deterministic = False

    def __init__(
        self, steps: int = 5, warmup: int = 2, time_limit: float = 60.0, device_map: Mapping[str, str] | None = None,
        enforce_memory: bool = False,
    ) -> None:
        check_sizes(type(self).__name__, 1, steps=steps)
        check_sizes(type(self).__name__, 0, warmup=warmup)
        if not time_limit > 0:
            raise ValueError(f"time_limit must be > 0, got {time_limit}")
        self.steps, self.warmup, self.time_limit = steps, warmup, float(time_limit)
        self.device_map = {name: _parse_device(name, value) for name, value in (device_map or {}).items()}
        for name, value in self.device_map.items():  # split_program may show a split on meta; a run computes
            if torch.device(value).type in _NO_DATA:
                raise ValueError(f"device_map[{name!r}] = {value!r} holds no data: nothing would be computed")
        self.enforce_memory = enforce_memory
        self._values: OrderedDict[int, tuple[Any, Any]] = OrderedDict()
        self._stream_pairs: dict[torch.device, tuple[Any, Any]] = {}
        self._checked: set[str] = set()
        self._warm_gpus: set[torch.device] = set()
        self._used_gpus: set[torch.device] = set()

    def __getstate__(self) -> dict[str, Any]:
        """Settings only: no cached values or CUDA streams."""
        return {**self.__dict__, "_values": OrderedDict(), "_stream_pairs": {}, "_checked": set(), "_warm_gpus": set(),
                "_used_gpus": set()}

    def run(
        self, graph: OpGraph, cluster: Cluster, placement: Placement,
        inputs: Mapping[str, Any] | Sequence[Any] | Any | None = None,
    ) -> tuple[Any, ...]:
        """Run one step and return the program's outputs, each on the device of the op that made it.

        Args:
            graph: a graph imported by ``from_torch`` or ``from_onnx``.
            cluster: the devices.
            placement: a device per op.
            inputs: the user inputs in order (a tensor, or a sequence flattened like the example inputs), or
                ``{placeholder name: value}`` for any input, parameters and tangents included. For an ONNX
                graph: the graph inputs in order, or ``{tensor name: value}`` for any graph input or
                initialiser (tensors or NumPy arrays). (default: None: the program's own values)

        Returns:
            The flat outputs of the FX graph (for a training graph: mutated buffers, outputs, then gradients;
            ``None`` where a gradient is missing; for an ONNX graph: the graph outputs).

        Raises:
            InvalidPlacementError: the placement does not fit the graph or cluster.
            TypeError: ``placement`` is not a :class:`~gplace.ir.Placement`.
            TorchRunError: the step failed (the reason a measurement would report).
        """
        check_placement(placement)
        placement.validate(graph, cluster)
        deadline = time.perf_counter() + self.time_limit
        with torch.no_grad(), self._memory_capped(cluster, placement):
            plan = self.plan(graph, cluster, placement, inputs)
            try:
                outputs, _ = execute_step(plan, deadline)
            except _TimeUp:
                raise TorchRunError(f"time limit of {self.time_limit:g} s exceeded during the step") from None
            _synchronize(plan)
        return tuple(outputs) if isinstance(outputs, list | tuple) else (outputs,)

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        deadline = time.perf_counter() + self.time_limit
        self._warn_once(cluster)
        try:
            with torch.no_grad(), self._memory_capped(cluster, placement):
                plan = self.plan(graph, cluster, placement, None)
                times, moved, base = self._time_steps(plan, deadline)
                return self._success(plan, cluster, times, moved, base)
        except TorchRunError as err:
            reason = str(err)
        except torch.OutOfMemoryError as err:  # one no step wrapped, e.g. raised when synchronising
            reason = f"out of memory: {error_summary(err)}"
        except Exception as err:
            if not _cuda_error(err):
                raise
            reason = f"CUDA error outside the ops: {type(err).__name__}: {error_summary(err)}"
        logger.debug("measurement of %r failed: %s", graph.name, reason)
        _release()  # the failed step's tensors went with the exception
        return Measurement.failure(self.id, reason)

    def usable(self) -> bool:
        """Whether CUDA still works in this process (a sticky error, such as an illegal address or a device-side
        assert, leaves the context unusable until the process exits; a pool replaces such a worker). Only the GPUs
        this runtime's measurements used are synchronised: synchronising another would create a CUDA context on it
        (hundreds of MB of its memory) in every worker. Written for several GPUs and never run on more than one."""
        if not (self._used_gpus and torch.cuda.is_available() and torch.cuda.is_initialized()):
            return True
        try:
            for device in sorted(self._used_gpus, key=lambda d: d.index):
                torch.cuda.synchronize(device)
        except Exception:  # the sticky error again
            return False
        return True

    def _success(
        self, plan: Plan, cluster: Cluster, times: list[float], moved: int, base: Mapping[torch.device, int],
    ) -> Measurement:
        median, spread = _step_statistics(times)
        return Measurement(ok=True, step_time=median, runtime=self.id, bytes_moved=moved, spread=spread,
                           peak_memory=_peak_memory(plan, cluster, base))

    def _time_steps(self, plan: Plan, deadline: float) -> tuple[list[float], int, dict[torch.device, int]]:
        """Wall times of the timed steps, the bytes one step moves between cluster devices, and the bytes each
        CUDA device held when the peaks were reset (after the warm-up steps, which allocate library workspaces)."""
        total, times, moved = self.warmup + self.steps, [], 0
        self._warm_up(plan, deadline)
        base = _reset_peaks(plan)  # after the GPU warm-up: with warmup=0 its steps' workspaces counted as the peak's
        for k in range(total):
            start = time.perf_counter()
            try:
                _check_time(deadline)
                moved = execute_step(plan, deadline)[1]  # outputs dropped at once: not held into the next step
            except _TimeUp:
                raise TorchRunError(
                    f"time limit of {self.time_limit:g} s exceeded after {k} of {total} steps (warm-up included)"
                ) from None
            _synchronize(plan)
            if k >= self.warmup:
                times.append(time.perf_counter() - start)
            if k + 1 == self.warmup:
                base = _reset_peaks(plan)
        return times, moved, base

    def _warm_up(self, plan: Plan, deadline: float) -> None:
        """Steps back to back for ``GPU_WARMUP_SECONDS`` the first time this runtime uses a GPU (see Step time)."""
        cold = self._cold_gpus(plan)
        if not cold:
            return
        try:
            keep_busy(plan, GPU_WARMUP_SECONDS, deadline)
        except _TimeUp:
            raise TorchRunError(f"time limit of {self.time_limit:g} s exceeded while warming up "
                                f"{', '.join(sorted(map(str, cold)))}") from None
        self._warm_gpus |= cold

    def _cold_gpus(self, plan: Plan) -> set[torch.device]:
        """The CUDA devices of ``plan`` this runtime has not warmed up yet."""
        return {d for d in plan.device_set if d.type == "cuda"} - self._warm_gpus

    # ------------------------------------------------------------------ set-up
    def plan(self, graph: OpGraph, cluster: Cluster, placement: Placement, inputs: Any) -> Plan:
        """The program bound to ``placement``, its values on their devices (``enforce_memory``'s caps are set by
        :meth:`measure` and :meth:`run` around it, not here)."""
        gm, values, known = self._program(graph, inputs)
        devices = self._devices(cluster, placement)
        homes = _homes(gm, graph, placement.devices.tolist())
        plan = _build_plan(gm, homes, devices, cluster.device_names, values, known)
        plan.streams, plan.copy_streams = self._streams(plan.device_set)
        _synchronize(plan)
        return plan

    def _streams(self, devices: frozenset[torch.device]) -> tuple[dict[torch.device, Any], dict[torch.device, Any]]:
        """A compute and a copy stream per CUDA device, made once per runtime and reused by every measurement
        (new streams would leave cuBLAS workspaces and stream-bound cached blocks behind each time)."""
        for dev in devices:
            if dev.type == "cuda" and dev not in self._stream_pairs:
                self._stream_pairs[dev] = (torch.cuda.Stream(device=dev), torch.cuda.Stream(device=dev))
        pairs = {dev: pair for dev, pair in self._stream_pairs.items() if dev in devices}
        return {d: p[0] for d, p in pairs.items()}, {d: p[1] for d, p in pairs.items()}

    def _memory_capped(self, cluster: Cluster, placement: Placement) -> Any:
        """With ``enforce_memory``, a context inside which each CUDA device of the placement is limited to its
        cluster device's ``memory`` (:func:`memory_fractions`: the caps before are given back on leaving, also on
        an exception or out of memory); else, or where the devices cannot be used (the plan then fails, saying
        why), nothing."""
        if not self.enforce_memory:
            return nullcontext()
        try:
            devices = self._devices(cluster, placement)
        except TorchRunError:
            return nullcontext()
        limits = {}
        for d, dev in devices.items():
            if dev.type == "cuda":
                total = torch.cuda.get_device_properties(dev).total_memory
                limits[dev] = min(1.0, cluster.devices[d].memory / total)
        return memory_fractions(limits)

    def _program(self, graph: OpGraph, inputs: Any) -> tuple[torch.fx.GraphModule, dict[str, Any], Known]:
        """The FX program of the graph's source, the values of its placeholders and attributes, and the host
        values of the inputs its calls read on the host (ONNX programs only)."""
        source = graph.source
        if isinstance(source, TorchSource):
            gm = _graph_module(source)
            values = self._cached(source.program, lambda: _program_values(source, gm))
            return gm, {**values, **_given_inputs(source, gm, inputs)}, {}
        if isinstance(source, OnnxSource):
            program = self._cached(source.model, lambda: _onnx_program(source, graph))
            given = program.given(inputs)
            return program.module, {**program.values, **given}, program.known(given)
        raise TorchRunError(_no_program(graph))

    def _devices(self, cluster: Cluster, placement: Placement) -> dict[int, torch.device]:
        """Cluster device index -> torch device, for the devices the placement uses; checks they exist and that
        no two share a GPU unless ``device_map`` says so."""
        devices = {}
        for d in sorted(set(placement.devices.tolist())):
            name = cluster.devices[d].name
            try:
                devices[d] = torch_device(name, self.device_map)
            except ValueError as err:
                raise TorchRunError(str(err)) from None
            problem = runnable_reason(devices[d])
            if problem:
                raise TorchRunError(f"device {name} ({devices[d]}) is not available ({problem})")
        shared = shared_gpu_problems({cluster.devices[d].name: dev for d, dev in devices.items()}, self.device_map)
        if shared:
            raise TorchRunError(shared[0])
        self._used_gpus.update(dev for dev in devices.values() if dev.type == "cuda")  # what usable() checks
        return devices

    def check_graph(self, graph: OpGraph) -> None:
        """Raise :class:`~gplace.ir.UnsupportedGraphError` unless ``graph`` holds a torch.export or ONNX program."""
        if not isinstance(graph.source, TorchSource | OnnxSource):
            raise UnsupportedGraphError(_no_program(graph))

    def check_cluster(self, cluster: Cluster) -> None:
        """Raise :class:`~gplace.runtime.base.ClusterMismatchError` naming every cluster device that maps to no
        torch device or to one this machine lacks, and every GPU two cluster devices share without a
        ``device_map`` entry saying so (call it once, before a search; measurements fail on such devices)."""
        ClusterMismatchError.check(cluster, cluster_problems(cluster, self.device_map))

    def _warn_once(self, cluster: Cluster) -> None:
        if cluster.fingerprint in self._checked:
            return
        self._checked.add(cluster.fingerprint)
        problems = cluster_problems(cluster, self.device_map)
        if problems:
            logger.warning("cluster %r does not fit this machine (placements using these devices fail): %s",
                           cluster.name, "; ".join(problems))

    def _cached(self, owner: Any, make: Callable[[], Any]) -> Any:
        """``make()`` cached per program (``owner``): its host values, or an ONNX model's converted program."""
        key = id(owner)
        cached = self._values.get(key)
        if cached is not None and cached[0] is owner:
            self._values.move_to_end(key)
            return cached[1]
        made = make()
        self._values[key] = (owner, made)
        if len(self._values) > 4:
            self._values.popitem(last=False)
        return made


# ---------------------------------------------------------------------- devices
def cluster_problems(cluster: Cluster, device_map: Mapping[str, str] | None = None, *, unshared: str = "") -> list[str]:
    """What keeps ``cluster`` from running here under ``torch-v1``: devices that map to no torch device or to one
    this machine lacks, and GPUs shared by two cluster devices without a ``device_map`` entry for each (with
    ``unshared``, the reason a runtime cannot share a GPU at all: every shared GPU, entries or not)."""
    problems, mapped = [], {}
    missing: dict[str, list[str]] = {}
    for device in cluster.devices:
        try:
            mapped[device.name] = torch_device(device.name, device_map)
        except ValueError as err:
            problems.append(str(err))
            continue
        why = runnable_reason(mapped[device.name])
        if why:
            missing.setdefault(why, []).append(f"{device.name} ({mapped[device.name]})")
    problems += [f"{', '.join(names)} not available ({why})" for why, names in missing.items()]
    return problems + shared_gpu_problems(mapped, device_map, unshared=unshared)


def shared_gpu_problems(mapped: Mapping[str, torch.device], device_map: Mapping[str, str] | None, *,
                        unshared: str = "") -> list[str]:
    """A message per CUDA device that several cluster devices map to, unless ``device_map`` names them all (with
    ``unshared``, the reason sharing cannot work: a message per shared CUDA device, entries or not)."""
    owners: dict[torch.device, list[str]] = {}
    for name, dev in mapped.items():
        if dev.type == "cuda":
            owners.setdefault(dev, []).append(name)
    if unshared:
        return [f"{' and '.join(names)} all map to {dev}: give each its own GPU ({unshared})"
                for dev, names in owners.items() if len(names) > 1]
    explicit = device_map or {}
    return [f"{' and '.join(names)} all map to {dev}: give each its own GPU, or share it on purpose with "
            "device_map entries for each" for dev, names in owners.items()
            if len(names) > 1 and not all(n in explicit for n in names)]


def runnable_reason(device: torch.device) -> str:
    """Why a run cannot compute on ``device`` (one this machine lacks, or one that holds no data), or ``""``."""
    if device.type in _NO_DATA:
        return f"a {device.type} device holds no data"
    return unavailable_reason(device)


def unavailable_reason(device: torch.device) -> str:
    """Why ``device`` cannot be used, or ``""``."""
    if device.type == "cpu":
        return ""
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return "" if (device.index or 0) < count else f"torch sees {count} CUDA device(s)"  # "cuda": the current
    try:
        torch.empty(0, device=device)
    except Exception as err:  # each backend raises its own kind
        return error_summary(err)
    return ""


# ---------------------------------------------------------------------- values
def _onnx_program(source: OnnxSource, graph: OpGraph) -> Any:
    """The converted ONNX model; a node without a torch implementation becomes a run error naming it."""
    from gplace.runtime.onnx.program import onnx_program

    try:
        return onnx_program(source, graph)
    except UnsupportedGraphError as err:
        raise TorchRunError(f"graph {graph.name!r} cannot run on torch: {err}") from err


def _graph_module(source: TorchSource) -> torch.fx.GraphModule:
    program = source.program
    return program if isinstance(program, torch.fx.GraphModule) else program.graph_module


def _program_values(source: TorchSource, gm: torch.fx.GraphModule) -> dict[str, Any]:
    """Real values where the program holds them, else values made from each node's metadata."""
    known = source.values if source.training else exported_values(source.program)
    values = {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            values[node.name] = known[node.name] if node.name in known else _synthesise(node)
        elif node.op == "get_attr":
            value = _attribute(gm, str(node.target))
            if isinstance(value, torch.Tensor):
                real = not isinstance(value, torch._subclasses.FakeTensor)
                values[node.name] = value if real else _synthesise(node)
            elif isinstance(value, torch.fx.GraphModule):  # a torch.cond branch or while_loop body, run as given
                values[node.name] = value
    return values


def _given_inputs(source: TorchSource, gm: torch.fx.GraphModule, inputs: Any) -> dict[str, Any]:
    """``inputs`` of :meth:`TorchRuntime.run` as placeholder name -> value."""
    names = [n.name for n in gm.graph.find_nodes(op="placeholder")]
    if inputs is None:
        return {}
    if isinstance(inputs, Mapping):
        unknown = sorted(set(inputs) - set(names))
        if unknown:
            raise ValueError(f"inputs name {unknown[0]!r}, not a placeholder of the program; it has {names}")
        return dict(inputs)
    user = _user_inputs(source, gm)
    leaves = pytree.tree_leaves(inputs)
    if len(leaves) != len(user):
        raise ValueError(f"got {len(leaves)} inputs, the program takes {len(user)}: {user}")
    return dict(zip(user, leaves, strict=True))


def _user_inputs(source: TorchSource, gm: torch.fx.GraphModule) -> list[str]:
    if not source.training:
        return list(source.program.graph_signature.user_inputs)
    return [n.name for n in gm.graph.find_nodes(op="placeholder")
            if type(n.meta.get("desc")).__name__ == "PlainAOTInput"]


def _attribute(gm: torch.fx.GraphModule, target: str) -> Any:
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part, None)
    return value


def _synthesise(node: torch.fx.Node) -> Any:
    """A value with the shape and dtype of ``meta["val"]`` (:func:`synthesised`, seeded by the node name)."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return synthesised(node.name, [_hint(d) for d in val.shape], val.dtype)
    if isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool):
        return _hint(val)
    if isinstance(val, int | float | bool):
        return val
    if val is None and not node.users:  # an argument nothing reads, e.g. a flag such as use_cache=False
        return None
    raise TorchRunError(f"input {node.name!r} has no value and no metadata to make one from; pass it in inputs")


def _hint(value: Any) -> Any:
    if isinstance(value, int | float | bool):
        return value
    hint = getattr(getattr(value, "node", None), "hint", None)
    if hint is None:
        raise TorchRunError(f"symbolic size {value} has no example value")
    return hint


# ---------------------------------------------------------------------- the plan
LAYOUT_FREE: dict[Any, Any] = {torch.ops.aten.view.default: torch.ops.aten.reshape.default}
"""Ops run in place of a program's, which torch.export traced with the example inputs' memory layouts. Another device
may lay out an op's output otherwise (on a CUDA GPU, ``nn.Transformer``'s attention output reaches a ``view`` that
the CPU-traced program cannot apply: "view size is not compatible with input tensor's size and stride"). Wherever
``view`` works, ``reshape`` returns that same view; only where it would raise, ``reshape`` copies (same values)."""


@dataclass(frozen=True, eq=False)
class _Call:
    """One FX ``call_function`` node, ready to run on its cluster device."""

    node: torch.fx.Node
    device: int
    """Cluster device index."""
    args: tuple
    kwargs: dict
    """The node's arguments, ``device=`` values replaced by its torch device."""
    free: tuple[str, ...]
    """Values whose last reader this is."""
    event: bool
    """Whether a reader on another torch device waits on it (CUDA only)."""
    target: Callable[..., Any]
    """What runs: the node's target, or its :data:`LAYOUT_FREE` stand-in."""
    writes: bool = False
    """Whether it writes an argument in place (its schema says so; a higher-order op may): on a GPU it first
    waits for the copies its device has started, which may still be reading that value (CUDA only)."""


@dataclass(eq=False)
class Plan:
    """A program bound to a placement, with its inputs on their devices."""

    calls: list[_Call]
    homes: dict[str, int]
    """FX node name -> cluster device index."""
    roots: dict[str, str]
    """FX node name -> the call that made its value (a getitem's tuple); itself for other nodes."""
    torch_devices: dict[int, torch.device]
    labels: dict[int, str]
    initial: dict[str, Any]
    """Placeholders and tensor attributes, on their devices."""
    outputs: Any
    """The output node's argument (a structure of nodes)."""
    streams: dict[torch.device, Any] = field(default_factory=dict)
    """The compute stream of each CUDA device."""
    copy_streams: dict[torch.device, Any] = field(default_factory=dict)
    """The copy stream of each CUDA device: copies into it and out of it run there."""
    host_readers: dict[str, frozenset[torch.device]] = field(default_factory=dict)
    """Call name -> the CPU devices reading its value, for calls on CUDA devices: sent as soon as it is made."""
    written: frozenset[str] = frozenset()
    """Placeholders and attributes some op writes in place: each step gets fresh copies of their values in
    :attr:`initial`, which no op writes."""

    @cached_property
    def device_set(self) -> frozenset[torch.device]:
        """The torch devices in use."""
        return frozenset(self.torch_devices.values())


def _homes(gm: torch.fx.GraphModule, graph: OpGraph, devices: list[int]) -> dict[str, int]:
    """FX node name -> cluster device: ops by the placement, the other nodes by their neighbours."""
    homes: dict[str, int] = {}
    covered: set[str] = set()
    for node in gm.graph.nodes:
        op = op_name_of(node)
        i = graph.op_index.get(op)
        if i is not None:
            homes[node.name] = devices[i]
            covered.add(op)
        elif node.op == "call_function" and node.target is operator.getitem:
            homes[node.name] = homes[node.args[0].name]
        elif node.op == "call_function":
            raise TorchRunError(f"node {op!r} of the torch program is not an op of graph {graph.name!r}")
    missing = [name for name in graph.op_names if name not in covered]
    if missing:
        raise TorchRunError(f"op {missing[0]!r} of graph {graph.name!r} is not a node of its torch program")
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "get_attr") and node.name not in homes:
            readers = [homes[u.name] for u in node.users if u.name in homes]
            homes[node.name] = readers[0] if readers else devices[0]
    return homes


def op_name_of(node: torch.fx.Node) -> str:
    """The gplace op an FX node stands for: ``meta["gplace_op"]`` (ONNX programs), else its name."""
    return node.meta.get("gplace_op", node.name)


def _build_plan(
    gm: torch.fx.GraphModule, homes: dict[str, int], devices: dict[int, torch.device],
    names: Sequence[str], values: dict[str, Any], known: Known,
) -> Plan:
    torch_devices = {d: devices[d] for d in sorted(set(homes.values()))}
    labels = {d: f"{names[d]} ({dev})" for d, dev in torch_devices.items()}
    roots = _roots(gm)
    cross = _cross_device_roots(gm, homes, torch_devices, roots)
    last = _last_readers(gm)
    calls = [
        _Call(node, homes[node.name], *_retarget(node, torch_devices[homes[node.name]], known.get(node.name, {})),
              free=tuple(last.get(node.name, ())), event=node.name in cross,
              target=LAYOUT_FREE.get(node.target, node.target), writes=writes_in_place(node))
        for node in gm.graph.nodes if node.op == "call_function"
    ]
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    plan = Plan(calls, homes, roots, torch_devices, labels, {}, output.args[0])
    plan.initial = _place_values(gm, homes, torch_devices, labels, values)
    plan.host_readers = _host_readers(gm, homes, torch_devices)
    plan.written = written_inputs(gm) & plan.initial.keys()
    return plan


def _host_readers(
    gm: torch.fx.GraphModule, homes: dict[str, int], devices: dict[int, torch.device],
) -> dict[str, frozenset[torch.device]]:
    readers: dict[str, set[torch.device]] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function" or devices[homes[node.name]].type != "cuda":
            continue
        for user in node.users:
            dst = devices.get(homes.get(user.name, -1))
            if dst is not None and dst.type == "cpu":
                readers.setdefault(node.name, set()).add(dst)
    return {name: frozenset(cpus) for name, cpus in readers.items()}


def writes_in_place(node: torch.fx.Node) -> bool:
    """Whether call ``node`` may write one of its arguments in place: an argument its schema marks as written
    (``aten.relu_``, an ``out=``), or any higher-order op (its subgraph may)."""
    if isinstance(node.target, torch._ops.HigherOrderOperator):
        return True
    schema = getattr(node.target, "_schema", None)
    return schema is not None and any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def _roots(gm: torch.fx.GraphModule) -> dict[str, str]:
    roots: dict[str, str] = {}
    for node in gm.graph.nodes:
        getitem = node.op == "call_function" and node.target is operator.getitem
        roots[node.name] = roots[node.args[0].name] if getitem else node.name
    return roots


def _cross_device_roots(
    gm: torch.fx.GraphModule, homes: dict[str, int], devices: dict[int, torch.device], roots: dict[str, str]
) -> set[str]:
    """Calls whose value some call on another torch device reads."""
    cross = set()
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        for dep in node.all_input_nodes:
            if devices[homes[dep.name]] != devices[homes[node.name]]:
                cross.add(roots[dep.name])
    return cross


def _last_readers(gm: torch.fx.GraphModule) -> dict[str, list[str]]:
    """Call name -> the values it is the last call to read (outputs are kept to the end)."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    kept = {n.name for n in output.all_input_nodes}
    last: dict[str, str] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function":
            for dep in node.all_input_nodes:
                last[dep.name] = node.name
    freed: dict[str, list[str]] = {}
    for value, reader in last.items():
        if value not in kept:
            freed.setdefault(reader, []).append(value)
    return freed


def _retarget(node: torch.fx.Node, device: torch.device, known: Mapping[int, Any]) -> tuple[tuple, dict]:
    """The node's arguments with every ``torch.device`` replaced by ``device`` (factory ops follow placement) and
    the arguments in ``known`` (position -> value) replaced by their values."""
    def swap(value: Any) -> Any:
        return device if isinstance(value, torch.device) else value

    args = tuple(known.get(i, arg) for i, arg in enumerate(node.args))
    return map_aggregate(args, swap), map_aggregate(node.kwargs, swap)


def _place_values(
    gm: torch.fx.GraphModule, homes: dict[str, int], devices: dict[int, torch.device],
    labels: dict[int, str], values: dict[str, Any],
) -> dict[str, Any]:
    placed = {}
    for node in gm.graph.nodes:
        if node.name not in values:
            continue
        home = homes[node.name]
        try:
            placed[node.name] = to_device(values[node.name], devices[home])
        except Exception as err:  # OutOfMemoryError or a device that refuses the tensor
            raise _failure(err, f"placing input {node.name!r}", labels[home]) from err
    return placed


# ---------------------------------------------------------------------- execution
class _TimeUp(TorchRunError):
    """The time limit passed during a step."""


def _check_time(deadline: float) -> None:
    if time.perf_counter() > deadline:
        raise _TimeUp("time limit exceeded during the step")


def keep_busy(plan: Plan, seconds: float, deadline: float = math.inf) -> None:
    """Run plain steps back to back for ``seconds``, then wait for every CUDA device, so that a GPU that idled at
    low clocks is at its working clocks when the timed steps start.

    Raises:
        _TimeUp: past ``deadline``.
    """
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        _check_time(deadline)
        execute_step(plan, deadline)
    _synchronize(plan)


def execute_step(plan: Plan, deadline: float) -> tuple[Any, int]:
    """Run one step; return the output structure and the bytes moved between cluster devices. Random ops draw
    from the CPU's and the plan's CUDA devices' generators seeded with :data:`STEP_SEED`; the caller's random
    state is given back."""
    with seeded(plan), streams_restored(plan):
        step = Step(plan)
        for call in plan.calls:
            step.run(call)
            _check_time(deadline)
    outputs = map_arg(plan.outputs, lambda n: step.env[n.name])
    return outputs, step.moved


class Step:
    """The values of one step: per node, and copies per (node, torch device).

    :meth:`run` makes a GPU's compute stream current (and its device); run calls inside
    :func:`streams_restored` to give the caller's back, as :func:`execute_step` does.
    """

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.env: dict[str, Any] = dict(plan.initial)
        self.copies: dict[tuple[str, torch.device], Any] = {}
        self.sent: set[tuple[str, int]] = set()
        self.events: dict[str, Any] = {}
        self.moved = 0
        self.copied_out: dict[torch.device, Any] = {}
        """GPU -> an event after the last copy started from it (its copy stream runs them in order)."""
        self.stream: Any = None
        """The compute stream made current last (switched only when a call's device has another one)."""
        for name in sorted(plan.written):
            self.restore(name)

    def restore(self, name: str) -> None:
        """A fresh copy of written input ``name``, made on its device's compute stream (the event marks it)."""
        plan = self.plan
        stream = plan.streams.get(plan.torch_devices[plan.homes[name]])
        with torch.cuda.stream(stream) if stream is not None else nullcontext():
            self.env[name] = pytree.tree_map_only(torch.Tensor, torch.clone, plan.initial[name])
            if stream is not None:
                self.events[name] = stream.record_event()

    def run(self, call: _Call) -> None:
        node, plan = call.node, self.plan
        device = plan.torch_devices[call.device]
        if node.target is operator.getitem:
            self.env[node.name] = operator.getitem(self.env[node.args[0].name], *node.args[1:])
            self.free(call.free)
            return
        args, kwargs = map_arg((call.args, call.kwargs), lambda dep: self.fetch(dep.name, call.device))
        stream = plan.streams.get(device)
        if stream is not None and stream is not self.stream:
            torch.cuda.set_stream(stream)  # and its device; a context per op cost more host time than most ops
            self.stream = stream
        if call.writes and stream is not None and device in self.copied_out:
            stream.wait_event(self.copied_out[device])  # a copy still reading a value this op overwrites
        try:
            self.env[node.name] = call.target(*args, **kwargs)
            if call.event and stream is not None:
                self.events[node.name] = stream.record_event()
            for cpu in plan.host_readers.get(node.name, ()):
                self.copies[node.name, cpu] = self.send_to_host(self.env[node.name], device, self.events[node.name])
        except Exception as err:  # an op may raise anything
            what = f"op {op_name_of(node)!r} ({node.meta.get('onnx_op_type', node.target)})"
            raise _failure(err, what, plan.labels[call.device]) from err
        self.free(call.free)

    def fetch(self, name: str, device: int) -> Any:
        """The value of node ``name`` on cluster device ``device``, copied at most once per step."""
        plan = self.plan
        src = plan.homes[name]
        value = self.env[name]
        if src == device:
            return value
        if (name, device) not in self.sent:
            self.sent.add((name, device))
            self.moved += _nbytes(value)
        dst, home = plan.torch_devices[device], plan.torch_devices[src]
        if dst == home:
            return value
        try:
            if (name, dst) not in self.copies:
                self.copies[name, dst] = self.copy(value, home, dst, self.events.get(plan.roots[name]))
            return _arrived(self.copies[name, dst])
        except Exception as err:  # OutOfMemoryError and CUDA errors
            raise _failure(err, f"copying {name!r} from {plan.labels[src]}", plan.labels[device]) from err

    def copy(self, value: Any, src: torch.device, dst: torch.device, event: Any) -> Any:
        """``value`` copied to ``dst`` on the copy streams, after its producer's ``event``; the destination's
        compute stream waits for the copy (an event), nothing else does."""
        if src.type == "cuda" and dst.type == "cpu":
            return self.send_to_host(value, src, event)
        if dst.type != "cuda":
            return to_device(value, dst)
        copies, compute = self.plan.copy_streams, self.plan.streams
        inbound = copies[dst]
        outbound = copies[src] if src.type == "cuda" else inbound
        if event is not None:
            outbound.wait_event(event)
        with torch.cuda.stream(outbound), torch.cuda.stream(inbound):  # torch copies between GPUs on the source's
            out = to_device(value, dst, non_blocking=True)                    # current stream, ordered with the dst's
        if src.type == "cuda":
            _record_stream(value, outbound)  # the source block stays allocated until the copy ran
            self.copied_out[src] = outbound.record_event()  # an op writing in place on src waits for it
        _record_stream(out, compute[dst])  # allocated on the copy stream, read on the compute stream
        compute[dst].wait_event(inbound.record_event())
        return out

    def send_to_host(self, value: Any, src: torch.device, event: Any) -> _HostCopy:
        """Start copying ``value`` into pinned host memory on ``src``'s copy stream, after ``event``; the host
        waits for it only when a CPU op reads it (:func:`_arrived`), so other devices' launches go on."""
        stream = self.plan.copy_streams[src]
        if event is not None:
            stream.wait_event(event)
        with torch.cuda.stream(stream):
            out = pytree.tree_map_only(torch.Tensor, pinned_copy, value)
            done = stream.record_event()
        _record_stream(value, stream)
        self.copied_out[src] = done  # an op writing in place on src waits for it
        return _HostCopy(out, done)

    def free(self, names: tuple[str, ...]) -> None:
        """Drop values (and their copies) no later call reads."""
        for name in names:
            self.env.pop(name, None)
            for device in self.plan.device_set:
                self.copies.pop((name, device), None)


@dataclass(frozen=True)
class _HostCopy:
    """A copy to pinned host memory that may still be running; ``done`` is recorded after it."""

    value: Any
    done: Any


def _arrived(copy: Any) -> Any:
    """A copy's value, once it is there (waits for a :class:`_HostCopy`)."""
    if isinstance(copy, _HostCopy):
        copy.done.synchronize()
        return copy.value
    return copy


def pinned_copy(t: torch.Tensor) -> torch.Tensor:
    """``t`` copied to the host into pinned memory, non-blocking (how torch-v1 brings a GPU result back)."""
    return torch.empty(t.shape, dtype=t.dtype, pin_memory=True).copy_(t, non_blocking=True)


def to_device(value: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """Tensors in ``value`` (a tensor, or lists and tuples of them) moved to ``device``."""
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to(device, non_blocking=non_blocking), value)


def _record_stream(value: Any, stream: Any) -> None:
    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, torch.Tensor) and leaf.device.type == "cuda":
            leaf.record_stream(stream)


def _nbytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor))


def _failure(err: Exception, what: str, where: str) -> TorchRunError:
    if isinstance(err, TorchRunError):
        return err
    if _out_of_memory(err):
        return TorchRunError(f"out of memory on {where} in {what}: {error_summary(err)}")
    return TorchRunError(f"{what} on {where} failed: {type(err).__name__}: {error_summary(err)}")


def _out_of_memory(err: Exception) -> bool:
    """A CUDA out-of-memory error, or the CPU allocator's (a plain ``RuntimeError``)."""
    return isinstance(err, torch.OutOfMemoryError) or "DefaultCPUAllocator: can't allocate memory" in str(err)


@contextmanager
def seeded(plan: Plan) -> Iterator[None]:
    """Generators of the host and the plan's CUDA devices seeded with :data:`STEP_SEED` inside, the caller's
    states given back on leaving."""
    gpus = sorted({dev.index for dev in plan.device_set if dev.type == "cuda"})
    with torch.random.fork_rng(devices=gpus):
        torch.random.default_generator.manual_seed(STEP_SEED)
        for index in gpus:
            torch.cuda.default_generators[index].manual_seed(STEP_SEED)
        yield


# ---------------------------------------------------------------------- CUDA bookkeeping
@contextmanager
def streams_restored(plan: Plan) -> Iterator[None]:
    """Give back the caller's current CUDA device and each device's current stream on leaving: a
    :class:`Step` makes its compute streams current as it goes (:func:`execute_step` runs it inside this)."""
    if not plan.streams:
        yield
        return
    device, before = torch.cuda.current_device(), [torch.cuda.current_stream(d) for d in plan.streams]
    try:
        yield
    finally:
        for stream in before:
            torch.cuda.set_stream(stream)
        torch.cuda.set_device(device)


@contextmanager
def memory_fractions(limits: Mapping[torch.device, float]) -> Iterator[None]:
    """Each CUDA device of ``limits`` capped at that fraction of its memory inside
    (``torch.cuda.set_per_process_memory_fraction``, which caps the whole process), and given back the fraction
    it had before (``torch.cuda.get_per_process_memory_fraction``; 1.0, no cap, where torch cannot read it) on
    leaving, also on an exception. A device that cannot be given back (a dead CUDA context) is left as it is,
    with a warning, so that the exception that ended the block is the one raised."""
    read = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    before: dict[torch.device, float] = {}
    try:
        for dev, fraction in limits.items():
            before[dev] = float(read(dev)) if read is not None else 1.0
            torch.cuda.set_per_process_memory_fraction(float(fraction), dev)
        yield
    finally:
        for dev, fraction in before.items():
            try:
                torch.cuda.set_per_process_memory_fraction(fraction, dev)
            except Exception as err:  # the sticky error again; usable() turns false
                logger.warning("could not give %s its memory fraction %g back: %s", dev, fraction, error_summary(err))


def _synchronize(plan: Plan) -> None:
    for device in plan.streams:
        try:
            torch.cuda.synchronize(device)
        except Exception as err:  # an asynchronous CUDA error surfaces here
            label = next(plan.labels[d] for d, dev in plan.torch_devices.items() if dev == device)
            raise _failure(err, "the step", label) from err


def _reset_peaks(plan: Plan) -> dict[torch.device, int]:
    """Reset each CUDA device's peak statistics; returns the bytes allocated on each at that moment."""
    base = {}
    for device in plan.streams:
        torch.cuda.reset_peak_memory_stats(device)
        base[device] = torch.cuda.memory_allocated(device)
    return base


def _peak_memory(plan: Plan, cluster: Cluster, base: Mapping[torch.device, int]) -> np.ndarray | None:
    """(D,) peak bytes per device when each device in use is a CUDA device of its own, else ``None``: the
    placement's inputs and parameters on the device plus the most a timed step allocated above what the device
    held before it (so neither other programs' tensors nor library workspaces count). Unused devices report 0.
    """
    used = list(plan.torch_devices.values())
    if any(dev.type != "cuda" for dev in used) or len(set(used)) < len(used):
        return None
    peaks = np.zeros(cluster.num_devices, dtype=np.int64)
    for d, dev in plan.torch_devices.items():
        held = sum(_nbytes(v) for name, v in plan.initial.items() if plan.homes[name] == d)
        peaks[d] = held + torch.cuda.max_memory_allocated(dev) - base.get(dev, 0)
    return peaks


def _cuda_error(err: Exception) -> bool:
    """A CUDA error (a dead context after a sticky error raises one from any CUDA call)."""
    accelerator = getattr(torch, "AcceleratorError", None)
    return (accelerator is not None and isinstance(err, accelerator)) or "CUDA" in str(err)


def _release() -> None:
    """After a failure, hand cached CUDA blocks back so that the next measurement starts clean (not possible
    after a sticky CUDA error, which makes every CUDA call fail: then nothing is done)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        try:
            torch.cuda.empty_cache()
        except Exception:  # a dead context; the pool replaces the worker (TorchRuntime.usable)
            logger.warning("CUDA is unusable in this process after a failed measurement")


def _step_statistics(times: Sequence[float]) -> tuple[float, float]:
    """Median step time and spread ``(max - min) / median`` of timed steps."""
    median = statistics.median(times)
    spread = (max(times) - min(times)) / median if median > 0 else 0.0
    return float(median), float(spread) if math.isfinite(spread) else 0.0


def _no_program(graph: OpGraph) -> str:
    return (f"graph {graph.name!r} has no torch program to run (its source is {type(graph.source).__name__}); "
            "TorchRuntime runs graphs imported by gplace.importers.torch_export.from_torch or "
            "gplace.importers.onnx.from_onnx")
