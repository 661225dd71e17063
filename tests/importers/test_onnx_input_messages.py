"""ONNX import errors about inputs and types: a symbol given two sizes, an element type of no known size, a
declared 0 dimension."""

from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from gplace import from_onnx  # noqa: E402

pytestmark = pytest.mark.onnx

F32 = TensorProto.FLOAT


def _model(nodes, inputs, outputs, value_info=(), domains=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, value_info=list(value_info))
    opsets = [helper.make_opsetid("", 21), *(helper.make_opsetid(d, 1) for d in domains)]
    return helper.make_model(graph, opset_imports=opsets)


def test_one_symbol_given_two_sizes_is_refused_naming_it_the_sizes_and_the_inputs():
    """x and z both (batch, 4), given batch 7 and 8: it imported, Add's output sized (8, 4), silently."""
    model = _model([helper.make_node("Add", ["x", "z"], ["y"], name="add")],
                   [helper.make_tensor_value_info(n, F32, ["batch", 4]) for n in ("x", "z")],
                   [helper.make_tensor_value_info("y", F32, ["batch", 4])])
    with pytest.raises(ValueError, match=r"dimension 'batch' two sizes: 7 \(input 'x'\) and 8 \(input 'z'"):
        from_onnx(model, {"x": [7, 4], "z": [8, 4]})
    g = from_onnx(model, {"x": [7, 4], "z": [7, 4]})
    assert g.output_shapes[g.op_index["add"]] == ((7, 4),)


def test_an_input_of_a_known_shape_and_an_unknown_element_type_names_the_type():
    """It said "input 'x' is of type tensor, not a tensor of known shape"."""
    x = helper.make_tensor_value_info("x", F32, [2, 3])
    x.type.tensor_type.elem_type = 99
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [x],
                   [helper.make_tensor_value_info("y", F32, [2, 3])])
    with pytest.raises(ValueError, match=r"input 'x' has elem_type 99, not an ONNX element type gplace knows the "
                                         r"size of \(its shape, \[2, 3\], is known\)"):
        from_onnx(model)


def test_an_intermediate_of_an_undefined_element_type_names_the_type():
    """A custom op's output typed UNDEFINED [2, 3] said "has a shape unknown after shape inference"."""
    nodes = [helper.make_node("Foo", ["x"], ["a"], name="foo", domain="my.dom"),
             helper.make_node("Relu", ["a"], ["y"], name="r")]
    model = _model(nodes, [helper.make_tensor_value_info("x", F32, [2, 3])],
                   [helper.make_tensor_value_info("y", F32, [2, 3])],
                   [helper.make_tensor_value_info("a", TensorProto.UNDEFINED, [2, 3])], domains=["my.dom"])
    with pytest.raises(ValueError, match=r"node 'foo': its output 'a' \(read by 'r'\) has elem_type 0 \(UNDEFINED\), "
                                         r"not an ONNX element type"):
        from_onnx(model)


def test_a_declared_zero_dimension_is_printed_as_zero():
    """It said "dimension 0 is '', input_shapes gives 5"."""
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                   [helper.make_tensor_value_info("x", F32, [0, 4])], [helper.make_tensor_value_info("y", F32, None)])
    with pytest.raises(ValueError, match=r"input 'x': dimension 0 is 0, input_shapes gives 5$"):
        from_onnx(model, {"x": [5, 4]})


@pytest.mark.parametrize("size", [-4, -1])
def test_a_negative_size_given_is_named_as_negative(size):
    """It read as a conflict with the input's symbol: "dimension 0 is 'b', input_shapes gives -4"."""
    x, y = (helper.make_tensor_value_info(n, F32, ["b", 8]) for n in ("x", "y"))
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [x], [y])
    with pytest.raises(ValueError, match=rf"^input_shapes\['x'\]: dimension 0 is {size}; a size is a whole number"):
        from_onnx(model, {"x": [size, 8]})
