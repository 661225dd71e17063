"""``pipe-steady-v1`` terms pinned by hand-computed cases a second round of mutation testing found unchecked: a
micro-batch's share of an edge is rounded up, update ops and their transfers stay out of the loads, and the batch
path scores each placement by its busiest device."""

from __future__ import annotations

import numpy as np
import pytest

from gplace.ir import Edge, Op, OpGraph, Placement
from gplace.pipeline import SteadyStateScore, pipeline_bytes_moved, steady_state_loads
from gplace.testing import chain, uniform_cluster


def test_a_microbatchs_share_of_an_edge_is_rounded_up() -> None:
    """Chain of 1 s and 3 s, a 5 B edge, M = 4, 1 B/s links, no latency, one op per device: each micro-batch
    sends ceil(5 / 4) = 2 B, 2 s charged at both ends, so the loads are 1/4 + 2 and 3/4 + 2."""
    g, c = chain((1.0, 3.0), nbytes=5), uniform_cluster(2, bandwidth=1.0, latency=0.0)
    loads = steady_state_loads(g, c, Placement.for_graph(g, [0, 1]), microbatches=4)
    assert loads.tolist() == pytest.approx([2.25, 2.75])


def _update_graph() -> OpGraph:
    """f0 (1 s) -> b0 (1 s) -> u0 (update, 8 s) -> u1 (update, 0 s), u0 -> u1 carrying 1000 B."""
    ops = [Op("f0", "L", 1.0, phase="forward"), Op("b0", "G", 1.0, phase="backward"),
           Op("u0", "U", 8.0, phase="update"), Op("u1", "U", 0.0, phase="update")]
    return OpGraph.from_ops(ops, [Edge("f0", "b0", 0), Edge("b0", "u0", 0), Edge("u0", "u1", 1000)], name="upd")


def test_update_ops_and_their_transfers_are_left_out_of_the_loads() -> None:
    """On devices [0, 0, 0, 1] with M = 4 and 0.5 s latency: device 0 computes (1 + 1) / 4 = 0.5 s per micro-batch
    (u0's 8 s is an update op, left out) and the only cross-device edge, u0 -> u1, is an update op's, also left out
    (0.5 s of latency at both ends if counted); device 1 holds only u1. Score 4 x 0.5 = 2 s; bytes_moved is the
    update edge once, whole: 1000 B."""
    g, c = _update_graph(), uniform_cluster(2, bandwidth=1e6, latency=0.5)
    p = Placement.for_graph(g, [0, 0, 0, 1])
    assert steady_state_loads(g, c, p, microbatches=4).tolist() == pytest.approx([0.5, 0.0])
    measured = SteadyStateScore(4).measure(g, c, p)
    assert measured.step_time == pytest.approx(2.0) and measured.bytes_moved == 1000


def test_the_batch_path_scores_each_placement_by_its_busiest_device() -> None:
    """Chain of 1 s and 3 s with free edges, M = 4: [0, 1] loads 0.25 and 0.75 s, score 4 x 0.75 = 3 s; [0, 0]
    and [1, 1] load one device 1 s, score 4 s. The batch agrees with measuring one at a time."""
    g, c = chain((1.0, 3.0), nbytes=0), uniform_cluster(2)
    score = SteadyStateScore(4)
    rows = np.array([[0, 1], [0, 0], [1, 1]])
    assert score.minibatch_times(g, c, rows).tolist() == pytest.approx([3.0, 4.0, 4.0])
    assert score.measure(g, c, Placement.for_graph(g, [0, 1])).step_time == pytest.approx(3.0)


def test_a_placement_that_is_no_placement_is_named_as_simulate_names_it() -> None:
    """steady_state_loads and pipeline_bytes_moved of a list raised "'list' object has no attribute 'validate'"."""
    graph, cluster = chain((1.0, 2.0, 3.0)), uniform_cluster(2)
    for count in (steady_state_loads, pipeline_bytes_moved):
        with pytest.raises(TypeError, match=r"^placement must be a gplace Placement, got list; make one"):
            count(graph, cluster, [0, 1, 0], 4)
