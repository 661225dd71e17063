"""``sim-v1``: a discrete-event simulator of one step of a placed op graph.

The semantics below are those of runtime id ``sim-v1``; any change to them needs a new id.

Compute
    Op ``i`` on device ``d`` takes ``graph.durations(cluster)[i, d]`` seconds. A device runs one op at a
    time, to completion. When it is idle it starts, among the ops ready on it, the one that became ready
    first; ties go to the op that comes first in ``graph.topological_order``.
Readiness
    An op is ready once every input has arrived on its device. An input from the same device arrives when
    its producer ends; an input from another device arrives when its transfer ends.
Communication
    A producer's output is sent to each other device that consumes it exactly once per (producer, device),
    carrying the largest ``edge_bytes`` among the producer's edges to consumers on that device. Each
    ordered device pair ``(s, d)`` is one channel that carries one transfer at a time (contention); the
    transfers on a channel are served in the order their producers ended (ties within one round of an
    instant, see Memory: topological order; a transfer that has started is never put back, so the output of a
    zero-duration op that ends in a later round of the same instant waits behind it). A transfer starts at
    ``max(producer end, channel free)`` and takes ``cluster.latency[s, d] + bytes / cluster.bandwidth[s, d]``
    seconds (its end is ``start + latency + bytes / bandwidth``, evaluated left to right). Different channels do
    not contend.
Memory
    The ``persistent_memory`` of the ops on a device is resident from ``t = 0``. An op's ``output_bytes``
    are allocated on its device when it starts and freed once its last consumer on that device has ended
    and all its outgoing transfers have finished; an output nobody consumes stays until the step ends. A
    received copy is allocated on the destination when its transfer starts and freed when its last
    consumer there has ended. ``temporary_memory`` is held while the op runs. Within one instant, every
    free happens before any allocation. The peak per device is reported; a peak above the device's
    ``memory`` is an out-of-memory failure (``ok=False``, never an exception). The events of one instant are
    handled in rounds, every end (with its frees) before every start (with its allocations), so a zero-duration
    op's end and frees fall in the round after its start.
Step time
    The end of the last op or transfer.

The event loop is a numba kernel over flat arrays. :class:`Simulator` caches the per-(graph, cluster)
arrays, so that measuring a placement costs little more than the kernel. ``Simulator.step_times`` first tries
a one-pass kernel that gives the same step time where no placement's memory can run out and nothing takes
zero time (see :func:`_fast_step_time`), and falls back to the event loop otherwise.

Example:
    >>> from gplace.ir import Placement
    >>> from gplace.testing import chain, uniform_cluster
    >>> g, c = chain((1.0, 2.0, 3.0)), uniform_cluster(2, bandwidth=1e6)
    >>> schedule(g, c, Placement.single(g, 0)).step_time
    6.0
    >>> schedule(g, c, Placement.for_graph(g, [0, 0, 1])).step_time  # + 1 MB over 1 MB/s
    7.0
"""

from __future__ import annotations

import logging
import numbers
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.errors import format_shortfall
from gplace.ir.frozen import ReadOnlyArrays, freeze_arrays
from gplace.ir.locks import ForkSafeLock
from gplace.ir.placement import check_placement
from gplace.runtime.base import Measurement, Runtime
from gplace.runtime.batch import check_device_batch, check_threads, run_rows
from gplace.runtime.jit import cached_njit
from gplace.runtime.kernels import (
    U,
    enqueue_transfer,
    heap_pop,
    heap_push,
    mark,
    move_front,
    segments,
    sorted_insert,
    transfers,
)

logger = logging.getLogger(__name__)

__all__ = ["PreparedCache", "Schedule", "Simulator", "schedule"]


@dataclass(frozen=True, eq=False)
class Schedule(ReadOnlyArrays):
    """The timeline of one simulated step.

    Shapes:
        N ops, D devices, T transfers, M memory changes.
    """

    step_time: float
    """Seconds from ``t = 0`` to the end of the last op or transfer."""
    devices: np.ndarray = field(repr=False)
    """(N,) int64 device of each op."""
    op_start: np.ndarray = field(repr=False)
    """(N,) float64 start time of each op."""
    op_end: np.ndarray = field(repr=False)
    """(N,) float64 end time of each op."""
    busy_time: np.ndarray = field(repr=False)
    """(D,) float64 seconds each device computed."""
    peak_memory: np.ndarray = field(repr=False)
    """(D,) int64 peak bytes in use on each device."""
    bytes_moved: int
    """Bytes sent between devices, all transfers together."""
    transfer_op: np.ndarray = field(repr=False)
    """(T,) int64 producer op of each transfer."""
    transfer_src: np.ndarray = field(repr=False)
    """(T,) int64 source device of each transfer."""
    transfer_dst: np.ndarray = field(repr=False)
    """(T,) int64 destination device of each transfer."""
    transfer_bytes: np.ndarray = field(repr=False)
    """(T,) int64 bytes of each transfer."""
    transfer_start: np.ndarray = field(repr=False)
    """(T,) float64 start time of each transfer."""
    transfer_end: np.ndarray = field(repr=False)
    """(T,) float64 end time of each transfer."""
    memory_time: np.ndarray = field(repr=False)
    """(M,) float64 time of each change of memory in use, in the order they happened."""
    memory_device: np.ndarray = field(repr=False)
    """(M,) int64 device whose memory changed."""
    memory_bytes: np.ndarray = field(repr=False)
    """(M,) int64 bytes in use on that device after the change (the first D entries: persistent memory)."""

    def __post_init__(self) -> None:
        freeze_arrays(self)


def schedule(graph: OpGraph, cluster: Cluster, placement: Placement) -> Schedule:
    """Simulate one step of ``graph`` placed by ``placement`` on ``cluster`` (see the module docstring).

    A pure function: it validates the placement, prepares the graph's arrays and runs the kernel. Use
    :class:`Simulator` to reuse the prepared arrays across calls.

    Args:
        graph: the op graph.
        cluster: the devices and links.
        placement: a device per op.

    Raises:
        InvalidPlacementError: the placement does not fit the graph or cluster, or puts an op on a device
            where it has no cost.
        TypeError: ``placement`` is not a :class:`~gplace.ir.Placement`.
    """
    check_placement(placement)
    placement.validate(graph, cluster)
    prep = _prepare(graph, cluster)
    return _run(prep, placement.devices)


class PreparedCache:
    """A least-recently-used cache of per-(graph, cluster) arrays that threads may share; pickles empty.

    Keyed by ``(graph.fingerprint, cluster.fingerprint)``: content, so an equal cluster built anew for each call (read
    from its file, unpickled) finds the arrays prepared for the first (keyed by the cluster object, it prepared them
    again each time: 2.6-9x slower a measurement). Preparing runs outside the lock (two threads may prepare one
    pair; either result is kept).
    """

    def _init_cache(self, size: int) -> None:
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1:
            raise ValueError(f"cache_size must be a whole number >= 1, got {size!r}")
        self._cache_size = int(size)
        self._cache: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._lock = ForkSafeLock()

    def _cached(self, graph: OpGraph, cluster: Cluster, prepare: Callable[[], Any]) -> Any:
        key = (graph.fingerprint, cluster.fingerprint)
        with self._lock:
            prep = self._cache.get(key)
            if prep is not None:
                self._cache.move_to_end(key)
                return prep
        logger.debug("preparing arrays for graph %r on cluster %r", graph.name, cluster.name)
        prep = prepare()
        with self._lock:
            self._cache[key] = prep
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return prep

    def clear_cache(self) -> None:
        """Drop every prepared (graph, cluster) pair (rebuilt on next use): a pipeline simulator's arrays grow with
        ops x M (about 27 MB for a 5,000-op graph at M = 32), and a long-lived simulator keeps ``cache_size``."""
        with self._lock:
            self._cache.clear()

    def __getstate__(self) -> dict[str, Any]:
        """Pickles without the lock and the prepared arrays (rebuilt on first use)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_cache", "_lock")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_cache(state.get("_cache_size", 16))  # a subclass that never called _init_cache has none


class Simulator(PreparedCache, Runtime):
    """The ``sim-v1`` runtime: :func:`schedule` behind the :class:`Runtime` contract.

    Args:
        cache_size: how many (graph, cluster) pairs keep their prepared arrays (default: ``16``).
        threads: most threads :meth:`step_times` splits a large batch over (``None``, the default: every core
            this process may use; results do not depend on it, see :mod:`gplace.runtime.batch`).
    """

    id = "sim-v1"
    deterministic = True

    def __init__(self, cache_size: int = 16, threads: int | None = None) -> None:
        self._init_cache(cache_size)
        self.threads = check_threads(threads)

    def schedule(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Schedule:
        """:func:`schedule`, reusing this simulator's prepared arrays."""
        check_placement(placement)
        placement.validate(graph, cluster)
        return self._schedule(graph, cluster, placement)

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        return _to_measurement(self._schedule(graph, cluster, placement), cluster, self.id)

    def step_times(self, graph: OpGraph, cluster: Cluster, devices: np.ndarray) -> np.ndarray:
        """Step times of a batch of placements, ``inf`` where one runs out of memory.

        Only shapes and device ranges are checked (no colocation, pins or missing costs; an op on a device
        where it has no cost makes the step ``inf``); meant for trainers that sample placements they know
        to be valid.

        Shapes:
            devices: (K, N) int device per op per placement. Returns (K,) float64 seconds.

        Raises:
            InvalidPlacementError: wrong shape or a device index out of range.
        """
        devices = check_device_batch(graph, cluster, devices)
        prep = self._prepared(graph, cluster)
        return run_rows(_batch_step_times, devices, (prep.memory, prep.fits, prep.fast, *prep.args), self.threads)

    def _schedule(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Schedule:
        return _run(self._prepared(graph, cluster), placement.devices)

    def _prepared(self, graph: OpGraph, cluster: Cluster) -> _Prepared:
        return self._cached(graph, cluster, lambda: _prepare(graph, cluster))


# ---------------------------------------------------------------------- python side
@dataclass(frozen=True, eq=False)
class _Prepared:
    """The kernel's arrays for one (graph, cluster)."""

    args: tuple
    memory: np.ndarray
    fits: bool
    """No placement can run out of memory: everything the graph could hold at once fits on every device."""
    fast: tuple
    """The arrays of :func:`_rank_arrays`."""


def _prepare(graph: OpGraph, cluster: Cluster) -> _Prepared:
    dur = np.ascontiguousarray(graph.durations(cluster))
    order = np.ascontiguousarray(graph.topological_order, dtype=np.int64)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    out_ptr, out_dst, out_eid = graph.out_csr
    in_ptr, in_src, in_eid = graph.in_csr
    args = (dur, order, rank, out_ptr, out_dst, out_eid, in_ptr, in_src, in_eid,
            graph.edge_bytes, graph.output_bytes, graph.temporary_memory, graph.persistent_memory,
            np.ascontiguousarray(cluster.latency), np.ascontiguousarray(cluster.bandwidth))
    args = tuple(np.array(a, order="C") for a in args)  # writable copies: one numba specialisation
    most = (int(graph.persistent_memory.sum()) + int(graph.output_bytes.sum()) + int(graph.edge_bytes.sum())
            + int(graph.temporary_memory.max(initial=0)))
    fits = bool(most <= cluster.memory.min(initial=most))
    return _Prepared(args, cluster.memory, fits, _rank_arrays(*args[:2], *args[3:6], *args[9:13]))


def _run(prep: _Prepared, devices: np.ndarray) -> Schedule:
    (start, end, busy, peak, x_op, x_dst, x_bytes, x_start, x_end,
     m_t, m_d, m_b, step) = _simulate(devices := np.array(devices, dtype=np.int64), *prep.args)
    return Schedule(
        step_time=float(step), devices=devices, op_start=start, op_end=end, busy_time=busy, peak_memory=peak,
        bytes_moved=int(x_bytes.sum()), transfer_op=x_op, transfer_src=devices[x_op], transfer_dst=x_dst,
        transfer_bytes=x_bytes, transfer_start=x_start, transfer_end=x_end,
        memory_time=m_t, memory_device=m_d, memory_bytes=m_b,
    )


def _to_measurement(sched: Schedule, cluster: Cluster, runtime: str) -> Measurement:
    over = np.flatnonzero(sched.peak_memory > cluster.memory)
    if over.size:
        reason = "; ".join(
            f"out of memory on {cluster.devices[d].name}: {format_shortfall(sched.peak_memory[d], cluster.memory[d])}"
            for d in over
        )
        return Measurement.failure(runtime, reason, peak_memory=sched.peak_memory)
    return Measurement(
        ok=True, step_time=sched.step_time, runtime=runtime, busy_time=sched.busy_time,
        peak_memory=sched.peak_memory, bytes_moved=sched.bytes_moved, op_start=sched.op_start, op_end=sched.op_end,
    )


# ---------------------------------------------------------------------- kernel: heaps
# ---------------------------------------------------------------------- kernel: setup
@cached_njit()
def _counters(dev, in_ptr, in_src, in_eid, x_of_edge, x_ptr):
    """Inputs still to arrive per op; holders of each output and of each received copy."""
    n = dev.shape[0]
    pending = np.empty(n, np.int64)
    out_rem = x_ptr[1:] - x_ptr[:-1]
    copy_rem = np.zeros(x_ptr[n], np.int64)
    for j in range(n):
        pending[j] = in_ptr[j + 1] - in_ptr[j]
        for k in range(in_ptr[j], in_ptr[j + 1]):
            if dev[in_src[k]] == dev[j]:
                out_rem[in_src[k]] += 1
            else:
                copy_rem[x_of_edge[in_eid[k]]] += 1
    return pending, out_rem, copy_rem


@cached_njit()
def _queues(dev, nd, x_op, x_dst):
    """Ready ops per device (heaps keyed by ready time, then topological rank, in ``rh_*[base[d]:]``),
    transfers per channel (FIFOs in ``ch_q[ch_head[c]:ch_tail[c]]``; ``x_chan[x]`` numbers only the channels
    the placement's transfers use, so a cluster of D devices costs no D x D arrays per step) and future events
    (a heap keyed by time, then rank for op ends and ``N + id`` for transfer ends)."""
    n, nx = dev.shape[0], x_op.shape[0]
    chan = np.empty(nx, np.int64)
    for x in range(nx):
        chan[x] = dev[x_op[x]] * nd + x_dst[x]
    used = np.unique(chan)
    x_chan = np.searchsorted(used, chan)
    ch_ptr = segments(x_chan, used.shape[0])
    return (np.empty(n), np.empty(n, np.int64), np.zeros(nd, np.int64), segments(dev, nd),
            np.empty(nx, np.int64), ch_ptr[:-1].copy(), ch_ptr[:-1].copy(),
            np.empty(n + nx), np.empty(n + nx, np.int64), x_chan)


@cached_njit()
def _memory(dev, persist, nd, nx):
    """Memory in use and peak per device, persistent memory resident from ``t = 0``, and the change log
    (time, device, bytes in use after the change), whose first ``nd`` entries are the starting levels."""
    n = dev.shape[0]
    mem, peak = np.zeros(nd, np.int64), np.zeros(nd, np.int64)
    cap = 3 * n + 2 * nx + nd
    log_t, log_d, log_b = np.zeros(cap), np.empty(cap, np.int64), np.empty(cap, np.int64)
    for i in range(n):
        mem[dev[i]] += persist[i]
    for d in range(nd):
        peak[d], log_d[d], log_b[d] = mem[d], d, mem[d]
    return mem, peak, log_t, log_d, log_b


@cached_njit()
def _mem(mem, peak, log_t, log_d, log_b, nlog, t, d, delta):
    """Change device ``d``'s memory in use by ``delta`` at ``t``; log it; return the new log length."""
    if delta == 0:
        return nlog
    mem[U(d)] += delta
    peak[U(d)] = max(peak[U(d)], mem[U(d)])
    log_t[U(nlog)], log_d[U(nlog)], log_b[U(nlog)] = t, d, mem[U(d)]
    return nlog + 1


# ---------------------------------------------------------------------- kernel: event loop
@cached_njit()
def _simulate(dev, dur, order, rank, out_ptr, out_dst, out_eid, in_ptr, in_src, in_eid,
              edge_bytes, out_bytes, temp_mem, persist, lat, bw):
    """Run one step; see the module docstring. Returns the arrays of a :class:`Schedule` and the step time."""
    n, nd = dev.shape[0], lat.shape[0]
    x_of_edge, x_op, x_dst, x_bytes, x_ptr = transfers(dev, out_ptr, out_dst, out_eid, edge_bytes, nd)
    nx = x_op.shape[0]
    pending, out_rem, copy_rem = _counters(dev, in_ptr, in_src, in_eid, x_of_edge, x_ptr)
    rh_t, rh_k, rh_n, dev_base, ch_q, ch_head, ch_tail, ev_t, ev_k, x_chan = _queues(dev, nd, x_op, x_dst)
    nc = ch_head.shape[0]
    nev, nch_todo, ndev_todo = 0, 0, 0
    dev_busy, dirty_dev, dev_todo = np.zeros(nd, np.bool_), np.zeros(nd, np.bool_), np.empty(nd, np.int64)
    ch_busy, dirty_ch, ch_todo = np.zeros(nc, np.bool_), np.zeros(nc, np.bool_), np.empty(nc, np.int64)
    start, end, busy, x_start, x_end = np.empty(n), np.empty(n), np.zeros(nd), np.empty(nx), np.empty(nx)
    mem, peak, log_t, log_d, log_b = _memory(dev, persist, nd, nx)
    nlog = nd
    t = 0.0
    for r in range(n):
        if pending[U(order[U(r)])] == 0:
            d = dev[U(order[U(r)])]
            rh_n[U(d)] = heap_push(rh_t, rh_k, dev_base[U(d)], rh_n[U(d)], 0.0, r)
            ndev_todo = mark(dirty_dev, dev_todo, ndev_todo, d)
    while True:
        # start phase: idle channels and devices with work start it now (all frees at t are done)
        for q in range(nch_todo):
            c = ch_todo[U(q)]
            dirty_ch[U(c)] = False
            if not ch_busy[U(c)] and ch_head[U(c)] < ch_tail[U(c)]:
                x = ch_q[U(ch_head[U(c)])]
                ch_head[U(c)] += 1
                ch_busy[U(c)] = True
                s, dst = dev[U(x_op[U(x)])], x_dst[U(x)]
                x_start[U(x)] = t
                nev = heap_push(ev_t, ev_k, 0, nev, t + lat[U(s), U(dst)] + x_bytes[U(x)] / bw[U(s), U(dst)], n + x)
                nlog = _mem(mem, peak, log_t, log_d, log_b, nlog, t, dst, x_bytes[U(x)])
        for q in range(ndev_todo):
            d = dev_todo[U(q)]
            dirty_dev[U(d)] = False
            if not dev_busy[U(d)] and rh_n[U(d)] > 0:
                r = heap_pop(rh_t, rh_k, dev_base[U(d)], rh_n[U(d)])
                rh_n[U(d)] -= 1
                i = order[U(r)]
                dev_busy[U(d)] = True
                start[U(i)] = t
                busy[U(d)] += dur[U(i), U(d)]
                nev = heap_push(ev_t, ev_k, 0, nev, t + dur[U(i), U(d)], r)
                nlog = _mem(mem, peak, log_t, log_d, log_b, nlog, t, d, out_bytes[U(i)] + temp_mem[U(i)])
        nch_todo = ndev_todo = 0
        if nev == 0:
            break
        # event phase: everything that ends at the next instant t
        t = ev_t[0]
        while nev > 0 and ev_t[0] == t:
            key = heap_pop(ev_t, ev_k, 0, nev)
            nev -= 1
            if key < n:  # an op ends
                i = order[U(key)]
                d = dev[U(i)]
                end[U(i)] = t
                dev_busy[U(d)] = False
                ndev_todo = mark(dirty_dev, dev_todo, ndev_todo, d)
                nlog = _mem(mem, peak, log_t, log_d, log_b, nlog, t, d, -temp_mem[U(i)])
                for k in range(in_ptr[U(i)], in_ptr[U(i + 1)]):
                    p = in_src[U(k)]
                    if dev[U(p)] == d:
                        out_rem[U(p)] -= 1
                        if out_rem[U(p)] == 0:
                            nlog = _mem(mem, peak, log_t, log_d, log_b, nlog, t, d, -out_bytes[U(p)])
                    else:
                        x = x_of_edge[U(in_eid[U(k)])]
                        copy_rem[U(x)] -= 1
                        if copy_rem[U(x)] == 0:
                            nlog = _mem(mem, peak, log_t, log_d, log_b, nlog, t, d, -x_bytes[U(x)])
                for k in range(out_ptr[U(i)], out_ptr[U(i + 1)]):
                    j = out_dst[U(k)]
                    if dev[U(j)] == d:
                        pending[U(j)] -= 1
                        if pending[U(j)] == 0:
                            rh_n[U(d)] = heap_push(rh_t, rh_k, dev_base[U(d)], rh_n[U(d)], t, rank[U(j)])
                for x in range(x_ptr[U(i)], x_ptr[U(i + 1)]):
                    c = x_chan[U(x)]
                    enqueue_transfer(ch_q, ch_head[U(c)], ch_tail[U(c)], x, x_op, end, rank, t)
                    ch_tail[U(c)] += 1
                    nch_todo = mark(dirty_ch, ch_todo, nch_todo, c)
            else:  # a transfer ends
                x = key - n
                p, dst = x_op[U(x)], x_dst[U(x)]
                x_end[U(x)] = t
                c = x_chan[U(x)]
                ch_busy[U(c)] = False
                nch_todo = mark(dirty_ch, ch_todo, nch_todo, c)
                out_rem[U(p)] -= 1
                if out_rem[U(p)] == 0:
                    nlog = _mem(mem, peak, log_t, log_d, log_b, nlog, t, dev[U(p)], -out_bytes[U(p)])
                for k in range(out_ptr[U(p)], out_ptr[U(p + 1)]):
                    j = out_dst[U(k)]
                    if dev[U(j)] == dst:
                        pending[U(j)] -= 1
                        if pending[U(j)] == 0:
                            rh_n[U(dst)] = heap_push(rh_t, rh_k, dev_base[U(dst)], rh_n[U(dst)], t, rank[U(j)])
                            ndev_todo = mark(dirty_dev, dev_todo, ndev_todo, dst)
    return (start, end, busy, peak, x_op, x_dst, x_bytes, x_start, x_end,
            log_t[:nlog].copy(), log_d[:nlog].copy(), log_b[:nlog].copy(), t)


# ---------------------------------------------------------------------- kernel: step time only
SHIFT_LIMIT = 64
"""Entries an insertion into :func:`_fast_step_time`'s sorted run may move before it turns into a heap."""


@cached_njit()
def _fast_step_time(dev, dur, out_ptr, out_dst, out_bytes, uniform, indeg, roots, lat, bw, check, memory, held,
                    temp_mem, pending, arrive, heap_t, heap_k, dev_free, chan_free, x_bytes, x_end, x_stamp, bound,
                    temp):
    """The step time of ``sim-v1``, or ``nan`` if an op or transfer took no time or (with ``check``) the
    placement might run out of memory.

    While every op and transfer takes time, each instant of ``sim-v1`` is one round and its queues are FIFO,
    so one pass in order of (ready time, rank) gives the same schedule: an op starts at ``max(ready, device
    free)``, and its transfers (one per other device with a consumer, in the order their producers ended on
    that device) at ``max(end, channel free)``. A zero-length op or transfer breaks that (an event inside its
    instant); the caller then runs the full kernel. With ``check``, the pass also adds up a memory bound per
    device (persistent memory and outputs of its ops, ``held``; every edge it receives; its largest temporary
    memory) and gives up unless the bound fits ``memory`` (then no peak can exceed it).

    Ops are numbered by topological rank (see :func:`_rank_arrays`); ``dev`` too, and ``dur`` is flat, op-major
    ``(N * D,)``. The arrays after
    ``temp_mem`` are scratch space. Indices are cast to unsigned (``U``), which spares numba's wraparound of
    negative ones (1.3-1.4x on this pass).
    """
    nd = lat.shape[0]
    pending[:] = indeg
    arrive[:] = 0.0
    dev_free[:] = 0.0
    chan_free[:] = 0.0
    x_stamp[:] = -1
    bound[:] = 0
    temp[:] = 0
    # ready ops by (ready time, rank): a sorted run in [head, tail) while inserting stays cheap (ready times only
    # grow, so a new op lands near the tail), else a heap in [0, size) (a sorted run is already one)
    head, tail, size, step = 0, roots.shape[0], 0, 0.0
    heap_t[:tail] = 0.0
    heap_k[:tail] = roots
    as_heap = False
    while (size > 0) if as_heap else (head < tail):
        if as_heap:
            ready = heap_t[0]
            i = heap_pop(heap_t, heap_k, 0, size)
            size -= 1
        else:
            ready, i = heap_t[U(head)], heap_k[U(head)]
            head += 1
        d = dev[U(i)]
        begin = max(ready, dev_free[U(d)])
        finish = begin + dur[U(i * nd + d)]
        if not finish > begin:
            return np.nan
        dev_free[U(d)] = finish
        step = max(step, finish)
        if check:
            bound[U(d)] += held[U(i)]
            temp[U(d)] = max(temp[U(d)], temp_mem[U(i)])
        lo, hi, same = out_ptr[U(i)], out_ptr[U(i + 1)], uniform[U(i)]
        if not same:  # bytes of each transfer: its largest edge (stamp -2 - i: counted, not sent)
            for k in range(lo, hi):
                dj = dev[U(out_dst[U(k)])]
                if dj != d:
                    if x_stamp[U(dj)] != -2 - i:
                        x_stamp[U(dj)], x_bytes[U(dj)] = -2 - i, 0
                    x_bytes[U(dj)] = max(x_bytes[U(dj)], out_bytes[U(k)])
        for k in range(lo, hi):
            j = out_dst[U(k)]
            dj = dev[U(j)]
            t = finish
            if dj != d:
                if check:
                    bound[U(dj)] += out_bytes[U(k)]
                if x_stamp[U(dj)] != i:  # the first edge to dj sends (stamp i: sent)
                    c = d * nd + dj
                    s = max(finish, chan_free[U(c)])
                    nbytes = out_bytes[U(lo)] if same else x_bytes[U(dj)]
                    e = s + lat[U(d), U(dj)] + nbytes / bw[U(d), U(dj)]
                    if not e > s:
                        return np.nan
                    chan_free[U(c)] = x_end[U(dj)] = e
                    step = max(step, e)
                    x_stamp[U(dj)] = i
                t = x_end[U(dj)]
            arrival = max(arrive[U(j)], t)
            arrive[U(j)] = arrival
            left = pending[U(j)] - 1
            pending[U(j)] = left
            if left == 0:
                if not as_heap:
                    moved = sorted_insert(heap_t, heap_k, head, tail, arrival, j, SHIFT_LIMIT)
                    if moved >= 0:
                        tail = moved
                    else:  # too far from the tail: continue with a heap
                        size = move_front(heap_t, heap_k, head, tail)
                        as_heap = True
                if as_heap:
                    size = heap_push(heap_t, heap_k, 0, size, arrival, j)
    if check and np.any(bound + temp > memory):
        return np.nan
    return step


def _rank_arrays(dur, order, out_ptr, out_dst, out_eid, edge_bytes, out_bytes, temp_mem, persist) -> tuple:
    """The graph renumbered by topological rank for :func:`_fast_step_time`: ``dur (N, D)``,
    out-edge CSR ``ptr (N+1,), dst (E,), bytes (E,)``, whether all out-edges of an op carry the same bytes
    ``(N,)``, in-degrees ``(N,)``, the ranks of ops without inputs, persistent + output bytes ``(N,)`` and
    temporary bytes ``(N,)``."""
    n = order.size
    rank = np.empty_like(order)
    rank[order] = np.arange(n)
    counts = np.diff(out_ptr)[order]
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    edges = np.concatenate([np.arange(out_ptr[i], out_ptr[i + 1]) for i in order] or [np.zeros(0, np.int64)])
    dst, nbytes = rank[out_dst[edges]], edge_bytes[out_eid[edges]]
    indeg = np.bincount(dst, minlength=n).astype(np.int64)
    op_of_edge = np.repeat(np.arange(n), counts)
    uniform = np.ones(n, np.bool_)
    uniform[op_of_edge[nbytes != nbytes[ptr[op_of_edge]]]] = False
    return tuple(np.ascontiguousarray(a) for a in (dur[order], ptr, dst, nbytes, uniform, indeg,
                                                   np.flatnonzero(indeg == 0).astype(np.int64),
                                                   (persist + out_bytes)[order], temp_mem[order]))


@cached_njit(nogil=True)
def _batch_step_times(devices, memory, fits, fast, *args):
    """Step time of each row of ``devices`` (K, N); ``inf`` where a device's peak exceeds ``memory``.

    Rows go through :func:`_fast_step_time` (with the arrays ``fast`` of :func:`_rank_arrays`) first, which
    checks their memory bound unless ``fits`` (no placement can exceed ``memory``).
    """
    out = np.empty(devices.shape[0])
    n, nd = devices.shape[1], memory.shape[0]
    order, lat, bw = args[1], args[13], args[14]
    dur, out_ptr, out_dst, out_bytes, uniform, indeg, roots, held, temp_mem = fast
    dur_flat = dur.reshape(dur.size)
    dev = np.empty(n, np.int64)
    pending, arrive, heap_t, heap_k = np.empty(n, np.int64), np.empty(n), np.empty(n), np.empty(n, np.int64)
    dev_free, chan_free = np.empty(nd), np.empty(nd * nd)
    x_bytes, x_end, x_stamp = np.empty(nd, np.int64), np.empty(nd), np.empty(nd, np.int64)
    bound, temp = np.empty(nd, np.int64), np.empty(nd, np.int64)
    for r in range(devices.shape[0]):
        for q in range(n):
            dev[q] = devices[r, order[q]]
        step = _fast_step_time(dev, dur_flat, out_ptr, out_dst, out_bytes, uniform, indeg, roots, lat, bw, not fits,
                               memory, held, temp_mem, pending, arrive, heap_t, heap_k, dev_free, chan_free,
                               x_bytes, x_end, x_stamp, bound, temp)
        if np.isnan(step):
            res = _simulate(devices[r], *args)
            step = np.inf if np.any(res[3] > memory) else res[12]
        out[r] = step
    return out
