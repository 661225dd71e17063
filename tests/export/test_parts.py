"""Per-device parts: every edge runs forward, one part per device where the devices' data flow allows."""

from __future__ import annotations

import numpy as np
import pytest

from gplace import Placement
from gplace.export import device_parts, part_of
from gplace.testing import random_dag, uniform_cluster


@pytest.mark.parametrize("seed", range(8))
def test_every_edge_runs_from_a_part_to_itself_or_a_later_one(seed):
    graph, cluster = random_dag(30, edge_prob=0.2, seed=seed), uniform_cluster(3)
    placement = Placement.for_graph(graph, np.random.default_rng(seed).integers(0, 3, graph.num_ops))
    parts = device_parts(graph, cluster, placement)
    owner = part_of(parts, graph.num_ops)
    assert sorted(i for p in parts for i in p.ops) == list(range(graph.num_ops))
    assert all(owner[u] <= owner[v] for u, v in graph.edge_index.T.tolist())
    assert all(set(placement.devices[list(p.ops)].tolist()) == {p.device} for p in parts)
    assert [p.stage for p in parts] == list(range(len(parts)))


def test_a_pipeline_of_devices_is_one_part_per_device():
    graph, cluster = random_dag(30, edge_prob=0.2, seed=1), uniform_cluster(3)
    placement = Placement.for_graph(graph, np.arange(graph.num_ops) * 3 // graph.num_ops)  # edges go up only
    assert [p.device for p in device_parts(graph, cluster, placement)] == [0, 1, 2]


def test_skipped_ops_are_in_no_part_and_constrain_nothing():
    graph, cluster = random_dag(10, edge_prob=0.3, seed=2), uniform_cluster(2)
    placement = Placement.for_graph(graph, np.zeros(graph.num_ops, dtype=int))
    parts = device_parts(graph, cluster, placement, skip=[0])
    assert part_of(parts, graph.num_ops)[0] == -1 and len(parts) == 1


@pytest.mark.parametrize(("skip", "error", "says"), [(["op0"], TypeError, "op indices"),
                                                     ([99], ValueError, "out of range"),
                                                     ([-1], ValueError, "out of range")])
def test_skip_takes_op_indices_in_range_only(skip, error, says):
    """A name or an index past the graph was numpy's IndexError; -1 skipped the last op without a word."""
    graph, cluster = random_dag(10, edge_prob=0.2, seed=0), uniform_cluster(2)
    with pytest.raises(error, match=says):
        device_parts(graph, cluster, Placement.single(graph, 0), skip=skip)
