"""1F1B with an input-less backward source (a gradient tape's shape constant, as a Keras training step imports):
it is ready at t = 0 for every micro-batch, ungated (pipe-v2 ran it then), and must not open them all, so
``in_flight`` stays at the 1F1B bound ``L_d = min(M, S - k)``."""

from __future__ import annotations

import numpy as np
import pytest

from gplace.ir import Edge, Op, OpGraph, Placement
from gplace.pipeline import PipelineSimulator
from gplace.testing import uniform_cluster

MB = 10**6


def _graph() -> OpGraph:
    """f0 -> f1 -> b1 -> b0, each 1 s and 1 MB; ``shape``, a backward source of no time, feeds b0."""
    ops = [Op("f0", "L", 1.0, output_bytes=MB, phase="forward"), Op("f1", "L", 1.0, output_bytes=MB, phase="forward"),
           Op("b1", "G", 1.0, phase="backward", grad_of="f1"), Op("b0", "G", 1.0, phase="backward", grad_of="f0"),
           Op("shape", "Const", 0.0, output_bytes=8, phase="backward")]
    edges = [Edge("f0", "f1"), Edge("f1", "b1"), Edge("b1", "b0"), Edge("f0", "b0"), Edge("shape", "b0", 8)]
    return OpGraph.from_ops(ops, edges, name="tape_const")


@pytest.mark.parametrize(("devices", "bound", "peak"), [
    ([0, 0, 0, 0, 0], [1, 0], [2 * MB // 8, 0]),  # one stage: one micro-batch at a time (was [8, 0])
    ([0, 1, 1, 0, 0], [2, 1], [2 * MB // 8, MB // 8]),  # two stages (was [8, 1])
    ([0, 1, 1, 0, 1], [2, 1], [2 * MB // 8, MB // 8]),  # the source on the last stage (was [2, 8])
])
def test_one_f_one_b_in_flight_keeps_its_bound_with_an_input_less_backward_source(devices, bound, peak):
    graph, cluster = _graph(), uniform_cluster(2)
    sim = PipelineSimulator(microbatches=8, schedule="1f1b")
    sched = sim.simulate(graph, cluster, Placement.for_graph(graph, devices))
    assert sched.in_flight.tolist() == bound
    assert sched.peak_memory.tolist() == peak
    assert sim.minibatch_times(graph, cluster, np.array([devices])).tolist() == [sched.minibatch_time]


def test_a_device_with_only_backward_instances_holds_no_micro_batch():
    """Its ops keep no activations: nothing is in flight there, under either schedule."""
    graph, cluster = _graph(), uniform_cluster(3)
    for schedule in ("gpipe", "1f1b"):
        sched = PipelineSimulator(4, schedule).simulate(graph, cluster, Placement.for_graph(graph, [0, 1, 1, 0, 2]))
        assert sched.in_flight[2] == 0 and sched.peak_memory[2] == 0
