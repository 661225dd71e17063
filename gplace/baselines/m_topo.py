"""Baechi's m-TOPO: fill devices in topological order, each up to an even share of the work."""

from __future__ import annotations

import numpy as np

from gplace.baselines._common import MemoryLedger, Units, build_units, graph_speeds, place_fitting
from gplace.baselines.base import Placer
from gplace.ir import Cluster, OpGraph


class MTopo(Placer):
    """Walk the ops in topological order, filling one device at a time (Jeon et al., SoCC 2020).

    Devices are filled fastest first (ties by index), by how fast each runs the graph, ``s_d``
    (:func:`~gplace.baselines._common.graph_speeds`: the ops' costs for its kind, and its speed; in proportion to
    the speeds where the ops cost the same on every kind). Each device takes ops until its busy time reaches the
    even share ``T = sum_i w_i / sum_d s_d``, where ``w_i`` is op ``i``'s mean ``duration x s_d`` over the devices
    it may run on; on equal devices this is total work over the number of devices. The last device takes whatever
    is left.

    Memory-aware: when the op's unit (its colocation group, or the op alone) does not fit the current
    device, the walk moves on to the next device that has room. Ops that may not run on the current
    device (pinned to another kind) and ops left over once the walk has passed every device with room
    go to the least-loaded allowed device with room; members of an already placed group follow it. Where the
    result still runs out of memory in ``sim-v1``, the walk is redone booking every copy as soon as both its ends'
    devices are known (:func:`~gplace.baselines._common.place_fitting`).

    Raises:
        PlacementInfeasibleError: from :meth:`place`, when an op fits on no device it may run on.
    """

    name = "m_topo"

    def _place(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        units = build_units(graph, cluster)
        return place_fitting(graph, cluster, units, lambda ledger: _walk(graph, cluster, units, ledger))


def _walk(graph: OpGraph, cluster: Cluster, units: Units, ledger: MemoryLedger) -> np.ndarray:
    """(N,) devices of the walk, booking memory in ``ledger``."""
    filler = _Filler(graph, cluster, units, ledger)
    device = np.empty(graph.num_ops, dtype=np.int64)
    for op in graph.topological_order.tolist():
        device[op] = filler.place(op)
    return device


class _Filler:
    """The walk's state: the current device, per-device busy time and memory."""

    def __init__(self, graph: OpGraph, cluster: Cluster, units: Units, ledger: MemoryLedger) -> None:
        self.graph = graph
        self.units = units
        self.ledger = ledger
        self.durations = graph.durations(cluster)
        speeds = graph_speeds(self.durations, units.allowed[units.unit_of], cluster.speeds)
        self.order = np.argsort(-speeds, kind="stable").tolist()
        self.cursor = 0
        self.load = np.zeros(cluster.num_devices)
        self.share = _even_share(self.durations, self.units.allowed[self.units.unit_of], speeds)

    def place(self, op: int) -> int:
        """Choose the device of ``op`` and book its time and memory there."""
        unit = int(self.units.unit_of[op])
        device = self._choose(op, unit)
        self.ledger.assign(op, device)
        self.load[device] += self.durations[op, device]
        return device

    def _choose(self, op: int, unit: int) -> int:
        placed = self.ledger.unit_device[unit]
        if placed >= 0:
            return placed
        last = len(self.order) - 1
        while self.cursor < last and self.load[self.order[self.cursor]] >= self.share * (1 - _ROUNDING):
            self.cursor += 1
        current = self.order[self.cursor]
        if self.units.allowed[unit, current]:
            for pos in range(self.cursor, last + 1):
                if self.ledger.fits(op, self.order[pos]) and self.units.allowed[unit, self.order[pos]]:
                    self.cursor = pos
                    return self.order[pos]
        return self._least_loaded(op)

    def _least_loaded(self, op: int) -> int:
        candidates = self.ledger.candidates(op)
        if not candidates:
            raise self.ledger.infeasible(self.graph, op)
        return min(candidates, key=lambda d: (self.load[d], d))


_ROUNDING = 1e-9
"""Relative slack of "a device's load reached the even share": both are sums of floats (five ops of 0.1 s came to
0.5 against a share of 0.5000000000000001, and a sixth op went on the device)."""


def _even_share(durations: np.ndarray, allowed: np.ndarray, speeds: np.ndarray) -> float:
    """Seconds of busy time per device if the work were spread in proportion to ``speeds``.

    Shapes:
        ``durations`` (N, D), ``allowed`` (N, D) bool, ``speeds`` (D,).
    """
    work = np.where(allowed, durations * speeds[None, :], 0.0).sum(1) / np.maximum(allowed.sum(1), 1)
    return float(work.sum() / speeds.sum())
