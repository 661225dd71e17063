"""Step-time baseline terms pinned by hand-computed cases a second round of mutation testing found unchecked: the
critical path takes an op's latest input, the work-over-devices bound binds when per-kind costs make the speed
bound weak, and m-SCT's favourite children (the LP's one-favourite rows, the greedy fallback's order and its one
favourite parent per op)."""

from __future__ import annotations

import numpy as np
import pytest

from gplace.baselines import METF, MSCT, step_time_lower_bound
from gplace.baselines.lower_bound import critical_path
from gplace.baselines.m_sct import _solve_lp
from gplace.ir import Cluster, Device, Edge, Op, OpGraph
from gplace.testing import MB, uniform_cluster


def _join() -> OpGraph:
    """Sources a (1 s), b (5 s), c (2 s) all feeding join (1 s)."""
    ops = [Op("a", "T", 1.0), Op("b", "T", 5.0), Op("c", "T", 2.0), Op("join", "T", 1.0)]
    return OpGraph.from_ops(ops, [Edge("a", "join"), Edge("b", "join"), Edge("c", "join")], name="join3")


def test_the_critical_path_waits_for_the_latest_input() -> None:
    """join starts when its slowest input b ends at 5 s and ends at 6 s (not at 2 s or 3 s after a or c); the bound on
    two equal devices is that 6 s, above the work bound 9 / 2."""
    g = _join()
    assert critical_path(g, np.array([1.0, 5.0, 2.0, 1.0])) == pytest.approx(6.0)
    assert step_time_lower_bound(g, uniform_cluster(2)) == pytest.approx(6.0)


def test_the_work_over_devices_bound_binds_when_per_kind_costs_weaken_the_speed_bound() -> None:
    """Four independent ops costing 1 on cpu (speed 1) and 100 on gpu (speed 100) take 1 s on either device. Bound
    (2): their fastest durations 4 x 1 s over 2 devices = 2 s, which is the optimum (two ops per device). Bound (3):
    speed-1 work min(1, 100) = 1 each, 4 over total speed 101; the critical path is 1 s."""
    cluster = Cluster.build([Device("c", "cpu", 1.0), Device("g", "gpu", 100.0)], default_bandwidth=1e6)
    g = OpGraph.from_ops([Op(f"o{i}", "T", None, kind_cost={"cpu": 1.0, "gpu": 100.0}) for i in range(4)], [],
                         name="kinds4")
    np.testing.assert_allclose(g.durations(cluster), np.ones((4, 2)))
    assert step_time_lower_bound(g, cluster) == pytest.approx(2.0)


def _fork() -> OpGraph:
    """a -> c (edge 0, 1 MB) and a -> b (edge 1, 2 MB)."""
    ops = [Op("a", "T", 1.0), Op("b", "T", 5.0), Op("c", "T", 1.0)]
    return OpGraph.from_ops(ops, [Edge("a", "c", MB), Edge("a", "b", 2 * MB)], name="fork")


def test_the_m_sct_lp_allows_at_most_one_favourite_child() -> None:
    """Weights a 1, b 5, c 1, both edges cost 10. With t = x(a -> b) and u = x(a -> c) the makespan is
    max(1 + 10 t + 5, 1 + 10 u + 1), and the row "at most one favourite child" asks t + u >= 2 - 1 = 1: the optimum
    is 6 + 10 t = 12 - 10 t, t = 0.3, u = 0.7 (w = 9). Without that row both could be 0 (w = 6). Rounded below
    0.5: b is a's favourite."""
    g = _fork()
    weight, cost = np.array([1.0, 5.0, 1.0]), np.array([10.0, 10.0])
    np.testing.assert_allclose(_solve_lp(g, weight, cost), [0.7, 0.3], atol=1e-7)  # by edge: a -> c, a -> b
    assert MSCT().favourite_children(g, weight, cost).tolist() == [1, -1, -1]


def test_the_m_sct_greedy_fallback_takes_the_heaviest_edge_and_one_favourite_parent_per_op() -> None:
    """Greedy (no LP): edges by bytes, most first. x -> z (3 MB) makes z x's favourite; y -> z (2 MB) is then
    skipped (z already has a favourite parent); y -> w (1 MB) makes w y's favourite; x -> w (0.5 MB) is skipped (x
    has one). Fewest bytes first would give x w and y z instead."""
    ops = [Op(n, "T", 1.0) for n in ("x", "y", "z", "w")]
    edges = [Edge("y", "w", MB), Edge("x", "w", MB // 2), Edge("y", "z", 2 * MB), Edge("x", "z", 3 * MB)]
    g = OpGraph.from_ops(ops, edges, name="greedy")
    fav = MSCT(max_lp_variables=0).favourite_children(g, np.ones(4), np.ones(4))
    assert fav.tolist() == [2, 3, -1, -1]


def test_m_sct_keeps_a_device_for_the_favourite_child_when_another_device_only_ties() -> None:
    """Sources o0 (3 s), o1 (1 s), o2 (3 s), o4 (3 s); o0 and o2 feed o3 (2 s) over 0-byte edges, no latency.

    Greedy favourites (equal bytes, edge order): o3 is o0's favourite child. Upward ranks: o0 5, o2 5, o4 3, o3 2,
    o1 1. o0 goes to device 0 at 0 s (rank tie to the lower index), o2 to device 1 at 0 s; both end at 3 s, when o3
    arrives on both devices. Device 0 last ran o0, and o3 can start on device 1 no earlier (3 s, a tie), so device
    0 is kept for o3 (3-5 s) and o4 goes to device 1 (3-6 s); o1 then starts earliest on device 0 (5 s). Giving up
    on a tie would hand device 0 to the higher-ranked o4 instead: [0, 1, 1, 1, 0].
    """
    ops = [Op(f"o{i}", "T", cost) for i, cost in enumerate((3.0, 1.0, 3.0, 2.0, 3.0))]
    g = OpGraph.from_ops(ops, [Edge("o0", "o3", 0), Edge("o2", "o3", 0)], name="awaited")
    placed = MSCT(max_lp_variables=0).place(g, uniform_cluster(2, bandwidth=1e6, latency=0.0))
    assert placed.devices.tolist() == [0, 0, 1, 0, 1]


def test_m_etf_ranks_ops_with_their_mean_transfer_costs() -> None:
    """o0 (3 s) alone; o1 (1 s) -> o2 (1 s) over 3 B at 1 B/s (mean transfer 3 s). Upward ranks: o1 1 + 3 + 1 = 5,
    o0 3, o2 1, so at 0 s, where both sources could start on either device, o1 wins the tie and takes device 0
    (0-1 s), o0 device 1 (0-3 s), and o2 follows o1 on device 0 (1-2 s): [1, 0, 0]. Ranked with free transfers
    (o1 2 < o0 3), o0 would take device 0 and the chain device 1: [0, 1, 1]."""
    ops = [Op("o0", "T", 3.0), Op("o1", "T", 1.0), Op("o2", "T", 1.0)]
    g = OpGraph.from_ops(ops, [Edge("o1", "o2", 3)], name="ranked")
    placed = METF().place(g, uniform_cluster(2, bandwidth=1.0, latency=0.0))
    assert placed.devices.tolist() == [1, 0, 0]
