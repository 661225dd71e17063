"""What the stage placers say when no split fits memory: three 6 MB layers on two 10 MB GPUs (each layer fits a
GPU and all of them fit both together, but no packing does)."""

from __future__ import annotations

import pytest

from gplace.baselines import PlacementInfeasibleError
from gplace.baselines.pipeline import IdealDPPartitioner, PipeDreamPartitioner, PipelineILPPlacer
from gplace.ir import Cluster, Device, Edge, Op, OpGraph
from gplace.testing import MB


def _packing() -> tuple[OpGraph, Cluster]:
    graph = OpGraph.from_ops([Op(f"l{i}", "L", 1.0, persistent_memory=6 * MB) for i in range(3)],
                             [Edge("l0", "l1"), Edge("l1", "l2")], name="pack")
    devices = [Device(f"/GPU:{i}", "gpu", 1.0, 10 * MB) for i in range(2)]
    return graph, Cluster.build(devices, default_bandwidth=1e9, name="c")


def test_the_exact_dp_says_no_contiguous_split_fits() -> None:
    """It passed on GPipe's greedy message (its last fallback's), blaming op 'l2'."""
    with pytest.raises(PlacementInfeasibleError, match="no contiguous split into 2 stages fits") as caught:
        IdealDPPartitioner(microbatches=4).place(*_packing())
    assert "'l2'" not in str(caught.value)


def test_the_ilp_names_memory_when_no_packing_fits() -> None:
    """It gave HiGHS's status line alone where neither one unit nor the total was too large."""
    with pytest.raises(PlacementInfeasibleError, match=r"memory: no assignment of the 3 units \(18,000,000 bytes"):
        PipelineILPPlacer(microbatches=4).place(*_packing())


def test_pipedream_names_the_total_memory_when_it_is_short():
    """It gave the capacities alone ('no contiguous split of 3 blocks into 2 stages fits ...'), where GPipe and the
    exact DP give the ops' bytes in all."""
    graph = OpGraph.from_ops([Op(f"l{i}", "L", 1.0, persistent_memory=8 * MB) for i in range(3)],
                             [Edge("l0", "l1"), Edge("l1", "l2")], name="big")
    cluster = Cluster.build([Device(f"/GPU:{i}", "gpu", 1.0, 10 * MB) for i in range(2)], default_bandwidth=1e9)
    with pytest.raises(PlacementInfeasibleError, match=r"the ops need 24,000,000 bytes in all"):
        PipeDreamPartitioner(microbatches=4).place(graph, cluster)


def test_pipedream_names_the_pin_no_split_meets():
    """Ops pinned gpu, cpu, gpu, cpu along a chain: PipeDream blamed memory ('no contiguous split of 4 blocks into 2
    stages fits the stage devices' memory'), of which each device had 1 GB for 40 bytes."""
    cluster = Cluster.build([Device("/CPU:0", "cpu", 1.0, 10**9), Device("/GPU:0", "gpu", 1.0, 10**9)],
                            default_bandwidth=1e9)
    ops = [Op(f"a{i}", "T", 1.0, pinned=("gpu", "cpu")[i % 2], output_bytes=10) for i in range(4)]
    graph = OpGraph.from_ops(ops, [Edge(f"a{i}", f"a{i + 1}") for i in range(3)], name="alternating")
    with pytest.raises(PlacementInfeasibleError, match=r"op 'a1' may run only on stages \[0\] \(its pins"):
        PipeDreamPartitioner(kind=None, microbatches=2).place(graph, cluster)
