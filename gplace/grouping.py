"""Co-location groups: coarsen an op graph so a sequence policy places groups, not ops (Mirhoseini et al. 2017).

:func:`group_ops` builds the groups in four steps:

a. ops sharing a colocation name form one group, and so do the two ends of each edge given as uncuttable
   (:func:`uncuttable_edges`: its transfer alone outlasts the whole graph on one device);
b. an op (or colocation group) whose outputs all go to one op is merged into that op's group (the paper's
   "merge an op into its only consumer");
c. while more than ``max_groups`` remain, two groups adjacent in the group order are merged, preferring pairs
   whose combined cost stays under the average, then pairs joined by an edge, then the smallest combined cost.

With ``memory_cap``, steps b and c make no group whose ops' memory (persistent plus outputs) exceeds it, so that a
graph too large for one device keeps groups a split can place (:func:`memory_cap`).

Groups are ordered topologically, earliest member first among ready groups. Colocation can tie ops from both
ends of a path into one group (a variable and its optimiser update, around the whole forward and backward pass),
so the group graph may have cycles: the order then breaks each cycle at its earliest group, and the coarse graph
keeps only the edges that point forward in the order, which makes it a DAG whose identity order is topological.
The runtime measures the original graph, which keeps every edge.

No step merges ops that cannot share a device kind (conflicting pins, or per-kind costs with no kind in common),
except colocation, which the graph itself requires.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from gplace.baselines._common import op_memory
from gplace.defaults import MAX_GROUPS
from gplace.ir import Cluster, GraphError, InvalidPlacementError, OpGraph, Placement
from gplace.ir.errors import check_flags
from gplace.ir.frozen import ReadOnlyArrays
from gplace.ir.placement import check_op_graph


@dataclass(frozen=True, eq=False)
class Grouping(ReadOnlyArrays):
    """A partition of a graph's ops into groups, and the coarse graph with one op per group.

    Group ids are 0-based and number the groups in a topological order of :attr:`graph`.
    """

    op_group: np.ndarray = field(repr=False)
    """(N,) int64 group id of each op of :attr:`original`."""
    num_groups: int
    """Number of groups G."""
    graph: OpGraph
    """The coarse graph: op ``g`` stands for group ``g`` (summed costs, memory and bytes; aggregated edges)."""
    original: OpGraph = field(repr=False)
    """The graph whose ops were grouped."""

    def __post_init__(self) -> None:
        arr = np.asarray(self.op_group, dtype=np.int64).copy()
        arr.setflags(write=False)
        object.__setattr__(self, "op_group", arr)
        if arr.shape != (self.original.num_ops,):
            raise ValueError(f"op_group has shape {arr.shape}, expected ({self.original.num_ops},)")
        if self.graph.num_ops != self.num_groups:
            raise ValueError(f"coarse graph has {self.graph.num_ops} ops but num_groups is {self.num_groups}")
        if arr.size and (arr.min() < 0 or arr.max() >= self.num_groups):
            raise ValueError(f"op_group must lie in [0, {self.num_groups}), got [{arr.min()}, {arr.max()}]")

    def expand(self, group_devices: np.ndarray) -> Placement:
        """The placement of :attr:`original` that puts every op on its group's device.

        Shapes:
            group_devices (G,) int, device index per group id; returned ``Placement.devices`` (N,) int64.
        """
        gd = np.asarray(group_devices)
        if gd.shape != (self.num_groups,):
            raise ValueError(f"group_devices has shape {gd.shape}, expected ({self.num_groups},)")
        return Placement.for_graph(self.original, gd[self.op_group])


def group_ops(graph: OpGraph, max_groups: int | None = MAX_GROUPS, *, merge_consumers: bool = True,
              uncuttable: np.ndarray | None = None, memory_cap: float | None = None) -> Grouping:
    """Group the ops of ``graph`` as in the paper (see the module docstring for the steps).

    Args:
        graph: the op graph.
        max_groups: merge adjacent groups until at most this many remain; ``None`` keeps steps a-c only
            (default: 256). Fewer may be impossible when adjacent groups need different device kinds or would
            hold more than ``memory_cap``; the result then has more groups.
        merge_consumers: run step b, merging each op into its only consumer (default: ``True``).
        uncuttable: edges whose two ends share a group where their device kinds allow (step a), e.g.
            :func:`uncuttable_edges` (default: none).
        memory_cap: the most bytes steps b and c let a group hold, e.g. :func:`memory_cap` (default: none).

    Shapes:
        uncuttable (E,) bool by ``graph.edge_index`` column; returned ``Grouping.op_group`` (N,) int64.

    Raises:
        ValueError: ``max_groups`` or ``memory_cap`` is out of range, or ``merge_consumers`` is no bool.
        TypeError: ``graph`` is not an :class:`~gplace.ir.OpGraph`.
    """
    check_op_graph(graph)
    check_flags("group_ops", merge_consumers=merge_consumers)
    if max_groups is not None and (not isinstance(max_groups, int | np.integer) or isinstance(max_groups, bool)
                                   or max_groups < 1):
        raise ValueError(f"max_groups must be a whole number >= 1 or None, got {max_groups!r}")
    if memory_cap is not None and (isinstance(memory_cap, bool) or not isinstance(memory_cap, int | float | np.number)
                                   or not memory_cap > 0):
        raise ValueError(f"memory_cap must be a number of bytes > 0 or None, got {memory_cap!r}")
    cap = np.inf if memory_cap is None else float(memory_cap)
    memory = op_memory(graph).astype(np.float64)
    uf = _UnionFind(_kind_masks(graph), memory.tolist())
    _merge_colocated(graph, uf)
    if uncuttable is not None:
        _merge_edges(graph, uf, uncuttable)
    if merge_consumers:
        _merge_into_only_consumer(graph, uf, cap)
    labels, num, src, dst = _group_graph(graph, uf)
    order = _group_order(num, src, dst, graph.first_positions(labels, num))
    pos = np.empty(num, dtype=np.int64)
    pos[order] = np.arange(num)
    run = np.arange(num)
    if max_groups is not None and num > max_groups:
        cost, masks = _group_sum(op_cost(graph), labels, num), _group_masks(uf, labels, num)
        held = _group_sum(memory, labels, num)
        run = _merge_adjacent(cost[order], masks[order], pos[src], pos[dst], max_groups, held[order], cap)
    return make_grouping(graph, run[pos[labels]])


def memory_cap(graph: OpGraph, cluster: Cluster) -> float | None:
    """Half the largest device's memory when no device can hold the whole graph alone (:func:`alone_memory`), so
    that groups stay small enough to spread over several devices; ``None`` when one can (a placement on it alone is
    then within reach, and the groups are left as they were).

    >>> from gplace.testing import chain, uniform_cluster
    >>> memory_cap(chain((1.0,) * 4, nbytes=100), uniform_cluster(2, memory=250))
    125.0
    """
    total = alone_memory(graph)
    return float(cluster.memory.max()) / 2 if all(int(m) < total for m in cluster.memory) else None


def alone_memory(graph: OpGraph) -> int:
    """Bytes that hold the whole graph on one device: its ops' persistent memory and outputs, and the largest
    temporary memory of one op (a bound of the simulators' peak there)."""
    return int(op_memory(graph).sum()) + int(graph.temporary_memory.max(initial=0))


def uncuttable_edges(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """The edges whose transfer over the cluster's fastest link takes longer than the whole graph on the fastest
    device that can hold it alone (every op allowed there, :func:`alone_memory` within its memory): a placement
    that cuts one waits at least that transfer, so it is never faster than that device alone. None where no device
    can hold the graph. Shapes: returns (E,) bool by ``graph.edge_index`` column."""
    durations, allowed = graph.durations(cluster), graph.allowed_devices(cluster)
    memory = alone_memory(graph)
    alone = [durations[:, d].sum() for d in range(cluster.num_devices)
             if allowed[:, d].all() and memory <= cluster.memory[d]]
    if not alone or cluster.num_devices < 2:
        return np.zeros(graph.edge_bytes.shape, dtype=bool)
    off = ~np.eye(cluster.num_devices, dtype=bool)
    fastest = np.full(graph.edge_bytes.shape, np.inf)
    for latency, bandwidth in set(zip(cluster.latency[off].tolist(), cluster.bandwidth[off].tolist(), strict=True)):
        np.minimum(fastest, latency + graph.edge_bytes / bandwidth, out=fastest)  # (E,) at a time, not (D^2, E)
    return fastest > min(alone)


def identity_grouping(graph: OpGraph) -> Grouping:
    """One group per op; the coarse graph is ``graph`` itself (colocation is left to the caller)."""
    return Grouping(np.arange(graph.num_ops, dtype=np.int64), graph.num_ops, graph, graph)


def check_grouping_of(graph: OpGraph, grouping: Grouping) -> None:
    """Raise ``ValueError`` unless ``grouping`` groups the ops of ``graph`` (the same ops, by fingerprint)."""
    original = grouping.original
    if original is not graph and original.fingerprint != graph.fingerprint:
        raise ValueError(f"the grouping is of graph {original.name!r} ({original.num_ops} ops, fingerprint "
                         f"{original.fingerprint}), not of graph {graph.name!r} ({graph.num_ops} ops, fingerprint "
                         f"{graph.fingerprint}): group the graph being placed")


def check_colocation_kept(grouping: Grouping) -> None:
    """Raise ``ValueError`` when a colocation set of ``grouping.original`` spans groups (a placement of the groups
    could split it; :func:`group_ops` keeps each set in one group, :func:`identity_grouping` does not)."""
    graph, first = grouping.original, {}
    for i, name in enumerate(graph.colocation):
        if name is None:
            continue
        j = first.setdefault(name, i)
        if grouping.op_group[j] != grouping.op_group[i]:
            raise ValueError(f"colocation set {name!r} spans groups: op {graph.op_names[j]!r} is in group "
                             f"{int(grouping.op_group[j])}, op {graph.op_names[i]!r} in group "
                             f"{int(grouping.op_group[i])}; group colocated ops together (group_ops does)")


def split_groups(grouping: Grouping, placement: Placement) -> Grouping:
    """``grouping`` with each group split by the devices ``placement`` puts its ops on, so that the placement is
    exactly expressible (a policy warm-started from it starts where it is). Colocated ops share a device in any
    valid placement, so they stay together; there may be up to ``num_groups x devices`` groups.

    Raises:
        InvalidPlacementError: ``placement`` is not a placement of ``grouping.original``.
    """
    graph = grouping.original
    if placement.graph_fingerprint not in (None, graph.fingerprint) or placement.devices.shape != (graph.num_ops,):
        raise InvalidPlacementError(f"the placement ({placement.devices.size} ops) is not one of graph "
                                    f"{graph.name!r} ({graph.num_ops} ops)")
    pairs = grouping.op_group * (int(placement.devices.max(initial=0)) + 1) + placement.devices
    _, op_group = np.unique(pairs, return_inverse=True)
    if int(op_group.max(initial=-1)) + 1 == grouping.num_groups:
        return grouping
    return make_grouping(graph, op_group)


def make_grouping(graph: OpGraph, op_group: np.ndarray) -> Grouping:
    """A :class:`Grouping` from given group ids, building the coarse graph.

    Groups are renumbered in a topological order that breaks cycles (see the module docstring); the coarse graph
    keeps the edges that point forward in that numbering, so it is always a DAG.

    Raises:
        GraphError: a group holds ops pinned to different kinds.
        ValueError: a group id in ``0..G-1`` has no op, or ``op_group`` is not one whole id >= 0 per op.

    Shapes:
        op_group (N,) int, group ids ``0..G-1`` with every id used.
    """
    op_group = _check_group_ids(graph, op_group)
    num = int(op_group.max()) + 1 if op_group.size else 0
    empty = np.flatnonzero(np.bincount(op_group, minlength=num) == 0)
    if empty.size:
        raise ValueError(f"group id {empty[0]} has no op; ids must be 0..G-1 with every id used")
    gs, gd = op_group[graph.edge_index[0]], op_group[graph.edge_index[1]]
    pairs = np.unique((gs * num + gd)[gs != gd])
    order = _group_order(num, pairs // max(num, 1), pairs % max(num, 1), graph.first_positions(op_group, num))
    rank = np.empty(num, dtype=np.int64)
    rank[order] = np.arange(num)
    op_group = rank[op_group]
    return Grouping(op_group, num, _coarse_graph(graph, op_group, num), graph)


def _check_group_ids(graph: OpGraph, op_group: object) -> np.ndarray:
    """``op_group`` as (N,) int64, refused by name unless it is one whole group id >= 0 per op."""
    ids = np.asarray(op_group)
    if ids.shape != (graph.num_ops,):
        raise ValueError(f"op_group has shape {ids.shape}, expected ({graph.num_ops},): one group id per op of "
                         f"graph {graph.name!r}")
    if ids.size and not (np.issubdtype(ids.dtype, np.integer) and ids.min() >= 0):
        raise ValueError(f"op_group must hold whole group ids >= 0, got dtype {ids.dtype} with values in "
                         f"[{ids.min()}, {ids.max()}]")
    return ids.astype(np.int64)


def op_cost(graph: OpGraph) -> np.ndarray:
    """(N,) float64 one cost per op for ranking: its generic cost, else the mean of its known per-kind costs."""
    cost = graph.compute_cost
    if graph.kind_cost:
        kinds = np.stack(list(graph.kind_cost.values()))
        known = ~np.isnan(kinds)
        mean = np.where(known, kinds, 0.0).sum(0) / np.maximum(known.sum(0), 1)
        cost = np.where(np.isnan(cost), mean, cost)
    return np.nan_to_num(cost, nan=0.0)


# ---------------------------------------------------------------------- device-kind compatibility
def _kind_masks(graph: OpGraph) -> list[int]:
    """Per op, a bit mask of the device kinds it may run on; the top bit stands for every other kind."""
    kinds = sorted({p for p in graph.pinned if p is not None} | set(graph.kind_cost))
    bit = {k: 1 << i for i, k in enumerate(kinds)}
    every = (1 << (len(kinds) + 1)) - 1
    masks = []
    for i, pin in enumerate(graph.pinned):
        if np.isnan(graph.compute_cost[i]):
            mask = sum(bit[k] for k, v in graph.kind_cost.items() if not np.isnan(v[i]))
        else:
            mask = every
        masks.append(mask & bit[pin] if pin is not None else mask)
    return masks


class _UnionFind:
    """Disjoint sets of ops, each with the mask of device kinds all its ops may run on."""

    def __init__(self, masks: list[int], weights: list[float] | None = None) -> None:
        self.parent = list(range(len(masks)))
        self.mask = list(masks)
        self.weight = list(weights) if weights is not None else [0.0] * len(masks)
        """Per set (at its root): the summed weight of its ops (their memory)."""

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def compatible(self, a: int, b: int) -> bool:
        return bool(self.mask[self.find(a)] & self.mask[self.find(b)])

    def union(self, a: int, b: int) -> int:
        a, b = self.find(a), self.find(b)
        if a != b:
            self.parent[b] = a
            self.mask[a] &= self.mask[b]
            self.weight[a] += self.weight[b]
        return a

    def labels(self) -> tuple[np.ndarray, int]:
        """(N,) int64 compact set ids and the number of sets."""
        roots = np.array([self.find(i) for i in range(len(self.parent))], dtype=np.int64)
        uniq, labels = np.unique(roots, return_inverse=True)
        return labels.astype(np.int64), int(uniq.size)


# ---------------------------------------------------------------------- steps a-c
def _merge_colocated(graph: OpGraph, uf: _UnionFind) -> None:
    """Merge each colocation group; raise :class:`GraphError` naming a group whose ops share no device kind."""
    first: dict[str, int] = {}
    for i, name in enumerate(graph.colocation):
        if name is not None:
            uf.union(first.setdefault(name, i), i)
    for name, i in first.items():
        if not uf.mask[uf.find(i)]:
            members = [j for j, group in enumerate(graph.colocation) if group == name]
            raise GraphError(f"graph {graph.name!r}: colocation group {name!r} has no device kind all its ops can "
                             f"run on: {_kind_limits(graph, members)}")


def _kind_limits(graph: OpGraph, ops: list[int], limit: int = 6) -> str:
    """What limits the device kinds of each of ``ops`` (their pins and per-kind-only costs), e.g. ``op 'a' is
    pinned to 'cpu', op 'b' has costs only for ['gpu']``; ops that run anywhere are left out."""
    parts = []
    for i in ops:
        why = [f"is pinned to {graph.pinned[i]!r}"] if graph.pinned[i] is not None else []
        if np.isnan(graph.compute_cost[i]):
            kinds = sorted(k for k, v in graph.kind_cost.items() if not np.isnan(v[i]))
            why.append(f"has costs only for {kinds}")
        if why:
            parts.append(f"op {graph.op_names[i]!r} " + " and ".join(why))
    more = f" (and {len(parts) - limit} more)" if len(parts) > limit else ""
    return ", ".join(parts[:limit]) + more


def _merge_edges(graph: OpGraph, uf: _UnionFind, edges: np.ndarray) -> None:
    """Merge the two ends of each given edge where their kinds allow."""
    edges = np.asarray(edges, dtype=bool)
    if edges.shape != graph.edge_bytes.shape:
        raise ValueError(f"uncuttable has shape {edges.shape}, expected ({graph.edge_bytes.size},): one per edge")
    for u, v in graph.edge_index[:, edges].T.tolist():
        if uf.compatible(u, v):
            uf.union(u, v)


def _merge_into_only_consumer(graph: OpGraph, uf: _UnionFind, cap: float = np.inf) -> None:
    """Visit groups latest first; merge each whose ops feed exactly one outside op into that op's group, unless
    the two together would hold more than ``cap`` bytes."""
    labels, num, src, dst = _group_graph(graph, uf)
    rep = _first_member(labels, num).tolist()
    u, v = graph.edge_index
    ptr, consumer = _csr(labels[u], v, num)
    ptr, consumer, lab = ptr.tolist(), consumer.tolist(), labels.tolist()
    for g in reversed(_group_order(num, src, dst, graph.first_positions(labels, num)).tolist()):
        outside = {c for c in consumer[ptr[g]:ptr[g + 1]] if lab[c] != g}
        if len(outside) == 1:
            (c,) = outside
            if uf.compatible(rep[g], c) and uf.weight[uf.find(rep[g])] + uf.weight[uf.find(c)] <= cap:
                uf.union(c, rep[g])


# ---------------------------------------------------------------------- step d
def _merge_adjacent(cost: np.ndarray, mask: np.ndarray, src: np.ndarray, dst: np.ndarray, max_groups: int,
                    memory: np.ndarray | None = None, cap: float = np.inf) -> np.ndarray:
    """Merge neighbours in a topological order (positions ``0..n-1``) until at most ``max_groups`` runs remain,
    never two whose ``memory`` together exceeds ``cap``.

    Shapes:
        cost (n,), mask (n,), memory (n,) and the edges ``src, dst`` (E,) in position space; returns (n,) int64
        run id per position, runs numbered in order.
    """
    n = len(cost)
    cost = (cost + max(float(cost.sum()), 1e-30) / n * 1e-3).tolist()  # a size term breaks ties among free ops
    mask = [int(m) for m in mask]
    held = [0.0] * n if memory is None else [float(m) for m in memory]
    nxt, prv = list(range(1, n + 1)), list(range(-1, n - 1))
    alive, version = [True] * n, [0] * n
    handle = list(range(n))  # the key of each run's neighbour set (small-to-large merging)
    nbrs: list[set[int] | None] = [set() for _ in range(n)]
    for a, b in zip(src.tolist(), dst.tolist(), strict=True):
        nbrs[a].add(b)
        nbrs[b].add(a)
    target = sum(cost) / max_groups
    heap: list[tuple[bool, bool, float, int, int, int]] = []

    def push(a: int) -> None:
        b = nxt[a]
        if a >= 0 and b < n and mask[a] & mask[b] and held[a] + held[b] <= cap:
            merged = cost[a] + cost[b]
            loose = merged <= target and handle[b] not in nbrs[handle[a]]
            heapq.heappush(heap, (merged > target, loose, merged, a, version[a], version[b]))

    for a in range(n - 1):
        push(a)
    count = n
    while count > max_groups and heap:
        *_, a, va, vb = heapq.heappop(heap)
        b = nxt[a]
        if not alive[a] or version[a] != va or b >= n or version[b] != vb:
            continue
        cost[a] += cost[b]
        held[a] += held[b]
        mask[a] &= mask[b]
        handle[a] = _merge_sets(nbrs, handle[a], handle[b])
        alive[b] = False
        nxt[a] = nxt[b]
        if nxt[b] < n:
            prv[nxt[b]] = a
        version[a] += 1
        count -= 1
        push(prv[a])
        push(a)
    return np.cumsum(alive, dtype=np.int64) - 1


def _merge_sets(nbrs: list[set[int] | None], ha: int, hb: int) -> int:
    """Merge neighbour set ``hb`` with ``ha``, renaming in the smaller one's neighbours; return the kept key."""
    if len(nbrs[ha]) < len(nbrs[hb]):
        ha, hb = hb, ha
    big = nbrs[ha]
    for x in nbrs[hb]:
        if x != ha:
            nbrs[x].discard(hb)
            nbrs[x].add(ha)
            big.add(x)
    big.discard(hb)
    nbrs[hb] = None
    return ha


# ---------------------------------------------------------------------- the coarse graph
def _coarse_graph(graph: OpGraph, op_group: np.ndarray, num: int) -> OpGraph:
    head = _most_expensive_member(op_cost(graph), op_group, num)
    kind_cost = {k: _group_sum(np.where(np.isnan(v), graph.compute_cost, v), op_group, num)
                 for k, v in graph.kind_cost.items()}
    src, dst, nbytes = _coarse_edges(graph, op_group, num)
    return OpGraph(
        name=f"{graph.name}/groups",
        op_names=tuple(f"g{g}" for g in range(num)),
        op_types=tuple(graph.op_types[i] for i in head.tolist()),
        compute_cost=_group_sum(graph.compute_cost, op_group, num),
        kind_cost=kind_cost,
        persistent_memory=_group_sum_int(graph.persistent_memory, op_group, num),
        temporary_memory=_group_sum_int(graph.temporary_memory, op_group, num),
        output_bytes=_group_sum_int(graph.output_bytes, op_group, num),
        output_shapes=tuple(graph.output_shapes[i] for i in head.tolist()),
        colocation=(None,) * num,
        pinned=_group_pins(graph, op_group, num),
        edge_index=np.stack([src, dst]),
        edge_bytes=nbytes,
    )


def _coarse_edges(graph: OpGraph, op_group: np.ndarray, num: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Forward edges between groups (lower to higher id); bytes summed over distinct producer ops."""
    u, v = graph.edge_index
    gs, gd = op_group[u], op_group[v]
    keep = gs < gd
    u, gs, gd, b = u[keep], gs[keep], gd[keep], graph.edge_bytes[keep]
    pair = gs * num + gd
    key = pair * max(graph.num_ops, 1) + u
    order = np.lexsort((b, key))
    last = np.r_[key[order][1:] != key[order][:-1], True] if key.size else np.zeros(0, dtype=bool)
    pair, b = pair[order][last], b[order][last]
    pairs, inverse = np.unique(pair, return_inverse=True)
    nbytes = np.zeros(pairs.size, dtype=np.int64)
    np.add.at(nbytes, inverse, b)
    return pairs // max(num, 1), pairs % max(num, 1), nbytes


def _group_pins(graph: OpGraph, op_group: np.ndarray, num: int) -> tuple[str | None, ...]:
    pins: list[str | None] = [None] * num
    pinned_by: list[int] = [-1] * num
    for i, (g, pin) in enumerate(zip(op_group.tolist(), graph.pinned, strict=True)):
        if pin is not None:
            if pins[g] not in (None, pin):
                raise GraphError(f"graph {graph.name!r}: a group holds op {graph.op_names[pinned_by[g]]!r} pinned to "
                                 f"{pins[g]!r} and op {graph.op_names[i]!r} pinned to {pin!r}")
            pins[g], pinned_by[g] = pin, i
    return tuple(pins)


# ---------------------------------------------------------------------- helpers
def _group_graph(graph: OpGraph, uf: _UnionFind) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """Compact labels, number of groups, and the distinct edges ``src, dst`` between groups."""
    labels, num = uf.labels()
    gs, gd = labels[graph.edge_index[0]], labels[graph.edge_index[1]]
    pairs = np.unique((gs * num + gd)[gs != gd])
    return labels, num, pairs // max(num, 1), pairs % max(num, 1)


def _group_masks(uf: _UnionFind, labels: np.ndarray, num: int) -> np.ndarray:
    rep = _first_member(labels, num)
    return np.array([uf.mask[uf.find(int(i))] for i in rep], dtype=object)


def _first_member(labels: np.ndarray, num: int) -> np.ndarray:
    """(G,) int64 smallest op index of each group."""
    first = np.full(num, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, labels, np.arange(labels.size, dtype=np.int64))
    return first


def _most_expensive_member(cost: np.ndarray, op_group: np.ndarray, num: int) -> np.ndarray:
    """(G,) int64 op index of each group's most expensive op (the first such op on ties)."""
    order = np.lexsort((np.arange(cost.size), -cost, op_group))
    starts = np.searchsorted(op_group[order], np.arange(num))
    return order[starts]


def _group_sum(values: np.ndarray, op_group: np.ndarray, num: int) -> np.ndarray:
    """(G,) float64 sums; NaN where any member is NaN."""
    return np.bincount(op_group, weights=values, minlength=num).astype(np.float64)


def _group_sum_int(values: np.ndarray, op_group: np.ndarray, num: int) -> np.ndarray:
    out = np.zeros(num, dtype=np.int64)
    np.add.at(out, op_group, values)
    return out


def _csr(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr, dst[order]


def _group_order(n: int, src: np.ndarray, dst: np.ndarray, priority: np.ndarray) -> np.ndarray:
    """(n,) int64 a topological order, lowest ``priority`` first among ready nodes; a cycle is broken by
    releasing its lowest-priority node early, so every node appears once even in a cyclic graph."""
    ptr, succ = _csr(src, dst, n)
    ptr, succ, prio = ptr.tolist(), succ.tolist(), priority.tolist()
    indeg = np.bincount(dst, minlength=n).tolist()
    ready = [(prio[i], i) for i in range(n) if indeg[i] == 0]
    heapq.heapify(ready)
    waiting = sorted((prio[i], i) for i in range(n))  # fallback when a cycle leaves nothing ready
    done, order, w = [False] * n, [], 0
    while len(order) < n:
        if ready:
            _, i = heapq.heappop(ready)
            if done[i]:
                continue
        else:
            while done[waiting[w][1]]:
                w += 1
            i = waiting[w][1]
        done[i] = True
        order.append(i)
        for j in succ[ptr[i]:ptr[i + 1]]:
            indeg[j] -= 1
            if indeg[j] == 0 and not done[j]:
                heapq.heappush(ready, (prio[j], j))
    return np.array(order, dtype=np.int64)
