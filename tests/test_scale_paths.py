"""From a probe of large graphs: the single-device baselines built each device's placer from scratch (N D^2: 16 s
for 20,000 ops on 128 devices); m-SCT's LP had no time limit (82 s on 6,500 ops); random_dag drew one number per
pair in Python (15 s for 8,000 ops). The faster paths give what the slower ones gave."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

from gplace.baselines import MSCT, PlacementInfeasibleError, SingleDevice
from gplace.baselines.single import each_device
from gplace.ir import Cluster, Device, Op, OpGraph
from gplace.testing import layered_dag, random_dag


def test_each_device_gives_what_a_placer_per_device_gives():
    ops = [dataclasses.replace(op, cost=None, kind_cost={"cpu": op.cost, "gpu": op.cost / 4})
           for op in random_dag(30, seed=2).ops()]  # none for the TPU: no op may run there
    ops[3] = dataclasses.replace(ops[3], pinned="gpu")
    ops[7] = dataclasses.replace(ops[7], cost=None, kind_cost={"cpu": 1e-3})
    graph = OpGraph.from_ops(ops, random_dag(30, seed=2).edges(), name="mixed")
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/GPU:0", "gpu", 2.0), Device("/GPU:1", "gpu"),
                             Device("/TPU:0", "tpu")], default_bandwidth=1e9)
    refused = 0
    for device, placed in each_device(graph, cluster):
        try:
            expected = SingleDevice(device=device).place(graph, cluster)
        except PlacementInfeasibleError as err:
            assert isinstance(placed, PlacementInfeasibleError) and str(placed) == str(err)
            refused += 1
            continue
        assert placed == expected
    assert refused == 1


def test_m_sct_falls_back_to_the_greedy_favourite_child_past_its_lp_time_limit(caplog):
    graph = layered_dag(300)
    cluster = Cluster.build([Device(f"/GPU:{i}", "gpu") for i in range(4)], default_bandwidth=1e10)
    with caplog.at_level(logging.WARNING, logger="gplace.baselines.m_sct"):
        MSCT(lp_seconds=1e-9).place(graph, cluster).validate(graph, cluster)
    assert "took longer than lp_seconds=1e-09" in caplog.text
    with pytest.raises(ValueError, match="lp_seconds must be a number of seconds > 0"):
        MSCT(lp_seconds=0)
    assert MSCT(lp_seconds=np.float32(5)).lp_seconds == 5.0


def test_random_dag_draws_the_graphs_it_drew_before():
    assert random_dag(20, 0.15, 0).fingerprint == "ef38d4c38d57400e"
    assert random_dag(60, 0.5, 3).fingerprint == "fe95c4a0fee06b76"
    assert random_dag(1).num_edges == 0 and isinstance(random_dag(1).ops()[0], Op)
