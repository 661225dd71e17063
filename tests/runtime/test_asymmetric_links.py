"""Links whose two directions differ (``Link.reverse_bandwidth`` / ``reverse_latency``): a transfer from ``s`` to
``d`` takes ``latency[s, d] + bytes / bandwidth[s, d]`` in ``sim-v1`` (event loop and ``step_times``' one-pass
kernel) and ``pipe-v3``, checked by hand and against the plain-Python references."""

from __future__ import annotations

import numpy as np
import pytest

from gplace.ir import Cluster, Device, Link, Placement
from gplace.pipeline import PipelineSimulator
from gplace.runtime import Simulator
from gplace.testing import MB, chain, random_dag
from tests.pipeline.graphs import random_training_dag
from tests.pipeline.reference import reference_minibatch
from tests.reference_sim import simulate

# a0 (1 s) -> a1 (1 s), 1 MB edge. GPU:0 -> GPU:1: 0.5 s + 1 MB / (1 MB/s) = 1.5 s; back: 7 s + 1 MB / (1 kB/s)
# = 1007 s. Step: 1 + 1.5 + 1 = 3.5 one way, 1 + 1007 + 1 = 1009 the other.
FORWARD, BACKWARD = ([0, 1], 3.5, (1.0, 2.5)), ([1, 0], 1009.0, (1.0, 1008.0))


def _one_way_link() -> Cluster:
    """Two GPUs: 1e6 B/s and 0.5 s from GPU:0 to GPU:1, 1e3 B/s and 7 s back."""
    return Cluster.build([Device("/GPU:0", "gpu"), Device("/GPU:1", "gpu")],
                         links=[Link("/GPU:0", "/GPU:1", bandwidth=1e6, latency=0.5,
                                     reverse_bandwidth=1e3, reverse_latency=7.0)], name="one_way")


@pytest.mark.parametrize(("devices", "step", "transfer"), [FORWARD, BACKWARD])
def test_sim_v1_event_loop_times_a_transfer_by_its_own_direction(devices, step, transfer):
    """``Simulator.schedule``: the transfer uses the link's bandwidth and latency from the producer's device."""
    g, c = chain((1.0, 1.0), nbytes=MB), _one_way_link()
    s = Simulator().schedule(g, c, Placement.for_graph(g, devices))
    assert s.step_time == step
    assert (s.transfer_start.tolist(), s.transfer_end.tolist()) == ([transfer[0]], [transfer[1]])
    assert Simulator().measure(g, c, Placement.for_graph(g, devices)).step_time == step


def test_sim_v1_step_times_time_a_transfer_by_its_own_direction():
    """``Simulator.step_times`` (its one-pass kernel: memory cannot run out here) gives the same step times."""
    g, c = chain((1.0, 1.0), nbytes=MB), _one_way_link()
    rows = np.array([FORWARD[0], BACKWARD[0]])
    assert Simulator().step_times(g, c, rows).tolist() == [FORWARD[1], BACKWARD[1]]


@pytest.mark.parametrize(("devices", "step", "transfer"), [FORWARD, BACKWARD])
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipe_v2_times_a_transfer_by_its_own_direction(devices, step, transfer, schedule):
    """``pipe-v3`` with one micro-batch: the same chain takes the same time as in ``sim-v1``."""
    g, c = chain((1.0, 1.0), nbytes=MB), _one_way_link()
    sim = PipelineSimulator(microbatches=1, schedule=schedule)
    assert sim.simulate(g, c, Placement.for_graph(g, devices)).minibatch_time == step
    assert sim.minibatch_times(g, c, np.array([devices])).tolist() == [step]


def _random_asymmetric_cluster(rng: np.random.Generator) -> Cluster:
    """2-4 GPUs; each pair's two directions get their own bandwidth (1e5-1e7 B/s) and latency (0-0.05 s)."""
    n = int(rng.integers(2, 5))
    devices = [Device(f"/GPU:{i}", "gpu", float(rng.choice([0.5, 1.0, 2.0]))) for i in range(n)]
    links = [Link(devices[i].name, devices[j].name, *(float(x) for x in (
        10 ** rng.uniform(5, 7), rng.uniform(0, 0.05), 10 ** rng.uniform(5, 7), rng.uniform(0, 0.05))))
        for i in range(n) for j in range(i + 1, n)]
    return Cluster.build(devices, links, name="asymmetric")


@pytest.mark.parametrize("seed", range(6))
def test_sim_v1_equals_the_reference_on_asymmetric_links(seed):
    """The event loop and ``step_times`` give the plain-Python reference's step time (exactly) on random DAGs,
    placements and asymmetric clusters."""
    rng = np.random.default_rng(seed)
    graph, cluster = random_dag(10, 0.3, seed), _random_asymmetric_cluster(rng)
    rows = rng.integers(0, cluster.num_devices, (6, graph.num_ops))
    expected = []
    for row in rows:
        want, got = simulate(graph, cluster, Placement.for_graph(graph, row)), Simulator().schedule(
            graph, cluster, Placement.for_graph(graph, row))
        assert got.step_time == want.step_time
        np.testing.assert_array_equal(got.op_start, want.op_start)
        expected.append(want.step_time)
    assert Simulator().step_times(graph, cluster, rows).tolist() == expected


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("seed", range(4))
def test_pipe_v2_equals_the_reference_on_asymmetric_links(schedule, seed):
    """``pipe-v3`` gives the plain-Python reference's mini-batch time (exactly) on random training DAGs and
    asymmetric clusters."""
    rng = np.random.default_rng(seed)
    graph, cluster = random_training_dag(int(rng.integers(3, 7)), seed), _random_asymmetric_cluster(rng)
    m = int(rng.integers(1, 5))
    sim = PipelineSimulator(microbatches=m, schedule=schedule)
    for _ in range(3):
        devices = rng.integers(0, cluster.num_devices, graph.num_ops)
        t = reference_minibatch(graph, cluster, devices, m, schedule)[0]
        assert sim.simulate(graph, cluster, Placement.for_graph(graph, devices.tolist())).minibatch_time == t
