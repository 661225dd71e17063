"""Shared pieces of the baseline placers: placement units, the memory ledger, mean costs, ranks.

A *unit* is a colocation group, or a single op outside any group. Placers put a unit on one device,
either all at once or by placing its first member and forcing the rest onto the same device. The
memory a unit needs is the sum over its ops of persistent memory plus output bytes. The step-time
baselines' :class:`MemoryLedger` adds what ``sim-v1`` also allocates: the largest temporary memory of the
ops on a device, and the copies a device receives (one per (producer, device), its largest edge there).
Counting every output and copy as resident for the whole step never under-estimates ``sim-v1``'s peak
(it frees dead tensors), but a colocation group's later members follow their group whatever copies they receive,
so the ledger can over-fill a device. :func:`place_fitting` keeps such a placement where ``sim-v1`` finds that
it fits (freeing dead tensors, it usually does), else redoes the pass with a :class:`StrictMemoryLedger`, which
books a copy as soon as both its ends' devices are known and never over-fills a device.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gplace.ir import Cluster, GraphError, InvalidPlacementError, OpGraph, Placement
from gplace.runtime.simulator import schedule

log = logging.getLogger(__name__)


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


def build_units(graph: OpGraph, cluster: Cluster, *, join_gradients: bool = False) -> Units:
    """Group ops into placement units: colocation groups and lone ops; with ``join_gradients``, a backward op also
    joins its forward op's (``grad_of``) unit where the two share an allowed device, as pipelines keep a layer's
    backward on its stage (PipeDream profiles import so, as colocation groups).

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
    allowed = _unit_allowed(unit_of, count, op_allowed)
    _check_units_runnable(graph, cluster, unit_of, allowed)
    if join_gradients and graph.grad_of:
        unit_of = _joined_with_forward(graph.grad_of, unit_of, allowed)
        count = int(unit_of.max()) + 1 if unit_of.size else 0
        allowed = _unit_allowed(unit_of, count, op_allowed)
    memory = np.zeros(count, dtype=np.int64)
    np.add.at(memory, unit_of, op_memory(graph))
    temporary = np.zeros(count, dtype=np.int64)
    np.maximum.at(temporary, unit_of, graph.temporary_memory)
    return Units(unit_of, allowed, memory, np.bincount(unit_of, minlength=count).astype(np.int64), temporary)


def _unit_allowed(unit_of: np.ndarray, count: int, op_allowed: np.ndarray) -> np.ndarray:
    """(U, D) bool: the devices every member of each unit may run on."""
    banned = np.zeros((count, op_allowed.shape[1]), dtype=np.int64)
    np.add.at(banned, unit_of, (~op_allowed).astype(np.int64))
    return banned == 0


def _joined_with_forward(grad_of: Sequence[int], unit_of: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """(N,) ``unit_of`` with each backward op's unit merged into its forward op's where they share a device,
    renumbered in order of first op."""
    root = list(range(allowed.shape[0]))
    common = list(allowed)

    def find(u: int) -> int:
        while root[u] != u:
            root[u] = root[root[u]]
            u = root[u]
        return u

    for b, f in enumerate(grad_of):
        if f < 0:
            continue
        ub, uf = find(int(unit_of[b])), find(int(unit_of[f]))
        both = common[ub] & common[uf]
        if ub != uf and both.any():
            root[ub], common[uf] = uf, both
    merged = np.array([find(u) for u in unit_of.tolist()], dtype=np.int64)
    _, first, inverse = np.unique(merged, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first)] = np.arange(first.size)
    return rank[inverse.reshape(-1)]


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
    receives from a producer placed on another device (placers here place an op after its producers). A copy is
    booked when its consumer is placed, so a group's later members, which follow their group whatever they
    receive, can take a device's free memory below 0 (:class:`StrictMemoryLedger` cannot).
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
        in_total = np.zeros(graph.num_ops, dtype=np.int64)
        np.add.at(in_total, graph.edge_index[1], graph.edge_bytes)
        self._in_total: list[int] = in_total.tolist()
        """Per op: bytes of all its inputs, a bound on the copies it can receive."""
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
        need = self._unit_need(op, device)
        if need + self._in_total[op] <= self.free[device]:  # room for every copy it could receive: none counted
            return True
        return need + sum(self._received(op, device).values()) <= self.free[device]

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
        return [d for d in self._allowed[self._unit_of[op]] if self.fits(op, d)]

    def infeasible(self, graph: OpGraph, op: int) -> PlacementInfeasibleError:
        """The error for ``op`` fitting nowhere, naming the op, its group and the free memory."""
        unit = int(self.units.unit_of[op])
        group = graph.colocation[op]
        what = f"with its colocation group {group!r} " if group is not None else ""
        allowed = np.flatnonzero(self.units.allowed[unit]).tolist()
        names = self.cluster.device_names
        need = {names[d]: self.need(op, d) for d in allowed}
        free = {names[d]: self.free[d] for d in allowed}
        sent = {names[d]: {names[e]: b for e, b in self._sent_per_device(unit, d).items()} for d in allowed}
        sent_text = "".join(f"; from {d}, bytes it sends to its consumers' devices: {b}" for d, b in sent.items() if b)
        return PlacementInfeasibleError(
            f"out of memory: op {graph.op_names[op]!r} {what}fits no device it may run on after the ops placed "
            f"before it (a greedy pass: another order may fit); bytes it needs there (persistent + output + "
            f"temporary + copies received): {need}; free bytes: {free}{sent_text}"
        )

    def _sent_per_device(self, unit: int, device: int) -> dict[int, int]:
        """Bytes of copies ``unit`` on ``device`` would send, per receiving device: none booked here (a copy is
        booked when its consumer is placed)."""
        return {}


class StrictMemoryLedger(MemoryLedger):
    """A :class:`MemoryLedger` that books a copy as soon as both its ends' devices are known, so it never
    over-fills a device.

    Placing a unit's first op also books the copies its members receive from units placed already and send to
    them, and a device is refused where one of those does not fit (on the device receiving it).
    """

    def __init__(self, units: Units, cluster: Cluster, graph: OpGraph) -> None:
        super().__init__(units, cluster, graph)
        self._members: list[list[int]] = [[] for _ in range(units.num_units)]
        for op, unit in enumerate(self._unit_of):
            self._members[unit].append(op)
        ptr, dst, eid = graph.out_csr
        self._out_ptr, self._out_dst = ptr.tolist(), dst.tolist()
        self._out_bytes: list[int] = graph.edge_bytes[eid].tolist()
        self._inbound: list[dict[int, int]] = [{} for _ in range(units.num_units)]
        """Per unplaced unit: producer op of a placed unit -> largest edge bytes from it into the unit."""
        self._outbound: list[dict[tuple[int, int], int]] = [{} for _ in range(units.num_units)]
        """Per unplaced unit: (member op, device of a placed unit consuming it) -> largest edge bytes."""

    def need(self, op: int, device: int) -> int:
        """Bytes placing ``op`` on ``device`` takes from its free memory: its unit (if not placed yet), the growth
        of the device's largest temporary memory, and the copies the unit's members receive there from placed
        units."""
        unit = self._unit_of[op]
        if self.unit_device[unit] >= 0:
            return 0
        return self._unit_need(op, device) + sum(self._unit_received(unit, device).values())

    def fits(self, op: int, device: int) -> bool:
        """Whether ``op`` may go to ``device``: its unit's device if placed, else an allowed device with room for
        the unit and its copies received there, where the copies it sends fit too."""
        unit = self._unit_of[op]
        if self.unit_device[unit] >= 0:
            return self.unit_device[unit] == device
        sent = self._sent_per_device(unit, device) if self._outbound[unit] else {}
        return self.need(op, device) <= self.free[device] and all(b <= self.free[e] for e, b in sent.items())

    def assign(self, op: int, device: int) -> None:
        """Put ``op`` (with its unit, if not placed yet) on ``device`` and book the memory it takes there."""
        unit = self._unit_of[op]
        placed = self.unit_device[unit]
        if placed >= 0 and placed != device:
            raise ValueError(f"unit {unit} is already on device {placed}, cannot move it to {device}")
        if placed < 0:
            self._place_unit(unit, device)

    def _unit_received(self, unit: int, device: int) -> dict[int, int]:
        """Bytes each placed producer on another device adds to its copy on ``device`` if ``unit`` goes there."""
        grow: dict[int, int] = {}
        for p, nbytes in self._inbound[unit].items():
            have = self._copies.get((p, device), 0)
            if nbytes > have and self.unit_device[self._unit_of[p]] != device:
                grow[p] = nbytes - have
        return grow

    def _sent(self, unit: int, device: int) -> dict[tuple[int, int], int]:
        """Bytes each (member, other device) copy grows by if ``unit`` goes to ``device``."""
        return {(m, e): nbytes - self._copies.get((m, e), 0) for (m, e), nbytes in self._outbound[unit].items()
                if e != device and nbytes > self._copies.get((m, e), 0)}

    def _sent_per_device(self, unit: int, device: int) -> dict[int, int]:
        """Bytes of copies ``unit`` on ``device`` would send, per receiving device."""
        per_device: dict[int, int] = {}
        for (_, e), nbytes in self._sent(unit, device).items():
            per_device[e] = per_device.get(e, 0) + nbytes
        return per_device

    def _place_unit(self, unit: int, device: int) -> None:
        """Book ``unit``'s memory and its copies to and from placed units; record the copies its members will
        receive from and send to the units still unplaced."""
        self.free[device] -= self._need[unit] + max(0, self._temporary[unit] - self._device_temporary[device])
        for p, nbytes in self._unit_received(unit, device).items():
            self._book(p, device, nbytes)
        for (m, e), nbytes in self._sent(unit, device).items():
            self._book(m, e, nbytes)
        self._device_temporary[device] = max(self._device_temporary[device], self._temporary[unit])
        self.unit_device[unit] = device
        self._inbound[unit], self._outbound[unit] = {}, {}
        for m in self._members[unit]:
            for k in range(self._in_ptr[m], self._in_ptr[m + 1]):
                other = self._unit_of[self._in_src[k]]
                if self.unit_device[other] < 0:
                    _keep_largest(self._outbound[other], (self._in_src[k], device), self._in_bytes[k])
            for k in range(self._out_ptr[m], self._out_ptr[m + 1]):
                other = self._unit_of[self._out_dst[k]]
                if self.unit_device[other] < 0:
                    _keep_largest(self._inbound[other], m, self._out_bytes[k])

    def _book(self, producer: int, device: int, nbytes: int) -> None:
        self._copies[producer, device] = self._copies.get((producer, device), 0) + nbytes
        self.free[device] -= nbytes


def _keep_largest(largest: dict[Any, int], key: Any, nbytes: int) -> None:
    """Keep the largest ``nbytes`` seen for ``key`` (no entry for 0 bytes)."""
    if nbytes > largest.get(key, 0):
        largest[key] = nbytes


def place_fitting(
    graph: OpGraph, cluster: Cluster, units: Units, greedy: Callable[[MemoryLedger], np.ndarray]
) -> np.ndarray:
    """(N,) devices of a greedy pass ``greedy`` run with a :class:`MemoryLedger`; where they over-fill a device
    in ``sim-v1`` (a colocation group's later members received copies with no room left), those of ``greedy`` run
    again with a :class:`StrictMemoryLedger`. Where the ledger finds no room (it holds every output for the whole
    step, where ``sim-v1`` frees a tensor after its last consumer), the fastest one-device placement that fits in
    ``sim-v1``, with a WARNING.

    Raises:
        PlacementInfeasibleError: from either pass, when an op fits on no device it may run on, and no one-device
            placement fits either.
    """
    try:
        ledger = MemoryLedger(units, cluster, graph)
        devices = greedy(ledger)
        if min(ledger.free) >= 0 or _fits_sim_v1(graph, cluster, devices):
            return devices
        return greedy(StrictMemoryLedger(units, cluster, graph))
    except PlacementInfeasibleError as err:
        devices = _fastest_one_device_that_fits(graph, cluster)
        if devices is None:
            raise
        log.warning("%s; but sim-v1, which frees a tensor after its last consumer, fits the graph on one device: "
                    "placed there", err)
        return devices


def _fastest_one_device_that_fits(graph: OpGraph, cluster: Cluster) -> np.ndarray | None:
    """(N,) devices of the fastest :class:`~gplace.baselines.single.SingleDevice` placement whose ``sim-v1`` peak
    memory fits every device; ``None`` where none fits."""
    from gplace.baselines.single import each_device

    best: tuple[float, np.ndarray] | None = None
    for _, placed in each_device(graph, cluster):
        if not isinstance(placed, Placement):  # no op may run there
            continue
        timed = schedule(graph, cluster, placed)
        if _fits(timed, cluster) and (best is None or timed.step_time < best[0]):
            best = (timed.step_time, placed.devices)
    return None if best is None else best[1]


def _fits_sim_v1(graph: OpGraph, cluster: Cluster, devices: np.ndarray) -> bool:
    """Whether ``sim-v1``'s peak memory of the placement ``devices`` fits every device."""
    return _fits(schedule(graph, cluster, Placement.for_graph(graph, devices)), cluster)


def _fits(timed: Any, cluster: Cluster) -> bool:
    """Whether ``sim-v1``'s schedule ``timed`` peaks within every device's memory."""
    return bool((timed.peak_memory <= cluster.memory).all())


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


def graph_speeds(durations: np.ndarray, allowed: np.ndarray, speeds: np.ndarray) -> np.ndarray:
    """(D,) float64 how fast each device runs this graph, to rank devices by: the inverse of the summed duration
    there of the ops every device may run (an op's duration follows its cost for the device's kind, not only the
    device's ``speed``: a K80 runs an LSTM step 4x faster than the CPU of the same speed 1.0); ``speeds`` where no op
    may run on every device or those ops take no time.

    Shapes:
        ``durations`` (N, D), ``allowed`` (N, D) bool, ``speeds`` (D,).
    """
    everywhere = allowed.all(1)
    total = durations[everywhere].sum(0)
    with np.errstate(over="ignore", divide="ignore"):  # subnormal totals: no finite inverse, ranked by speeds
        inverse = 1.0 / total
    if not everywhere.any() or not np.all(np.isfinite(total) & (total > 0) & np.isfinite(inverse)):
        return speeds.astype(np.float64)
    return inverse


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
    """(N,) op indices by decreasing rank, ties in topological order (always a topological order).

    Ranks are compared rounded to steps of 1e-9 of the largest finite one (an infinite rank as that largest), so
    ranks equal but for rounding (``79.99999999999999`` and ``80.0``, sums of the same costs in another order) are
    ties that fall to the topological order, as HEFT's definition says (two ranks either side of a step's edge
    still compare by their noise)."""
    finite = rank[np.isfinite(rank)]
    scale = float(np.abs(finite).max(initial=0.0)) or 1.0
    key = np.round(np.clip(np.nan_to_num(rank), -scale, scale) / scale * 1e9)  # an infinite rank: the largest
    return np.lexsort((graph.topological_position, -key))


def unit_durations(units: Units, durations: np.ndarray) -> np.ndarray:
    """(U, D) float64 summed durations of each unit's members on each device.

    Shapes:
        ``durations`` (N, D).
    """
    out = np.zeros((units.num_units, durations.shape[1]))
    np.add.at(out, units.unit_of, durations)
    return out
