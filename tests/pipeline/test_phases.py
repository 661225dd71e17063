import pytest

from gplace.ir import Edge, GraphError, Op, OpGraph, graph_from_dict, graph_to_dict
from gplace.testing import chain
from tests.pipeline.graphs import training_chain


def test_phases_round_trip_as_graph_format_version_2():
    g = training_chain()
    doc = graph_to_dict(g)
    assert doc["version"] == 2
    assert doc["ops"][3]["phase"] == "backward" and doc["ops"][3]["grad_of"] == "f0"
    back = graph_from_dict(doc)
    assert back.phase == g.phase and back.grad_of == g.grad_of and back.fingerprint == g.fingerprint
    assert back.ops()[3].grad_of == "f0"


def test_graphs_without_phases_stay_version_1_with_their_fingerprint():
    g = chain()
    doc = graph_to_dict(g)
    assert doc["version"] == 1 and not g.has_phases
    assert graph_from_dict(doc).fingerprint == g.fingerprint
    doc["ops"][0]["phase"] = "forward"
    with pytest.raises(GraphError, match="unknown field"):
        graph_from_dict(doc)


def test_phases_change_the_fingerprint():
    ops = [Op("a", "T", 1.0), Op("b", "T", 1.0)]
    plain = OpGraph.from_ops(ops, [Edge("a", "b")])
    phased = OpGraph.from_ops([ops[0], Op("b", "T", 1.0, phase="backward", grad_of="a")], [Edge("a", "b")])
    assert plain.fingerprint != phased.fingerprint
    assert phased.phase_codes().tolist() == [0, 1]


@pytest.mark.parametrize(("op", "match"), [
    (Op("b", "T", 1.0, phase="sideways"), "op 'b' has unknown phase 'sideways'"),
    (Op("b", "T", 1.0, phase="backward", grad_of="zz"), "op 'b' has grad_of 'zz', which is not an op"),
])
def test_bad_phases_name_the_op(op, match):
    with pytest.raises(GraphError, match=match):
        OpGraph.from_ops([Op("a", "T", 1.0), op], [Edge("a", "b")])
