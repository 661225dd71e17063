"""OpGraph construction, validation errors that name the culprit, and derived structure."""

import copy
import pickle

import numpy as np
import pytest

from gplace.ir import Edge, GraphError, Op, OpGraph
from gplace.testing import chain, cpu_gpu_cluster, diamond, random_dag


def _graph(ops, edges):
    return OpGraph.from_ops(ops, edges, name="g")


def test_a_long_cycle_is_named_by_its_ends_and_length():
    """Every op of a cycle was listed: a 100,000-op cycle made a message of 1.2 million characters."""
    n = 1000
    ops = [Op(f"a{i}", "X", 1.0) for i in range(n)]
    edges = [Edge(f"a{i}", f"a{(i + 1) % n}") for i in range(n)]
    with pytest.raises(GraphError, match=r"cycle through ops .* -> \.\.\. \(1000 ops in all\) -> ") as err:
        _graph(ops, edges)
    assert len(str(err.value)) < 200


def test_cycle_names_ops_on_it():
    ops = [Op("a", "X", 1.0), Op("b", "X", 1.0), Op("c", "X", 1.0), Op("d", "X", 1.0)]
    edges = [Edge("d", "a"), Edge("a", "b"), Edge("b", "c"), Edge("c", "a")]
    with pytest.raises(GraphError, match="cycle") as err:
        _graph(ops, edges)
    msg = str(err.value)
    assert all(f"'{n}'" in msg for n in "abc") and "'d'" not in msg


def test_edge_to_missing_op_is_named():
    with pytest.raises(GraphError, match="missing op 'ghost'"):
        _graph([Op("a", "X", 1.0)], [Edge("a", "ghost")])


@pytest.mark.parametrize("cost, kind_cost, match", [
    (None, {}, "'a' .*no compute cost"),
    (-1.0, {}, "'a' has negative compute_cost"),
    (1.0, {"gpu": -2.0}, "'a' has negative kind_cost\\['gpu'\\]"),
])
def test_bad_costs_are_named(cost, kind_cost, match):
    with pytest.raises(GraphError, match=match):
        _graph([Op("a", "X", cost, kind_cost)], [])


def test_ops_and_edges_of_the_wrong_type_are_type_errors_naming_the_argument():
    """``from_ops(ops, [("a", "b")])`` failed with "'tuple' object has no attribute 'src'"."""
    ops = [Op("a", "X", 1.0), Op("b", "X", 1.0)]
    with pytest.raises(TypeError, match=r"graph 'g': edges\[0\] must be an Edge\(src, dst\), got tuple \('a', 'b'\)"):
        OpGraph.from_ops(ops, [("a", "b")], name="g")
    with pytest.raises(TypeError, match=r"graph 'g': ops\[1\] must be an Op\(name, type, cost\), got str 'b'"):
        OpGraph.from_ops([ops[0], "b"], [], name="g")


def test_kind_cost_alone_is_enough():
    g = _graph([Op("a", "X", None, {"gpu": 2.0})], [])
    assert np.isnan(g.compute_cost[0]) and g.kind_cost["gpu"][0] == 2.0


def test_negative_memory_duplicate_names_self_loop():
    with pytest.raises(GraphError, match="'a' has negative persistent_memory"):
        _graph([Op("a", "X", 1.0, persistent_memory=-5)], [])
    with pytest.raises(GraphError, match="duplicate op name 'a'"):
        _graph([Op("a", "X", 1.0), Op("a", "X", 1.0)], [])
    with pytest.raises(GraphError, match="self-loop on op 'a'"):
        _graph([Op("a", "X", 1.0)], [Edge("a", "a")])


def test_bytes_whose_total_would_overflow_the_simulators_are_refused():
    """Each op's bytes fit int64 but three of 2**62 do not add up in it: refused, so no simulator's memory total
    wraps around (a negative peak that passed for fitting)."""
    with pytest.raises(GraphError, match="more than the 4611686018427387904 the simulators"):
        _graph([Op(f"o{i}", "X", 1.0, output_bytes=2**62) for i in range(3)], [])
    _graph([Op("o", "X", 1.0, output_bytes=2**61)], [])


def test_edge_bytes_whose_total_would_overflow_are_refused_naming_the_graph():
    """Two edges of 2**62 bytes each fit int64 but their sum does not: grouping merged them into a wrapped-around
    edge it blamed for 'negative bytes', and sim-v1 reported -2**63 bytes moved. Ops' and edges' bytes now count
    together against the cap."""
    ops = [Op("a", "X", 1.0), Op("b", "X", 1.0), Op("c", "X", 1.0)]
    with pytest.raises(GraphError, match=r"graph 'g': its ops and edges hold 9.223e\+18 bytes in all \(9.223e\+18 on "
                                         r"its edges\), more than the 4611686018427387904"):
        _graph(ops, [Edge("a", "c", 2**62), Edge("b", "c", 2**62)])
    big_output = ops[:2] + [Op("c", "X", 1.0, output_bytes=2**61)]
    with pytest.raises(GraphError, match="its ops and edges hold"):
        _graph(big_output, [Edge("a", "c", 2**61), Edge("b", "c", 2**40)])
    _graph(big_output, [Edge("a", "c", 2**60), Edge("b", "c", 2**60)])


@pytest.mark.parametrize("nbytes", [2.0**63, np.float64(2**63), np.uint64(2**63)])
def test_a_byte_count_of_2_to_the_63_is_named_in_any_number_type(nbytes):
    """float(2**63 - 1) rounds to 2**63, so a float of 2**63 passed the range check and overflowed int64 raw."""
    with pytest.raises(GraphError, match="op 'o' persistent_memory is .* more than the largest supported"):
        _graph([Op("o", "X", 1.0, persistent_memory=nbytes)], [])
    with pytest.raises(GraphError, match="edge 'o' -> 'p' bytes is .* more than the largest supported"):
        _graph([Op("o", "X", 1.0), Op("p", "X", 1.0)], [Edge("o", "p", nbytes)])


def test_a_grad_of_naming_its_own_op_is_refused():
    with pytest.raises(GraphError, match="op 'b' has grad_of naming itself"):
        _graph([Op("f", "F", 1.0, phase="forward"), Op("b", "B", 1.0, phase="backward", grad_of="b")], [])


def test_colocation_group_pinned_to_two_kinds():
    ops = [Op("a", "X", 1.0, colocation="v", pinned="cpu"), Op("b", "X", 1.0, colocation="v", pinned="gpu")]
    with pytest.raises(GraphError, match="colocation group 'v'.*'a'.*'cpu'.*'b'.*'gpu'"):
        _graph(ops, [])


def test_arrays_are_read_only():
    g = chain()
    with pytest.raises(ValueError):
        g.compute_cost[0] = 5.0


def test_derived_structure_is_read_only_so_no_cache_goes_stale():
    """The order, CSR, name index and per-kind costs cannot change under the fingerprint and caches."""
    g = OpGraph.from_ops([Op("a", "t", 1.0, {"gpu": 1.0}), Op("b", "t", 2.0)], [Edge("a", "b", 8)])
    for arr in (g.topological_order, *g.out_csr, *g.in_csr):
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = 1
    for mapping in (g.kind_cost, g.op_index):
        with pytest.raises(TypeError, match="read-only"):
            mapping["c"] = 0
        with pytest.raises(TypeError, match="read-only"):
            mapping.update(c=0)
    assert pickle.loads(pickle.dumps(g)).kind_cost.keys() == {"gpu"}
    assert copy.deepcopy(g).op_index == {"a": 0, "b": 1}


def test_a_graph_built_by_hand_from_views_does_not_change_when_their_base_does():
    """A view's base stayed writable: a later write to it changed the graph (a step time went from 13 to 52)."""
    g = chain((1.0, 2.0))
    fields = {f: getattr(g, f) for f in ("name", "op_names", "op_types", "kind_cost", "persistent_memory",
                                        "temporary_memory", "output_bytes", "output_shapes", "colocation", "pinned",
                                        "edge_index", "edge_bytes")}
    base = np.array([1.0, 2.0])
    built = OpGraph(**fields, compute_cost=base[:])
    base[0] = 40.0
    assert built.compute_cost.tolist() == [1.0, 2.0] and not built.compute_cost.flags.writeable


def test_a_graph_built_by_hand_is_validated_like_one_from_ops():
    """The constructor's validate() refuses what from_ops refuses: a repeated name, float bytes (NaN), float edges."""
    g = chain((1.0, 2.0))
    fields = {f: getattr(g, f) for f in ("name", "op_names", "op_types", "compute_cost", "kind_cost",
                                        "persistent_memory", "temporary_memory", "output_bytes", "output_shapes",
                                        "colocation", "pinned", "edge_index", "edge_bytes")}
    with pytest.raises(GraphError, match="duplicate op name 'op0'"):
        OpGraph(**{**fields, "op_names": ("op0", "op0")})
    with pytest.raises(GraphError, match="persistent_memory has dtype float64, expected int64"):
        OpGraph(**{**fields, "persistent_memory": np.array([np.nan, 0.0])})
    with pytest.raises(GraphError, match="edge_bytes has dtype float64, expected int64"):
        OpGraph(**{**fields, "edge_bytes": g.edge_bytes.astype(float)})


def test_topological_order_and_csr():
    g = diamond()
    assert g.topological_order.tolist() == [0, 1, 2, 3]
    ptr, dst, _ = g.out_csr
    assert sorted(dst[ptr[0]:ptr[1]].tolist()) == [1, 2]
    graph = random_dag(50, seed=3)
    pos = graph.topological_position
    assert pos[graph.topological_order].tolist() == list(range(50)) and not pos.flags.writeable
    labels = np.arange(50) % 3
    assert graph.first_positions(labels, 4).tolist() == [*(pos[labels == k].min() for k in range(3)), 50]
    ei = graph.edge_index
    assert np.all(pos[ei[0]] < pos[ei[1]])


def test_durations_use_kind_cost_and_speed():
    ops = [Op("a", "X", 4.0, {"gpu": 1.0}), Op("b", "X", 3.0)]
    g = _graph(ops, [Edge("a", "b")])
    d = g.durations(cpu_gpu_cluster(1))
    assert d.tolist() == [[4.0, 1.0], [3.0, 3.0]]


def test_allowed_devices_and_unplaceable_op():
    g = _graph([Op("a", "X", 1.0, pinned="cpu"), Op("b", "X", 1.0)], [])
    assert g.allowed_devices(cpu_gpu_cluster(2)).tolist() == [[True, False, False], [True, True, True]]
    g = _graph([Op("a", "X", 1.0, pinned="tpu")], [])
    with pytest.raises(GraphError, match="'a'.*pinned='tpu'.*no device"):
        g.allowed_devices(cpu_gpu_cluster(2))


def test_fingerprint_changes_with_content():
    assert chain().fingerprint == chain().fingerprint
    assert chain().fingerprint != chain(costs=(1.0, 2.0, 3.5)).fingerprint


def test_to_pyg():
    from gplace.ir import to_pyg

    data = to_pyg(diamond())
    assert data.num_nodes == 4 and data.edge_index.shape == (2, 4) and data.x.shape == (4, 4)
    assert data.edge_attr.shape == (4, 1)


def test_to_pyg_refuses_features_that_are_not_one_row_per_op():
    from gplace.ir import to_pyg

    for x in (np.zeros((3, 2)), np.zeros(4)):  # a Data with edges into featureless nodes, or 1-D x, before
        with pytest.raises(ValueError, match=r"x must be \(N, F\) node features with N = 4"):
            to_pyg(diamond(), x)


def test_to_pyg_costs_an_op_with_per_kind_costs_only_by_their_mean():
    """It counted such an op as free (its generic cost is NaN); featurize ranks it by the mean of its kinds."""
    from gplace.ir import to_pyg

    graph = OpGraph.from_ops([Op("a", "t", None, {"gpu": 1e-6, "cpu": 3e-6}), Op("b", "t", 2e-6)], [])
    np.testing.assert_allclose(to_pyg(graph).x[:, 0].numpy(), np.log1p([2.0, 2.0]), rtol=1e-6)
