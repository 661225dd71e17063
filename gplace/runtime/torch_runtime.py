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
    higher-order-op subgraphs: :func:`~gplace.importers.torch_export.written_inputs`) is copied afresh before
    each step (outside its timer: Step time), so every step starts from the same values and the user's tensors
    are never written.
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
    of each; ``spread = (max - min) / median``. A step's copies of the written inputs (Values) are made, and
    finished on every CUDA device, before its clock starts, and freed after it stops: they are not the
    program's (until 2026-12-05 they were timed: writing one 64-row slot of a 67 MB buffer in place measured
    84 ms against 0.23 ms eager on one CPU thread, 0.74 ms now; the id stayed, as the ops, shapes and devices
    timed are the same). The first measurement of a runtime that uses a GPU first runs
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
import statistics
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch

from gplace.importers.onnx import OnnxSource
from gplace.importers.torch_export import TorchSource
from gplace.ir import Cluster, OpGraph, Placement, UnsupportedGraphError
from gplace.ir.errors import check_flags, check_sizes, error_summary
from gplace.ir.placement import check_placement
from gplace.runtime.base import ClusterMismatchError, Measurement, Runtime
from gplace.runtime.calibration import GPU_WARMUP_SECONDS
from gplace.runtime.torch_cuda import memory_fractions, streams_restored, synchronize
from gplace.runtime.torch_devices import (
    cluster_problems,
    runnable_device_map,
    runnable_reason,
    shared_gpu_problems,
    torch_device,
    unavailable_reason,
)
from gplace.runtime.torch_errors import TorchRunError
from gplace.runtime.torch_plan import LAYOUT_FREE as LAYOUT_FREE
from gplace.runtime.torch_plan import Known, Plan, build_plan, node_homes
from gplace.runtime.torch_plan import writes_in_place as writes_in_place
from gplace.runtime.torch_program import (
    given_inputs,
    graph_module,
    no_program,
    onnx_torch_program,
    op_name_of,
    program_values,
)
from gplace.runtime.torch_step import STEP_SEED as STEP_SEED
from gplace.runtime.torch_step import Step, TimeUp, check_time, execute_step, fresh_step, nbytes, pinned_copy
from gplace.runtime.torch_step import seeded as seeded
from gplace.runtime.torch_step import to_device as to_device
from gplace.runtime.wrapper import check_time_limit
from gplace.torch_modes import forked_rng

logger = logging.getLogger(__name__)

__all__ = ["Plan", "Step", "TorchRunError", "TorchRuntime", "cluster_problems", "execute_step",
           "memory_fractions", "op_name_of", "pinned_copy", "shared_gpu_problems", "streams_restored", "torch_device",
           "unavailable_reason"]
# The names above and those imported "as" themselves (LAYOUT_FREE, STEP_SEED, seeded, to_device, writes_in_place)
# are defined in the torch_* modules and re-exported: other code imports them from here.


class TorchRuntime(Runtime):
    """The ``torch-v1`` runtime: executes graphs imported by ``from_torch`` or ``from_onnx`` (module docstring).

    Args:
        steps: timed steps per measurement. (default: 5)
        warmup: untimed steps before them. (default: 2)
        time_limit: seconds a measurement may take, set-up and warm-up included; ``None`` or ``inf``: no
            limit. (default: 60.0)
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
        self, steps: int = 5, warmup: int = 2, time_limit: float | None = 60.0,
        device_map: Mapping[str, str] | None = None, enforce_memory: bool = False,
    ) -> None:
        check_sizes(type(self).__name__, 1, steps=steps)
        check_sizes(type(self).__name__, 0, warmup=warmup)
        check_flags(type(self).__name__, enforce_memory=enforce_memory)
        limit = check_time_limit(type(self).__name__, time_limit)
        self.steps, self.warmup, self.time_limit = steps, warmup, limit
        self.device_map = runnable_device_map(device_map)
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
                initialiser (tensors or NumPy arrays). An ``int``, ``float`` or ``bool`` input is a constant of
                the exported program: only its traced value is taken (a joint training graph keeps no record of it,
                so there another value goes unchecked, and the traced one is used). (default: None: the program's
                own values)

        Returns:
            The flat outputs of the FX graph (for a training graph: mutated buffers, outputs, then gradients;
            ``None`` where a gradient is missing; for an ONNX graph: the graph outputs).

        Raises:
            InvalidPlacementError: the placement does not fit the graph or cluster.
            TypeError: ``placement`` is not a :class:`~gplace.ir.Placement`.
            ValueError: ``inputs`` do not fit the program (a name, the count, or a traced constant's value).
            TorchRunError: the step failed (the reason a measurement would report).
        """
        check_placement(placement)
        placement.validate(graph, cluster)
        with forked_rng():  # one run at a time in the process (its step seeds the process's generators)
            return self._run(graph, cluster, placement, inputs)

    def _run(self, graph: OpGraph, cluster: Cluster, placement: Placement, inputs: Any) -> tuple[Any, ...]:
        deadline = time.perf_counter() + self.time_limit
        with torch.no_grad(), self._memory_capped(cluster, placement):
            plan = self.plan(graph, cluster, placement, inputs)
            try:
                outputs, _ = execute_step(plan, deadline)
            except TimeUp:
                raise TorchRunError(f"time limit of {self.time_limit:g} s exceeded during the step") from None
            synchronize(plan)
        outputs = tuple(outputs) if isinstance(outputs, list | tuple) else (outputs,)
        return tuple(_own_copy(x, plan.initial) for x in outputs)

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        with forked_rng():  # one measurement at a time in the process: its steps seed the process's generators, and
            return self._measure_held(graph, cluster, placement)  # a step waiting on another's was timed waiting

    def _measure_held(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
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
            try:
                check_time(deadline)
                step = fresh_step(plan)  # its copies of the written inputs made, and finished, before the clock
                start = time.perf_counter()
                moved = execute_step(plan, deadline, step)[1]
            except TimeUp:
                raise TorchRunError(
                    f"time limit of {self.time_limit:g} s exceeded after {k} of {total} steps (warm-up included)"
                ) from None
            synchronize(plan)
            if k >= self.warmup:
                times.append(time.perf_counter() - start)
            del step  # its copies and outputs freed after the clock, not held into the next step
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
        except TimeUp:
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
        homes = node_homes(gm, graph, placement.devices.tolist())
        plan = build_plan(gm, homes, devices, cluster.device_names, values, known)
        plan.streams, plan.copy_streams = self._streams(plan.device_set)
        synchronize(plan)
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
        cluster device's ``memory``, the sum of theirs for cluster devices a ``device_map`` puts on one GPU
        (:func:`memory_fractions`: the caps before are given back on leaving, also on an exception or out of
        memory); else, or where the devices cannot be used (the plan then fails, saying why), nothing."""
        if not self.enforce_memory:
            return nullcontext()
        try:
            devices = self._devices(cluster, placement)
        except TorchRunError:
            return nullcontext()
        limits: dict[torch.device, float] = {}
        for d, dev in devices.items():
            if dev.type == "cuda":  # cluster devices sharing a GPU (device_map) share its cap: their memory summed
                total = torch.cuda.get_device_properties(dev).total_memory
                limits[dev] = min(1.0, limits.get(dev, 0.0) + cluster.devices[d].memory / total)
        return memory_fractions(limits)

    def _program(self, graph: OpGraph, inputs: Any) -> tuple[torch.fx.GraphModule, dict[str, Any], Known]:
        """The FX program of the graph's source, the values of its placeholders and attributes, and the host
        values of the inputs its calls read on the host (ONNX programs only)."""
        source = graph.source
        if isinstance(source, TorchSource):
            gm = graph_module(source)
            values = self._cached(source.program, lambda: program_values(source, gm))
            return gm, {**values, **given_inputs(source, gm, inputs)}, {}
        if isinstance(source, OnnxSource):
            program = self._cached(source.model, lambda: onnx_torch_program(source, graph))
            given = program.given(inputs)
            return program.module, {**program.values, **given}, program.known(given)
        raise TorchRunError(no_program(graph))

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
        """Raise :class:`~gplace.ir.UnsupportedGraphError` unless ``graph`` holds a torch.export program or an ONNX
        model whose nodes convert to torch (one without a torch implementation is named here, not in every
        measurement; no weights are read)."""
        source = graph.source
        if not isinstance(source, TorchSource | OnnxSource):
            raise UnsupportedGraphError(no_program(graph))
        if isinstance(source, OnnxSource):
            from gplace.runtime.onnx.program import check_convertible

            try:
                check_convertible(source, graph)
            except UnsupportedGraphError as err:
                raise UnsupportedGraphError(f"graph {graph.name!r} cannot run on torch: {err}") from None

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


# ---------------------------------------------------------------------- measurement
def keep_busy(plan: Plan, seconds: float, deadline: float = math.inf) -> None:
    """Run plain steps back to back for ``seconds``, then wait for every CUDA device, so that a GPU that idled at
    low clocks is at its working clocks when the timed steps start.

    Raises:
        TimeUp: past ``deadline``.
    """
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        check_time(deadline)
        execute_step(plan, deadline)
    synchronize(plan)


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
        held = sum(nbytes(v) for name, v in plan.initial.items() if plan.homes[name] == d)
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


def _own_copy(output: Any, kept: Mapping[str, Any]) -> Any:
    """``output`` cloned where it shares memory with a value the runtime keeps for later steps (a weight, an ONNX
    initialiser a Reshape returns a view of): a caller writing into a result changed every later run."""
    if not isinstance(output, torch.Tensor) or not (ptr := output.untyped_storage().data_ptr()):
        return output
    shared = any(isinstance(v, torch.Tensor) and v.untyped_storage().data_ptr() == ptr for v in kept.values())
    return output.clone() if shared else output
