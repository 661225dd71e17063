"""OpGraph construction, validation errors that name the culprit, and derived structure."""

import numpy as np
import pytest

from gplace.ir import Edge, GraphError, Op, OpGraph
from gplace.testing import chain, cpu_gpu_cluster, diamond, random_dag


def _graph(ops, edges):
    return OpGraph.from_ops(ops, edges, name="g")


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


def test_topological_order_and_csr():
    g = diamond()
    assert g.topological_order.tolist() == [0, 1, 2, 3]
    ptr, dst, _ = g.out_csr
    assert sorted(dst[ptr[0]:ptr[1]].tolist()) == [1, 2]
    order = random_dag(50, seed=3).topological_order
    pos = np.empty_like(order)
    pos[order] = np.arange(order.size)
    ei = random_dag(50, seed=3).edge_index
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
