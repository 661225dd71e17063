"""Per-group input features for a sequence encoder, after the reference code of Mirhoseini et al. 2017.

Groups are laid out in a topological order of the coarse graph. Each group gets the op-type ids of all its
ops (summed by an ``nn.EmbeddingBag``), the output shapes of its most expensive op, the signed relative
positions of its neighbours in that order, and a few log-scaled cost numbers. Log-scaled values are
``log1p(x) / 10`` so they stay of order one.

For message-passing encoders the coarse graph's edges come too, renumbered to feature positions, with
``log1p(bytes)`` per edge, and each group's position in the order and depth in the graph. For device-aware
policies, :func:`device_features` describes each device of a cluster by kind, speed, memory and links.

Features follow the order the graph lists its ops where the graph leaves a choice: the topological order takes
the op listed first among ready ops (``OpGraph.topological_order``), so positions and relative positions depend on
it, and a group's most expensive op is the one listed first among equally expensive ones. The same graph
exported with its ops in another order can therefore be featurised, and placed, differently, by every encoder
(message-passing ones included: they read the positions).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, fields

import numpy as np
import torch

from gplace.grouping import Grouping, check_grouping_of, op_cost
from gplace.ir import Cluster, OpGraph
from gplace.ir.frozen import ReadOnlyArrays

MAX_OUTPUTS = 5
"""Output shapes kept per group."""
MAX_DIMS = 5
"""Dimensions kept per output shape."""
SHAPE_FEATURES = MAX_OUTPUTS * MAX_DIMS
"""Width of :attr:`GroupFeatures.shapes` and :attr:`GroupFeatures.shape_flags`."""
NUMERIC_FEATURES = 7
"""Width of :attr:`GroupFeatures.numeric`."""
POSITION_FEATURES = 3
"""Width of :attr:`GroupFeatures.position`."""
DEVICE_KINDS = ("cpu", "gpu")
"""Device kinds with their own one-hot column in :func:`device_features`; every other kind shares a third."""
DEVICE_FEATURES = len(DEVICE_KINDS) + 4
"""Width of :func:`device_features`."""
_LOG_SCALE = 10.0
_BANDWIDTH_CAP = 1e15
"""Bytes per second a link's feature saturates at (an infinite link, a free transfer, reads as this)."""


@dataclass(frozen=True, eq=False)
class GroupFeatures(ReadOnlyArrays):
    """Features of G groups in feature order (row ``i`` describes group ``order[i]``)."""

    order: np.ndarray
    """(G,) int64 group id at each position: a topological order of the coarse graph."""
    type_ids: np.ndarray
    """(N,) int64 hashed op-type id of every op, the ops of position 0 first (``EmbeddingBag`` input)."""
    type_offsets: np.ndarray
    """(G,) int64 start of each position's ops in :attr:`type_ids` (``EmbeddingBag`` offsets)."""
    shapes: np.ndarray
    """(G, 25) float32 ``log1p(dim) / 10`` of up to 5 outputs x 5 dims of the most expensive op; 0 if unknown."""
    shape_flags: np.ndarray
    """(G, 25) float32 1 where that dim is known, -1 where it is unknown (-1 in the shape), 0 where absent."""
    adjacency: np.ndarray
    """(G, K) float32 ``sign(d) log1p(|d|) / 10`` of the relative position ``d`` of up to K nearest neighbours
    (predecessors negative, successors positive), ascending, padded with 0."""
    numeric: np.ndarray
    """(G, 7) float32 log-scaled compute cost (microseconds), output bytes, persistent and temporary memory,
    number of ops, in-degree and out-degree."""
    edge_index: np.ndarray
    """(2, E) int64 the coarse graph's edges as (source, destination) feature positions (PyG's convention);
    every edge goes forward in the order."""
    edge_attr: np.ndarray
    """(E, 1) float32 ``log1p(bytes)`` carried by each edge of :attr:`edge_index`."""
    position: np.ndarray
    """(G, 3) float32 position in the order over G, depth (longest path from a source, in edges) over the
    largest depth plus one, and ``log1p(depth) / 10``."""

    def __post_init__(self) -> None:
        for f in fields(self):
            getattr(self, f.name).setflags(write=False)

    @property
    def num_groups(self) -> int:
        """Number of groups G."""
        return int(self.order.size)

    def to_tensors(self) -> dict[str, torch.Tensor]:
        """Every field as a CPU tensor, keyed by field name (int64 and float32)."""
        return {f.name: torch.from_numpy(np.array(getattr(self, f.name))) for f in fields(self)}


def featurize(graph: OpGraph, grouping: Grouping, num_type_buckets: int = 512, max_neighbours: int = 20
              ) -> GroupFeatures:
    """Features of every group of ``grouping``, in a topological order of ``grouping.graph``.

    Args:
        graph: the graph that was grouped (its op types feed the type ids).
        grouping: the groups and their coarse graph.
        num_type_buckets: op types are hashed (crc32) into this many ids (default: 512).
        max_neighbours: neighbours kept per group, nearest in the order first (default: 20).

    Shapes:
        returns a :class:`GroupFeatures` with G rows; ``type_ids`` (N,).
    """
    check_grouping_of(graph, grouping)
    for label, value, least in (("num_type_buckets", num_type_buckets, 1), ("max_neighbours", max_neighbours, 0)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
            raise ValueError(f"{label} must be a whole number >= {least}, got {value!r}")
    coarse = grouping.graph
    order = coarse.topological_order
    pos = np.empty(coarse.num_ops, dtype=np.int64)
    pos[order] = np.arange(coarse.num_ops)
    type_ids, offsets = _type_bags(graph, pos[grouping.op_group], coarse.num_ops, num_type_buckets)
    shapes, flags = _shape_features([coarse.output_shapes[g] for g in order.tolist()])
    counts = np.bincount(grouping.op_group, minlength=coarse.num_ops)
    return GroupFeatures(
        order=order.astype(np.int64),
        type_ids=type_ids,
        type_offsets=offsets,
        shapes=shapes,
        shape_flags=flags,
        adjacency=_adjacency(pos[coarse.edge_index], coarse.num_ops, max_neighbours),
        numeric=_numeric(coarse, counts)[order],
        edge_index=pos[coarse.edge_index],
        edge_attr=np.log1p(coarse.edge_bytes.astype(np.float64)).astype(np.float32)[:, None],
        position=_position(pos[coarse.edge_index], coarse.num_ops),
    )


def device_features(cluster: Cluster) -> np.ndarray:
    """Per-device features, so a policy can score devices it has never seen by what they are.

    Columns: one-hot kind (``cpu``, ``gpu``, any other), ``log(speed)``, ``log1p(memory bytes) / 10`` and the
    mean over the other devices of ``log1p(bandwidth in bytes/s) / 10`` in both directions (0 for a single
    device; a bandwidth counts at most ``1e15``, so an infinite link is a finite feature).

    Shapes:
        returns (D, 6) float32, row ``d`` for device index ``d``.
    """
    d = cluster.num_devices
    kind = np.array([DEVICE_KINDS.index(k) if k in DEVICE_KINDS else len(DEVICE_KINDS) for k in cluster.kinds])
    one_hot = np.eye(len(DEVICE_KINDS) + 1)[kind]
    off = ~np.eye(d, dtype=bool)
    bandwidth = np.minimum(np.where(off, cluster.bandwidth, 0.0), _BANDWIDTH_CAP)
    log_bw = np.log1p(bandwidth) / _LOG_SCALE
    mean_bw = (log_bw.sum(0) + log_bw.sum(1)) / max(2 * (d - 1), 1)
    cols = [np.log(cluster.speeds), np.log1p(cluster.memory.astype(np.float64)) / _LOG_SCALE, mean_bw]
    return np.concatenate([one_hot, np.stack(cols, 1)], 1).astype(np.float32)


def type_bucket(op_type: str, num_type_buckets: int) -> int:
    """Stable hashed id of an op type: ``crc32(op_type) % num_type_buckets``."""
    return zlib.crc32(op_type.encode()) % num_type_buckets


def _type_bags(graph: OpGraph, op_pos: np.ndarray, num: int, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat type ids sorted by position, and each position's offset. Shapes: op_pos (N,); returns (N,), (G,)."""
    ids = {t: type_bucket(t, buckets) for t in set(graph.op_types)}
    per_op = np.array([ids[t] for t in graph.op_types], dtype=np.int64)
    offsets = np.zeros(num, dtype=np.int64)
    np.cumsum(np.bincount(op_pos, minlength=num)[:-1], out=offsets[1:])
    return per_op[np.argsort(op_pos, kind="stable")], offsets


def _shape_features(shapes: list[tuple[tuple[int, ...], ...]]) -> tuple[np.ndarray, np.ndarray]:
    """Log-scaled dims and known/unknown/absent flags. Shapes: returns (G, 25), (G, 25) float32."""
    dims = np.zeros((len(shapes), MAX_OUTPUTS, MAX_DIMS), dtype=np.float64)
    present = np.zeros_like(dims, dtype=bool)
    for g, outs in enumerate(shapes):
        for o, shape in enumerate(outs[:MAX_OUTPUTS]):
            d = shape[:MAX_DIMS]
            dims[g, o, :len(d)] = d
            present[g, o, :len(d)] = True
    known = present & (dims >= 0)
    values = np.where(known, np.log1p(np.maximum(dims, 0)) / _LOG_SCALE, 0.0)
    flags = known.astype(np.float64) - (present & ~known)
    n = len(shapes)
    return values.reshape(n, SHAPE_FEATURES).astype(np.float32), flags.reshape(n, SHAPE_FEATURES).astype(np.float32)


def _adjacency(edges: np.ndarray, num: int, k: int) -> np.ndarray:
    """Signed log-scaled relative positions of the ``k`` nearest neighbours. Shapes: edges (2, E); returns (G, k)."""
    src, dst = edges
    node = np.concatenate([src, dst])
    rel = np.concatenate([dst - src, src - dst])
    node, rel = _dedupe(node, rel)
    nearest = np.lexsort((rel, np.abs(rel), node))
    node, rel = node[nearest], rel[nearest]
    rank = np.arange(node.size) - np.searchsorted(node, node)
    keep = rank < k
    node, rel = node[keep], rel[keep]
    ascending = np.lexsort((rel, node))
    node, rel = node[ascending], rel[ascending]
    out = np.zeros((num, k), dtype=np.float32)
    out[node, np.arange(node.size) - np.searchsorted(node, node)] = np.sign(rel) * np.log1p(np.abs(rel)) / _LOG_SCALE
    return out


def _dedupe(node: np.ndarray, rel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop repeated (node, rel) pairs (parallel edges)."""
    if node.size == 0:
        return node, rel
    pairs = np.unique(np.stack([node, rel], 1), axis=0)
    return pairs[:, 0], pairs[:, 1]


def _numeric(coarse: OpGraph, counts: np.ndarray) -> np.ndarray:
    """Log-scaled cost numbers per group id. Shapes: counts (G,); returns (G, 7) float32.

    The cost is in microseconds and the bytes in bytes, absolute (the pretrained policies learnt them so): a graph
    whose costs are all off by a factor (milliseconds read as seconds) gets other features, and a learned search
    on it samples otherwise (final times 2-8 % apart over a few seeds), though the simulator's times only scale."""
    n = coarse.num_ops
    cols = [
        op_cost(coarse) * 1e6,
        coarse.output_bytes,
        coarse.persistent_memory,
        coarse.temporary_memory,
        counts,
        np.bincount(coarse.edge_index[1], minlength=n),
        np.bincount(coarse.edge_index[0], minlength=n),
    ]
    return (np.log1p(np.stack(cols, 1).astype(np.float64)) / _LOG_SCALE).astype(np.float32)


def _position(edges: np.ndarray, num: int) -> np.ndarray:
    """Position and depth features. Shapes: edges (2, E) forward in position order; returns (G, 3) float32."""
    src, dst = edges
    depth = [0] * num
    for s, t in zip(src[np.argsort(dst, kind="stable")].tolist(), np.sort(dst).tolist(), strict=True):
        # edges sorted by destination; every source precedes its destination, so depth[s] is already final
        if depth[s] + 1 > depth[t]:
            depth[t] = depth[s] + 1
    d = np.asarray(depth, dtype=np.float64)
    cols = [np.arange(num) / max(num, 1), d / (d.max(initial=0.0) + 1.0), np.log1p(d) / _LOG_SCALE]
    return np.stack(cols, 1).astype(np.float32).reshape(num, POSITION_FEATURES)
