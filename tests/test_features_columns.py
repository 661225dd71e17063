"""Feature columns pinned by hand-computed cases a second round of mutation testing found unchecked: a zero-size
dim is a known dim, a zero-byte edge has feature 0, the op-count column counts a group's ops, and a device's link
feature averages both directions of an asymmetric link."""

from __future__ import annotations

import numpy as np

from gplace.features import device_features, featurize
from gplace.grouping import identity_grouping, make_grouping
from gplace.ir import Cluster, Device, Edge, Link, Op, OpGraph
from gplace.testing import chain


def test_a_zero_size_dim_is_known_with_value_zero() -> None:
    """An empty output of shape (0, 4): dim 0 is known (flag 1) with log1p(0) / 10 = 0; dim 4 gives log1p(4) / 10;
    only -1 marks an unknown dim."""
    g = OpGraph.from_ops([Op("e", "Empty", 1.0, output_shapes=((0, 4),))], [], name="empty")
    feats = featurize(g, identity_grouping(g))
    np.testing.assert_allclose(feats.shapes[0, :2], [0.0, np.log1p(4) / 10], rtol=1e-6)
    assert feats.shape_flags[0, :3].tolist() == [1, 1, 0]


def test_a_zero_byte_edge_has_feature_zero() -> None:
    """Edge features are log1p(bytes): 0 for an edge carrying nothing (a control dependency), log1p(1000) else."""
    ops = [Op("a", "T", 1.0), Op("b", "T", 1.0), Op("c", "T", 1.0)]
    g = OpGraph.from_ops(ops, [Edge("a", "b", 0), Edge("b", "c", 1000)], name="bytes")
    feats = featurize(g, identity_grouping(g))
    by_edge = dict(zip(map(tuple, feats.edge_index.T.tolist()), feats.edge_attr[:, 0].tolist(), strict=True))
    assert by_edge[(0, 1)] == 0.0
    np.testing.assert_allclose(by_edge[(1, 2)], np.log1p(1000), rtol=1e-6)


def test_the_op_count_column_counts_the_ops_of_each_group() -> None:
    """Chain a0 -> a1 -> a2 grouped [0, 0, 1]: column 4 (number of ops) is log1p(2) / 10, then log1p(1) / 10."""
    g = chain((1.0, 1.0, 1.0))
    feats = featurize(g, make_grouping(g, np.array([0, 0, 1])))
    np.testing.assert_allclose(feats.numeric[:, 4], np.log1p([2.0, 1.0]) / 10, rtol=1e-6)


def test_the_link_feature_averages_both_directions_of_an_asymmetric_link() -> None:
    """a -> b at 1e6 B/s, b -> a at 1e4 B/s: each device's link column is the mean of log1p(bw) / 10 over what it
    sends and receives, (log1p(1e6) + log1p(1e4)) / 2 / 10 for both (not its sending side only)."""
    cluster = Cluster.build([Device("a", "gpu"), Device("b", "gpu")], [Link("a", "b", 1e6, reverse_bandwidth=1e4)])
    assert cluster.bandwidth[0, 1] == 1e6 and cluster.bandwidth[1, 0] == 1e4
    expected = (np.log1p(1e6) + np.log1p(1e4)) / 2 / 10
    np.testing.assert_allclose(device_features(cluster)[:, 5], [expected, expected], rtol=1e-6)
