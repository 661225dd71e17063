"""``pipe-v3``: a discrete-event simulator of one mini-batch of a placed graph, pipelined over micro-batches.

The semantics below are those of runtime id ``pipe-v3``; any change to them needs a new id. ``pipe-v2`` (the
figures recorded from 2026-11-29 to 2026-12-05) differed in one rule: under ``1f1b`` a device ran a ready
backward instance before any ready forward one, so with unequal stages its order was not torch's (two stages
with forward passes of 0.5 s and backward passes of 2.0 s and 0.5 s, M = 3: ``F0 F1 B0 B1 F2 B2`` on the first
device, 3.0 s, where torch's ``F0 F1 B0 F2 B1 B2`` takes 2.67 s); its ``gpipe`` is ``pipe-v3``'s, and so is its
``1f1b`` on a graph without backward ops. ``pipe-v1`` (before 2026-11-29) differed from ``pipe-v2`` in two
rules: its stages were ordered by the first forward op of any kind, so a weight or input op on another device
decided which device was stage 0 (and the 1F1B limits); and a micro-batch left a device with its last instance
there, so a device whose backward ops ran elsewhere held one micro-batch's activations instead of every one
waiting for its backward.

Instances
    The mini-batch is split into ``M`` micro-batches. Every forward or backward op (an op without a phase
    counts as forward) runs once per micro-batch ``m``, taking ``graph.durations(cluster)[i, d] / M``
    seconds; every update op runs once, taking its full duration. An edge between two micro-batch ops joins
    their instances of the same micro-batch; an edge from a micro-batch op to an update op joins each of
    its ``M`` instances to the update op; an edge between update ops joins them once. Edges carry
    ``ceil(edge_bytes / M)`` bytes from a micro-batch op and ``edge_bytes`` from an update op. Update ops
    may only feed update ops, and backward ops may not feed forward ops (else :class:`GraphError`).
Stages
    A forward op *runs* unless it is a source (no inputs) that takes no time on any device it may run on (an
    input, a weight). The devices holding forward ops that run, ordered by the first such op of each in
    ``graph.topological_order``, are the stages ``k = 0 .. S-1``. Device ``d`` of stage ``k`` admits
    ``L_d = min(M, S - k)`` micro-batches under ``1f1b`` and ``L_d = M`` under ``gpipe`` (``L_d = M`` also for
    devices without forward ops that run).
Compute
    A device runs one instance at a time, to completion. An instance is ready once every input instance has
    arrived on its device (same device: when its producer ends; else when its transfer ends). When idle, a
    device looks at its ready instance of highest priority and starts it unless a gate holds it (then the
    device waits; nothing of lower priority overtakes it). Priority, highest first: under ``gpipe``
    forward, backward, update, then the lower micro-batch; under ``1f1b`` the place of the instance's pass in
    torch's ``Schedule1F1B`` order for its device, ``F0 .. F(L_d - 1)`` (the warm-up), then ``B0 F(L_d) B1
    F(L_d + 1) ..`` in turn, then the backward passes left, update instances last; under both, then the op
    that comes first in ``graph.topological_order``. Torch waits for the next pass of its order; a device here
    starts its ready instance of highest priority, so where the next pass has not arrived and a later one has,
    it runs the later one (``benchmarks/pipeline_torch_order.md``: on random chains of 2 to 5 stages, one a
    device, M 1 to 9, unequal passes, every device's order was torch's on 84-86 % and the mini-batch time that of
    torch's order on 91-92 %, from 0.920x to 1.174x of it; ``pipe-v2``: 66-68 %, 68-69 %, 0.959x to 1.413x).
    Gates: an update op waits until every forward and backward instance on its device has ended; under
    ``gpipe`` a backward instance waits until every forward instance on its device has ended; a forward
    instance of micro-batch ``m >= L_d`` waits until micro-batch ``m - L_d`` has ended all its instances on the
    device.
Communication
    As in ``sim-v1``, over instances: one transfer per (producer instance, other device with a consumer
    instance), carrying the largest bytes among those edges; each ordered device pair is one channel that
    carries one transfer at a time, served in the order the producers ended (ties within one round of the
    event loop: priority order; as in ``sim-v1``, a started transfer is never put back, so the output of a
    zero-duration instance that ends a round later at the same instant waits behind it); a
    transfer takes ``cluster.latency[s, d] + bytes / cluster.bandwidth[s, d]`` seconds.
Memory
    A micro-batch is in flight on a device from the start of its first forward instance there to the end of
    its last instance there and of every backward instance, wherever it runs, of a forward op there
    (``grad_of``): its activations are held until their backward. A backward instance does not open it (its
    forward instances are the ones the 1F1B gate admits): an input-less backward source (a gradient tape's
    shape constants) is ready at ``t = 0`` for every micro-batch, ungated, and counted every one in flight
    under ``pipe-v2``'s 1F1B, which ran it first (``[8, 0]`` where ``L_d`` is 1, until 2026-12-05; the id
    stayed, as no time changed, only ``in_flight`` and the peaks, so out-of-memory verdicts); a device
    without forward instances holds none. Each in-flight micro-batch keeps ``ceil(output_bytes / M)`` of every
    forward op on the device. The peak of device ``d`` is its ops' ``persistent_memory`` + the most
    micro-batches ever in flight on it x those activations + the largest ``temporary_memory`` of its ops. A peak
    above the device's ``memory`` is an out-of-memory failure (``ok=False``, never an exception).
Mini-batch time
    The end of the last instance or transfer. The bubble of a device is ``1 - busy / time``.

The event loop is a numba kernel over flat arrays; :class:`PipelineSimulator` caches the per-(graph,
cluster) instance arrays, so that a placement costs little more than the kernel. The batch API
(:meth:`PipelineSimulator.minibatch_times`) first runs a pass without the event queue,
:func:`_fast_minibatch_time`, that gives the same time to the bit while every instance and transfer takes time
and the memory needs no event loop (one micro-batch, or no placement can run out of memory); any other
placement runs the event loop.

Example:
    >>> from gplace.ir import Placement
    >>> from gplace.testing import chain, uniform_cluster
    >>> g, c = chain((1.0, 1.0), nbytes=0), uniform_cluster(2)
    >>> sim = PipelineSimulator(microbatches=4, schedule="gpipe")
    >>> sim.simulate(g, c, Placement.single(g, 0)).minibatch_time
    2.0
    >>> sim.simulate(g, c, Placement.for_graph(g, [0, 1])).minibatch_time  # 5 slots of 0.25 s
    1.25
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from gplace.defaults import MICROBATCHES, SCHEDULE
from gplace.ir import Cluster, GraphError, OpGraph, Placement
from gplace.ir.errors import format_shortfall
from gplace.ir.frozen import ReadOnlyArrays, freeze_arrays
from gplace.ir.graph import BACKWARD, FORWARD, UPDATE, csr
from gplace.ir.placement import check_placement
from gplace.runtime.base import Measurement, ReadOnlySetting, Runtime
from gplace.runtime.batch import check_device_batch, check_threads, run_rows
from gplace.runtime.jit import cached_njit
from gplace.runtime.kernels import U, enqueue_transfer, heap_pop, heap_push, mark, segments, transfers
from gplace.runtime.simulator import PreparedCache

logger = logging.getLogger(__name__)

__all__ = ["SCHEDULES", "PipelineSchedule", "PipelineSimulator", "check_microbatches", "ops_that_run",
           "prepare_instances"]

SCHEDULES = ("gpipe", "1f1b")
MAX_INSTANCES = 2**24
"""The most op instances (ops x micro-batches) one simulation expands a graph into: about 500 bytes each with their
edges (measured: 2 million instances of a 100-op graph took 1.1 GB), and a duration per device (see
:data:`MAX_DURATIONS`). (Until 2026-12-04 2**28, which could ask for over 100 GB before failing.)"""
MAX_DURATIONS = 2**27
"""The most (instance, device) durations one simulation holds (1 GiB of float64): many devices lower the instances
allowed (a 2-op graph at M = 10**5 on 4,096 devices asked for 6.1 GiB of them)."""


def check_microbatches(microbatches: object) -> int:
    """``microbatches`` as an ``int``.

    Raises:
        ValueError: it is not a whole number from 1 to :data:`MAX_INSTANCES` (``True``, ``2.5`` and ``"4"``
            included; no graph of one op or more expands into more instances).

    Example:
        >>> check_microbatches(4.0)
        4
    """
    whole = isinstance(microbatches, (int, float, np.integer, np.floating)) and not isinstance(microbatches, bool)
    if not whole or not 1 <= microbatches <= MAX_INSTANCES or int(microbatches) != microbatches:
        raise ValueError(f"microbatches must be an integer from 1 to {MAX_INSTANCES:,}, got {microbatches!r}")
    return int(microbatches)


@dataclass(frozen=True, eq=False)
class PipelineSchedule(ReadOnlyArrays):
    """The timeline of one simulated mini-batch.

    Shapes:
        K op instances (``M`` per forward/backward op, one per update op), D devices, T transfers.
    """

    minibatch_time: float
    """Seconds from ``t = 0`` to the end of the last instance or transfer."""
    microbatches: int
    schedule: str
    devices: np.ndarray = field(repr=False)
    """(N,) int64 device of each op."""
    inst_op: np.ndarray = field(repr=False)
    """(K,) int64 op of each instance; instances are numbered by phase (under ``1f1b`` backward first), then
    micro-batch, then topological order."""
    inst_microbatch: np.ndarray = field(repr=False)
    """(K,) int64 micro-batch of each instance, -1 for update ops."""
    inst_start: np.ndarray = field(repr=False)
    """(K,) float64 start time of each instance."""
    inst_end: np.ndarray = field(repr=False)
    """(K,) float64 end time of each instance."""
    busy_time: np.ndarray = field(repr=False)
    """(D,) float64 seconds each device computed."""
    bubble: np.ndarray = field(repr=False)
    """(D,) float64 idle fraction ``1 - busy / minibatch_time`` of each device (0 when the time is 0)."""
    in_flight: np.ndarray = field(repr=False)
    """(D,) int64 most micro-batches in flight on each device at once (whose activations it holds)."""
    peak_memory: np.ndarray = field(repr=False)
    """(D,) int64 peak bytes per device (see the memory model)."""
    bytes_moved: int
    """Bytes sent between devices, all transfers together."""
    transfer_inst: np.ndarray = field(repr=False)
    """(T,) int64 producer instance of each transfer."""
    transfer_src: np.ndarray = field(repr=False)
    """(T,) int64 source device of each transfer."""
    transfer_dst: np.ndarray = field(repr=False)
    """(T,) int64 destination device of each transfer."""
    transfer_bytes: np.ndarray = field(repr=False)
    """(T,) bytes of each transfer."""
    transfer_start: np.ndarray = field(repr=False)
    """(T,) float64 start time of each transfer."""
    transfer_end: np.ndarray = field(repr=False)
    """(T,) float64 end time of each transfer."""

    def __post_init__(self) -> None:
        freeze_arrays(self)


class PipelineSimulator(PreparedCache, Runtime):
    """The ``pipe-v3`` runtime (see the module docstring): the time of one mini-batch.

    Its :attr:`id` is ``pipe-v3/<schedule>/m<M>``, so that caches keep the settings apart.

    Args:
        microbatches: micro-batches per mini-batch, ``M >= 1``.
        schedule: ``"gpipe"`` or ``"1f1b"``.
        cache_size: how many (graph, cluster) pairs keep their prepared arrays (``ops x M`` instances each:
            about 40 MB for 5,000 ops at M = 32; :meth:`clear_cache` drops them). (default: ``16``)
        threads: most threads :meth:`minibatch_times` splits a large batch over (``None``: every core this
            process may use; results do not depend on it, see :mod:`gplace.runtime.batch`).
    """

    semantics = "pipe-v3"
    deterministic = True
    microbatches = ReadOnlySetting[int]()
    """Micro-batches per mini-batch (read-only: :attr:`id` and the prepared arrays are made from it)."""
    schedule = ReadOnlySetting[str]()
    """``"gpipe"`` or ``"1f1b"`` (read-only, as ``microbatches``)."""

    def __init__(
        self, microbatches: int = MICROBATCHES, schedule: str = SCHEDULE, cache_size: int = 16,
        threads: int | None = None,
    ) -> None:
        microbatches = check_microbatches(microbatches)
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
        self._init_cache(cache_size)
        self._microbatches, self._schedule = microbatches, schedule
        self.threads = check_threads(threads)
        self.id = f"{self.semantics}/{schedule}/m{microbatches}"

    def simulate(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> PipelineSchedule:
        """The full timeline of one mini-batch.

        Raises:
            InvalidPlacementError: the placement does not fit the graph or cluster.
            GraphError: the graph's phases break the rules of the module docstring.
            TypeError: ``placement`` is not a :class:`~gplace.ir.Placement`.
        """
        check_placement(placement)
        placement.validate(graph, cluster)
        return _run(self._prepared(graph, cluster), placement.devices)

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        return to_measurement(_run(self._prepared(graph, cluster), placement.devices), cluster, self.id)

    def minibatch_times(self, graph: OpGraph, cluster: Cluster, devices: np.ndarray) -> np.ndarray:
        """Mini-batch times of a batch of placements, ``inf`` where one runs out of memory.

        Only shapes and device ranges are checked (as in ``Simulator.step_times``).

        Shapes:
            devices: (K, N) int device per op per placement. Returns (K,) float64 seconds.

        Raises:
            InvalidPlacementError: wrong shape or a device index out of range.
        """
        devices = check_device_batch(graph, cluster, devices)
        prep = self._prepared(graph, cluster)
        return run_rows(_batch_minibatch_times, devices, (prep.memory, prep.fast, *prep.args), self.threads)

    def _prepared(self, graph: OpGraph, cluster: Cluster) -> _Instances:
        return self._cached(graph, cluster, lambda: prepare_instances(graph, cluster, self.microbatches, self.schedule))


# ---------------------------------------------------------------------- python side
@dataclass(frozen=True, eq=False)
class _Instances:
    """The kernel's arrays for one (graph, cluster, M, schedule)."""

    microbatches: int
    schedule: str
    inst_op: np.ndarray
    inst_mb: np.ndarray
    args: tuple
    memory: np.ndarray
    fast: tuple
    """The extra arrays and flags of :func:`_fast_minibatch_time` (see :func:`_fast_arrays`)."""


def check_phases(graph: OpGraph) -> np.ndarray:
    """(N,) int64 phase codes (0 forward, 1 backward, 2 update), checked against the pipe-v3 rules.

    Raises:
        GraphError: an update op feeds a non-update op, or a backward op feeds a forward op.
    """
    code = graph.phase_codes()
    src, dst = graph.edge_index
    bad = np.flatnonzero(((code[src] == UPDATE) & (code[dst] != UPDATE)) |
                         ((code[src] == BACKWARD) & (code[dst] == FORWARD)))
    if bad.size:
        s, t = src[bad[0]], dst[bad[0]]
        phases = ("forward", "backward", "update")
        raise GraphError(
            f"graph {graph.name!r}: {phases[code[s]]} op {graph.op_names[s]!r} feeds {phases[code[t]]} op "
            f"{graph.op_names[t]!r}; a pipeline needs update ops to feed only update ops and backward ops "
            f"not to feed forward ops"
        )
    return code


def prepare_instances(graph: OpGraph, cluster: Cluster, microbatches: int, schedule: str) -> _Instances:
    """Expand ``graph`` into its op instances (see the module docstring) as the kernel's arrays."""
    m_count, n = microbatches, graph.num_ops
    if m_count * n > MAX_INSTANCES:
        raise ValueError(f"microbatches={m_count} makes {m_count * n:,} op instances of graph {graph.name!r} "
                         f"({n} ops), more than the {MAX_INSTANCES:,} pipe-v3 simulates")
    if m_count * n * cluster.num_devices > MAX_DURATIONS:
        raise ValueError(f"microbatches={m_count} makes {m_count * n:,} op instances of graph {graph.name!r} "
                         f"({n} ops) with a duration on each of {cluster.num_devices:,} devices, more than the "
                         f"{MAX_DURATIONS:,} durations pipe-v3 holds")
    code = check_phases(graph)
    rank = graph.topological_position
    per_mb = np.flatnonzero(code != UPDATE)
    upd = np.flatnonzero(code == UPDATE)
    nf = per_mb.size
    inst_op = np.concatenate([np.tile(per_mb, m_count), upd]).astype(np.int64)
    inst_mb = np.concatenate([np.repeat(np.arange(m_count), nf), np.full(upd.size, -1)]).astype(np.int64)
    first = np.full(n, -1, np.int64)  # instance id of (op, micro-batch 0); update ops: their one instance
    first[per_mb] = np.arange(nf)
    first[upd] = m_count * nf + np.arange(upd.size)
    e_src, e_dst, e_bytes = _instance_edges(graph, code, first, nf, m_count)
    klass = code[inst_op] if schedule == "gpipe" else np.array([1, 0, 2])[code[inst_op]]
    by_priority = np.lexsort((rank[inst_op], inst_mb, klass))  # gpipe's priority order; 1f1b's per device
    new_id = np.empty_like(by_priority)
    new_id[by_priority] = np.arange(by_priority.size)
    inst_op, inst_mb, e_src, e_dst = inst_op[by_priority], inst_mb[by_priority], new_id[e_src], new_id[e_dst]
    k = inst_op.size
    out_ptr, out_dst, out_eid = csr(e_src, e_dst, k)
    in_ptr, in_src, in_eid = csr(e_dst, e_src, k)
    share = np.where(code[inst_op] == UPDATE, 1.0, float(m_count))
    durations = graph.durations(cluster)
    dur = durations[inst_op] / share[:, None]
    per_mb_bytes = -(-graph.output_bytes // m_count)
    args = (code[inst_op], inst_mb, dur, out_ptr, out_dst, out_eid, in_ptr, in_src, in_eid, e_bytes,
            inst_op, code, rank, ops_that_run(graph, cluster, durations), _grad_of(graph), per_mb_bytes,
            graph.temporary_memory, graph.persistent_memory,
            np.ascontiguousarray(cluster.latency), np.ascontiguousarray(cluster.bandwidth),
            m_count, schedule == "1f1b")
    args = tuple(np.array(a, order="C") if isinstance(a, np.ndarray) else a for a in args)
    return _Instances(m_count, schedule, inst_op, inst_mb, args, cluster.memory, _fast_arrays(graph, cluster, args))


def _fast_arrays(graph: OpGraph, cluster: Cluster, args: tuple) -> tuple:
    """The arrays and flags of :func:`_fast_minibatch_time`, flat so that its loop keeps few of them at hand:
    per instance ``(out-edge start, out-edge end, all out-edges carry the same bytes, in-degree)`` (4K,); per
    out-edge in CSR order ``(consumer, bytes)`` (2E,) and its producer (E,); durations (K x D,); per device pair
    ``(latency, bandwidth)`` (2 x D x D,); the instances without inputs; under ``1f1b``, the number of the first
    forward instance and the forward instances per micro-batch (2,); whether a gate can ever hold an instance
    (there is a backward or update instance, or 1F1B with ``M > 1``); and whether no placement can run out of
    memory (every op's persistent memory, ``M`` micro-batches of every forward op's activations and the largest
    temporary memory fit the smallest device)."""
    (ic, _, dur, out_ptr, out_dst, out_eid, in_ptr, _, _, ebytes, _, code, _, _, _, act_bytes, temp_mem, persist,
     lat, bw, m_count, one_f_one_b) = args
    k = ic.size
    out_b = ebytes[out_eid]
    counts = np.diff(out_ptr)
    edge_src = np.repeat(np.arange(k), counts).astype(np.int64)
    uniform = np.ones(k, np.int64)
    uniform[edge_src[out_b != out_b[out_ptr[:-1][edge_src]]]] = 0
    indeg = np.diff(in_ptr).astype(np.int64)
    inst = np.stack([out_ptr[:-1], out_ptr[1:], uniform, indeg], axis=1).astype(np.int64)
    edges = np.stack([out_dst, out_b], axis=1).astype(np.int64)
    link = np.stack([lat.ravel(), bw.ravel()], axis=1).astype(np.float64)
    gates = bool(np.any(ic != FORWARD) or (one_f_one_b and m_count > 1))
    most = int(persist.sum()) + m_count * int(act_bytes[code == FORWARD].sum()) + int(temp_mem.max(initial=0))
    fits = bool(most <= int(cluster.memory.min(initial=most)))
    forwards = int(np.count_nonzero(ic == FORWARD)) // m_count
    blocks = np.array([ic.size - int(np.count_nonzero(ic == UPDATE)) - m_count * forwards, forwards], np.int64)
    arrays = (inst.ravel(), edges.ravel(), edge_src, np.asarray(dur, np.float64).ravel(), link.ravel(),
              np.flatnonzero(indeg == 0).astype(np.int64), blocks)
    return tuple(np.ascontiguousarray(x) for x in arrays) + (gates, fits)


def _grad_of(graph: OpGraph) -> np.ndarray:
    """(N,) int64 the forward op each op differentiates, -1 for none (a graph without phases has none)."""
    return np.asarray(graph.grad_of, dtype=np.int64) if graph.grad_of else np.full(graph.num_ops, -1, np.int64)


def microbatch_activations(graph: OpGraph, microbatches: int) -> np.ndarray:
    """(N,) int64: what one micro-batch in flight holds of each op's output (module docstring, Memory):
    ``ceil(output_bytes / M)`` of a forward op, nothing of a backward or update op."""
    return np.where(graph.phase_codes() == FORWARD, -(-graph.output_bytes // microbatches), 0)


def ops_that_run(graph: OpGraph, cluster: Cluster, durations: np.ndarray | None = None) -> np.ndarray:
    """(N,) bool: each op but a source (no inputs) that takes no time on any device it may run on (an input, a
    weight), which never decides a stage's place (``durations``: ``graph.durations(cluster)``, if at hand)."""
    durations = graph.durations(cluster) if durations is None else durations
    source = np.bincount(graph.edge_index[1], minlength=graph.num_ops) == 0
    idle = np.all((durations == 0) | ~np.isfinite(durations), axis=1)
    return ~(source & idle)


def _instance_edges(graph: OpGraph, code: np.ndarray, first: np.ndarray, nf: int, m_count: int):
    """Instance edges ``(src, dst)`` with bytes, as in the module docstring."""
    src, dst = graph.edge_index
    nbytes = graph.edge_bytes
    mb_src = code[src] != UPDATE
    both = mb_src & (code[dst] != UPDATE)
    into_upd = mb_src & (code[dst] == UPDATE)
    upd = ~mb_src
    offsets = np.arange(m_count) * nf
    e_src = [(first[src[both]][None, :] + offsets[:, None]).ravel(),
             (first[src[into_upd]][None, :] + offsets[:, None]).ravel(), first[src[upd]]]
    e_dst = [(first[dst[both]][None, :] + offsets[:, None]).ravel(),
             np.tile(first[dst[into_upd]], m_count), first[dst[upd]]]
    per_mb = -(-nbytes // m_count)
    e_bytes = [np.tile(per_mb[both], m_count), np.tile(per_mb[into_upd], m_count), nbytes[upd]]
    return (np.concatenate(e_src).astype(np.int64), np.concatenate(e_dst).astype(np.int64),
            np.concatenate(e_bytes).astype(np.int64))


def _run(prep: _Instances, devices: np.ndarray) -> PipelineSchedule:
    devices = np.array(devices, dtype=np.int64)
    (start, end, busy, x_inst, x_dst, x_bytes, x_start, x_end, in_flight, peak, t) = _simulate(devices, *prep.args)
    bubble = 1.0 - busy / t if t > 0 else np.zeros_like(busy)
    return PipelineSchedule(
        minibatch_time=float(t), microbatches=prep.microbatches, schedule=prep.schedule, devices=devices,
        inst_op=prep.inst_op, inst_microbatch=prep.inst_mb, inst_start=start, inst_end=end, busy_time=busy,
        bubble=bubble, in_flight=in_flight, peak_memory=peak, bytes_moved=int(x_bytes.sum()),
        transfer_inst=x_inst, transfer_src=devices[prep.inst_op[x_inst]], transfer_dst=x_dst, transfer_bytes=x_bytes,
        transfer_start=x_start, transfer_end=x_end,
    )


def to_measurement(sched: PipelineSchedule, cluster: Cluster, runtime: str) -> Measurement:
    """A :class:`Measurement` of a mini-batch: ``step_time`` is the mini-batch time; ``op_start``/``op_end``
    are each op's first start and last end over its instances; out of memory is a failure."""
    over = np.flatnonzero(sched.peak_memory > cluster.memory)
    if over.size:
        reason = "; ".join(
            f"out of memory on {cluster.devices[d].name} ({sched.in_flight[d]} micro-batches in flight): "
            f"{format_shortfall(sched.peak_memory[d], cluster.memory[d])}"
            for d in over
        )
        return Measurement.failure(runtime, reason, peak_memory=sched.peak_memory)
    op_start, op_end = _op_spans(sched.inst_op, sched.inst_start, sched.inst_end, sched.devices.size)
    return Measurement(
        ok=True, step_time=sched.minibatch_time, runtime=runtime, busy_time=sched.busy_time,
        peak_memory=sched.peak_memory, bytes_moved=sched.bytes_moved, op_start=op_start, op_end=op_end,
    )


# ---------------------------------------------------------------------- kernel
@cached_njit()
def _op_spans(inst_op, inst_start, inst_end, n):
    """Each op's first start and last end over its instances (``inf`` and 0 for an op without instances)."""
    op_start, op_end = np.full(n, np.inf), np.zeros(n)
    for k in range(inst_op.shape[0]):
        i = inst_op[k]
        op_start[i] = min(op_start[i], inst_start[k])
        op_end[i] = max(op_end[i], inst_end[k])
    return op_start, op_end


@cached_njit()
def _admission_limits(dev, code, rank, runs, nd, m_count, one_f_one_b):
    """``L_d`` per device: the stage rule of the module docstring."""
    first = np.full(nd, np.iinfo(np.int64).max)
    for i in range(dev.shape[0]):
        if code[i] == 0 and runs[i]:
            first[dev[i]] = min(first[dev[i]], rank[i])
    limit = np.full(nd, m_count, np.int64)
    if one_f_one_b:
        stages = np.argsort(first)
        s = 0
        for d in range(nd):
            if first[d] < np.iinfo(np.int64).max:
                s += 1
        for k in range(s):
            limit[stages[k]] = min(m_count, s - k)
    return limit


@cached_njit()
def _static_memory(dev, code, act_bytes, temp_mem, persist, nd):
    """Per device: persistent bytes, activation bytes of one micro-batch, largest temporary bytes."""
    base, act, temp = np.zeros(nd, np.int64), np.zeros(nd, np.int64), np.zeros(nd, np.int64)
    for i in range(dev.shape[0]):
        d = dev[i]
        base[d] += persist[i]
        temp[d] = max(temp[d], temp_mem[i])
        if code[i] == 0:
            act[d] += act_bytes[i]
    return base, act, temp


@cached_njit()
def _gated(k, d, ic, imb, fwd_left, bwd_left, left, limit, m_count, one_f_one_b):
    """Whether a gate of the module docstring holds instance ``k`` on device ``d``."""
    if ic[k] == 2:
        return fwd_left[d] + bwd_left[d] > 0
    if ic[k] == 1:
        return (not one_f_one_b) and fwd_left[d] > 0
    m = imb[k]
    return m >= limit[d] and left[d * m_count + m - limit[d]] > 0


@cached_njit()
def _simulate(dev, ic, imb, dur, out_ptr, out_dst, out_eid, in_ptr, in_src, in_eid, ebytes,
              inst_op, code, rank, runs, grad_of, act_bytes, temp_mem, persist, lat, bw, m_count, one_f_one_b):
    """Run one mini-batch; see the module docstring. Returns the arrays of a :class:`PipelineSchedule`."""
    k_count, nd = ic.shape[0], lat.shape[0]
    idev = np.empty(k_count, np.int64)
    for k in range(k_count):
        idev[k] = dev[inst_op[k]]
    limit = _admission_limits(dev, code, rank, runs, nd, m_count, one_f_one_b)
    priority = _priorities(ic, imb, idev, limit, m_count, one_f_one_b)  # a ready heap holds these keys
    x_of_edge, x_inst, x_dst, x_bytes, x_ptr = transfers(idev, out_ptr, out_dst, out_eid, ebytes, nd)
    nx = x_inst.shape[0]
    pending = in_ptr[1:] - in_ptr[:-1]
    fwd_left, bwd_left = np.zeros(nd, np.int64), np.zeros(nd, np.int64)
    left, started = np.zeros(nd * m_count, np.int64), np.zeros(nd * m_count, np.bool_)
    for k in range(k_count):
        if ic[k] == 0:
            fwd_left[idev[k]] += 1
        elif ic[k] == 1:
            bwd_left[idev[k]] += 1
        if ic[k] != 2:
            left[idev[k] * m_count + imb[k]] += 1
    holder = _activation_holders(ic, inst_op, idev, dev, grad_of)
    hold = left.copy()  # left (the gates) and the backward instances elsewhere that hold a micro-batch here
    for k in range(k_count):
        if holder[k] >= 0:
            hold[holder[k] * m_count + imb[k]] += 1
    in_flight, most = np.zeros(nd, np.int64), np.zeros(nd, np.int64)
    rh_k, rh_n, dev_base = np.empty(k_count, np.int64), np.zeros(nd, np.int64), segments(idev, nd)
    chan = np.empty(nx, np.int64)
    for x in range(nx):
        chan[x] = idev[x_inst[x]] * nd + x_dst[x]
    ch_ptr = segments(chan, nd * nd)
    ch_q, ch_head, ch_tail = np.empty(nx, np.int64), ch_ptr[:-1].copy(), ch_ptr[:-1].copy()
    ev_t, ev_k = np.empty(k_count + nx), np.empty(k_count + nx, np.int64)
    nev, nch_todo, ndev_todo, done = 0, 0, 0, 0
    dev_busy, dirty_dev, dev_todo = np.zeros(nd, np.bool_), np.zeros(nd, np.bool_), np.empty(nd, np.int64)
    ch_busy, dirty_ch, ch_todo = np.zeros(nd * nd, np.bool_), np.zeros(nd * nd, np.bool_), np.empty(nd * nd, np.int64)
    start, end, busy = np.full(k_count, np.nan), np.full(k_count, np.nan), np.zeros(nd)
    x_start, x_end = np.empty(nx), np.empty(nx)
    t = 0.0
    for k in range(k_count):
        if pending[k] == 0:
            d = idev[k]
            rh_n[d] = _iheap_push(rh_k, dev_base[d], rh_n[d], priority[k])
            ndev_todo = mark(dirty_dev, dev_todo, ndev_todo, d)
    while True:
        for q in range(nch_todo):
            c = ch_todo[q]
            dirty_ch[c] = False
            if not ch_busy[c] and ch_head[c] < ch_tail[c]:
                x = ch_q[ch_head[c]]
                ch_head[c] += 1
                ch_busy[c] = True
                s = idev[x_inst[x]]
                x_start[x] = t
                nev = heap_push(ev_t, ev_k, 0, nev, t + lat[s, x_dst[x]] + x_bytes[x] / bw[s, x_dst[x]],
                                 k_count + x)
        for q in range(ndev_todo):
            d = dev_todo[q]
            dirty_dev[d] = False
            if dev_busy[d] or rh_n[d] == 0:
                continue
            k = rh_k[dev_base[d]] % k_count
            if _gated(k, d, ic, imb, fwd_left, bwd_left, left, limit, m_count, one_f_one_b):
                continue
            _iheap_pop(rh_k, dev_base[d], rh_n[d])
            rh_n[d] -= 1
            dev_busy[d] = True
            start[k] = t
            busy[d] += dur[k, d]
            nev = heap_push(ev_t, ev_k, 0, nev, t + dur[k, d], k)
            if ic[k] == 0 and not started[d * m_count + imb[k]]:  # a micro-batch opens with a forward instance
                started[d * m_count + imb[k]] = True
                in_flight[d] += 1
                most[d] = max(most[d], in_flight[d])
        nch_todo = ndev_todo = 0
        if nev == 0:
            break
        t = ev_t[0]
        while nev > 0 and ev_t[0] == t:
            key = heap_pop(ev_t, ev_k, 0, nev)
            nev -= 1
            if key < k_count:  # an instance ends
                k = key
                d = idev[k]
                end[k] = t
                done += 1
                dev_busy[d] = False
                ndev_todo = mark(dirty_dev, dev_todo, ndev_todo, d)
                if ic[k] == 0:
                    fwd_left[d] -= 1
                elif ic[k] == 1:
                    bwd_left[d] -= 1
                if ic[k] != 2:
                    left[d * m_count + imb[k]] -= 1
                    in_flight[d] -= _release(hold, started, d * m_count + imb[k])
                if holder[k] >= 0:
                    in_flight[holder[k]] -= _release(hold, started, holder[k] * m_count + imb[k])
                for e in range(out_ptr[k], out_ptr[k + 1]):
                    j = out_dst[e]
                    if idev[j] == d:
                        pending[j] -= 1
                        if pending[j] == 0:
                            rh_n[d] = _iheap_push(rh_k, dev_base[d], rh_n[d], priority[j])
                for x in range(x_ptr[k], x_ptr[k + 1]):
                    c = d * nd + x_dst[x]
                    enqueue_transfer(ch_q, ch_head[c], ch_tail[c], x, x_inst, end, priority, t)
                    ch_tail[c] += 1
                    nch_todo = mark(dirty_ch, ch_todo, nch_todo, c)
            else:  # a transfer ends
                x = key - k_count
                p, dst = x_inst[x], x_dst[x]
                x_end[x] = t
                c = idev[p] * nd + dst
                ch_busy[c] = False
                nch_todo = mark(dirty_ch, ch_todo, nch_todo, c)
                for e in range(out_ptr[p], out_ptr[p + 1]):
                    j = out_dst[e]
                    if idev[j] == dst:
                        pending[j] -= 1
                        if pending[j] == 0:
                            rh_n[dst] = _iheap_push(rh_k, dev_base[dst], rh_n[dst], priority[j])
                            ndev_todo = mark(dirty_dev, dev_todo, ndev_todo, dst)
    if done < k_count:  # cannot happen under the documented rules (each gate waits on earlier work)
        t = np.nan
    base, act, temp = _static_memory(dev, code, act_bytes, temp_mem, persist, nd)
    peak = base + most * act + temp
    return start, end, busy, x_inst, x_dst, x_bytes, x_start, x_end, most, peak, t


@cached_njit()
def _position(c, m, limit, m_count):
    """Where an instance of phase ``c`` and micro-batch ``m`` comes in the 1F1B order of a device admitting
    ``limit`` micro-batches: torch's ``Schedule1F1B`` sequence ``F0 .. F(L-1)``, then ``B0 FL B1 F(L+1) ..`` in
    turn, then the last backwards; update instances after all (``2 M``)."""
    if c == 2:
        return 2 * m_count
    if c == 0:
        return m + max(0, m - limit + 1)
    return limit + m + min(m, m_count - limit)


@cached_njit()
def _priorities(ic, imb, idev, limit, m_count, one_f_one_b):
    """(K,) int64 each instance's priority, lowest first: its number (gpipe's order), under ``1f1b`` after its
    :func:`_position` on its device (``position * K + number``)."""
    k_count = ic.shape[0]
    key = np.arange(k_count)
    if one_f_one_b:
        for k in range(k_count):
            key[k] += k_count * _position(ic[k], imb[k], limit[idev[k]], m_count)
    return key


@cached_njit()
def _activation_holders(ic, inst_op, idev, dev, grad_of):
    """(K,) int64: for a backward instance on another device than the forward op it differentiates, that op's
    device, which holds the micro-batch's activations until it ends; -1 for every other instance."""
    holder = np.full(ic.shape[0], -1, np.int64)
    for k in range(ic.shape[0]):
        f = grad_of[inst_op[k]]
        if ic[k] == 1 and f >= 0 and dev[f] != idev[k]:
            holder[k] = dev[f]
    return holder


@cached_njit()
def _release(hold, started, slot):
    """Count an instance holding ``slot`` (device x micro-batch) as ended; 1 when it was the last of a micro-batch
    in flight there (opened by a forward instance), else 0."""
    hold[slot] -= 1
    return 1 if hold[slot] == 0 and started[slot] else 0


@cached_njit()
def _iheap_push(h, base, size, k):
    """Push ``k`` onto the min-heap of ints in ``h[base:base + size]``; return the new size."""
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if h[base + parent] < k:
            break
        h[base + i] = h[base + parent]
        i = parent
    h[base + i] = k
    return size + 1


@cached_njit()
def _iheap_pop(h, base, size):
    """Remove and return the smallest int of a non-empty heap; the new size is ``size - 1``."""
    top = h[base]
    size -= 1
    k = h[base + size]
    i = 0
    while 2 * i + 1 < size:
        c = 2 * i + 1
        if c + 1 < size and h[base + c + 1] < h[base + c]:
            c += 1
        if k < h[base + c]:
            break
        h[base + i] = h[base + c]
        i = c
    h[base + i] = k
    return top


SHIFT_LIMIT = 64
"""Entries an insertion into a device's sorted run of future arrivals may move before the run turns into a heap."""
MAX_FAST_DEVICES = 62
"""Most devices :func:`_fast_minibatch_time` takes (it keeps a set of devices in the bits of an int64)."""


@cached_njit()
def _fast_minibatch_time(inst, edges, edge_src, dur, link, roots, ic, imb, gates, limit, m_count, one_f_one_b,
                         blocks, st, masks, arrive, bits, di, df, fut_t, fut_k, fwd_left, bwd_left, left, fleft, flo):
    """The mini-batch time of :func:`_simulate` (memory aside), or ``nan`` where this pass cannot vouch for it:
    an instance or a transfer took no time (its end not after its start), or not every instance ran.

    While every instance and transfer takes time, an instant of the event loop is one round: whatever ends then
    is taken in before any device decides, and a decision made then changes nothing before a later instant. So
    the devices decide one at a time in order of time (the device whose next decision comes first), and the
    consequences of a start are worked out at once: its end; its transfers (a channel serves its source
    device's transfers in the order their producers ended there, which is the order they started, so a transfer
    starts at ``max(producer end, channel free)``); the arrivals on its consumers' devices and, once every input
    of a consumer is known, its ready time. A consumer ready by the time its device is free again joins that
    device's pool at once (the device decides next then); a later one joins the device's future arrivals (a run
    sorted by time, a heap if inserting grows costly), which enter the pool when the device decides. A device
    decides when its instance ends and when an arrival is due while it is idle, as in the event loop (nothing
    else changes what it would do). A gate's counters are only read by their own device's decisions, which come
    after every instance started there has ended, so an instance is counted off when it starts.

    ``inst``, ``edges``, ``edge_src``, ``dur``, ``link`` and ``roots`` are those of :func:`_fast_arrays`; ``st``
    holds each instance's device (even entries, set by the caller) and the rest is scratch space; ``bits`` must
    be all clear on entry and is clear again on a return that is not ``nan``; ``di[8 * d + 5]`` holds the number
    of instances on device ``d`` on entry. Indices are cast to unsigned (``U``) where they cannot be negative,
    which spares numba's wraparound of negative indices.

    Under ``1f1b`` the pool's lowest set bit is its backward instance of lowest micro-batch (backward instances
    are numbered first, by micro-batch, then forward ones: ``blocks`` holds the first forward number and the
    forward instances per micro-batch); :func:`_forward_first` looks for a ready forward instance that comes
    before it in the device's order, among those of micro-batches from ``flo[d]`` (its lowest with a forward
    instance not started; ``fleft`` counts them per device and micro-batch) on.
    """
    k_count = ic.shape[0]
    nd = di.shape[0] // 8
    words = (k_count + 63) >> 6
    # per device d: ints di[8d:8d+8] = pool size, first word of the pool that may hold a bit, futures' head and
    # tail (a sorted run), heap size (-1: still a run), futures' base, bytes of the transfer to d; floats
    # df[4d:4d+4] = free, next decision, arrival there of this instance's output; then channel free (D x D)
    for k in range(k_count):
        st[U(2 * k + 1)] = inst[U(4 * k + 3)]  # inputs still to come
        masks[U(k)] = 0
        arrive[U(k)] = 0.0
    for q in range(edge_src.shape[0]):  # the devices with a consumer of each instance, a bit each
        masks[U(edge_src[U(q)])] |= 1 << st[U(2 * edges[U(2 * q)])]
    base = 0
    for d in range(nd):
        on_d = di[U(8 * d + 5)]
        di[U(8 * d)], di[U(8 * d + 1)], di[U(8 * d + 2)], di[U(8 * d + 3)], di[U(8 * d + 4)] = 0, words, base, base, -1
        di[U(8 * d + 5)] = base
        base += on_d
        df[U(4 * d)], df[U(4 * d + 1)] = 0.0, np.inf
    cf = 4 * nd
    for c in range(nd * nd):
        df[U(cf + c)] = 0.0
    if gates:
        fwd_left[:] = 0
        bwd_left[:] = 0
        left[:] = 0
        fleft[:] = 0
        for k in range(k_count):
            d = st[2 * k]
            if ic[k] == 0:
                fwd_left[d] += 1
                fleft[d * m_count + imb[k]] += 1
            elif ic[k] == 1:
                bwd_left[d] += 1
            if ic[k] != 2:
                left[d * m_count + imb[k]] += 1
        if one_f_one_b:
            flo[:] = 0
            for q in range(nd):
                while flo[q] < m_count and fleft[q * m_count + flo[q]] == 0:
                    flo[q] += 1
    for q in range(roots.shape[0]):
        k = roots[q]
        d = st[U(2 * k)]
        bits[U(d * words + (k >> 6))] |= U(1) << U(k & 63)
        di[U(8 * d)] += 1
        di[U(8 * d + 1)] = min(di[U(8 * d + 1)], k >> 6)
        df[U(4 * d + 1)] = 0.0
    done, t = 0, 0.0
    while True:
        now, d = np.inf, -1
        for q in range(nd):
            x = df[U(4 * q + 1)]
            better = x < now
            now = min(now, x)
            d = q if better else d
        if d < 0:
            break
        # the arrivals due by now join the pool (the lowest set bit: the instance of highest priority)
        fh, ft, hs = di[U(8 * d + 2)], di[U(8 * d + 3)], di[U(8 * d + 4)]
        cnt, cur = di[U(8 * d)], di[U(8 * d + 1)]
        if hs < 0:
            while fh < ft and fut_t[U(fh)] <= now:
                j = fut_k[U(fh)]
                fh += 1
                bits[U(d * words + (j >> 6))] |= U(1) << U(j & 63)
                cnt += 1
                cur = min(cur, j >> 6)
            di[U(8 * d + 2)] = fh
            head = fut_t[U(fh)] if fh < ft else np.inf
        else:
            fb = di[U(8 * d + 5)]
            while hs > 0 and fut_t[U(fb)] <= now:
                j = heap_pop(fut_t, fut_k, fb, hs)
                hs -= 1
                bits[U(d * words + (j >> 6))] |= U(1) << U(j & 63)
                cnt += 1
                cur = min(cur, j >> 6)
            di[U(8 * d + 4)] = hs
            head = fut_t[U(fb)] if hs > 0 else np.inf
        if cnt == 0:  # idle until its next arrival
            di[U(8 * d)], di[U(8 * d + 1)] = cnt, cur
            df[U(4 * d + 1)] = head
            continue
        w = cur
        while bits[U(d * words + w)] == 0:
            w += 1
        k = (w << 6) + np.int64(trailing_zeros(bits[U(d * words + w)]))
        if one_f_one_b and ic[k] == 1:
            k = _forward_first(k, bits, d * words, imb[k], limit[d], m_count, blocks, flo[d])
        if gates:
            c = ic[k]
            if c == 2:
                held = fwd_left[d] + bwd_left[d] > 0
            elif c == 1:
                held = (not one_f_one_b) and fwd_left[d] > 0
            else:
                m = imb[k]
                held = m >= limit[d] and left[d * m_count + m - limit[d]] > 0
            if held:  # a gate of the module docstring holds it (as _gated)
                di[U(8 * d)], di[U(8 * d + 1)] = cnt, w
                df[U(4 * d + 1)] = head  # waits for an arrival
                continue
            if ic[k] == 0:
                fwd_left[d] -= 1
                if one_f_one_b:
                    fleft[d * m_count + imb[k]] -= 1
                    while flo[d] < m_count and fleft[d * m_count + flo[d]] == 0:
                        flo[d] += 1
            elif ic[k] == 1:
                bwd_left[d] -= 1
            if ic[k] != 2:
                left[d * m_count + imb[k]] -= 1
        bits[U(d * words + (k >> 6))] ^= U(1) << U(k & 63)
        cnt -= 1
        di[U(8 * d)], di[U(8 * d + 1)] = cnt, w
        e = now + dur[U(k * nd + d)]
        if not e > now:
            return np.nan
        df[U(4 * d)] = e
        df[U(4 * d + 1)] = e if cnt > 0 else max(e, head)
        t = max(t, e)
        done += 1
        lo, hi = inst[U(4 * k)], inst[U(4 * k + 1)]
        uniform = inst[U(4 * k + 2)]
        if not uniform:  # bytes of each transfer: its largest edge
            for q in range(nd):
                di[U(8 * q + 6)] = 0
            for q in range(lo, hi):
                dj = st[U(2 * edges[U(2 * q)])]
                di[U(8 * dj + 6)] = max(di[U(8 * dj + 6)], edges[U(2 * q + 1)])
        df[U(4 * d + 2)] = e
        mask = masks[U(k)] & ~(1 << d)
        while mask:  # one transfer per other device with a consumer
            dj = np.int64(trailing_zeros(U(mask)))
            mask &= mask - 1
            c = d * nd + dj
            s = max(e, df[U(cf + c)])
            xe = s + link[U(2 * c)] + (edges[U(2 * lo + 1)] if uniform else di[U(8 * dj + 6)]) / link[U(2 * c + 1)]
            if not xe > s:
                return np.nan
            df[U(cf + c)] = xe
            df[U(4 * dj + 2)] = xe
            t = max(t, xe)
        for q in range(lo, hi):
            j = edges[U(2 * q)]
            dj = st[U(2 * j)]
            r = max(arrive[U(j)], df[U(4 * dj + 2)])
            arrive[U(j)] = r
            p = st[U(2 * j + 1)] - 1
            st[U(2 * j + 1)] = p
            if p == 0:
                if r <= df[U(4 * dj)]:  # dj is busy until then: into its pool, it decides next when free
                    wj = j >> 6
                    bits[U(dj * words + wj)] |= U(1) << U(j & 63)
                    di[U(8 * dj)] += 1
                    di[U(8 * dj + 1)] = min(di[U(8 * dj + 1)], wj)
                    df[U(4 * dj + 1)] = df[U(4 * dj)]
                else:  # among dj's future arrivals
                    df[U(4 * dj + 1)] = min(df[U(4 * dj + 1)], r)
                    hs = di[U(8 * dj + 4)]
                    if hs < 0:
                        fh, ft = di[U(8 * dj + 2)], di[U(8 * dj + 3)]
                        p = ft
                        while p > fh and fut_t[U(p - 1)] > r:
                            p -= 1
                        if ft - p <= SHIFT_LIMIT:
                            for i in range(ft, p, -1):
                                fut_t[U(i)], fut_k[U(i)] = fut_t[U(i - 1)], fut_k[U(i - 1)]
                            fut_t[U(p)], fut_k[U(p)] = r, j
                            di[U(8 * dj + 3)] = ft + 1
                        else:  # a sorted run is a heap: move it to the base and go on as one
                            fb = di[U(8 * dj + 5)]
                            for i in range(ft - fh):
                                fut_t[U(fb + i)], fut_k[U(fb + i)] = fut_t[U(fh + i)], fut_k[U(fh + i)]
                            hs = ft - fh
                    if hs >= 0:
                        di[U(8 * dj + 4)] = heap_push(fut_t, fut_k, di[U(8 * dj + 5)], hs, r, j)
    return t if done == k_count else np.nan


@cached_njit()
def _forward_first(k, bits, base, j, limit, m_count, blocks, flo):
    """Under ``1f1b``, the instance a device runs of ``k`` (its ready backward instance of lowest micro-batch
    ``j``) and its ready forward instances (set bits in ``bits[base:]``): the forward one of lowest micro-batch,
    then topological order, if it comes before ``B j`` in :func:`_position`'s order, else ``k``. A forward
    instance of micro-batch ``m`` comes first if ``m`` is below ``(P + L - 2) // 2 + 1`` (``P`` the position of
    ``B j``, ``L`` the device's limit); those below ``flo`` have all started."""
    first, per_mb = blocks[0], blocks[1]
    stop = min(m_count, (_position(1, j, limit, m_count) + limit - 2) // 2 + 1)
    lo, hi = first + flo * per_mb, first + stop * per_mb
    w, last = lo >> 6, (hi - 1) >> 6
    while lo < hi and w <= last:
        word = bits[U(base + w)]
        if w == lo >> 6:
            word &= ~((U(1) << U(lo & 63)) - U(1))
        if w == last and hi & 63:
            word &= (U(1) << U(hi & 63)) - U(1)
        if word:
            return (w << 6) + np.int64(trailing_zeros(word))
        w += 1
    return k


@cached_njit(nogil=True)
def _batch_minibatch_times(devices, memory, fast, *args):
    """Mini-batch time of each row of ``devices`` (K, N); ``inf`` where a device's peak exceeds ``memory``.

    Each row goes through :func:`_fast_minibatch_time` where its memory needs no event loop (``M = 1``: each
    device holds one micro-batch if it has a forward instance, so the peak is known before the run; else
    when no placement can run out of memory, ``fits``), and through :func:`_simulate` where that gives up or
    the memory needs the event loop.
    """
    inst, edges, edge_src, dur1, link, roots, blocks, gates, fits = fast
    ic, imb, inst_op, code, rank, runs = args[0], args[1], args[10], args[11], args[12], args[13]
    act_bytes, temp_mem, persist, lat, bw, m_count, one_f_one_b = args[15:]
    k_count, nd, n = ic.shape[0], lat.shape[0], devices.shape[1]
    words = (k_count + 63) >> 6
    st, masks, arrive = np.empty(2 * k_count, np.int64), np.empty(k_count, np.int64), np.empty(k_count)
    bits = np.zeros(nd * words, np.uint64)
    di, df = np.empty(8 * nd, np.int64), np.empty(4 * nd + nd * nd)
    fut_t, fut_k = np.empty(k_count), np.empty(k_count, np.int64)
    fwd_left, bwd_left, left = np.empty(nd, np.int64), np.empty(nd, np.int64), np.empty(nd * m_count, np.int64)
    fleft, flo = np.empty(nd * m_count, np.int64), np.empty(nd, np.int64)
    limit = np.full(nd, m_count, np.int64)
    out = np.empty(devices.shape[0])
    for r in range(devices.shape[0]):
        dev = devices[r]
        fast_ok = fits
        if not fits and m_count == 1:  # one micro-batch: in flight on every device with a forward instance
            base, act, temp = _static_memory(dev, code, act_bytes, temp_mem, persist, nd)
            most = np.zeros(nd, np.int64)
            for i in range(n):
                if code[i] == 0:
                    most[dev[i]] = 1
            if np.any(base + most * act + temp > memory):
                out[r] = np.inf
                continue
            fast_ok = True
        step = np.nan
        if fast_ok and nd <= MAX_FAST_DEVICES:
            for q in range(nd):
                di[8 * q + 5] = 0
            for k in range(k_count):
                d = dev[inst_op[k]]
                st[2 * k] = d
                di[8 * d + 5] += 1
            if gates and one_f_one_b and m_count > 1:
                limit = _admission_limits(dev, code, rank, runs, nd, m_count, one_f_one_b)
            step = _fast_minibatch_time(inst, edges, edge_src, dur1, link, roots, ic, imb, gates, limit, m_count,
                                        one_f_one_b, blocks, st, masks, arrive, bits, di, df, fut_t, fut_k,
                                        fwd_left, bwd_left, left, fleft, flo)
            if np.isnan(step):
                bits[:] = 0
        if np.isnan(step):
            res = _simulate(dev, *args)
            step = np.inf if np.any(res[9] > memory) else res[10]
        out[r] = step
    return out
