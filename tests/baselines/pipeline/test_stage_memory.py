"""The stage placers' static memory counts the outputs of forward ops only, as ``pipe-v2`` holds them: two layers,
each a forward op and its colocated backward op with 1 MB outputs, on two GPUs of 1.5 MB (one layer per GPU fits
in ``pipe-v2``; counting the backward outputs too, every placer refused)."""

from __future__ import annotations

import numpy as np
import pytest

from gplace.baselines.pipeline import GPipePartitioner, IdealDPPartitioner, PipeDreamPartitioner, PipelineILPPlacer
from gplace.baselines.pipeline.stages import stage_memory
from gplace.ir import Cluster, Device, Edge, Op, OpGraph
from gplace.pipeline import PipelineSimulator
from gplace.testing import MB


def _two_layers() -> tuple[OpGraph, Cluster]:
    ops = []
    for i in range(2):
        ops += [Op(f"f{i}", "L", 1.0, output_bytes=MB, colocation=f"l{i}", phase="forward"),
                Op(f"b{i}", "G", 2.0, output_bytes=MB, colocation=f"l{i}", phase="backward", grad_of=f"f{i}")]
    edges = [Edge("f0", "f1"), Edge("f1", "b1"), Edge("b1", "b0"), Edge("f0", "b0")]
    graph = OpGraph.from_ops(ops, edges, name="fb2")
    devices = [Device(f"/GPU:{i}", "gpu", 1.0, int(1.5 * MB)) for i in range(2)]
    return graph, Cluster.build(devices, default_bandwidth=1e6, name="c")


def test_only_forward_outputs_count() -> None:
    graph, _ = _two_layers()
    np.testing.assert_array_equal(stage_memory(graph), [MB, 0, MB, 0])


@pytest.mark.parametrize("placer", [GPipePartitioner, PipeDreamPartitioner, IdealDPPartitioner, PipelineILPPlacer])
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_a_split_that_fits_in_pipe_v2_is_found(placer: type, schedule: str) -> None:
    graph, cluster = _two_layers()
    placement = placer(microbatches=4).place(graph, cluster)  # the static model is the same for both schedules
    assert PipelineSimulator(4, schedule).measure(graph, cluster, placement).ok
