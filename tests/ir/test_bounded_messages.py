"""Error messages quote a user's values cut short, give advice that works, and ``Op`` hashes like ``Edge``."""

from __future__ import annotations

import json

import pytest

from gplace.importers import load_cluster, load_giph_graph, load_graph
from gplace.ir import Cluster, Device, Edge, GraphError, Op, OpGraph, cluster_from_dict, graph_from_dict
from gplace.ir.graph import SHORT_REPR_CHARS, short_repr

_MAX_MESSAGE = 1000
_TWO_DEVICES = [{"name": "a", "kind": "gpu"}, {"name": "b", "kind": "gpu"}]


def _graph_doc(*ops: dict) -> dict:
    return {"format": "gplace.graph", "version": 1, "name": "x", "ops": list(ops), "edges": []}


@pytest.mark.parametrize("value", [list(range(20000)), "x" * 50000, {str(i): [i] * 100 for i in range(1000)},
                                   [[[[list(range(100))] * 50] * 50] * 50], 10**1000],
                         ids=["list", "string", "dict", "nested", "int"])
def test_short_repr_is_bounded(value):
    """``short_repr`` of any value stays within SHORT_REPR_CHARS; a small value reads as its ``repr``."""
    assert len(short_repr(value)) <= SHORT_REPR_CHARS
    assert short_repr([1, "a", None]) == repr([1, "a", None])


def test_long_output_bytes_is_cut_short_and_names_the_op():
    """A 20,000-item output_bytes gives a short message naming the op and the field."""
    with pytest.raises(GraphError) as info:
        graph_from_dict(_graph_doc({"name": "a", "type": "MatMul", "cost": 1.0, "output_bytes": list(range(20000))}))
    message = str(info.value)
    assert len(message) < _MAX_MESSAGE
    assert "op 'a'" in message and "output_bytes" in message


def test_nameless_op_with_long_shapes_is_cut_short():
    """An op without a name is quoted cut short, naming its position and the missing field."""
    with pytest.raises(GraphError) as info:
        graph_from_dict(_graph_doc({"type": "MatMul", "cost": 1.0, "output_shapes": [[7] * 20000]}))
    message = str(info.value)
    assert len(message) < _MAX_MESSAGE
    assert "ops[0]" in message and "'name'" in message


def test_op_built_in_python_with_long_value_is_cut_short():
    """OpGraph.from_ops quotes a bad field of an Op cut short, naming the op and the field."""
    with pytest.raises(GraphError) as info:
        OpGraph.from_ops([Op("a", "MatMul", 1.0, output_bytes=[1] * 20000)], [])
    message = str(info.value)
    assert len(message) < _MAX_MESSAGE
    assert "op 'a'" in message and "output_bytes" in message


def test_giph_node_with_list_compute_is_cut_short(tmp_path):
    """A GiPH node whose compute is a long list gives a short message naming the node and the field."""
    path = tmp_path / "giph.json"
    path.write_text(json.dumps({"nodes": [{"id": 0, "compute": [1.0] * 20000}], "edges": []}))
    for load in (load_giph_graph, load_graph):
        with pytest.raises(GraphError) as info:
            load(path)
        message = str(info.value)
        assert len(message) < _MAX_MESSAGE
        assert "nodes[0]" in message and "'compute'" in message


def test_unknown_device_lists_a_few_names_and_the_count():
    """Cluster.index names the unknown device, the first few known ones and how many there are."""
    cluster = Cluster.build([Device(f"/GPU:{i}", "gpu") for i in range(500)], default_bandwidth=1e9)
    with pytest.raises(GraphError) as info:
        cluster.index("/GPU:999")
    message = str(info.value)
    assert len(message) < _MAX_MESSAGE
    assert "'/GPU:999'" in message and "500 device(s)" in message and "'/GPU:0'" in message


def test_missing_link_advice_in_a_cluster_file_works(tmp_path):
    """A cluster file lacking a link says to add a ``default_link``, and doing so loads; the message names the
    cluster by its default name."""
    doc = {"format": "gplace.cluster", "version": 1, "devices": _TWO_DEVICES}
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(GraphError, match=r"cluster 'cluster': no link between 'a' and 'b'.*\"default_link\""):
        load_cluster(path)
    path.write_text(json.dumps({**doc, "default_link": {"bandwidth": 1e9, "latency": 0.0}}))
    assert load_cluster(path).bandwidth[0, 1] == 1e9


@pytest.mark.parametrize("default_link", [{"latency": 2e-5}, {}])
def test_a_default_link_without_bandwidth_is_named_not_taken_for_none(default_link):
    """It was read as no default_link: "no link between 'a' and 'b'; add ... "default_link" ...", though there was
    one."""
    doc = {"format": "gplace.cluster", "version": 1, "devices": _TWO_DEVICES, "default_link": default_link}
    with pytest.raises(GraphError, match=r"^cluster 'cluster': default_link lacks field\(s\) \['bandwidth'\]$"):
        cluster_from_dict(doc)
    with pytest.raises(GraphError, match=r"default_link's bandwidth must be a number \(bytes/s\) or \"inf\", got null"):
        cluster_from_dict({**doc, "default_link": {**default_link, "bandwidth": None}})


def test_unnamed_cluster_errors_use_its_default_name():
    """An unnamed cluster document's errors name it 'cluster' (its name once loaded), not None."""
    doc = {"format": "gplace.cluster", "version": 1, "devices": _TWO_DEVICES, "default_bandwidth": 1e9}
    with pytest.raises(GraphError, match=r"^cluster 'cluster': unknown field\(s\) \['default_bandwidth'\]"):
        cluster_from_dict(doc)


def test_link_to_an_unknown_device_is_named_before_a_missing_pair():
    """A link naming no device of the file is reported as such, not as a missing link."""
    doc = {"format": "gplace.cluster", "version": 1, "devices": _TWO_DEVICES,
           "links": [{"a": "a", "b": "c", "bandwidth": 1e9}]}
    with pytest.raises(GraphError, match="unknown device 'c'"):
        cluster_from_dict(doc)


def test_op_is_hashable_like_edge():
    """Op hashes (kind_cost left out of the hash), equal ops hash alike, and kind_cost still counts for equality."""
    op = Op("a", "MatMul", None, kind_cost={"gpu": 1.0})
    assert hash(op) == hash(Op("a", "MatMul", None, kind_cost={"gpu": 1.0}))
    assert op != Op("a", "MatMul", None, kind_cost={"gpu": 2.0})
    assert len({Op("a", "MatMul", 1.0), Op("a", "MatMul", 1.0), op}) == 2
    assert hash(Edge("a", "b")) == hash(Edge("a", "b"))
