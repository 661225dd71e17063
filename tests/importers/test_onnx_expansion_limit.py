"""``from_onnx`` refuses, before onnx's shape inference runs, a model whose local functions' calls expand past
``EXPANSION_LIMIT`` nodes: a 2 KB model of functions each calling the next twice, 26 deep (67 million nodes),
kept onnx's inference busy for as long as it took (2**20 nodes: 14 s; the time doubles with each level)."""

import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from gplace import from_onnx  # noqa: E402
from gplace.importers.onnx.control import EXPANSION_LIMIT  # noqa: E402
from gplace.ir import UnsupportedGraphError  # noqa: E402

pytestmark = pytest.mark.onnx


def _nested(depth: int):
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    funcs = [helper.make_function("local", "F0", ["x"], ["y"], [helper.make_node("Relu", ["x"], ["y"])], opsets[:1])]
    for k in range(1, depth + 1):
        body = [helper.make_node(f"F{k - 1}", ["x"], ["h"], domain="local"),
                helper.make_node(f"F{k - 1}", ["h"], ["y"], domain="local")]
        funcs.append(helper.make_function("local", f"F{k}", ["x"], ["y"], body, opsets))
    value = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node(f"F{depth}", ["X"], ["Y"], domain="local", name="top")], "g",
                              [value("X", TensorProto.FLOAT, [4, 4])], [value("Y", TensorProto.FLOAT, [4, 4])])
    return helper.make_model(graph, opset_imports=opsets, functions=funcs)


def test_a_model_whose_calls_expand_past_the_limit_is_refused_naming_the_function():
    assert EXPANSION_LIMIT < 2**26
    with pytest.raises(UnsupportedGraphError, match=r"expand to 67,108,864 nodes \(each call of 'F26'"):
        from_onnx(_nested(26))


def test_a_small_nest_still_imports():
    assert from_onnx(_nested(4)).num_ops == 2
