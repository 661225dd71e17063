"""Tests for gplace.features: per-group encoder inputs."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

from gplace.features import NUMERIC_FEATURES, SHAPE_FEATURES, featurize, type_bucket
from gplace.grouping import group_ops, identity_grouping
from gplace.ir import Edge, Op, OpGraph
from gplace.testing import diamond, random_dag


def _shaped_graph() -> OpGraph:
    """``a -> b`` where b has two outputs, one with an unknown dim."""
    ops = [Op("a", "Input", 1.0, output_bytes=100, output_shapes=((32, 100),)),
           Op("b", "MatMul", 2.0, output_bytes=50, persistent_memory=1000,
              output_shapes=((32, -1), (7,)))]
    return OpGraph.from_ops(ops, [Edge("a", "b")])


def test_rows_follow_a_topological_order():
    """`order` is the coarse graph's topological order and every edge goes forward in it."""
    graph = random_dag(60, seed=3)
    grouping = group_ops(graph, max_groups=12)
    feats = featurize(graph, grouping)
    pos = np.argsort(feats.order)
    src, dst = grouping.graph.edge_index
    assert sorted(feats.order.tolist()) == list(range(grouping.num_groups))
    assert (pos[src] < pos[dst]).all()


def test_type_ids_are_stable_crc32_buckets_of_every_member():
    """Each position's bag holds crc32(type) % buckets of exactly its group's ops."""
    graph = random_dag(40, seed=1)
    grouping = group_ops(graph, max_groups=5)
    feats = featurize(graph, grouping, num_type_buckets=97)
    assert type_bucket("MatMul", 97) == zlib.crc32(b"MatMul") % 97
    ends = np.r_[feats.type_offsets[1:], graph.num_ops]
    for p, g in enumerate(feats.order.tolist()):
        members = np.flatnonzero(grouping.op_group == g)
        expected = sorted(type_bucket(graph.op_types[i], 97) for i in members)
        assert sorted(feats.type_ids[feats.type_offsets[p]:ends[p]].tolist()) == expected


def test_shape_features_log_scale_and_flag_unknown_dims():
    """Known dims are log1p(d)/10 with flag 1, -1 dims are 0 with flag -1, absent slots are 0 with flag 0."""
    feats = featurize(_shaped_graph(), identity_grouping(_shaped_graph()))
    row, flags = feats.shapes[1], feats.shape_flags[1]
    assert row.shape == (SHAPE_FEATURES,)
    np.testing.assert_allclose(row[[0, 1, 5]], np.log1p([32, 0, 7]) / 10, rtol=1e-6)
    assert flags[[0, 1, 2, 5, 6]].tolist() == [1, -1, 0, 1, 0]
    assert flags[10:].tolist() == [0] * 15


def test_adjacency_is_signed_relative_positions():
    """In a diamond (order src, left, right, sink) src sees successors +1, +2 and sink predecessors -2, -1."""
    feats = featurize(diamond(), identity_grouping(diamond()), max_neighbours=3)
    scale = np.log1p([1.0, 2.0]) / 10
    np.testing.assert_allclose(feats.adjacency[0], [scale[0], scale[1], 0], rtol=1e-6)
    np.testing.assert_allclose(feats.adjacency[3], [-scale[1], -scale[0], 0], rtol=1e-6)
    np.testing.assert_allclose(feats.adjacency[1], [-scale[0], scale[1], 0], rtol=1e-6)


def test_adjacency_keeps_the_nearest_neighbours():
    """With more neighbours than slots, the nearest ones (by |relative position|) are kept."""
    ops = [Op(f"o{i}", "T", 1.0) for i in range(8)]
    graph = OpGraph.from_ops(ops, [Edge("o0", f"o{i}") for i in range(1, 8)])
    feats = featurize(graph, identity_grouping(graph), max_neighbours=2)
    np.testing.assert_allclose(feats.adjacency[0], np.log1p([1.0, 2.0]) / 10, rtol=1e-6)


def test_numeric_features():
    """Numbers are log1p(x)/10 of cost in microseconds, bytes, memory, op count and degrees."""
    graph = _shaped_graph()
    feats = featurize(graph, identity_grouping(graph))
    assert feats.numeric.shape == (2, NUMERIC_FEATURES)
    expected = np.log1p([2e6, 50, 1000, 0, 1, 1, 0]) / 10
    np.testing.assert_allclose(feats.numeric[1], expected, rtol=1e-6)


def test_to_tensors_dtypes_and_mismatched_graph():
    """to_tensors gives int64 ids and float32 features; a grouping of another graph is rejected."""
    graph = random_dag(30)
    feats = featurize(graph, group_ops(graph, max_groups=6))
    tensors = feats.to_tensors()
    assert tensors["type_ids"].dtype == torch.int64 and tensors["type_offsets"].shape == (6,)
    assert tensors["numeric"].dtype == torch.float32 and tensors["adjacency"].shape == (6, 20)
    assert all(torch.isfinite(t.float()).all() for t in tensors.values())
    with pytest.raises(ValueError, match="ops"):
        featurize(diamond(), group_ops(graph, max_groups=6))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"num_type_buckets": 0}, "num_type_buckets must be a whole number >= 1"),  # a ZeroDivisionError before
    ({"max_neighbours": -1}, "max_neighbours must be a whole number >= 0"),  # numpy's 'negative dimensions'
    ({"max_neighbours": 2.5}, "max_neighbours must be a whole number >= 0"),
])
def test_bad_feature_settings_are_named(kwargs, match):
    graph = random_dag(10, seed=0)
    with pytest.raises(ValueError, match=match):
        featurize(graph, identity_grouping(graph), **kwargs)
