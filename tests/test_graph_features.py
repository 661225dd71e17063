"""Tests for the graph and device features of gplace.features (edges, position, devices) and their placer plumbing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gplace.encoders import LSTMEncoder
from gplace.features import DEVICE_FEATURES, POSITION_FEATURES, device_features, featurize
from gplace.grouping import group_ops, identity_grouping
from gplace.ir import Cluster, Device, Edge, Link, Op, OpGraph
from gplace.methods import make_learner
from gplace.placer import PolicyPlacer
from gplace.policies import MLPPolicy
from gplace.testing import MB, diamond, random_dag, uniform_cluster


def test_edges_are_in_feature_positions_with_log_bytes():
    """A diamond (order src, left, right, sink) has edges 0->1, 0->2, 1->3, 2->3 carrying log1p(1 MB)."""
    feats = featurize(diamond(), identity_grouping(diamond()))
    assert feats.edge_index.dtype == np.int64
    assert sorted(map(tuple, feats.edge_index.T.tolist())) == [(0, 1), (0, 2), (1, 3), (2, 3)]
    np.testing.assert_allclose(feats.edge_attr, np.full((4, 1), np.log1p(MB)), rtol=1e-6)


def test_grouped_edges_point_forward_and_match_the_coarse_graph():
    """After grouping, edge_index is the coarse graph's edges renumbered to positions, all forward."""
    graph = random_dag(60, seed=3)
    grouping = group_ops(graph, max_groups=12)
    feats = featurize(graph, grouping)
    pos = np.argsort(feats.order)
    np.testing.assert_array_equal(feats.edge_index, pos[grouping.graph.edge_index])
    assert (feats.edge_index[0] < feats.edge_index[1]).all()
    assert feats.edge_attr.shape == (grouping.graph.num_edges, 1) and feats.edge_attr.dtype == np.float32
    tensors = feats.to_tensors()
    assert tensors["edge_index"].dtype == torch.int64 and tensors["position"].dtype == torch.float32


def test_position_is_order_over_g_and_longest_path_depth():
    """Diamond depths are 0, 1, 1, 2: columns pos / 4, depth / 3, log1p(depth) / 10."""
    feats = featurize(diamond(), identity_grouping(diamond()))
    assert feats.position.shape == (4, POSITION_FEATURES)
    depth = np.array([0.0, 1.0, 1.0, 2.0])
    expected = np.stack([np.arange(4) / 4, depth / 3, np.log1p(depth) / 10], 1)
    np.testing.assert_allclose(feats.position, expected, rtol=1e-6)


def test_depth_is_the_longest_path_not_the_shortest():
    """With a->b->c and a shortcut a->c, c has depth 2."""
    graph = OpGraph.from_ops([Op(n, "T", 1.0) for n in "abc"], [Edge("a", "b"), Edge("b", "c"), Edge("a", "c")])
    feats = featurize(graph, identity_grouping(graph))
    np.testing.assert_allclose(feats.position[:, 1], [0, 1 / 3, 2 / 3], rtol=1e-6)


def test_device_features_kind_speed_memory_and_links():
    """Columns: one-hot cpu/gpu/other, log speed, log1p(memory)/10, mean log1p(bandwidth)/10 both ways."""
    devices = [Device("c", "cpu", 1.0, 10**9), Device("g", "gpu", 4.0, 10**10), Device("t", "tpu", 0.5, 10**8)]
    links = [Link("c", "g", 1e6), Link("g", "t", 1e8)]
    cluster = Cluster.build(devices, links, default_bandwidth=1e4)
    feats = device_features(cluster)
    assert feats.shape == (3, DEVICE_FEATURES) and feats.dtype == np.float32
    np.testing.assert_array_equal(feats[:, :3], np.eye(3))
    np.testing.assert_allclose(feats[:, 3], np.log([1.0, 4.0, 0.5]), rtol=1e-6)
    np.testing.assert_allclose(feats[:, 4], np.log1p([1e9, 1e10, 1e8]) / 10, rtol=1e-6)
    bw = np.log1p([[0, 1e6, 1e4], [1e6, 0, 1e8], [1e4, 1e8, 0]]) / 10
    np.testing.assert_allclose(feats[:, 5], bw.sum(1) / 2, rtol=1e-6)
    np.testing.assert_allclose(device_features(uniform_cluster(1))[:, 5], [0.0])


def test_an_infinite_link_is_a_finite_feature_and_the_device_aware_policy_stays_finite():
    """An infinite bandwidth (a free transfer; GiPH's files give one) counts as 1e15 B/s: no inf features, no NaN."""
    links = [Link("a", "b", float("inf")), Link("a", "c", 1e9), Link("b", "c", 1e9)]
    cluster = Cluster.build([Device(n, "gpu") for n in "abc"], links)
    feats = device_features(cluster)
    assert np.isfinite(feats).all()
    np.testing.assert_allclose(feats[0, 5], (np.log1p(1e15) + np.log1p(1e9)) / 2 / 10, rtol=1e-6)
    placer = PolicyPlacer(random_dag(20, seed=0), cluster, *make_learner("device_aware", 3))
    assert torch.isfinite(placer.sample(4, generator=torch.Generator().manual_seed(0)).log_prob).all()


def test_placer_holds_device_features_as_a_buffer_outside_the_state_dict():
    """PolicyPlacer computes the cluster's device features, keeps them out of state_dict, and checks given ones."""
    cluster = uniform_cluster(2)
    graph = random_dag(12)
    placer = PolicyPlacer(graph, cluster, LSTMEncoder(hidden_size=8), MLPPolicy(2, hidden_size=8), max_groups=4)
    torch.testing.assert_close(placer.device_features, torch.from_numpy(device_features(cluster)))
    assert "device_features" not in placer.state_dict()
    with pytest.raises(ValueError, match="device_features"):
        PolicyPlacer(graph, cluster, LSTMEncoder(hidden_size=8), MLPPolicy(2, hidden_size=8),
                     device_features=np.zeros((3, DEVICE_FEATURES)))


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e39])
def test_device_features_that_are_not_finite_are_refused_naming_the_device(value):
    """A NaN (or a value past float32's range) was kept: every log-probability NaN, every update skipped, and the
    search returned everything on device 0."""
    cluster, graph = uniform_cluster(2), random_dag(12)
    features = device_features(cluster)
    features[1, 3] = value
    with pytest.raises(ValueError, match=r"device_features\[1, 3\] \(device '/GPU:1'\) is (nan|inf) in float32"):
        PolicyPlacer(graph, cluster, LSTMEncoder(hidden_size=8), MLPPolicy(2, hidden_size=8),
                     device_features=features)
