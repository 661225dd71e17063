"""Shared pieces of the baseline placers: placement units, the memory ledger, mean costs, ranks.

A *unit* is a colocation group, or a single op outside any group. Placers put a unit on one device,
either all at once or by placing its first member and forcing the rest onto the same device. The
memory a unit needs is the sum over its ops of persistent memory plus output bytes. The step-time
baselines' :class:`MemoryLedger` adds what ``sim-v1`` also allocates: the largest temporary memory of the
ops on a device, and the copies a device receives (one per (producer, device), its largest edge there).
Counting every output and copy as resident for the whole step never under-estimates ``sim-v1``'s peak
(it frees dead tensors), so a placement they return fits it, unless a colocation group's later members receive
more copies than the room its first member left (they follow it whatever they receive).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gplace.ir import Cluster, GraphError, InvalidPlacementError, OpGraph


class PlacementInfeasibleError(InvalidPlacementError):
    """No placement fits: no device an op may run on has room for it (and its colocation group), or every placement
    a search measured failed; the message names the op or the last failure."""


@dataclass(frozen=True, eq=False)
class Units:
    """Colocation groups and lone ops of a graph on a cluster.

    Shapes:
        ``unit_of`` (N,) int64; ``allowed`` (U, D) bool; ``memory`` (U,) int64; ``size`` (U,) int64.
    """

    unit_of: np.ndarray
    """Unit index of every op; units are numbered in order of their first op index."""
    allowed: np.ndarray
    """Devices every member of the unit may run on (pins and finite durations)."""
    memory: np.ndarray
    """Bytes the whole unit needs on its device: persistent memory plus output bytes of its members."""
    size: np.ndarray
    """Number of ops in each unit."""
    temporary: np.ndarray
    """(U,) int64 largest temporary memory of the unit's members (held while one of them runs)."""

    @property
    def num_units(self) -> int:
        """Number of units U."""
        return int(self.memory.shape[0])


def op_memory(graph: OpGraph) -> np.ndarray:
    """(N,) int64 bytes an op occupies on its device: persistent memory plus output bytes."""
    return graph.persistent_memory + graph.output_bytes


def build_units(graph: OpGraph, cluster: Cluster) -> Units:
    """Group ops into placement units.

    Raises:
        GraphError: a colocation group has no device every member may run on.
    """
    ids: dict[str, int] = {}
    unit_of = np.empty(graph.num_ops, dtype=np.int64)
    count = 0
    for i, group in enumerate(graph.colocation):
        if group is None:
            unit_of[i] = count
            count += 1
        else:
            if group not in ids:
                ids[group] = count
                count += 1
            unit_of[i] = ids[group]
    op_allowed = graph.allowed_devices(cluster)
    banned = np.zeros((count, cluster.num_devices), dtype=np.int64)
    np.add.at(banned, unit_of, (~op_allowed).astype(np.int64))
    allowed = banned == 0
    memory = np.zeros(count, dtype=np.int64)
    np.add.at(memory, unit_of, op_memory(graph))
    temporary = np.zeros(count, dtype=np.int64)
    np.maximum.at(temporary, unit_of, graph.temporary_memory)
    _check_units_runnable(graph, cluster, unit_of, allowed)
    return Units(unit_of, allowed, memory, np.bincount(unit_of, minlength=count).astype(np.int64), temporary)


def _check_units_runnable(graph: OpGraph, cluster: Cluster, unit_of: np.ndarray, allowed: np.ndarray) -> None:
    dead = np.flatnonzero(~allowed.any(1))
    if dead.size:
        members = np.flatnonzero(unit_of == dead[0])
        group = graph.colocation[members[0]]
        detail = ", ".join(f"{graph.op_names[i]!r} (pinned={graph.pinned[i]!r})" for i in members[:5])
        raise GraphError(
            f"colocation group {group!r} can run on no single device of cluster {cluster.name!r}: "
            f"its members {detail} allow no common device"
        )


class MemoryLedger:
    """Free memory per device and the device chosen for each unit, as ops are placed one at a time.

    Placing a unit's first op reserves the whole unit's persistent memory and outputs, so later members
    always fit; a device also keeps room for the largest temporary memory of its ops and for every copy it
    receives from a producer placed on another device (placers here place an op after its producers).
    """

    def __init__(self, units: Units, cluster: Cluster, graph: OpGraph) -> None:
        self.units, self.cluster = units, cluster
        self.free: list[int] = [int(m) for m in cluster.memory]
        self.unit_device: list[int] = [-1] * units.num_units
        self._need: list[int] = units.memory.tolist()
        self._temporary: list[int] = units.temporary.tolist()
        self._device_temporary: list[int] = [0] * cluster.num_devices
        self._allowed: list[list[int]] = [[d for d, ok in enumerate(row) if ok] for row in units.allowed.tolist()]
        self._unit_of: list[int] = units.unit_of.tolist()
        ptr, src, eid = graph.in_csr
        self._in_ptr, self._in_src = ptr.tolist(), src.tolist()
        self._in_bytes: list[int] = graph.edge_bytes[eid].tolist()
        self._copies: dict[tuple[int, int], int] = {}

    def need(self, op: int, device: int) -> int:
        """Bytes placing ``op`` on ``device`` takes from its free memory: its unit (if not placed yet), the growth
        of the device's largest temporary memory, and the copies of inputs produced on other devices."""
        return self._unit_need(op, device) + sum(self._received(op, device).values())

    def _unit_need(self, op: int, device: int) -> int:
        """Bytes ``op``'s unit takes on ``device`` if not placed yet: its memory and the growth of the device's
        largest temporary memory."""
        unit = self._unit_of[op]
        if self.unit_device[unit] >= 0:
            return 0
        return self._need[unit] + max(0, self._temporary[unit] - self._device_temporary[device])

    def _received(self, op: int, device: int) -> dict[int, int]:
        """Bytes each producer of ``op`` on another device adds to its copy on ``device`` (largest edge so far)."""
        grow: dict[int, int] = {}
        for k in range(self._in_ptr[op], self._in_ptr[op + 1]):
            p = self._in_src[k]
            placed = self.unit_device[self._unit_of[p]]
            if placed < 0 or placed == device:
                continue
            have = self._copies.get((p, device), 0)
            if self._in_bytes[k] > have + grow.get(p, 0):
                grow[p] = self._in_bytes[k] - have
        return grow

    def fits(self, op: int, device: int) -> bool:
        """Whether ``op`` may go to ``device``: its unit's device if placed, else an allowed device with room."""
        placed = self.unit_device[self._unit_of[op]]
        if placed >= 0:
            return placed == device
        return self.need(op, device) <= self.free[device]

    def assign(self, op: int, device: int) -> None:
        """Put ``op`` (with its unit, if not placed yet) on ``device`` and book the memory it takes there."""
        unit = self._unit_of[op]
        placed = self.unit_device[unit]
        if placed >= 0 and placed != device:
            raise ValueError(f"unit {unit} is already on device {placed}, cannot move it to {device}")
        received = self._received(op, device)
        self.free[device] -= self._unit_need(op, device) + sum(received.values())
        for p, nbytes in received.items():
            self._copies[p, device] = self._copies.get((p, device), 0) + nbytes
        if placed < 0:
            self._device_temporary[device] = max(self._device_temporary[device], self._temporary[unit])
            self.unit_device[unit] = device

    def candidates(self, op: int) -> list[int]:
        """Devices ``op`` may go to now: its unit's device if placed, else allowed devices with room."""
        placed = self.unit_device[self._unit_of[op]]
        if placed >= 0:
            return [placed]
        return [d for d in self._allowed[self._unit_of[op]] if self.need(op, d) <= self.free[d]]

    def infeasible(self, graph: OpGraph, op: int) -> PlacementInfeasibleError:
        """The error for ``op`` fitting nowhere, naming the op, its group and the free memory."""
        unit = int(self.units.unit_of[op])
        group = graph.colocation[op]
        what = f"with its colocation group {group!r} " if group is not None else ""
        allowed = np.flatnonzero(self.units.allowed[unit]).tolist()
        need = {self.cluster.device_names[d]: self.need(op, d) for d in allowed}
        free = {self.cluster.device_names[d]: self.free[d] for d in allowed}
        return PlacementInfeasibleError(
            f"op {graph.op_names[op]!r} {what}fits no device it may run on after the ops placed before it (a "
            f"greedy pass: another order may fit); bytes it needs there (persistent + output + temporary + copies "
            f"received): {need}; free bytes: {free}"
        )


def mean_comm(cluster: Cluster) -> tuple[float, float]:
    """Mean seconds per byte and mean latency over ordered pairs of distinct devices ((0, 0) for one device)."""
    d = cluster.num_devices
    if d < 2:
        return 0.0, 0.0
    off = ~np.eye(d, dtype=bool)
    return float(np.mean(1.0 / cluster.bandwidth[off])), float(np.mean(cluster.latency[off]))


def mean_edge_cost(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """(E,) float64 mean transfer seconds per edge: bytes x mean seconds-per-byte + mean latency."""
    per_byte, latency = mean_comm(cluster)
    if cluster.num_devices < 2:
        return np.zeros(graph.num_edges)
    return graph.edge_bytes.astype(np.float64) * per_byte + latency


def mean_durations(durations: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """(N,) float64 mean duration of each op over the devices it may run on.

    Shapes:
        ``durations`` (N, D), ``allowed`` (N, D) bool.
    """
    total = np.where(allowed, durations, 0.0).sum(1)
    return total / np.maximum(allowed.sum(1), 1)


def upward_rank(graph: OpGraph, weight: np.ndarray, edge_cost: np.ndarray) -> np.ndarray:
    """(N,) float64 HEFT upward rank: ``weight[i] + max over successors j of (edge_cost[i->j] + rank[j])``.

    Shapes:
        ``weight`` (N,), ``edge_cost`` (E,) in edge-id order.
    """
    ptr, dst, eid = graph.out_csr
    ptr_l, dst_l, cost_l = ptr.tolist(), dst.tolist(), edge_cost[eid].tolist()
    rank = weight.astype(np.float64).tolist()
    for i in graph.topological_order[::-1].tolist():
        best = 0.0
        for k in range(ptr_l[i], ptr_l[i + 1]):
            v = cost_l[k] + rank[dst_l[k]]
            if v > best:
                best = v
        rank[i] += best
    return np.array(rank, dtype=np.float64)


def rank_order(graph: OpGraph, rank: np.ndarray) -> np.ndarray:
    """(N,) op indices by decreasing rank, ties in topological order (always a topological order)."""
    pos = np.empty(graph.num_ops, dtype=np.int64)
    pos[graph.topological_order] = np.arange(graph.num_ops)
    return np.lexsort((pos, -rank))


def unit_durations(units: Units, durations: np.ndarray) -> np.ndarray:
    """(U, D) float64 summed durations of each unit's members on each device.

    Shapes:
        ``durations`` (N, D).
    """
    out = np.zeros((units.num_units, durations.shape[1]))
    np.add.at(out, units.unit_of, durations)
    return out
