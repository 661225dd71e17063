"""Grouping rules pinned by hand-computed cases that a second round of mutation testing found unchecked: step c
adds up a merged run's memory, the ranking cost of an op with only per-kind costs is their mean, and an uncuttable
edge between ops that share no device kind is left cut."""

from __future__ import annotations

import numpy as np
import pytest

from gplace.grouping import group_ops, op_cost
from gplace.ir import Edge, Op, OpGraph


def test_step_c_counts_the_memory_of_a_merged_run_against_the_cap() -> None:
    """Chain a0 -> a1 -> a2 -> a3, each 1 s and 10 B persistent, step b off, one group wanted, cap 25 B.

    Every neighbouring pair holds 20 B <= 25: (a0, a1) merges first (equal costs, lowest position), then the run
    holds 20 B and (a0 a1, a2) would hold 30 B > 25, so only (a2, a3) merges next, and the two runs (20 B each,
    40 B together) stay apart: groups [0, 0, 1, 1]. A run that kept its first member's 10 B would absorb all four
    ops (40 B, over the cap).
    """
    ops = [Op(f"a{i}", "T", 1.0, persistent_memory=10) for i in range(4)]
    g = OpGraph.from_ops(ops, [Edge(f"a{i}", f"a{i + 1}", 0) for i in range(3)], name="mem4")
    grouping = group_ops(g, 1, merge_consumers=False, memory_cap=25)
    assert grouping.op_group.tolist() == [0, 0, 1, 1]
    assert np.bincount(grouping.op_group, weights=[10] * 4).max() <= 25


def test_op_cost_of_an_op_with_only_per_kind_costs_is_their_mean() -> None:
    """Op x has no generic cost, 1 s on cpu and 3 s on gpu: its ranking cost is (1 + 3) / 2 = 2 s; op y has
    only a gpu cost of 5 s: 5 s (a mean over the one known kind, not over every kind); op z's generic 7 s wins."""
    ops = [Op("x", "T", None, kind_cost={"cpu": 1.0, "gpu": 3.0}), Op("y", "T", None, kind_cost={"gpu": 5.0}),
           Op("z", "T", 7.0)]
    g = OpGraph.from_ops(ops, [Edge("x", "y"), Edge("y", "z")], name="kinds")
    assert op_cost(g).tolist() == pytest.approx([2.0, 5.0, 7.0])


def test_an_uncuttable_edge_between_ops_pinned_to_different_kinds_stays_cut() -> None:
    """a is pinned to cpu, b to gpu, c runs anywhere; both edges are given as uncuttable. Step a merges the ends
    of an edge only where their kinds allow: b and c share a group, a stays alone (merging it with b would put a
    cpu pin and a gpu pin in one group)."""
    ops = [Op("a", "T", 1.0, pinned="cpu"), Op("b", "T", 1.0, pinned="gpu"), Op("c", "T", 1.0)]
    g = OpGraph.from_ops(ops, [Edge("a", "b"), Edge("b", "c")], name="pins")
    grouping = group_ops(g, None, merge_consumers=False, uncuttable=np.array([True, True]))
    assert grouping.op_group.tolist() == [0, 1, 1]
    assert grouping.graph.pinned == ("cpu", "gpu")
