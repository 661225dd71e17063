"""An op's output_shapes or kind_cost of the wrong container type is a GraphError naming the op and the field,
from OpGraph.from_ops and from a graph document (it was a bare TypeError, or 'malformed field' naming no field)."""

import json

import pytest

from gplace import Op, OpGraph, load_graph
from gplace.ir.errors import GraphError


@pytest.mark.parametrize("shapes", [3, None, 2.5])
def test_from_ops_names_op_and_output_shapes(shapes):
    with pytest.raises(GraphError, match=r"op 'a'.*output_shapes"):
        OpGraph.from_ops([Op("a", "A", 1.0, output_shapes=shapes)], [])


def test_from_ops_keeps_good_shapes():
    g = OpGraph.from_ops([Op("a", "A", 1.0, output_shapes=[[2, 3]])], [])
    assert g.output_shapes == (((2, 3),),)


@pytest.mark.parametrize("field, value", [("output_shapes", 3), ("output_shapes", "ab"), ("output_shapes", {}),
                                          ("kind_cost", [1]), ("kind_cost", 3), ("kind_cost", "gpu")])
def test_load_graph_names_op_and_field(tmp_path, field, value):
    doc = {"format": "gplace.graph", "version": 1, "edges": [],
           "ops": [{"name": "a", "cost": 1.0, field: value}]}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(GraphError, match=rf"op 'a'.*{field}"):
        load_graph(path)


def test_load_graph_reads_good_fields(tmp_path):
    doc = {"format": "gplace.graph", "version": 1, "edges": [],
           "ops": [{"name": "a", "cost": 1.0, "kind_cost": {"gpu": 0.5}, "output_shapes": [[4]]}]}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    g = load_graph(path)
    assert g.output_shapes == (((4,),),) and "gpu" in g.kind_cost
