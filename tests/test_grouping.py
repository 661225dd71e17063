"""Tests for gplace.grouping: co-location groups and the coarse graph."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gplace
from gplace.grouping import group_ops, identity_grouping, make_grouping, memory_cap, split_groups, uncuttable_edges
from gplace.ir import Cluster, Device, Edge, GraphError, InvalidPlacementError, Op, OpGraph, Placement
from gplace.testing import MB, chain, cpu_gpu_cluster, diamond, heavy_edge_diamond, random_dag, uniform_cluster


def _ops(n: int, **per_op: dict[int, object]) -> list[Op]:
    """``n`` ops ``o0..`` of cost i+1; keyword dicts set fields of chosen ops, e.g. ``pinned={0: "cpu"}``."""
    return [Op(f"o{i}", f"T{i % 3}", float(i + 1), output_bytes=10,
               **{k: v[i] for k, v in per_op.items() if i in v}) for i in range(n)]


def _sparse_dag(n: int, seed: int = 0, pin_every: int = 0) -> OpGraph:
    """A DAG where op i reads 1-2 of the 30 ops before it; every ``pin_every``-th op is pinned, cpu and gpu in turn."""
    rng = np.random.default_rng(seed)
    pins = {i: ("cpu", "gpu")[(i // pin_every) % 2] for i in range(0, n, pin_every)} if pin_every else {}
    ops = [Op(f"n{i}", f"T{i % 5}", float(rng.uniform(0.1, 1)), output_bytes=100, pinned=pins.get(i))
           for i in range(n)]
    edges = [Edge(f"n{j}", f"n{i}") for i in range(1, n)
             for j in sorted(set(rng.integers(max(0, i - 30), i, size=2).tolist()))]
    return OpGraph.from_ops(ops, edges, name=f"sparse{n}")


def _assert_acyclic_order(graph: OpGraph, op_group: np.ndarray) -> None:
    src, dst = graph.edge_index
    assert (op_group[src] <= op_group[dst]).all(), "an edge goes from a later group to an earlier one"


def test_chain_collapses_into_one_group():
    """Each op of a chain is merged into its only consumer, leaving one group with the summed cost."""
    grouping = group_ops(chain((1.0, 2.0, 3.0, 4.0)))
    assert grouping.num_groups == 1
    assert grouping.op_group.tolist() == [0, 0, 0, 0]
    assert grouping.graph.compute_cost.tolist() == [10.0]
    assert grouping.graph.num_edges == 0


def test_only_consumer_merge_keeps_ops_with_two_consumers_apart():
    """In a diamond the source feeds two ops, so it stays alone; left and right merge into the sink."""
    grouping = group_ops(diamond(), max_groups=None)
    assert grouping.op_group.tolist() == [0, 1, 1, 1]
    assert grouping.graph.op_types == ("Input", "MatMul")  # the most expensive member's type (right, cost 3)


def test_colocated_ops_share_a_group():
    """Ops with one colocation name are in one group even with consumer merging off."""
    ops = _ops(5, colocation={1: "c", 3: "c"})
    edges = [Edge("o0", "o1"), Edge("o0", "o2"), Edge("o0", "o3"), Edge("o2", "o4"), Edge("o3", "o4"),
             Edge("o1", "o4")]
    grouping = group_ops(OpGraph.from_ops(ops, edges), max_groups=None, merge_consumers=False)
    g = grouping.op_group
    assert g[1] == g[3]
    assert grouping.num_groups == 4
    assert grouping.graph.colocation == (None,) * 4


def test_colocation_cycle_keeps_the_middle_op_free():
    """o0 -> o1 -> o2 with o0 and o2 colocated: o1 stays its own group; the coarse graph keeps forward edges only."""
    ops = _ops(4, colocation={0: "c", 2: "c"})
    edges = [Edge("o0", "o1"), Edge("o1", "o2"), Edge("o0", "o3"), Edge("o2", "o3")]
    grouping = group_ops(OpGraph.from_ops(ops, edges), max_groups=None, merge_consumers=False)
    assert grouping.op_group.tolist() == [0, 1, 0, 2]
    assert sorted(map(tuple, grouping.graph.edge_index.T.tolist())) == [(0, 1), (0, 2)]
    assert grouping.graph.topological_order.tolist() == [0, 1, 2]

def test_colocation_cycle_with_conflicting_pins_stays_apart():
    """A colocation cycle around an op pinned to another kind is placeable: that op keeps its own group."""
    ops = _ops(3, colocation={0: "c", 2: "c"}, pinned={0: "cpu", 1: "gpu"})
    grouping = group_ops(OpGraph.from_ops(ops, [Edge("o0", "o1"), Edge("o1", "o2")]))
    assert grouping.op_group.tolist() == [0, 1, 0]
    assert grouping.graph.pinned == ("cpu", "gpu")


@pytest.mark.parametrize("max_groups", [1, 10, 37])
def test_max_groups_is_honoured_and_groups_form_a_dag(max_groups):
    """random_dag(200) coarsens to at most max_groups groups, numbered in a topological order."""
    graph = random_dag(200)
    grouping = group_ops(graph, max_groups=max_groups)
    assert grouping.num_groups == max_groups
    _assert_acyclic_order(graph, grouping.op_group)
    assert grouping.graph.topological_order.tolist() == list(range(max_groups))
    assert np.bincount(grouping.op_group).min() >= 1


def test_adjacent_merging_balances_cost():
    """No group of random_dag(200) at 10 groups costs more than 3x the average."""
    graph = random_dag(200)
    cost = group_ops(graph, max_groups=10).graph.compute_cost
    assert cost.max() < 3 * graph.compute_cost.sum() / 10


def test_coarse_costs_memory_and_durations_are_member_sums():
    """Every per-group quantity, and the duration on each device, is the sum over the group's ops."""
    ops = [Op(f"o{i}", "T", 1.0 + i, kind_cost={"gpu": 0.5 * i} if i % 2 else {}, persistent_memory=i,
              temporary_memory=2 * i, output_bytes=3 * i) for i in range(30)]
    edges = [Edge(f"o{i}", f"o{j}") for i in range(30) for j in (i + 1, i + 3) if j < 30]
    graph = OpGraph.from_ops(ops, edges)
    grouping = group_ops(graph, max_groups=4)
    cluster = cpu_gpu_cluster(1)
    expected = np.zeros((4, 2))
    np.add.at(expected, grouping.op_group, graph.durations(cluster))
    np.testing.assert_allclose(grouping.graph.durations(cluster), expected)
    for field in ("persistent_memory", "temporary_memory", "output_bytes"):
        assert getattr(grouping.graph, field).tolist() == np.bincount(
            grouping.op_group, getattr(graph, field), minlength=4).astype(int).tolist()


def test_edge_bytes_count_each_producer_once():
    """o0 feeds o1 and o2 of one group: 10 bytes once; o3 feeds it too: 10 + 7 bytes in all."""
    ops = [Op("o0", "T", 1.0, output_bytes=10), Op("o1", "T", 1.0, colocation="c"),
           Op("o2", "T", 1.0, colocation="c"), Op("o3", "T", 1.0, output_bytes=7), Op("o4", "T", 1.0)]
    edges = [Edge("o0", "o1"), Edge("o0", "o2"), Edge("o3", "o2"), Edge("o0", "o4"), Edge("o3", "o4"),
             Edge("o1", "o4")]
    grouping = group_ops(OpGraph.from_ops(ops, edges), max_groups=None, merge_consumers=False)
    coarse, g = grouping.graph, grouping.op_group
    to_c = (coarse.edge_index[1] == g[1]) & np.isin(coarse.edge_index[0], [g[0], g[3]])
    assert sorted(coarse.edge_bytes[to_c].tolist()) == [7, 10]
    assert coarse.num_edges == len({(a, b) for a, b in coarse.edge_index.T.tolist()})


def test_an_edge_whose_transfer_outlasts_the_graph_on_one_device_is_uncuttable():
    graph = heavy_edge_diamond()
    assert uncuttable_edges(graph, uniform_cluster(2, bandwidth=1e6)).tolist() == [True, False, False, False]
    assert not uncuttable_edges(graph, uniform_cluster(2, bandwidth=2e6)).any()  # 2.5 s: cutting it may pay
    assert not uncuttable_edges(graph, uniform_cluster(2, memory=10**6, bandwidth=1e6)).any()  # no device holds it
    assert not uncuttable_edges(graph, uniform_cluster(1, bandwidth=1e6)).any()


def test_a_device_whose_temporary_memory_overflows_does_not_make_an_edge_uncuttable():
    """The whole-graph device was judged by persistent memory and outputs only: with a temporary buffer on top it
    cannot run the graph alone, yet the edge was kept uncut, and every cold search found no placement that runs."""
    from gplace.experiment import place

    ops = [Op("a", "T", 1.0, output_bytes=50 * MB), Op("b", "T", 1.0, temporary_memory=30 * MB)]
    graph = OpGraph.from_ops(ops, [Edge("a", "b", 10 * MB)], name="tmp")
    cluster = uniform_cluster(2, memory=75 * MB, bandwidth=1e6)
    assert not uncuttable_edges(graph, cluster).any()  # one device needs 80 MB: only [0, 1] runs
    report = place(graph, cluster, method="learned", budget=4, seed=0)
    assert report.measurement.ok and len(set(report.placement.devices.tolist())) == 2


def test_uncuttable_edges_take_the_fastest_link_without_a_matrix_of_every_link_and_edge():
    """The fastest transfer of each edge came from a (D (D - 1), E) matrix: 4.9 GB for 80,000 edges on 64
    devices. Same answer (here over asymmetric, uneven links), a few arrays of E."""
    import tracemalloc

    from gplace.ir import Cluster, Device, Link

    rng = np.random.default_rng(0)
    devices = [Device(f"/GPU:{i}", "gpu", 1.0) for i in range(64)]
    links = [Link(a.name, b.name, float(rng.uniform(1e3, 1e4)), float(rng.uniform(0, 1e-3)),
                  reverse_bandwidth=float(rng.uniform(1e3, 1e4)))
             for i, a in enumerate(devices) for b in devices[i + 1:]]
    cluster = Cluster.build(devices, links)
    graph = random_dag(300, 0.03, 1)  # 323 s on one device; 1-7 MB edges: 100-700 s over the fastest link
    off = ~np.eye(64, dtype=bool)
    matrix = (cluster.latency[off][:, None] + graph.edge_bytes[None, :] / cluster.bandwidth[off][:, None]).min(0)
    alone = float(graph.durations(cluster)[:, 0].sum())
    tracemalloc.start()
    try:
        found = uncuttable_edges(graph, cluster)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found.tolist() == (matrix > alone).tolist() and found.any() and not found.all()
    assert peak < 64 * 63 * graph.num_edges * 8 / 10  # a tenth of the matrix alone (4,032 x E float64s, 43 MB)


def test_uncuttable_edges_keep_their_ends_in_one_group():
    graph = heavy_edge_diamond()
    free = group_ops(graph, max_groups=None, merge_consumers=False)
    kept = group_ops(graph, max_groups=None, merge_consumers=False,
                     uncuttable=uncuttable_edges(graph, uniform_cluster(2, bandwidth=1e6)))
    assert free.num_groups == 4 and kept.num_groups == 3
    assert kept.op_group[0] == kept.op_group[1]
    with pytest.raises(ValueError, match="uncuttable has shape"):
        group_ops(graph, uncuttable=np.ones(3, dtype=bool))


def test_pins_are_never_mixed():
    """Groups of a graph with every 10th op pinned (cpu, gpu, ...) hold one pin at most; the coarse op carries it."""
    graph = _sparse_dag(300, pin_every=10)
    grouping = group_ops(graph, max_groups=8)
    for g in range(grouping.num_groups):
        pins = {graph.pinned[i] for i in np.flatnonzero(grouping.op_group == g)} - {None}
        assert len(pins) <= 1
        assert grouping.graph.pinned[g] == (pins.pop() if pins else None)


def test_ops_with_disjoint_kind_costs_are_not_merged():
    """An op with only a gpu cost and one with only a cpu cost never share a group (neither kind runs both)."""
    ops = [Op("a", "T", None, kind_cost={"gpu": 1.0}), Op("b", "T", None, kind_cost={"cpu": 1.0})]
    grouping = group_ops(OpGraph.from_ops(ops, [Edge("a", "b")]), max_groups=1)
    assert grouping.num_groups == 2


@pytest.mark.parametrize("a, b, why", [
    ({"cost": 1.0, "pinned": "cpu"}, {"cost": None, "kind_cost": {"gpu": 1.0}},
     "op 'a' is pinned to 'cpu', op 'b' has costs only for ['gpu']"),
    ({"cost": None, "kind_cost": {"cpu": 1.0}}, {"cost": None, "kind_cost": {"gpu": 1.0}},
     "op 'a' has costs only for ['cpu'], op 'b' has costs only for ['gpu']"),
])
def test_a_colocation_group_with_no_common_device_kind_is_named_with_its_ops(a, b, why):
    """The error named the coarse op 'g0' (no compute cost, or no device to run on), not the colocation group."""
    ops = [Op("a", "T", colocation="c", **a), Op("b", "T", colocation="c", **b), Op("z", "T", 1.0)]
    graph = OpGraph.from_ops(ops, [Edge("a", "b"), Edge("b", "z")], name="G")
    with pytest.raises(GraphError, match=re.escape(f"graph 'G': colocation group 'c' has no device kind all its "
                                                   f"ops can run on: {why}")):
        group_ops(graph)


def test_make_grouping_names_the_ops_pinned_to_two_kinds():
    """The error named the group by its renumbered id ('group g0'), which the caller never gave."""
    graph = OpGraph.from_ops(_ops(3, pinned={0: "cpu", 2: "gpu"}), [Edge("o0", "o1"), Edge("o1", "o2")], name="G")
    with pytest.raises(GraphError, match="graph 'G': a group holds op 'o0' pinned to 'cpu' and op 'o2' pinned to "
                                         "'gpu'"):
        make_grouping(graph, np.array([1, 0, 1]))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"max_groups": float("nan")}, "max_groups must be a whole number"),  # NaN disabled the limit
    ({"max_groups": 1.5}, "max_groups must be a whole number"),
    ({"max_groups": "3"}, "max_groups must be a whole number"),  # a raw TypeError from a comparison
    ({"memory_cap": -1}, "memory_cap must be a number of bytes > 0"),  # negative or NaN caps were ignored
    ({"memory_cap": float("nan")}, "memory_cap must be a number of bytes > 0"),
])
def test_bad_grouping_settings_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        group_ops(random_dag(20, seed=0), **kwargs)


def test_alternating_pins_can_exceed_max_groups():
    """A chain cpu, gpu, cpu, gpu cannot be merged at all; the result keeps 4 groups rather than mix pins."""
    ops = _ops(4, pinned={0: "cpu", 1: "gpu", 2: "cpu", 3: "gpu"})
    graph = OpGraph.from_ops(ops, [Edge(f"o{i}", f"o{i + 1}") for i in range(3)])
    assert group_ops(graph, max_groups=2).num_groups == 4


def test_expand_gives_a_valid_placement():
    """Putting each group on an allowed device expands to a placement that passes validation."""
    ops = _ops(12, colocation={2: "c", 7: "c"}, pinned={5: "cpu", 9: "gpu"})
    edges = [Edge(f"o{i}", f"o{j}") for i in range(12) for j in (i + 1, i + 4) if j < 12]
    graph = OpGraph.from_ops(ops, edges)
    cluster = cpu_gpu_cluster(2)
    grouping = group_ops(graph, max_groups=3)
    allowed = grouping.graph.allowed_devices(cluster)
    placement = grouping.expand(allowed.shape[1] - 1 - np.argmax(allowed[:, ::-1], 1))
    placement.validate(graph, cluster)
    assert placement.devices[2] == placement.devices[7]
    with pytest.raises(ValueError, match="shape"):
        grouping.expand(np.zeros(grouping.num_groups + 1, dtype=int))


def test_identity_grouping_has_one_group_per_op():
    """identity_grouping keeps the graph and maps op i to group i."""
    graph = diamond()
    grouping = identity_grouping(graph)
    assert grouping.num_groups == 4 and grouping.graph is graph
    assert grouping.expand(np.array([0, 1, 0, 1])).devices.tolist() == [0, 1, 0, 1]


def test_make_grouping_rejects_unused_ids_and_drops_back_edges():
    """Group ids must all be used; a grouping whose quotient has a cycle keeps only its forward edges."""
    with pytest.raises(ValueError, match="no op"):
        make_grouping(chain(), np.array([0, 2, 2]))
    grouping = make_grouping(chain(), np.array([0, 1, 0]))
    assert grouping.op_group.tolist() == [0, 1, 0]
    assert grouping.graph.edge_index.T.tolist() == [[0, 1]]


def test_large_graph_groups_quickly():
    """A 20,000-op graph groups to 256 convex groups (the heap and linked list keep this fast)."""
    graph = _sparse_dag(20_000, seed=1)
    grouping = group_ops(graph, max_groups=256)
    assert grouping.num_groups == 256
    _assert_acyclic_order(graph, grouping.op_group)


def test_split_groups_makes_a_placement_exactly_expressible():
    graph = random_dag(40, seed=2)
    grouping = group_ops(graph, max_groups=5)
    placement = Placement.for_graph(graph, np.arange(graph.num_ops) % 3)
    split = split_groups(grouping, placement)
    group_device = np.zeros(split.num_groups, dtype=np.int64)
    group_device[split.op_group] = placement.devices
    assert np.array_equal(split.expand(group_device).devices, placement.devices)
    assert grouping.num_groups < split.num_groups <= 3 * grouping.num_groups
    aligned = grouping.expand(np.arange(grouping.num_groups) % 2)
    assert split_groups(grouping, aligned) is grouping  # nothing to split
    with pytest.raises(InvalidPlacementError, match="not one of graph"):
        split_groups(grouping, Placement(np.zeros(3, dtype=np.int64)))


def test_a_memory_cap_keeps_groups_a_split_can_place():
    """A 12-op chain of 150 MB ops on two 1000 MB devices: unbounded, step b merges it into one group no device
    holds; with memory_cap (half a device) no group holds more than 500 MB, and a learned search finds a split
    that fits (it failed before: every sample out of memory)."""
    mb = 10**6
    ops = [Op(f"a{i}", "M", 1.0, persistent_memory=150 * mb, output_bytes=mb) for i in range(12)]
    g = OpGraph.from_ops(ops, [Edge(f"a{i}", f"a{i + 1}") for i in range(11)], name="split12")
    cluster = uniform_cluster(2, memory=1000 * mb)
    assert group_ops(g, 256).num_groups == 1
    cap = memory_cap(g, cluster)
    assert cap == 500 * mb and memory_cap(g, uniform_cluster(2, memory=10**10)) is None
    roomy_cpu = Cluster.build([Device("/CPU:0", "cpu", 1.0, 10**10), Device("/GPU:0", "gpu", 1.0, 1000 * mb)],
                              default_bandwidth=1e9)
    assert memory_cap(g, roomy_cpu) is None  # the CPU holds it all: the groups stay as they were
    capped = group_ops(g, 256, memory_cap=cap)
    held = np.bincount(capped.op_group, weights=[150 * mb + mb] * 12)
    assert capped.num_groups > 1 and held.max() <= cap
    assert group_ops(g, 2, memory_cap=cap).num_groups > 2  # step c respects the cap too
    report = gplace.place(g, cluster, method="learned", budget="16 samples", seed=0)
    assert report.measurement.ok


def test_make_grouping_names_group_ids_that_are_not_one_whole_id_per_op() -> None:
    g = chain((1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match=r"op_group has shape \(2,\), expected \(3,\)"):
        make_grouping(g, np.array([0, 0]))  # IndexError before
    with pytest.raises(ValueError, match="whole group ids >= 0"):
        make_grouping(g, np.array([-1, 0, 0]))  # np.bincount's error before
    with pytest.raises(ValueError, match="whole group ids >= 0, got dtype float64"):
        make_grouping(g, np.array([0.5, 0, 1]))  # truncated to [0, 0, 1] before


def test_features_refuse_a_grouping_of_another_graph() -> None:
    from gplace.features import featurize

    g, h = chain((1.0, 2.0, 3.0)), chain((3.0, 2.0, 1.0))
    with pytest.raises(ValueError, match="the grouping is of graph"):
        featurize(g, group_ops(h, 3))
