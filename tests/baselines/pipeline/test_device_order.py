"""Contiguous splits on stage devices that differ: the same machine listed in another order gets the same split
(stage s ran on the s-th device as listed: a fast GPU listed first took the cheapest layer), and GPipe's balanced
split gives a faster device a larger share of the work."""

from __future__ import annotations

import itertools

import pytest

from gplace.baselines.pipeline import GPipePartitioner, IdealDPPartitioner, PipeDreamPartitioner, StageProblem
from gplace.ir import Cluster, Device, Edge, Link, Op, OpGraph
from gplace.pipeline import PipelineSimulator
from gplace.testing import MB


def _chain(costs: list[float]) -> OpGraph:
    ops = [Op(f"l{i}", "T", c, output_bytes=1000) for i, c in enumerate(costs)]
    return OpGraph.from_ops(ops, [Edge(f"l{i}", f"l{i + 1}") for i in range(len(costs) - 1)], name="chain")


def _gpus(*speeds: float) -> Cluster:
    return Cluster.build([Device(f"/GPU:{i}", "gpu", s) for i, s in enumerate(speeds)], default_bandwidth=1e9,
                         name="mixed")


@pytest.mark.parametrize("placer", [IdealDPPartitioner(microbatches=8), PipeDreamPartitioner(microbatches=8)])
def test_the_split_does_not_depend_on_the_order_the_devices_are_listed_in(placer) -> None:
    graph, simulator = _chain([1.0, 2.0, 3.0]), PipelineSimulator(8)
    times = {}
    for speeds in ((2.0, 1.0, 1.0), (1.0, 1.0, 2.0)):
        cluster = _gpus(*speeds)
        placement = placer.place(graph, cluster)
        assert cluster.devices[placement.devices[2]].speed == 2.0  # the largest layer on the fast GPU
        times[speeds] = simulator.measure(graph, cluster, placement).step_time
    assert times[(2.0, 1.0, 1.0)] == times[(1.0, 1.0, 2.0)]


def test_alike_devices_are_solved_in_index_order_only() -> None:
    """Links of one speed both ways do not make devices differ (the model costs them by their mean); speeds do:
    every order of up to four devices, and beyond, index order, its reverse, fastest first, slowest first."""
    assert StageProblem(_chain([1.0, 2.0]), _gpus(1.0, 1.0, 1.0)).orders() == [(0, 1, 2)]
    nvlink = Cluster.build([Device(f"/GPU:{i}", "gpu") for i in range(4)],
                           [Link("/GPU:0", "/GPU:1", 3e11), Link("/GPU:2", "/GPU:3", 3e11)], default_bandwidth=1e10)
    assert StageProblem(_chain([1.0, 2.0]), nvlink).orders() == [(0, 1, 2, 3)]
    assert StageProblem(_chain([1.0, 2.0]), _gpus(1.0, 2.0, 1.0)).orders() == list(itertools.permutations(range(3)))
    assert StageProblem(_chain([1.0, 2.0]), _gpus(1.0, 2.0, 1.0, 1.0, 1.0)).orders() == [
        (0, 1, 2, 3, 4), (4, 3, 2, 1, 0), (1, 0, 2, 3, 4), (4, 3, 2, 0, 1)]


@pytest.mark.parametrize("placer", [IdealDPPartitioner(microbatches=4), PipeDreamPartitioner(microbatches=4)])
def test_four_gpus_of_four_speeds_get_one_split_however_listed(placer) -> None:
    """Speeds 1, 2, 0.5, 1.5 listed so and sorted: the index order found a split the speed orders missed, so the
    two listings' bottlenecks were 14 % apart (the metamorphic probe's phased chain; a 7-layer chain here)."""
    graph, simulator = _chain([1.0, 2.0, 3.0, 1.0, 0.5, 2.5, 1.0]), PipelineSimulator(4)
    times = set()
    for speeds in itertools.permutations((1.0, 2.0, 0.5, 1.5)):
        cluster = _gpus(*speeds)
        times.add(simulator.measure(graph, cluster, placer.place(graph, cluster)).step_time)
    assert len(times) == 1, sorted(times)


def test_gpipe_gives_a_faster_device_a_larger_share() -> None:
    """Four equal layers on GPUs of speed 1 and 3: three on the fast one (two each: 6.0 s against 3.4 s)."""
    graph, cluster = _chain([1.0] * 4), _gpus(1.0, 3.0)
    assert GPipePartitioner(microbatches=8).place(graph, cluster).devices.tolist() == [0, 1, 1, 1]


@pytest.mark.parametrize("placer", [IdealDPPartitioner(microbatches=8), PipeDreamPartitioner(microbatches=8)])
def test_devices_of_one_speed_and_several_memory_sizes_in_any_listing(placer) -> None:
    """Three equal layers, the first of 6 MB, on GPUs of 10, 3 and 3 MB: listed (3, 10, 3), the index order and its
    reverse put the 6 MB layer second, so two layers shared a GPU (twice the time); the larger memory first is
    tried too now."""
    ops = [Op(f"l{i}", "T", 1.0, output_bytes=1000, persistent_memory=m * MB) for i, m in enumerate((6, 2, 2))]
    graph = OpGraph.from_ops(ops, [Edge("l0", "l1"), Edge("l1", "l2")], name="chain")
    times = []
    for memory in ((10, 3, 3), (3, 10, 3)):
        cluster = Cluster.build([Device(f"/GPU:{i}", "gpu", 1.0, m * MB) for i, m in enumerate(memory)],
                                default_bandwidth=1e9, name="mem")
        placement = placer.place(graph, cluster)
        times.append(PipelineSimulator(8).measure(graph, cluster, placement).step_time)
    assert times[1] == pytest.approx(times[0])
