"""Out of memory under a pipeline runtime: the hint "op X alone needs ... no placement fits" counts what the
pipeline holds of an op (one micro-batch's share of a forward op's output, no output for a backward op), not the
whole output a step holds; it told a user whose split merely ran out of memory that nothing could fit."""

from __future__ import annotations

import pytest

import gplace
from gplace.baselines import PlacementInfeasibleError
from gplace.ir import Edge, Op, OpGraph, Placement
from gplace.pipeline import PipelineSimulator
from gplace.testing import uniform_cluster

MB = 10**6


def _chain():
    ops = [Op("a0", "T", 1.0, output_bytes=2 * MB, temporary_memory=int(8.5 * MB)),
           Op("a1", "T", 1.0, temporary_memory=int(9.8 * MB)),
           Op("a2", "T", 3.0, temporary_memory=int(9.8 * MB))]
    return OpGraph.from_ops(ops, [Edge("a0", "a1"), Edge("a1", "a2")], name="c3")


def test_a_split_out_of_memory_is_not_called_hopeless_when_another_fits():
    graph, cluster, pipeline = _chain(), uniform_cluster(2, memory=10 * MB), PipelineSimulator(4, "gpipe")
    assert pipeline.measure(graph, cluster, Placement.for_graph(graph, [0, 1, 1])).ok  # a placement that fits
    with pytest.raises(PlacementInfeasibleError) as err:
        gplace.place(graph, cluster, method="ideal_dp", runtime=pipeline)
    assert "out of memory" in str(err.value)
    assert "no placement fits" not in str(err.value), str(err.value)


def test_an_op_no_device_holds_one_micro_batch_of_is_still_named():
    graph, cluster = _chain(), uniform_cluster(2, memory=9 * MB)
    with pytest.raises(PlacementInfeasibleError) as err:
        gplace.place(graph, cluster, method="ideal_dp", runtime=PipelineSimulator(4, "gpipe"))
    assert "op 'a1' alone needs 9.8 MB" in str(err.value), str(err.value)
    assert "no placement fits" in str(err.value)
