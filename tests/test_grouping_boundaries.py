"""Grouping rules at their boundaries, hand-computed from ``gplace.grouping``'s docstrings: a device holding the
graph exactly, a transfer exactly as long as the graph alone, a merged pair exactly at the memory cap, the coarse
op type of a group, and step c preferring a pair joined by an edge over a cheaper pair that is not."""

from __future__ import annotations

import numpy as np

from gplace.grouping import alone_memory, group_ops, make_grouping, memory_cap, uncuttable_edges
from gplace.ir import Edge, Op, OpGraph
from gplace.testing import chain, uniform_cluster


def test_memory_cap_is_none_when_a_device_holds_the_graph_exactly() -> None:
    """A device with exactly ``alone_memory`` bytes can hold the whole graph: no cap; one byte less: half of it."""
    g = chain((1.0,) * 4, nbytes=100)
    total = alone_memory(g)
    assert memory_cap(g, uniform_cluster(2, memory=total)) is None
    assert memory_cap(g, uniform_cluster(2, memory=total - 1)) == (total - 1) / 2


def test_uncuttable_edges_counts_a_device_whose_memory_equals_the_graphs() -> None:
    """Two 1 s ops, a 300 B edge over 100 B/s links: the 3 s transfer outlasts the 2 s on one device, whose memory
    is exactly ``alone_memory``, so that device counts and the edge is uncuttable."""
    g = chain((1.0, 1.0), nbytes=300)
    cluster = uniform_cluster(2, memory=alone_memory(g), bandwidth=100.0)
    assert uncuttable_edges(g, cluster).tolist() == [True]


def test_a_transfer_as_long_as_the_graph_alone_is_cuttable() -> None:
    """Two 1 s ops: a 200 B edge at 100 B/s takes 2 s, not longer than the 2 s alone (cuttable); 201 B takes
    longer (uncuttable)."""
    cluster = uniform_cluster(2, bandwidth=100.0)
    assert uncuttable_edges(chain((1.0, 1.0), nbytes=200), cluster).tolist() == [False]
    assert uncuttable_edges(chain((1.0, 1.0), nbytes=201), cluster).tolist() == [True]


def test_step_c_merges_a_pair_exactly_at_the_memory_cap() -> None:
    """Two ops of 100 B outputs, step b off, one group wanted: 200 B together is within a 200 B cap (merged), not
    within 199 B (kept apart)."""
    g = chain((1.0, 1.0), nbytes=100)
    assert group_ops(g, 1, merge_consumers=False, memory_cap=200).op_group.tolist() == [0, 0]
    assert group_ops(g, 1, merge_consumers=False, memory_cap=199).op_group.tolist() == [0, 1]


def test_coarse_op_type_and_shape_come_from_the_most_expensive_member() -> None:
    """A group of an Add (1 s) and a MatMul (5 s): the coarse op is a MatMul with the MatMul's output shape."""
    ops = [Op("add", "Add", 1.0, output_shapes=((2,),)), Op("mm", "MatMul", 5.0, output_shapes=((3, 3),))]
    g = OpGraph.from_ops(ops, [Edge("add", "mm")], name="two")
    coarse = make_grouping(g, np.array([0, 0])).graph
    assert coarse.op_types == ("MatMul",) and coarse.output_shapes == (((3, 3),),)


def test_step_c_prefers_a_pair_joined_by_an_edge() -> None:
    """Ops a (0.5 s), b (0.5 s), c (1 s), d (4 s), one edge b -> c, step b off, three groups wanted (average 2 s):
    (a, b) costs 1 s and (b, c) 1.5 s, both under the average, but only b and c are joined by an edge: they merge."""
    ops = [Op("a", "Add", 0.5), Op("b", "Add", 0.5), Op("c", "Add", 1.0), Op("d", "Add", 4.0)]
    g = OpGraph.from_ops(ops, [Edge("b", "c")], name="edge_first")
    assert group_ops(g, 3, merge_consumers=False).op_group.tolist() == [0, 1, 1, 2]
