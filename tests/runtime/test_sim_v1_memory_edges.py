"""``sim-v1`` at the edges of its memory check and of its busy-until bookkeeping, with hand-computed answers.

Each test runs both paths: ``measure``/``schedule`` (the event loop) and ``step_times`` (the one-pass kernel,
which falls back to the event loop when the graph might not fit, see ``Simulator.step_times``).
"""

from __future__ import annotations

import numpy as np
import pytest

from gplace.ir import Edge, Op, OpGraph, Placement
from gplace.runtime import Simulator, schedule
from gplace.testing import MB, uniform_cluster


@pytest.fixture(scope="module")
def sim() -> Simulator:
    return Simulator()


def _graph(ops: list[Op], edges: list[Edge]) -> OpGraph:
    return OpGraph.from_ops(ops, edges, name="edges")


def test_a_peak_exactly_at_the_memory_limit_fits(sim: Simulator) -> None:
    """a0 -> a1 -> a2 on one device, cost 1 and 1 MB output each: a1 runs 1..2 holding a0's and its own output
    (2 MB); at 2 a0's is freed before a2 allocates, so the peak is 2 MB. With 2 MB the step runs in 3 s; one byte
    less is out of memory. (The graph could hold 5 MB at once, so step_times takes the event loop here.)"""
    g = _graph([Op(f"a{i}", "T", 1.0, output_bytes=MB) for i in range(3)], [Edge("a0", "a1"), Edge("a1", "a2")])
    exact, short = uniform_cluster(2, memory=2 * MB), uniform_cluster(2, memory=2 * MB - 1)
    p = Placement.single(g, 0)
    m = sim.measure(g, exact, p)
    assert m.ok and m.step_time == 3.0 and m.peak_memory.tolist() == [2 * MB, 0]
    assert sim.step_times(g, exact, np.array([p.devices])).tolist() == [3.0]
    assert not sim.measure(g, short, p).ok
    assert sim.step_times(g, short, np.array([p.devices])).tolist() == [np.inf]


def test_a_received_copy_larger_than_its_output_counts_against_memory(sim: Simulator) -> None:
    """a (1 MB output) sends 5 MB over its edge to b: on GPU 1 (4 MB) the received copy alone is out of memory;
    with both on GPU 0 the peak is a's 1 MB output and the step 2 s (1 + 5 + 1 = 7 s had the copy been left out)."""
    g = _graph([Op("a", "T", 1.0, output_bytes=MB), Op("b", "T", 1.0)], [Edge("a", "b", 5 * MB)])
    c = uniform_cluster(2, memory=4 * MB, bandwidth=1e6)
    assert not sim.measure(g, c, Placement.for_graph(g, [0, 1])).ok
    assert sim.step_times(g, c, np.array([[0, 1], [0, 0]])).tolist() == [np.inf, 2.0]


@pytest.mark.parametrize("held", ["temporary_memory", "persistent_memory"])
def test_memory_an_op_holds_without_an_output_counts_against_memory(sim: Simulator, held: str) -> None:
    """a (5 MB of scratch, or of weights) -> b, both on a 4 MB device: a's 5 MB alone do not fit, though no op has
    an output and b, the last op, holds nothing (a bound that kept only the last op's scratch would pass)."""
    g = _graph([Op("a", "T", 1.0, **{held: 5 * MB}), Op("b", "T", 1.0)], [Edge("a", "b", 0)])
    c = uniform_cluster(2, memory=4 * MB)
    m = sim.measure(g, c, Placement.single(g, 0))
    assert not m.ok and m.peak_memory.tolist() == [5 * MB, 0]
    assert sim.step_times(g, c, np.array([[0, 0]])).tolist() == [np.inf]


def test_a_busy_channel_delays_the_next_transfer_in_step_times(sim: Simulator) -> None:
    """p (3 MB) runs 0..1 and q (1 MB) 1..2 on GPU 0; their consumers s and r run on GPU 1, 1 MB/s. p's transfer
    holds the channel 1..4, so q's waits: 4..5; s runs 4..5, r 5..6: step 6 s. A channel free at once would send q's
    output 2..3 and run r 3..4, s 4..5: step 5 s."""
    ops = [Op("p", "T", 1.0, output_bytes=3 * MB), Op("q", "T", 1.0, output_bytes=MB), Op("s", "T", 1.0),
           Op("r", "T", 1.0)]
    g = _graph(ops, [Edge("p", "s"), Edge("q", "r")])
    c, devices = uniform_cluster(2, bandwidth=1e6), [0, 0, 1, 1]
    s = schedule(g, c, Placement.for_graph(g, devices))
    assert s.step_time == 6.0 and s.transfer_start.tolist() == [1.0, 4.0] and s.op_start.tolist() == [0, 1, 4, 5]
    assert sim.step_times(g, c, np.array([devices])).tolist() == [6.0]


def test_a_busy_device_delays_its_next_op_in_step_times(sim: Simulator) -> None:
    """Three independent ops of 1, 2 and 3 s on one device run back to back: 6 s in both paths (3 s had the
    device been free again at once)."""
    g = _graph([Op(f"o{i}", "T", float(i + 1)) for i in range(3)], [])
    c = uniform_cluster(2)
    s = schedule(g, c, Placement.single(g, 1))
    assert s.step_time == 6.0 and s.op_start.tolist() == [0, 1, 3] and s.busy_time.tolist() == [0, 6]
    assert sim.step_times(g, c, np.array([[1, 1, 1]])).tolist() == [6.0]
