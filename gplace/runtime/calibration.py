"""Fit the simulator's costs to the machine at hand, from measurements of the ``torch-v1`` runtime.

``torch`` is imported inside the functions that measure; :func:`fit_link`, :func:`with_op_costs`,
:func:`with_link_costs` and :func:`serialized` need only numpy.

Per-op times (:func:`time_ops`)
    The graph runs on one device through the ``torch-v1`` executor itself (its plan and step, so values,
    arguments and memory behave as in a measurement), and each FX call is timed where it runs, in program
    order, with ``time.perf_counter`` around it (a CUDA device is synchronised after each call, so GPU times
    are those of ops run one at a time). An ``operator.getitem`` is charged to the op whose tuple it reads.
    The median over ``repeats`` steps after ``warmup`` ones is the op's time. This is timing *in sequence*,
    not in isolation: caches and allocator hold what a real step leaves in them. Ops the executor does not run
    (``Input`` and ``Parameter`` ops) cost 0.
Anchoring to the step time
    Each instrumented step is followed by a plain one (``torch-v1``'s own step function, as a measurement runs
    it), so that both see the same load on the machine; ``Calibration.step_time`` is the median plain step.
    The calibrated costs add up to it: what a plain step costs beyond the sum of the op times (the executor's
    loop, time checks, the step's set-up; its per-op bookkeeping is already inside each op's time; the copies
    of the inputs it writes in place are made before either step's clock, as ``torch-v1`` makes them) is
    spread evenly over the ops the executor runs (``Calibration.overhead`` per op); if the op times add up to
    more than the step (timing each op has a cost of its own, and noise), they are scaled down instead
    (``Calibration.scale`` < 1). So on one device the calibrated graph predicts the measured step.
Warm-up
    On a GPU, the timed steps follow :data:`GPU_WARMUP_SECONDS` of plain steps back to back: a GPU that idled
    runs at low clocks, and the instrumented steps (one op at a time, waited for) keep it there. Measured on an
    H200 (`benchmarks/gpu_check.md`): the first calibration in a process, after ``warmup`` steps only, put a
    plain step at 0.745 ms that measurements right after timed at 0.498 ms; a second calibration, 0.491 ms.
Links (:func:`time_copies`, :func:`fit_link`)
    For each ordered pair of devices, the copy ``torch-v1`` makes of float32 tensors of several sizes is timed
    (with CUDA events where a GPU is involved, so that synchronising is not part of the latency): from a GPU to
    the host into pinned memory, non-blocking (``torch_runtime.pinned_copy``, the function ``torch-v1`` calls),
    into a GPU ``tensor.to(dst, non_blocking=True)``, between host devices ``tensor.to(dst)``; and
    ``seconds = a * bytes + b`` is fitted by non-negative least squares on relative residuals: bandwidth
    ``1 / a`` (``inf`` when ``a = 0``), latency ``b``. Two logical devices on one torch device (``/CPU:0``
    and ``/CPU:1`` on the one host) do not copy at all, in torch (``to`` returns the tensor itself) and in
    ``torch-v1`` (the value is shared): the fit then gives ``a`` of about 0 and ``b`` of a microsecond or so,
    i.e. near-free transfers.
The shared executor (:func:`serialized`)
    ``torch-v1`` runs the ops of CPU devices one after another in the calling thread, in program order, so
    two logical CPU devices never compute at the same time, whereas ``sim-v1`` runs devices concurrently.
    ``sim-v1`` has no notion of devices sharing an executor, so :func:`calibrate` writes the fact into the
    graph instead: with ``shared_executor`` (the default when every device maps to the host CPU), the
    calibrated graph gains a 0-byte edge from each executed op to the next one in program order (unless an
    edge is already there). The simulator then runs the ops in that order, one at a time, on whatever devices
    the placement names, and a device switch costs one link latency (about a microsecond). Without it (the
    *naive* model), the simulator predicts that a split placement on two logical CPUs runs up to twice as fast,
    which the machine does not do; ``benchmarks/calibration.md`` reports the error of both models. The chain
    is wrong for GPUs (they do run concurrently with the host), so ``shared_executor=True`` is refused on a
    cluster with a non-CPU device.

The calibrated graph has a new fingerprint (its costs, and edges, changed): make placements for it with
``Placement.for_graph(calibration.graph, placement.devices)``. It keeps the torch program as its ``source``,
so ``TorchRuntime`` runs it too.
"""

from __future__ import annotations

import functools
import logging
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from gplace.ir import Cluster, Edge, OpGraph, Placement
from gplace.ir.errors import check_sizes

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

__all__ = [
    "Calibration", "LinkFit", "anchor", "calibrate", "execution_order", "fit_link", "serialized", "time_copies",
    "time_ops", "with_link_costs", "with_op_costs",
]

GPU_WARMUP_SECONDS = 1.0
"""Seconds of back-to-back plain steps before a GPU's timed steps (see Warm-up in the module docstring); also
before the first timed steps of a :class:`~gplace.runtime.torch_runtime.TorchRuntime` on a GPU."""

COPY_SIZES = (2**10, 2**14, 2**17, 2**20, 2**22, 2**24)
"""Bytes of the tensors :func:`calibrate` copies to fit a link (1 kB to 16 MB)."""


@dataclass(frozen=True)
class LinkFit:
    """``seconds = seconds_per_byte * bytes + latency`` for copies from device ``src`` to ``dst``."""

    src: int
    dst: int
    seconds_per_byte: float
    """``a``: 1 / bandwidth."""
    latency: float
    """``b``: seconds per copy."""

    @property
    def bandwidth(self) -> float:
        """Bytes per second, ``inf`` when copies cost no time per byte."""
        return math.inf if self.seconds_per_byte <= 0 else 1.0 / self.seconds_per_byte


@dataclass(frozen=True, eq=False)
class Calibration:
    """A graph and cluster whose costs were measured on this machine, and what they were fitted from.

    Shapes:
        N ops.
    """

    graph: OpGraph
    """The graph with ``kind_cost`` measured for each device kind (and the execution chain if shared)."""
    cluster: Cluster
    """The cluster with fitted bandwidths and latencies."""
    op_time: Mapping[str, np.ndarray] = field(repr=False)
    """kind -> (N,) float64 seconds each op took in sequence (before overhead); 0 for ops not executed."""
    overhead: Mapping[str, float]
    """kind -> seconds of interpreter overhead added to each executed op (>= 0)."""
    scale: Mapping[str, float]
    """kind -> factor (<= 1) on the op times when they add up to more than the step; else 1."""
    step_time: Mapping[str, float]
    """kind -> median seconds of a plain ``torch-v1`` step with every op on that kind's first device."""
    links: tuple[LinkFit, ...] = field(repr=False)
    """One fit per ordered pair of distinct devices."""
    shared_executor: bool
    """Whether the graph carries the chain that makes the simulator run ops one at a time."""


def calibrate(
    graph: OpGraph, cluster: Cluster, *, device_map: Mapping[str, str] | None = None,
    shared_executor: bool | None = None, repeats: int = 20, warmup: int = 3,
    copy_sizes: Sequence[int] = COPY_SIZES, copy_repeats: int = 10,
) -> Calibration:
    """Measure op and link costs of ``graph`` on ``cluster`` with ``torch-v1`` (see the module docstring).

    Each device kind is measured on its first device in ``cluster``; a device of the same kind with another
    ``speed`` is assumed that much faster or slower.

    Args:
        graph: a graph imported by ``from_torch`` or ``from_onnx`` (anything ``TorchRuntime`` runs).
        cluster: the devices; their names map to torch devices as in ``TorchRuntime``.
        device_map: cluster device name -> torch device, as in ``TorchRuntime``. (default: None)
        shared_executor: chain the ops in program order so the simulator runs them one at a time.
            (default: None: when every device maps to the host CPU)
        repeats: timed steps, for op times and the step time. (default: 20)
        warmup: untimed steps before them. (default: 3)
        copy_sizes: bytes of the tensors copied to fit each link. (default: :data:`COPY_SIZES`)
        copy_repeats: copies timed per size (the median counts). (default: 10)

    Raises:
        ValueError: ``shared_executor=True`` on a cluster with a device that is not the host CPU; ``repeats``,
            ``copy_repeats`` < 1, ``warmup`` < 0 or not whole numbers, or fewer than two distinct ``copy_sizes``.
        gplace.runtime.torch_runtime.TorchRunError: the graph does not run on a device.
    """
    from gplace.runtime.torch_runtime import torch_device

    check_sizes("calibrate", 1, repeats=repeats, copy_repeats=copy_repeats)
    check_sizes("calibrate", 0, warmup=warmup)
    if len({int(size) for size in copy_sizes}) < 2:
        raise ValueError(f"calibrate: copy_sizes must hold at least two distinct byte counts (a link's latency and "
                         f"bandwidth are fitted to them), got {list(copy_sizes)}")

    devices = [torch_device(name, device_map) for name in cluster.device_names]
    all_cpu = all(d.type == "cpu" for d in devices)
    if shared_executor is None:
        shared_executor = all_cpu
    elif shared_executor and not all_cpu:
        raise ValueError("shared_executor=True models devices run by one host thread; this cluster has "
                         f"{sorted({str(d) for d in devices if d.type != 'cpu'})}, which run concurrently")
    order = execution_order(graph, cluster, device_map)
    executed = np.zeros(graph.num_ops)
    executed[order] = 1.0
    calibrated, op_time, overhead, scale, step_time = graph, {}, {}, {}, {}
    for kind in dict.fromkeys(cluster.kinds):
        d = cluster.kinds.index(kind)
        samples, plain = _timed_steps(graph, cluster, d, device_map, repeats, warmup)
        op_time[kind], step_time[kind] = np.median(samples, axis=0), float(np.median(plain))
        overhead[kind], scale[kind] = anchor(op_time[kind], step_time[kind], len(order))
        seconds = (op_time[kind] * scale[kind] + overhead[kind] * executed) * cluster.devices[d].speed
        calibrated = with_op_costs(calibrated, kind, seconds)
    if shared_executor:
        calibrated = serialized(calibrated, order)
    links = _fit_links(devices, copy_sizes, copy_repeats)
    return Calibration(calibrated, with_link_costs(cluster, links), op_time, overhead, scale, step_time, links,
                       shared_executor)


# ---------------------------------------------------------------------- measuring
def time_ops(
    graph: OpGraph, cluster: Cluster, device: int = 0, *, device_map: Mapping[str, str] | None = None,
    repeats: int = 20, warmup: int = 3,
) -> np.ndarray:
    """Seconds each op takes when the whole graph runs on ``device`` through the ``torch-v1`` executor.

    Shapes:
        Returns (N,) float64: the median over ``repeats`` steps of each op's in-sequence time; 0 for ops the
        executor does not run.

    Raises:
        gplace.runtime.torch_runtime.TorchRunError: the graph does not run on the device.
    """
    return np.median(_timed_steps(graph, cluster, device, device_map, repeats, warmup)[0], axis=0)


def _timed_steps(
    graph: OpGraph, cluster: Cluster, device: int, device_map: Mapping[str, str] | None, repeats: int, warmup: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-op seconds of ``repeats`` instrumented steps (R, N), and the seconds of a plain ``torch-v1`` step run
    right after each (R,), so that both see the same load on the machine."""
    import torch

    from gplace.runtime.torch_runtime import TorchRuntime, execute_step, keep_busy, seeded, streams_restored
    from gplace.runtime.torch_step import fresh_step

    with torch.no_grad():
        plan = TorchRuntime(device_map=device_map).plan(graph, cluster, Placement.single(graph, device), None)
    # every step seeded as torch-v1 seeds it, one block at a time in the process: the lock is taken here, before the
    # timers (a step waiting on another thread's measurement was timed waiting), and the caller's draws are kept
    with torch.no_grad(), seeded(plan):
        owner = _owners(graph, plan)
        sync = _synchronizer(plan.device_set)
        samples, plain = np.zeros((warmup + repeats, graph.num_ops)), np.zeros(warmup + repeats)
        if any(d.type == "cuda" for d in plan.device_set):
            keep_busy(plan, GPU_WARMUP_SECONDS)
        for r in range(warmup + repeats):
            step = fresh_step(plan)  # both steps' copies of the written inputs made before their clocks start,
            with streams_restored(plan):  # and freed after they stop, as torch-v1 times a step
                for call, i in zip(plan.calls, owner, strict=True):
                    start = time.perf_counter()
                    step.run(call)
                    sync()
                    samples[r, i] += time.perf_counter() - start
            del step
            step = fresh_step(plan)
            start = time.perf_counter()
            execute_step(plan, math.inf, step)
            sync()
            plain[r] = time.perf_counter() - start
            del step
    return samples[warmup:], plain[warmup:]


def time_copies(src: torch.device, dst: torch.device, sizes: Sequence[int], repeats: int = 10) -> np.ndarray:
    """Median seconds of ``torch-v1``'s copy (:func:`runtime_copy`) to ``dst`` of float32 tensors of ``sizes``
    bytes living on ``src``.

    Between host devices the wall time; where a GPU is involved, CUDA events recorded around the copy on the
    stream torch runs it on (the source GPU's, else the destination's), so that no synchronisation overhead
    enters the fitted latency. (Until 2026-11-29 a copy from a GPU was timed as a pageable ``tensor.to("cpu")``,
    which ``torch-v1`` does not make; the pinned copy timed now has never run on a GPU.)

    Shapes:
        Returns (len(sizes),) float64.
    """
    import torch

    sync = _synchronizer({src, dst})
    timer = _event_timer(src if src.type == "cuda" else dst) if "cuda" in (src.type, dst.type) else _wall_timer
    copy = runtime_copy(src, dst)
    out = np.empty(len(sizes))
    for k, nbytes in enumerate(sizes):
        x = torch.ones(max(1, int(nbytes) // 4), device=src)  # not rand: the caller's generator is left alone
        times = []
        for _ in range(repeats + 1):  # the first copy warms up (and allocates the pinned buffer the next reuse)
            sync()
            times.append(timer(functools.partial(copy, x)))
            sync()
        out[k] = statistics.median(times[1:])
    return out


def runtime_copy(src: torch.device, dst: torch.device) -> Callable[[torch.Tensor], torch.Tensor]:
    """The function ``torch-v1`` copies a tensor from ``src`` to ``dst`` with (``Step.copy``; its streams and
    events aside): from a GPU to the host ``pinned_copy`` (into pinned memory, non-blocking), into a GPU
    ``to(dst, non_blocking=True)``, else ``to(dst)``."""
    from gplace.runtime.torch_runtime import pinned_copy, to_device

    if src.type == "cuda" and dst.type == "cpu":
        return pinned_copy
    return functools.partial(to_device, device=dst, non_blocking=dst.type == "cuda")


def _wall_timer(copy: Callable[[], Any]) -> float:
    start = time.perf_counter()
    copy()
    return time.perf_counter() - start


def _event_timer(device: torch.device) -> Callable[[Callable[[], Any]], float]:
    """Seconds between CUDA events recorded before and after ``copy()`` on ``device``'s current stream."""
    import torch

    def timed(copy: Callable[[], Any]) -> float:
        stream = torch.cuda.current_stream(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        copy()
        end.record(stream)
        end.synchronize()
        return start.elapsed_time(end) / 1000.0  # milliseconds

    return timed


def anchor(op_time: np.ndarray, step_time: float, executed: int) -> tuple[float, float]:
    """``(overhead per executed op, scale)`` so that ``scale * op_time.sum() + overhead * executed == step_time``.

    The residual ``step_time - op_time.sum()`` is spread evenly over the ``executed`` ops when it is >= 0;
    otherwise the op times are scaled down. One of the two is neutral (overhead 0, or scale 1).

    Raises:
        ValueError: ``step_time`` is not a finite number > 0 (a scale of 0 or below costs every op nothing, or less).
    """
    if not 0 < step_time < math.inf:
        raise ValueError(f"anchor: step_time must be a finite number of seconds > 0, got {step_time!r}")
    total = float(op_time.sum())
    residual = step_time - total
    if residual >= 0 or total <= 0:
        return max(residual, 0.0) / max(1, executed), 1.0
    logger.debug("op times add up to %.3g s more than the step; scaled by %.3f", -residual, step_time / total)
    return 0.0, step_time / total


def execution_order(graph: OpGraph, cluster: Cluster, device_map: Mapping[str, str] | None = None) -> list[int]:
    """Indices of the ops ``torch-v1`` runs, in the order it runs them (the FX program order).

    Raises:
        gplace.runtime.torch_runtime.TorchRunError: the graph has no torch program, or it does not run.
    """
    from gplace.runtime.torch_runtime import TorchRuntime, op_name_of

    plan = TorchRuntime(device_map=device_map).plan(graph, cluster, Placement.single(graph, 0), None)
    ops = [op_name_of(c.node) for c in plan.calls]
    return [graph.op_index[op] for op in ops if op in graph.op_index]


def _owners(graph: OpGraph, plan: Any) -> list[int]:
    """The op each call of the plan is charged to (a getitem: the op that made its tuple)."""
    from gplace.runtime.torch_runtime import op_name_of

    calls = {c.node.name: c.node for c in plan.calls}
    return [graph.op_index[op_name_of(calls[plan.roots[c.node.name]])] for c in plan.calls]


def _synchronizer(devices: Any) -> Any:
    import torch

    cuda = [d for d in devices if d.type == "cuda"]

    def sync() -> None:
        for d in cuda:
            torch.cuda.synchronize(d)

    return sync


def _fit_links(devices: Sequence[torch.device], sizes: Sequence[int], repeats: int) -> tuple[LinkFit, ...]:
    """One fit per ordered pair of distinct cluster devices; pairs of the same torch devices timed once."""
    timed: dict[tuple[Any, Any], tuple[float, float]] = {}
    fits = []
    for i, src in enumerate(devices):
        for j, dst in enumerate(devices):
            if i == j:
                continue
            if (src, dst) not in timed:
                timed[src, dst] = fit_link(np.asarray(sizes), time_copies(src, dst, sizes, repeats))
            fits.append(LinkFit(i, j, *timed[src, dst]))
    return tuple(fits)


# ---------------------------------------------------------------------- fitting and rewriting
def fit_link(nbytes: Sequence[float] | np.ndarray, seconds: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Fit ``seconds = a * nbytes + b`` by least squares of the *relative* residuals, with ``a, b >= 0``.

    Copy times span orders of magnitude (a microsecond for 1 kB, milliseconds for 16 MB) and their noise is
    roughly proportional to them, so each residual is divided by its measured time: plain least squares would
    let the largest copy's noise swamp ``b``.

    Shapes:
        nbytes, seconds: (M,), M >= 2 distinct sizes.

    Returns:
        ``(a, b)``: seconds per byte and seconds per copy.

    Raises:
        ValueError: fewer than two distinct sizes, or shapes that differ.
    """
    from scipy.optimize import nnls

    x, y = np.asarray(nbytes, dtype=np.float64), np.asarray(seconds, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or np.unique(x).size < 2:
        raise ValueError(f"need two 1-D arrays of one length with >= 2 distinct sizes, got {x.shape}, {y.shape}")
    if not (y > 0).all():
        raise ValueError(f"copy times must be > 0, got {y.tolist()}")
    columns = np.stack([x / y, 1 / y], axis=1)
    scale = columns.max(axis=0)  # columns of similar magnitude keep NNLS well conditioned
    (a, b), _ = nnls(columns / scale, np.ones_like(y))
    return float(a / scale[0]), float(b / scale[1])


def with_op_costs(graph: OpGraph, kind: str, seconds: np.ndarray) -> OpGraph:
    """``graph`` with ``kind_cost[kind]`` replaced by ``seconds`` (at speed 1.0); the rest unchanged.

    Shapes:
        seconds: (N,) float64 >= 0.
    """
    seconds = np.asarray(seconds, dtype=np.float64)
    if seconds.shape != (graph.num_ops,):
        raise ValueError(f"seconds has shape {seconds.shape}, expected ({graph.num_ops},)")
    kind_cost = {**graph.kind_cost, kind: seconds.copy()}
    return _rebuilt(graph, kind_cost=kind_cost)


def serialized(graph: OpGraph, order: Sequence[int]) -> OpGraph:
    """``graph`` with a 0-byte edge from each op of ``order`` to the next (where no edge is), so that the
    simulator runs those ops one after another in that order, whatever the placement."""
    have = set(zip(*graph.edge_index.tolist(), strict=True))
    names = graph.op_names
    extra = [Edge(names[a], names[b], 0) for a, b in zip(order, order[1:], strict=False) if (a, b) not in have]
    return OpGraph.from_ops(graph.ops(), [*graph.edges(), *extra], name=graph.name, source=graph.source)


def with_link_costs(cluster: Cluster, links: Sequence[LinkFit]) -> Cluster:
    """``cluster`` with bandwidth ``1 / a`` and latency ``b`` from each fit; pairs without a fit unchanged."""
    bandwidth, latency = np.array(cluster.bandwidth), np.array(cluster.latency)
    for link in links:
        bandwidth[link.src, link.dst] = link.bandwidth
        latency[link.src, link.dst] = link.latency
    return Cluster(cluster.devices, bandwidth, latency, name=f"{cluster.name}-calibrated")


def _rebuilt(graph: OpGraph, **fields: Any) -> OpGraph:
    values = {name: getattr(graph, name) for name in graph.__dataclass_fields__}
    return OpGraph(**{**values, **fields})
