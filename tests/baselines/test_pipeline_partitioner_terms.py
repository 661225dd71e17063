"""The pipeline partitioners' cost terms on chains small enough to cost by hand: each stage's work, sent and
received seconds, micro-batching, the transfers inside a stage the DPs must not charge, GPipe's midpoint rule and
memory exactly at a device's capacity."""

from __future__ import annotations

import numpy as np
import pytest

from gplace import testing
from gplace.baselines.pipeline import StageProblem
from gplace.baselines.pipeline.contiguous import (
    GPipePartitioner,
    chain_partition,
    enumerate_ideals,
    ideal_partition,
)
from gplace.ir import Edge, Op, OpGraph
from gplace.testing import MB


def _problem(graph: OpGraph, overlap: bool = True, microbatches: int = 1, **cluster) -> StageProblem:
    return StageProblem(graph, testing.uniform_cluster(2, **cluster), overlap=overlap, microbatches=microbatches)


def _chain_dp(problem: StageProblem) -> np.ndarray:
    return chain_partition(problem.blocks(), problem.capacity)


def _ideal_dp(problem: StageProblem) -> np.ndarray:
    blocks = problem.blocks()
    return ideal_partition(blocks, enumerate_ideals(blocks.forward, 64), problem.capacity)


@pytest.mark.parametrize(("overlap", "microbatches", "loads"), [
    (True, 1, [2.5, 2.5]),   # max(1, sent 2.5), max(2, received 2.5)
    (False, 1, [3.5, 4.5]),  # 1 + 2.5, 2 + 2.5
    (False, 2, [2.0, 2.5]),  # per micro-batch: work 0.5 and 1, a 1 MB half over the link: 0.5 + 1 = 1.5 s
])
def test_stage_loads_add_work_sent_and_received_seconds(overlap: bool, microbatches: int, loads: list[float]) -> None:
    """a0 -> a1 -> a2, 1 s each, 2 MB edges over 1 MB/s with 0.5 s latency (2.5 s an edge), split a0 | a1 a2."""
    problem = _problem(testing.chain((1.0, 1.0, 1.0), nbytes=2 * MB), overlap, microbatches, bandwidth=1e6,
                       latency=0.5)
    np.testing.assert_allclose(problem.stage_loads(np.array([0, 1, 1])), loads)


@pytest.mark.parametrize("dp", [_chain_dp, _ideal_dp], ids=["chain", "ideals"])
@pytest.mark.parametrize(("edges", "best"), [((10.0, 0.1), [0, 0, 1]), ((0.1, 10.0), [0, 1, 1])])
def test_the_dps_charge_no_transfer_inside_a_stage(dp, edges: tuple[float, float], best: list[int]) -> None:
    """a0 -> a1 -> a2, 1 s each, one edge of 10 s and one of 0.1 s: the best split keeps the heavy edge inside a
    stage (bottleneck 2 s, two ops on one device); a DP that charged it to that stage's sent or received seconds
    would see 10 s there and cut it instead (10 s)."""
    ops = [Op(f"a{i}", "T", 1.0) for i in range(3)]
    graph = OpGraph.from_ops(ops, [Edge("a0", "a1", int(edges[0] * MB)), Edge("a1", "a2", int(edges[1] * MB))])
    problem = _problem(graph, bandwidth=1e6)
    stages = problem.unit_stages(problem.blocks(), dp(problem))
    assert stages.tolist() == best and problem.bottleneck(stages) == pytest.approx(2.0)


@pytest.mark.parametrize("dp", [_chain_dp, _ideal_dp], ids=["chain", "ideals"])
def test_the_dps_charge_a_stage_what_it_receives(dp) -> None:
    """a0 (2 s) and a1 (2 s) each send 2 s to a2 (1 s), three stages: a0 | a1 | a2 leaves a2's stage receiving
    4 s (bottleneck 4); a0 | a1 a2 is best, 3 s (a1 and a2 take 3 s, receiving 2). A DP that took a stage's
    received seconds for its sent ones would see a2 alone cost 1 s and pick the three-way split."""
    ops = [Op("a0", "T", 2.0), Op("a1", "T", 2.0), Op("a2", "T", 1.0)]
    graph = OpGraph.from_ops(ops, [Edge("a0", "a2", 2 * MB), Edge("a1", "a2", 2 * MB)])
    problem = StageProblem(graph, testing.uniform_cluster(3, bandwidth=1e6), overlap=True)
    stages = problem.unit_stages(problem.blocks(), dp(problem))
    assert problem.bottleneck(stages) == pytest.approx(3.0)


def test_gpipe_puts_each_unit_where_its_compute_midpoint_falls() -> None:
    """Costs 1..8 (total 36) on 4 stages: the midpoints 0.5, 2, 4.5, 8, 12.5, 18, 24.5, 32 fall in quarters 0, 0, 0,
    0, 1, 2, 2, 3, so the loads are 10, 5, 13, 8 (the class docstring's example)."""
    graph = testing.chain(tuple(float(c) for c in range(1, 9)), nbytes=0)
    problem = StageProblem(graph, testing.uniform_cluster(4), overlap=True)
    stages = GPipePartitioner().stages(problem)
    assert stages.tolist() == [0, 0, 0, 0, 1, 2, 2, 3]
    np.testing.assert_allclose(problem.stage_loads(stages), [10.0, 5.0, 13.0, 8.0])


@pytest.mark.parametrize("dp", [_chain_dp, _ideal_dp], ids=["chain", "ideals"])
def test_the_dps_fill_a_device_exactly_to_its_capacity(dp) -> None:
    """a0 -> a1, 1 s and 1 MB each, a 10 s edge (1 MB at 100 KB/s): both ops on one 2 MB device take 2 s; a DP
    that refused a stage of exactly 2 MB would cut the edge (10 s)."""
    problem = _problem(testing.chain((1.0, 1.0), nbytes=MB), memory=2 * MB, bandwidth=1e5)
    stages = problem.unit_stages(problem.blocks(), dp(problem))
    assert len(set(stages.tolist())) == 1 and problem.bottleneck(stages) == pytest.approx(2.0)


def test_gpipe_fills_a_stage_exactly_to_its_capacity() -> None:
    """Four 1 s, 1 MB ops on two 2 MB devices: GPipe's balanced split a0 a1 | a2 a3 fills both exactly."""
    problem = _problem(testing.chain((1.0,) * 4, nbytes=MB), memory=2 * MB)
    assert GPipePartitioner().stages(problem).tolist() == [0, 0, 1, 1]
