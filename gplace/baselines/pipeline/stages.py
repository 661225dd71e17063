"""The pipeline-stage problem every partitioner here solves, its cost model and its lower bound.

Cost model: per micro-batch, stage device ``d`` computes for ``work(d) = sum_{i on d} durations[i, d] / M``
and sends and receives ``sum (latency + bytes / M / bandwidth)`` over the edges it cuts; its *load* combines
the three (:func:`stage_time`: their maximum when transfers overlap compute, the default, else their sum),
and a pipeline of many micro-batches runs at the pace of its most loaded stage (the *bottleneck*). The sum is
:func:`gplace.pipeline.steady_state_loads` (``pipe-steady-v1``) costed per edge with the mean link from a
stage device to a later one (an edge forward in pipeline order) or to an earlier one: equal to it on uniform
links when no op feeds two ops on one other device (else an upper bound, a transfer counted once per edge), and
update ops are amortised (``duration / M``) instead of left out.
An edge between two update ops is sent once per mini-batch (as in ``pipe-v3``), so it is amortised too:
``(latency + bytes / bandwidth) / M`` per micro-batch.
The placers minimise the bottleneck subject to pins, colocation groups and memory: an op occupies its
persistent memory plus, for a forward op (or one without a phase), the activations its stage holds until their
backward (:func:`stage_memory`), ``ceil(bytes / M)`` a micro-batch held: all M under ``gpipe``, and under ``1f1b``
on stage ``s`` of ``S`` the ``min(M, S - s)`` in flight there (:func:`held_microbatches`; ``S`` counts the devices
off the stages that run forward ops, and where a backward op is not in its forward op's colocation group, every
stage holds M, as ``pipe-v3`` keeps a micro-batch until its backward ops end wherever they run). That static
model leaves out ``pipe-v3``'s temporary memory, so a split may still run out of memory in ``pipe-v3``
(``gplace.place`` measures it and says so), or be refused where one would fit there.

A *unit* is a colocation group or a lone op. Units that may run on a stage device are put in pipeline order
(:func:`pipeline_order`): a topological order of the units (edges inside a cycle of units, such as layers
colocated with their backward ops, left out) that follows the topological position of each unit's first member
where the edges allow, so a buffer whose in-place writes run late follows what they write. Units that no stage
device may run (e.g. ops pinned to the CPU when the stages are GPUs) stay on their fastest allowed device with
room and their transfers are charged to the stage they talk to.
The partitioners see units through *blocks*: contiguous runs of units in that order, so large graphs are
coarsened to a bounded number of blocks of about equal compute (:meth:`StageProblem.blocks`).
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.sparse import coo_array
from scipy.sparse.csgraph import connected_components

from gplace.baselines._common import PlacementInfeasibleError, Units, build_units, unit_durations
from gplace.ir import Cluster, OpGraph
from gplace.ir.graph import FORWARD, UPDATE, csr
from gplace.ir.placement import check_graph_and_cluster
from gplace.pipeline.simulator import SCHEDULES, check_microbatches, microbatch_activations, ops_that_run

log = logging.getLogger(__name__)

ALL_ORDERS_UP_TO = 4
"""Most stage devices of unlike speeds whose every order (4! = 24) :meth:`StageProblem.orders` gives."""


def pipeline_lower_bound(graph: OpGraph, cluster: Cluster) -> float:
    """Seconds per mini-batch no pipeline can beat: ``max(total work / devices, largest op)``.

    Work is each op's time on its fastest allowed device; devices are those some op may run on. Every
    micro-batch runs every op once, so over a mini-batch the busiest device works at least the average,
    and the slowest op cannot be split. Transfers only add time. (Up to rounding: ``pipe-v3`` adds ``cost / M``
    ``M`` times, which may come out an ulp below ``cost``.)

    Raises:
        TypeError: ``graph`` or ``cluster`` is not gplace's.
    """
    check_graph_and_cluster(graph, cluster)
    if graph.num_ops == 0:
        return 0.0
    allowed = graph.allowed_devices(cluster)
    fastest = np.where(allowed, graph.durations(cluster), np.inf).min(1)
    usable = int(allowed.any(0).sum())
    return float(max(fastest.sum() / usable, fastest.max()))


def stage_memory(graph: OpGraph, microbatches: int = 1, held: int | None = None) -> np.ndarray:
    """(N,) int64 bytes an op occupies on a stage device in the static model: its persistent memory plus, for a
    forward op (or one without a phase), the activations ``pipe-v3`` holds until their backward (a backward or
    update op's output is short-lived there): ``held x ceil(output / microbatches)`` where a stage holds ``held``
    micro-batches at once (``M`` under GPipe: a byte or so over the whole output where M does not divide it, as
    ``pipe-v3`` counts), its whole output where ``held`` is ``None``."""
    output = graph.output_bytes
    if held is not None:
        output = held * -(-output // microbatches)
    forward = graph.phase_codes() == FORWARD
    return graph.persistent_memory + np.where(forward, output, 0)


def held_microbatches(schedule: str, microbatches: int, stages: int) -> np.ndarray:
    """(S,) int64 the most micro-batches stage ``s`` of a contiguous split holds at once in ``pipe-v3``: ``M`` under
    ``gpipe``, ``min(M, S - s)`` under ``1f1b`` (its in-flight bound; a split that leaves stages empty only lowers
    it).

    Raises:
        ValueError: ``schedule`` is not one of :data:`~gplace.pipeline.simulator.SCHEDULES`.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if schedule == "gpipe":
        return np.full(stages, microbatches, dtype=np.int64)
    return np.minimum(microbatches, stages - np.arange(stages, dtype=np.int64))


def fits_1f1b(graph: OpGraph, cluster: Cluster, devices: np.ndarray, microbatches: int) -> bool:
    """Whether a placement fits every device's memory in the static model (:func:`stage_memory`) with the
    micro-batches ``pipe-v3``'s 1F1B lets each device hold: ``min(M, S - k)`` on its stage ``k`` (devices ranked by
    their first forward op that runs, in topological order), M where a backward op of its forward ops runs
    elsewhere (its gate does not wait for those). The partitioners' bound ranks stages by the split's order, which
    a weight at a layer's head or a split over parallel branches can reorder.

    Shapes:
        ``devices`` (N,) int, the device of each op.
    """
    m, nd = microbatches, cluster.num_devices
    forward = graph.phase_codes() == FORWARD
    runs = forward & ops_that_run(graph, cluster)
    first = np.full(nd, graph.num_ops)
    np.minimum.at(first, devices[runs], graph.topological_position[runs])
    ranked = np.argsort(first, kind="stable")[: int((first < graph.num_ops).sum())]
    held = np.full(nd, m, dtype=np.int64)
    held[ranked] = np.minimum(m, ranked.size - np.arange(ranked.size))
    grad_of = np.asarray(graph.grad_of or [-1] * graph.num_ops, dtype=np.int64)
    backward = np.flatnonzero(grad_of >= 0)
    apart = devices[backward] != devices[grad_of[backward]]
    held[np.unique(devices[grad_of[backward[apart]]])] = m
    need, activations = np.zeros(nd, dtype=np.int64), np.zeros(nd, dtype=np.int64)
    np.add.at(need, devices, graph.persistent_memory)  # whole bytes: float weights lose them past 2**53
    np.add.at(activations, devices, microbatch_activations(graph, m))
    return bool((need + held * activations <= cluster.memory).all())


def check_kind(kind: object) -> str | None:
    """``kind`` if it is a device kind (a non-empty string) or ``None``.

    Raises:
        ValueError: anything else (e.g. a number passed where ``microbatches`` was meant).
    """
    if kind is not None and not (isinstance(kind, str) and kind):
        raise ValueError(f"kind must be a device kind (a non-empty string such as 'gpu') or None, got {kind!r}")
    return kind


def stage_devices(cluster: Cluster, kind: str | None, warn: bool = True) -> np.ndarray:
    """Indices of the devices that hold stages: those of ``kind``, or every device if there are none (or no kind),
    with a warning naming the cluster's kinds in the first case (a misspelt kind would otherwise go unnoticed;
    ``warn=False`` where the caller's partitioner has already warned)."""
    chosen = [d for d, k in enumerate(cluster.kinds) if kind is None or k == kind]
    if not chosen and warn:
        log.warning("cluster %r has no device of kind %r (kinds: %s): the stages use every device", cluster.name,
                    kind, ", ".join(sorted(set(cluster.kinds))))
    return np.array(chosen or range(cluster.num_devices), dtype=np.int64)


def _between_update_ops(graph: OpGraph) -> np.ndarray:
    """(E,) bool: the edges from an update op to an update op (``pipe-v3`` sends them once per mini-batch)."""
    update = graph.phase_codes() == UPDATE
    return update[graph.edge_index[0]] & update[graph.edge_index[1]]


def pipeline_order(graph: OpGraph, units: Units) -> np.ndarray:
    """(U,) every unit id in pipeline order: a topological order of the units (graph edges contracted) that takes,
    among the units ready, the one whose first member comes first in ``graph.topological_order``.

    Edges inside a strongly connected set of units (e.g. layers whose forward and backward ops are colocated)
    cannot all go forward and are left out. A unit whose first member comes early but whose other members run
    late (a buffer with its in-place writes) follows the units it needs. When ordering the units by their first
    member already keeps every other edge, that is the order; O(N + E log N).
    """
    first = graph.first_positions(units.unit_of, units.num_units)
    src, dst = _between_components(graph, units)
    if (first[src] < first[dst]).all():
        return np.argsort(first)  # first positions are distinct
    return _smallest_first(first, src, dst)


def _between_components(graph: OpGraph, units: Units) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) unit ids of the edges between two strongly connected components of the unit graph."""
    src, dst = units.unit_of[graph.edge_index[0]], units.unit_of[graph.edge_index[1]]
    src, dst = src[src != dst], dst[src != dst]
    n = units.num_units
    adjacency = coo_array((np.ones(src.size), (src, dst)), shape=(n, n))
    _, component = connected_components(adjacency, directed=True, connection="strong")
    keep = component[src] != component[dst]
    return src[keep], dst[keep]


def _smallest_first(key: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """(n,) a topological order of the DAG ``src -> dst`` on ``n = key.size`` nodes (Kahn's algorithm), taking the
    ready node of smallest ``key`` first."""
    ptr, succ, _ = csr(src, dst, key.size)
    ptr_l, succ_l, key_l = ptr.tolist(), succ.tolist(), key.tolist()
    indegree = np.bincount(dst, minlength=key.size).tolist()
    ready = [(k, u) for u, k in enumerate(key_l) if indegree[u] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        u = heapq.heappop(ready)[1]
        order.append(u)
        for v in succ_l[ptr_l[u]:ptr_l[u + 1]]:
            indegree[v] -= 1
            if indegree[v] == 0:
                heapq.heappush(ready, (key_l[v], v))
    return np.array(order, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class Blocks:
    """Contiguous runs of pipelined units, in order, with what a stage needs to know about them.

    Shapes:
        ``bounds`` (B+1,) positions into :attr:`StageProblem.order`; ``cost`` (B, S) seconds per micro-batch
        on each stage device; ``memory`` (B, S) int64 bytes on each; ``allowed`` (B, S) bool; ``transfer``
        (B, B) seconds per micro-batch of the edges from block a to block b (0 on the diagonal); ``forward`` (B, B)
        bool, an edge from an earlier block a to a later block b (the precedence the stages keep).
    """

    bounds: np.ndarray
    cost: np.ndarray
    memory: np.ndarray
    allowed: np.ndarray
    transfer: np.ndarray
    forward: np.ndarray

    @property
    def num_blocks(self) -> int:
        """Number of blocks B."""
        return int(self.memory.shape[0])

    overlap: bool
    """Whether a stage's transfers overlap its compute (see :func:`stage_time`)."""

    @cached_property
    def sent(self) -> np.ndarray:
        """(B,) seconds of the transfers out of each block."""
        return self.transfer.sum(1)

    @cached_property
    def received(self) -> np.ndarray:
        """(B,) seconds of the transfers into each block."""
        return self.transfer.sum(0)


def stage_time(work: np.ndarray, sent: np.ndarray, received: np.ndarray, overlap: bool) -> np.ndarray:
    """Seconds per micro-batch of a stage: ``max(work, sent, received)`` when transfers overlap compute (links
    are their own resources, as in ``pipe-v3`` and PipeDream's planner), else ``work + sent + received`` (the
    device also drives its transfers, as in ``pipe-steady-v1``)."""
    if overlap:
        return np.maximum(np.maximum(work, sent), received)
    return work + sent + received


class StageProblem:
    """Units of ``graph`` in pipeline order and their costs on the stage devices of ``cluster``.

    Transfers are costed with the mean bandwidth and latency between distinct stage devices; for contiguous
    splits, from a stage device to a later one (an edge forward in pipeline order) or to an earlier one
    (backward), which differ on one-way links. So the partitioners' objective (:meth:`bottleneck`) is exact on
    clusters with uniform links, and for contiguous splits on two stage devices with one-way links.

    Args:
        order: stage ``s`` runs on stage device ``order[s]`` (a permutation of ``range(S)`` over the stage
            devices in index order; where they differ, a contiguous split depends on it: :meth:`orders`).
            (default: ``None``, index order)
        contiguous: the splits solved keep the pipeline order (an edge forward in it goes to a later stage);
            ``False`` for any assignment (the ILP's), each edge costed with the mean link of both ways.
            (default: ``True``)
        schedule: the schedule whose memory a split must fit (:func:`held_microbatches`): ``"gpipe"`` holds every
            micro-batch's activations on every stage, so its splits fit under ``"1f1b"`` too; ``"1f1b"`` lets
            later stages of a contiguous split hold fewer (any assignment, ``contiguous=False``, is held to
            ``"gpipe"``'s: its stages' order is not known). (default: ``"gpipe"``)
        join_gradients: a backward op joins its forward op's unit (:func:`~gplace.baselines._common.build_units`),
            so no split separates them. (default: ``False``)

    Raises:
        GraphError: an op, or a colocation group, may run on no device of the cluster.
        ValueError: ``microbatches`` is not an integer >= 1, or ``schedule`` is unknown.
    """

    def __init__(self, graph: OpGraph, cluster: Cluster, *, kind: str | None = "gpu", microbatches: int = 1,
                 overlap: bool = True, order: Sequence[int] | None = None, contiguous: bool = True,
                 schedule: str = "gpipe", join_gradients: bool = False) -> None:
        microbatches = check_microbatches(microbatches)
        held_microbatches(schedule, microbatches, 0)  # checks the schedule
        self.graph, self.cluster, self.microbatches, self.overlap = graph, cluster, microbatches, overlap
        self.schedule = schedule if contiguous else "gpipe"
        self.contiguous = contiguous
        devices = stage_devices(cluster, kind, warn=order is None)
        self.devices = devices if order is None else devices[_permutation(order, devices.size)]
        self.units = build_units(graph, cluster, join_gradients=join_gradients)
        allowed = self.units.allowed[:, self.devices]
        piped = allowed.any(1)
        memory = np.zeros(self.units.num_units, dtype=np.int64)
        np.add.at(memory, self.units.unit_of, stage_memory(graph))
        self.fixed_device = self._fixed_devices(piped, memory)
        order = pipeline_order(graph, self.units)
        self.order = order[piped[order]]
        """(P,) unit ids of the pipelined units, in pipeline order."""
        self.position = np.full(self.units.num_units, -1, dtype=np.int64)
        self.position[self.order] = np.arange(self.order.size)
        durations = unit_durations(self.units, graph.durations(self.cluster))[:, self.devices]
        self.cost = np.where(allowed, durations, 0.0)[self.order] / microbatches
        """(P, S) seconds per micro-batch of each pipelined unit on each stage device (fixed-op transfers included)."""
        self.allowed = allowed[self.order]
        self.memory = self._unit_memory()[self.order]
        """(P, S) int64 bytes each pipelined unit occupies on each stage device (:func:`stage_memory`)."""
        self.capacity = cluster.memory[self.devices]
        self.unit_src, self.unit_dst, self.unit_seconds = self._unit_edges()
        """(E',) the graph's edges between pipelined units: src and dst positions, seconds per micro-batch."""

    def _unit_memory(self) -> np.ndarray:
        """(U, S) int64 bytes of each unit on each stage device, as many micro-batches held as :meth:`_held` says."""
        held = self._held()
        columns = {}
        for h in np.unique(held).tolist():
            columns[h] = np.zeros(self.units.num_units, dtype=np.int64)
            np.add.at(columns[h], self.units.unit_of, stage_memory(self.graph, self.microbatches, h))
        return np.stack([columns[h] for h in held.tolist()], 1).reshape(self.units.num_units, self.num_stages)

    def _held(self) -> np.ndarray:
        """(S,) the most micro-batches each stage device holds at once: the schedule's bound
        (:func:`held_microbatches`), counting among the stages the devices off the stages that run forward ops (a
        CPU-pinned layer is a stage of ``pipe-v3``'s), where every backward op is in its forward op's unit; else M.

        ``pipe-v3`` keeps a micro-batch in flight on a device until the backward ops of its forward ops there end,
        wherever they run, while 1F1B's gate waits only for instances on the device: a stage whose backward ops run
        elsewhere held up to M (5 of 8 micro-batches where the bound said 4: out of memory)."""
        m = self.microbatches
        grad_of = np.asarray(self.graph.grad_of or [-1] * self.graph.num_ops, dtype=np.int64)
        backward = np.flatnonzero(grad_of >= 0)
        unit_of = self.units.unit_of
        if self.schedule == "gpipe" or (unit_of[backward] != unit_of[grad_of[backward]]).any():
            return np.full(self.num_stages, m, dtype=np.int64)
        forward = ops_that_run(self.graph, self.cluster) & (self.graph.phase_codes() == FORWARD)
        off_stages = self.fixed_device[unit_of[forward]]
        extra = np.unique(off_stages[off_stages >= 0]).size
        return held_microbatches(self.schedule, m, self.num_stages + extra)[:self.num_stages]

    def first_op(self, unit: int) -> str:
        """The name of unit ``unit``'s first op (``unit`` a unit id, as in ``units.unit_of``), for messages."""
        return self.graph.op_names[int(np.flatnonzero(self.units.unit_of == unit)[0])]

    def named_unit(self, unit: int) -> str:
        """``op 'x'``, or ``op 'x' (with the ops kept with it)`` where unit ``unit`` (a unit id) holds more ops (its
        colocation group, its backward ops)."""
        group = " (with the ops kept with it)" if int(self.units.size[unit]) > 1 else ""
        return f"op {self.first_op(unit)!r}{group}"

    def memory_shortfall(self) -> str | None:
        """Why no placement of the pipelined units fits the stage devices' memory, where memory alone says so: one
        unit larger than every device, or all of them larger than all devices together; else ``None``."""
        capacity = [int(c) for c in self.capacity]
        fewest = self.memory.min(1)  # a cluster has at least one stage device
        some = "" if (self.memory == self.memory[:, :1]).all() else " at least"  # bytes differ by stage (1F1B)
        too_large = np.flatnonzero((self.memory > self.capacity).all(1))
        if too_large.size:
            unit = int(too_large[0])
            return (f"{self.named_unit(int(self.order[unit]))} needs{some} {int(fewest[unit]):,} bytes, more than any "
                    f"stage device holds (capacities {capacity})")
        if int(fewest.sum()) > sum(capacity):
            return (f"the ops need{some} {int(fewest.sum()):,} bytes in all, the stage devices hold "
                    f"{sum(capacity):,} together (capacities {capacity})")
        return None

    @property
    def num_stages(self) -> int:
        """Number of stage devices S."""
        return int(self.devices.size)

    @property
    def num_units(self) -> int:
        """Number of pipelined units P."""
        return int(self.order.size)

    def _fixed_devices(self, piped: np.ndarray, memory: np.ndarray) -> np.ndarray:
        """(U,) device of each unit that no stage device may run (its fastest allowed device with room, units in
        order), -1 for pipelined units.

        Raises:
            PlacementInfeasibleError: such a unit fits none of its devices beside the units placed before it.
        """
        time = np.where(self.units.allowed, unit_durations(self.units, self.graph.durations(self.cluster)), np.inf)
        device = np.full(self.units.num_units, -1, dtype=np.int64)
        free = self.cluster.memory.astype(np.int64)
        for u in np.flatnonzero(~piped).tolist():
            order = np.argsort(time[u], kind="stable")
            room = [int(d) for d in order if np.isfinite(time[u, d]) and memory[u] <= free[d]]
            if not room:
                raise PlacementInfeasibleError(
                    f"{self.named_unit(u)}, which no stage device may run, needs {int(memory[u])} "
                    f"bytes (persistent + forward outputs) and fits none of its devices beside the ops placed there "
                    f"before it (free bytes: {dict(zip(self.cluster.device_names, free.tolist(), strict=True))})")
            device[u] = room[0]
            free[room[0]] -= memory[u]
        return device

    def _unit_edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Edges between pipelined units as (src position, dst position, seconds); fixed-op edges join ``cost``,
        and those between units of which one is fixed are kept for :meth:`fixed_reach`."""
        graph, units = self.graph, self.units
        d = self.devices
        ua, ub = units.unit_of[graph.edge_index[0]], units.unit_of[graph.edge_index[1]]
        pa, pb = self.position[ua], self.position[ub]
        later = pa < pb
        per_byte, latency = (np.where(later, *pair) for pair in self._mean_links())
        # a transfer per micro-batch of bytes / M; between update ops one per mini-batch, amortised over M
        once = _between_update_ops(graph)
        nbytes = graph.edge_bytes / np.where(once, 1, self.microbatches)
        amortised = np.where(once, self.microbatches, 1)
        seconds = (latency + nbytes * per_byte) / amortised
        between = (ua != ub) & (pa >= 0) & (pb >= 0)
        touching = (ua != ub) & ((pa < 0) | (pb < 0))  # only paths through fixed units matter there
        self._fixed_edges = (ua[touching], ub[touching])
        for mine, other, sends in ((pa, ub, True), (pb, ua, False)):  # a pipelined unit talking to a fixed one
            talks = (mine >= 0) & (self.position[other] < 0)             # pays the transfer, in its direction
            fixed = self.fixed_device[other[talks]]
            for s, dev in enumerate(d):  # 0 where the fixed op sits on this stage device (infinite bandwidth)
                src, dst = (dev, fixed) if sends else (fixed, dev)
                link = self.cluster.latency[src, dst] + nbytes[talks] / self.cluster.bandwidth[src, dst]
                np.add.at(self.cost[:, s], mine[talks], link / amortised[talks])
        return pa[between], pb[between], seconds[between].astype(np.float64)

    def orders(self) -> list[tuple[int, ...]]:
        """Orders of the stage devices (for ``order=``, index order first) worth solving: the index order alone
        for any assignment (``contiguous=False``: the model's costs are the same in any order) or where the stage
        devices are alike (same costs, pins and memory; links of one speed both ways, which the model costs by
        their mean); else every order of up to :data:`ALL_ORDERS_UP_TO` stage devices (so the split does not depend
        on how the cluster lists them: four GPUs of four speeds gave a bottleneck 14 % apart listed two ways), and
        beyond, four: the index order, its reverse, and the devices by their speed on this graph, fastest and
        slowest first (in the first, the larger memory first among equally fast ones: devices of one speed and
        several memory sizes were tried only as listed and reversed, so the split depended on the listing; a CPU
        that early ops are pinned to comes first in the last)."""
        index = tuple(range(self.num_stages))
        if not self.contiguous or self._alike():
            return [index]
        if self.num_stages <= ALL_ORDERS_UP_TO:
            return list(itertools.permutations(index))
        fastest = tuple(np.lexsort((-self.capacity, self.cost.sum(0))).tolist())
        return list(dict.fromkeys([index, index[::-1], fastest, fastest[::-1]]))

    def _alike(self) -> bool:
        """Whether the stage devices are interchangeable in the model: every unit's cost and pins the same on each,
        the same memory, and no link faster one way than the other."""
        return bool((self.cost == self.cost[:, :1]).all() and (self.allowed == self.allowed[:, :1]).all()
                    and (self.capacity == self.capacity[0]).all() and not self.one_way_links)

    @cached_property
    def one_way_links(self) -> bool:
        """Whether a link between two stage devices is faster one way than the other (bandwidth or latency)."""
        d = np.ix_(self.devices, self.devices)
        bandwidth, latency = self.cluster.bandwidth[d], self.cluster.latency[d]
        return not (np.array_equal(bandwidth, bandwidth.T) and np.array_equal(latency, latency.T))

    def _mean_links(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """Mean seconds per byte and mean latency, each as (to a later stage device, to an earlier one)."""
        d = self.devices
        if d.size < 2:
            return (0.0, 0.0), (0.0, 0.0)
        inverse, latency = 1.0 / self.cluster.bandwidth[np.ix_(d, d)], self.cluster.latency[np.ix_(d, d)]
        if not (self.contiguous and self.one_way_links):
            off = ~np.eye(d.size, dtype=bool)
            per_byte, mean_latency = float(np.mean(inverse[off])), float(np.mean(latency[off]))
            return (per_byte, per_byte), (mean_latency, mean_latency)
        later, earlier = np.triu_indices(d.size, 1), np.tril_indices(d.size, -1)
        return ((float(inverse[later].mean()), float(inverse[earlier].mean())),
                (float(latency[later].mean()), float(latency[earlier].mean())))

    def fixed_reach(self, label: np.ndarray) -> tuple[np.ndarray, list[int]]:
        """Pipelined units joined only through units off the stages, such as an op pinned to the CPU between two
        GPU layers: the later one needs the earlier one's output, so the stages keep that order as if an edge
        (with no transfer: the fixed unit's own edges carry it) joined them. Without it, the exact DP split a chain
        around a pinned op into stages that run back and forth between the devices.

        Returns ``(src, reach)``: for every pipelined unit (position ``src[i]``) with an edge into a fixed unit, the
        set of ``label[t]`` (a bitset, bit ``label[t]``) over the pipelined units ``t`` reached from that fixed unit
        through fixed units only (one row per source and strongly connected set of fixed units it feeds). The
        pairs ``(src[i], t)`` are those joined through fixed units. Reach is propagated over the strongly
        connected sets of fixed units in reverse topological order: O(F + E) big-integer operations of L bits
        (F fixed units, E edges touching them, L = ``label.max() + 1``), no pair materialised.

        Shapes:
            ``label`` (P,) int >= 0, per position; ``src`` (R,) int64.
        """
        ua, ub = self._fixed_edges
        fixed = self.position < 0
        ids = np.flatnonzero(fixed)
        if ids.size == 0 or ua.size == 0 or self.num_units == 0:
            return np.zeros(0, dtype=np.int64), []
        index = np.full(self.units.num_units, -1, dtype=np.int64)
        index[ids] = np.arange(ids.size)
        both = fixed[ua] & fixed[ub]
        fa, fb = index[ua[both]], index[ub[both]]
        adjacency = coo_array((np.ones(fa.size), (fa, fb)), shape=(ids.size, ids.size))
        count, comp = connected_components(adjacency, directed=True, connection="strong")
        ca, cb = comp[fa], comp[fb]
        ca, cb = ca[ca != cb], cb[ca != cb]
        reach = [0] * count
        out = fixed[ua] & ~fixed[ub]
        for c, t in zip(comp[index[ua[out]]].tolist(), label[self.position[ub[out]]].tolist(), strict=True):
            reach[c] |= 1 << t
        ptr, succ, _ = csr(ca, cb, count)
        ptr_l, succ_l = ptr.tolist(), succ.tolist()
        for c in reversed(_smallest_first(np.arange(count), ca, cb).tolist()):  # successors first
            for nxt in succ_l[ptr_l[c]:ptr_l[c + 1]]:
                reach[c] |= reach[nxt]
        into = ~fixed[ua] & fixed[ub]
        keys = np.unique(self.position[ua[into]] * count + comp[index[ub[into]]])
        keep = [i for i, c in enumerate((keys % count).tolist()) if reach[c]]
        return keys[keep] // count, [reach[c] for c in (keys[keep] % count).tolist()]

    def _forward_through_fixed(self, forward: np.ndarray, block_of: np.ndarray) -> None:
        """Mark in ``forward`` (B, B) the pairs of blocks ``a < b`` joined through fixed units
        (:meth:`fixed_reach`), in place; O(F + E) operations on B-bit integers, then B rows unpacked."""
        src, reach = self.fixed_reach(block_of)
        if not reach:
            return
        b = forward.shape[0]
        rows = [0] * b
        for a, r in zip(block_of[src].tolist(), reach, strict=True):
            rows[a] |= r >> (a + 1) << (a + 1)  # later blocks only
        for a, r in enumerate(rows):
            if r:
                forward[a] |= _bits(r, b)

    @cached_property
    def _through_fixed(self) -> tuple[np.ndarray, np.ndarray]:
        """Pairs (a, b) of pipelined units (positions, ``a != b``, sorted) joined through fixed units
        (:meth:`fixed_reach`), built on first use: as many as the pairs (sources x targets of a fixed unit)."""
        p = self.num_units
        src, reach = self.fixed_reach(np.arange(p))
        keys = [np.int64(s) * p + t[t != s] for s, t in
                zip(src.tolist(), (np.flatnonzero(_bits(r, p)) for r in reach), strict=True)]
        keys = np.unique(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.int64)
        return keys // max(p, 1), keys % max(p, 1)

    @cached_property
    def edge_src(self) -> np.ndarray:
        """(E,) src positions of :attr:`unit_src`'s edges, then of the pairs joined through fixed units (a cost
        of 0 s, as edges that keep the order), built on first use (the ILP and the benchmark's contiguity check
        read them; the partitioners read :meth:`blocks`)."""
        return np.concatenate([self.unit_src, self._through_fixed[0]])

    @cached_property
    def edge_dst(self) -> np.ndarray:
        """(E,) dst positions, as :attr:`edge_src`."""
        return np.concatenate([self.unit_dst, self._through_fixed[1]])

    @cached_property
    def edge_seconds(self) -> np.ndarray:
        """(E,) seconds per micro-batch, as :attr:`edge_src` (0 for the pairs joined through fixed units)."""
        return np.concatenate([self.unit_seconds, np.zeros(self._through_fixed[0].size)])

    # ------------------------------------------------------------------ blocks
    def blocks(self, max_blocks: int | None = None) -> Blocks:
        """The units coarsened into at most ``max_blocks`` contiguous runs of about equal mean cost (``None``: one
        block per unit)."""
        p = self.num_units
        if max_blocks is None or max_blocks >= p:
            bounds = np.arange(p + 1)
        else:
            weight = self.cost.mean(1) + 1e-12
            cum = np.concatenate([[0.0], np.cumsum(weight)])
            targets = cum[-1] * np.arange(1, max_blocks) / max_blocks
            cuts = np.searchsorted(cum, targets)
            bounds = np.unique(np.concatenate([[0], np.clip(cuts, 1, p - 1), [p]]))
        return self._blocks(bounds)

    def _blocks(self, bounds: np.ndarray) -> Blocks:
        b = bounds.size - 1
        block_of = np.repeat(np.arange(b), np.diff(bounds))
        cost = np.add.reduceat(self.cost, bounds[:-1], axis=0) if b else np.zeros((0, self.num_stages))
        memory = np.add.reduceat(self.memory, bounds[:-1], axis=0) if b else np.zeros((0, self.num_stages), np.int64)
        allowed = np.logical_and.reduceat(self.allowed, bounds[:-1], axis=0) if b else np.zeros((0, 1), bool)
        transfer = np.zeros((b, b))
        bs, bd = block_of[self.unit_src], block_of[self.unit_dst]
        np.add.at(transfer, (bs, bd), self.unit_seconds)
        np.fill_diagonal(transfer, 0.0)
        forward = np.zeros((b, b), dtype=bool)
        forward[bs[bs < bd], bd[bs < bd]] = True
        self._forward_through_fixed(forward, block_of)
        return Blocks(bounds, cost, memory, allowed, transfer, forward, self.overlap)

    # ------------------------------------------------------------------ placements
    def devices_for_units(self, unit_stage: np.ndarray) -> np.ndarray:
        """(N,) device index per op (stage s runs on ``devices[s]``), from the stage of every pipelined unit."""
        unit_device = self.fixed_device.copy()
        unit_device[self.order] = self.devices[np.asarray(unit_stage, dtype=np.int64)]
        return unit_device[self.units.unit_of]

    def stage_loads(self, unit_stage: np.ndarray) -> np.ndarray:
        """(S,) seconds per micro-batch of each stage under the model above, from the stage of every pipelined unit.

        Shapes:
            ``unit_stage`` (P,) int, in pipeline order.
        """
        unit_stage = np.asarray(unit_stage, dtype=np.int64)
        s = self.num_stages
        work = np.bincount(unit_stage, weights=self.cost[np.arange(self.num_units), unit_stage], minlength=s)
        a, b = unit_stage[self.unit_src], unit_stage[self.unit_dst]  # pairs through fixed units cost nothing
        cut = a != b
        sent = np.bincount(a[cut], weights=self.unit_seconds[cut], minlength=s)
        received = np.bincount(b[cut], weights=self.unit_seconds[cut], minlength=s)
        return stage_time(work, sent, received, self.overlap)

    def bottleneck(self, unit_stage: np.ndarray) -> float:
        """The largest of :meth:`stage_loads`."""
        return float(self.stage_loads(unit_stage).max(initial=0.0))

    def unit_stages(self, blocks: Blocks, block_stage: np.ndarray) -> np.ndarray:
        """(P,) stage of every pipelined unit, from the stage of every block."""
        return np.repeat(np.asarray(block_stage, dtype=np.int64), np.diff(blocks.bounds))


def _permutation(order: Sequence[int], size: int) -> np.ndarray:
    """``order`` as an index array, checked to be a permutation of ``range(size)``.

    Raises:
        ValueError: it is not.
    """
    perm = np.asarray(order, dtype=np.int64)
    if perm.shape != (size,) or not np.array_equal(np.sort(perm), np.arange(size)):
        raise ValueError(f"order must be a permutation of range({size}) (the stage devices), got {list(order)!r}")
    return perm


def _bits(mask: int, n: int) -> np.ndarray:
    """(n,) bool, bit ``i`` of the non-negative integer ``mask`` (below ``2 ** n``) at ``i``."""
    raw = np.frombuffer(mask.to_bytes((n + 7) // 8, "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[:n].astype(bool)
