"""Earliest-start-time-first list scheduling with memory, shared by m-ETF and m-SCT.

Each device keeps two heaps of the ops whose inputs are all scheduled: ``pending`` keyed by the time
their inputs arrive on that device, and ``ready`` (inputs arrived by the time the device is free)
keyed by priority. The earliest start on a device is then ``max(device free, best pending arrival)``
or ``device free`` when ``ready`` is not empty, found in O(log n); a step scans the D devices. Entries
that became invalid (op scheduled, its colocation group placed elsewhere, the device out of memory)
are dropped lazily when they reach the top of a heap.
"""

from __future__ import annotations

import heapq

import numpy as np

from gplace.baselines._common import MemoryLedger, unit_durations
from gplace.ir import Cluster, OpGraph


class EtfScheduler:
    """Schedules every op at the (op, device) pair with the earliest start time.

    Ties between ops go to the higher ``priority``; ties between devices to the earlier finish, then
    the lower device index. An input produced on another device arrives ``latency + bytes / bandwidth``
    after its producer finishes; links are not modelled as contended. A chosen op that is the first of its
    colocation group (of more than one op) to be scheduled places the whole group: it moves to the device where
    the group's work would finish earliest, started with it, ``start there + the group's summed durations
    there``, when that is strictly earlier than on the chosen device (ties to the earlier start, then to the
    chosen device, then to the lower index), and starts there (see :meth:`_group_device`).

    Shapes:
        ``durations`` (N, D) seconds; ``priority`` (N,) float64, higher first.
    """

    def __init__(
        self, graph: OpGraph, cluster: Cluster, ledger: MemoryLedger, durations: np.ndarray, priority: np.ndarray
    ) -> None:
        self.graph, self.ledger = graph, ledger
        n, d = graph.num_ops, cluster.num_devices
        in_ptr, in_src, in_eid = graph.in_csr
        self.in_ptr, self.in_src = in_ptr.tolist(), in_src.tolist()
        self.in_bytes = graph.edge_bytes[in_eid].astype(np.float64).tolist()
        out_ptr, out_dst, _ = graph.out_csr
        self.out_ptr, self.out_dst = out_ptr.tolist(), out_dst.tolist()
        self.inv_bw, self.lat = (1.0 / cluster.bandwidth).tolist(), cluster.latency.tolist()
        self.dur = durations.tolist()
        self.neg_priority = (-np.asarray(priority, dtype=np.float64)).tolist()
        self.waiting = np.bincount(graph.edge_index[1], minlength=n).tolist()
        self.arrival: list[dict[int, float] | None] = [None] * n
        self.alive = [0] * n
        self.pending: list[list[tuple[float, float, int]]] = [[] for _ in range(d)]
        self.ready: list[list[tuple[float, int]]] = [[] for _ in range(d)]
        self.device, self.finish = [-1] * n, [0.0] * n
        self.avail, self.last = [0.0] * d, [-1] * d
        units = ledger.units
        self.unit_of: list[int] = units.unit_of.tolist()
        self.grouped: list[bool] = (units.size > 1).tolist()
        self.group_dur: list[list[float]] = unit_durations(units, durations).tolist()
        """Per unit and device: the summed durations of its members there."""

    def run(self) -> np.ndarray:
        """Schedule every op; return the (N,) device of each."""
        for i, count in enumerate(self.waiting):
            if count == 0:
                self._release(i)
        for _ in range(self.graph.num_ops):
            device, op, start = self._select()
            self._commit(op, device, start)
        return np.array(self.device, dtype=np.int64)

    # ------------------------------------------------------------------ selection
    def _select(self) -> tuple[int, int, float]:
        best: tuple[float, float, int, int] | None = None
        for d in range(len(self.avail)):
            cand = self._candidate(d)
            if cand is None:
                continue
            start, op = cand
            key = (start, start + self.dur[op][d], d, op)
            if best is None or key < best:
                best = key
        if best is None:
            raise RuntimeError("list scheduler found no schedulable op; the graph's dependencies are broken")
        start, _, d, op = best
        if self.places_group(op):
            d, start = self._group_device(op, d, start)
        return d, op, start

    def places_group(self, op: int) -> bool:
        """Whether scheduling ``op`` places a colocation group of more than one op (none of it placed yet)."""
        unit = self.unit_of[op]
        return self.grouped[unit] and self.ledger.unit_device[unit] < 0

    def group_finish(self, op: int, d: int, start: float) -> tuple[float, float]:
        """Key of device ``d`` for ``op``'s group started there with ``op`` at ``start``: the time the group's
        summed durations there would end, then ``start``."""
        return start + self.group_dur[self.unit_of[op]][d], start

    def _group_device(self, op: int, d: int, start: float) -> tuple[int, float]:
        """Device and start of ``op``, chosen on ``d`` at ``start``, as the first of its group: the device with
        room where :meth:`group_finish` is least, ``d`` unless another is strictly less (then the lower index)."""
        best_d, best_start, best_key = d, start, self.group_finish(op, d, start)
        for e, t in self.arrival[op].items():
            if e == d:
                continue
            s = max(self.avail[e], t)
            key = self.group_finish(op, e, s)
            if key < best_key and self.ledger.fits(op, e):
                best_d, best_start, best_key = e, s, key
        return best_d, best_start

    def _candidate(self, d: int) -> tuple[float, int] | None:
        """Earliest start on device ``d`` and the op that gets it, or ``None`` if no op may go there."""
        pending, ready, free_at = self.pending[d], self.ready[d], self.avail[d]
        while pending and pending[0][0] <= free_at:
            _, neg_prio, op = heapq.heappop(pending)
            heapq.heappush(ready, (neg_prio, op))
        while ready and not self._valid(ready[0][1], d):
            heapq.heappop(ready)
        if ready:
            return free_at, ready[0][1]
        while pending and not self._valid(pending[0][2], d):
            heapq.heappop(pending)
        if pending:
            return pending[0][0], pending[0][2]
        return None

    def _valid(self, op: int, d: int) -> bool:
        """Whether ``op`` may still start on ``d``; counts down the op's live devices when not."""
        if self.device[op] >= 0:
            return False
        if self.ledger.fits(op, d):
            return True
        self.alive[op] -= 1
        if self.alive[op] == 0:
            raise self.ledger.infeasible(self.graph, op)
        return False

    # ------------------------------------------------------------------ bookkeeping
    def _release(self, op: int) -> None:
        """``op``'s inputs are all scheduled: compute their arrival per device and queue it."""
        candidates = self.ledger.candidates(op)
        if not candidates:
            raise self.ledger.infeasible(self.graph, op)
        arrival = {d: self._arrival(op, d) for d in candidates}
        self.arrival[op] = arrival
        self.alive[op] = len(candidates)
        neg_prio = self.neg_priority[op]
        for d, t in arrival.items():
            heapq.heappush(self.pending[d], (t, neg_prio, op))

    def _arrival(self, op: int, d: int) -> float:
        t = 0.0
        device, finish, nbytes, src = self.device, self.finish, self.in_bytes, self.in_src
        for k in range(self.in_ptr[op], self.in_ptr[op + 1]):
            p = src[k]
            dp = device[p]
            a = finish[p] if dp == d else finish[p] + self.lat[dp][d] + nbytes[k] * self.inv_bw[dp][d]
            if a > t:
                t = a
        return t

    def _commit(self, op: int, d: int, start: float) -> None:
        self.ledger.assign(op, d)
        end = start + self.dur[op][d]
        self.device[op], self.finish[op] = d, end
        self.avail[d], self.last[d] = end, op
        for k in range(self.out_ptr[op], self.out_ptr[op + 1]):
            j = self.out_dst[k]
            self.waiting[j] -= 1
            if self.waiting[j] == 0:
                self._release(j)
