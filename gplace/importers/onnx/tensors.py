"""ONNX tensor types and node structure: sizes of typed values, a node's reads and subgraphs, cost attributes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gplace.costmodel import TensorSpec
from gplace.ir import GraphError

if TYPE_CHECKING:
    import onnx


_COST_ATTRS = ("kernel_shape", "size", "equation", "transA", "num_heads", "training_mode", "mode", "sampling_ratio",
               "axis", "onesided", "q_num_heads", "kv_num_heads", "update_rule", "activation", "reduction")
"""Node attributes the cost model reads (``transA``: ``com.microsoft::FusedMatMul``'s K; ``num_heads``:
``com.microsoft::Attention``'s softmax; ``training_mode``: a ``BatchNormalization`` computing batch statistics;
``mode``: ``Resize``'s and ``GridSample``'s interpolation; ``sampling_ratio``: ``RoiAlign``'s; ``axis``: opset
17's ``DFT``; ``onesided``: ``STFT``'s; ``q_num_heads``, ``kv_num_heads``, ``update_rule``: ``LinearAttention``'s;
``activation``: ``CausalConvWithState``'s fused SiLU; ``reduction``: a scatter's)."""
_RECURRENT = frozenset({"LSTM", "GRU", "RNN"})
_BITS = {
    "FLOAT": 32, "UINT8": 8, "INT8": 8, "UINT16": 16, "INT16": 16, "INT32": 32, "INT64": 64, "STRING": 64,
    "BOOL": 8, "FLOAT16": 16, "DOUBLE": 64, "UINT32": 32, "UINT64": 64, "COMPLEX64": 64, "COMPLEX128": 128,
    "BFLOAT16": 16, "FLOAT8E4M3FN": 8, "FLOAT8E4M3FNUZ": 8, "FLOAT8E5M2": 8, "FLOAT8E5M2FNUZ": 8,
    "FLOAT8E8M0": 8, "UINT4": 4, "INT4": 4, "FLOAT4E2M1": 4, "UINT2": 2, "INT2": 2, "FLOAT6E2M3": 6,
    "FLOAT6E3M2": 6,
}
"""Bits per element of each ONNX tensor element type (``STRING`` is an estimate: one pointer)."""


def subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The graphs a control-flow node carries (an ``If``'s branches, a ``Loop``'s or ``Scan``'s body)."""
    graphs = []
    for attr in node.attribute:
        if attr.type == attr.GRAPH:
            graphs.append(attr.g)
        elif attr.type == attr.GRAPHS:
            graphs.extend(attr.graphs)
    return graphs


def node_reads(node: onnx.NodeProto) -> list[str]:
    """Every tensor ``node`` reads from its scope, each once: its inputs, then the outer values its subgraphs
    use (ONNX's implicit inputs)."""
    names = [t for t in node.input if t]
    for graph in subgraphs(node):
        names += _captures(graph)
    return list(dict.fromkeys(names))


def _captures(graph: onnx.GraphProto) -> list[str]:
    """The names ``graph`` (and the graphs inside it) read without defining them."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    defined.update(t.values.name for t in graph.sparse_initializer)
    captured = []
    for node in graph.node:
        captured += [t for t in node_reads(node) if t not in defined]
        defined.update(node.output)
    return captured


def tensor_spec(type_proto: onnx.TypeProto) -> TensorSpec | None:
    """Shape and bytes of a fully known tensor type, else ``None`` (a negative ``dim_value``, as some exporters
    write for a dynamic one, is unknown too)."""
    if not type_proto.HasField("tensor_type"):
        return None
    tensor_type = type_proto.tensor_type
    dims = tensor_type.shape.dim
    if not tensor_type.HasField("shape") or any(not d.HasField("dim_value") or d.dim_value < 0 for d in dims):
        return None
    shape = tuple(int(d.dim_value) for d in dims)
    bits = _elem_bits(tensor_type.elem_type)
    return None if bits is None else TensorSpec(shape, math.ceil(math.prod(shape) * bits / 8))


def unsized_elem_type(type_proto: onnx.TypeProto) -> str | None:
    """Where a tensor type's element type has no size gplace knows (undefined, or unknown to ONNX), the words for
    it (the number and ONNX's name, and the shape where known), else ``None``."""
    tensor_type = type_proto.tensor_type
    if _elem_bits(tensor_type.elem_type) is not None:
        return None
    dims = tensor_type.shape.dim
    known = tensor_type.HasField("shape") and all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims)
    shape = f" (its shape, {[int(d.dim_value) for d in dims]}, is known)" if known else ""
    return (f"has elem_type {_elem_name(tensor_type.elem_type)}, not an ONNX element type gplace knows the size "
            f"of{shape}")


def _elem_name(elem_type: int) -> str:
    """``"0 (UNDEFINED)"`` for a type ONNX names, else the number alone."""
    import onnx

    try:
        return f"{elem_type} ({onnx.TensorProto.DataType.Name(elem_type)})"
    except ValueError:
        return str(elem_type)


def _elem_bits(elem_type: int) -> int | None:
    import onnx

    try:
        return _BITS.get(onnx.TensorProto.DataType.Name(elem_type))
    except ValueError:
        return None


def initializer_spec(tensor: onnx.TensorProto) -> TensorSpec:
    """A stored tensor's shape and bytes.

    Raises:
        GraphError: a negative dimension (a stored tensor has no unknown ones), or a ``data_type`` of no known
            size (undefined, or unknown to ONNX: it was sized as 32-bit), naming the tensor.
    """
    shape = tuple(int(d) for d in tensor.dims)
    if any(d < 0 for d in shape):
        raise GraphError(f"initializer {tensor.name!r} has dims {list(shape)}: a stored tensor's are >= 0")
    bits = _elem_bits(tensor.data_type)
    if bits is None:
        raise GraphError(f"initializer {tensor.name!r} has data_type {tensor.data_type}, not an ONNX element type "
                         "gplace knows the size of")
    return TensorSpec(shape, math.ceil(math.prod(shape) * bits / 8))


def value_types(graph: onnx.GraphProto) -> dict[str, onnx.TypeProto]:
    """Name -> type of a graph's inputs, outputs, value_info and initialisers (known shapes win)."""
    import onnx

    types: dict[str, onnx.TypeProto] = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.name not in types or tensor_spec(value.type) is not None:
            types[value.name] = value.type
    for tensor in graph.initializer:
        types[tensor.name] = onnx.helper.make_tensor_type_proto(tensor.data_type, tensor.dims)
    return types


def spec_of(types: Mapping[str, onnx.TypeProto], name: str) -> TensorSpec | None:
    type_proto = types.get(name)
    return None if type_proto is None else tensor_spec(type_proto)


def function_key(function: onnx.FunctionProto) -> tuple[str, str, str]:
    """A local function's (domain, name, overload): what a call names it by."""
    return function.domain, function.name, function.overload


def call_key(node: onnx.NodeProto) -> tuple[str, str, str]:
    """The (domain, name, overload) of the function ``node`` would call: its ``overload`` field picks one of
    several functions of one name (IR 10)."""
    return node.domain, node.op_type, node.overload


def qualified_op_type(node: onnx.NodeProto) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"


def cost_attrs(node: onnx.NodeProto) -> dict[str, Any]:
    import onnx

    attrs: dict[str, Any] = {}
    if node.op_type in _RECURRENT and node.domain in ("", "ai.onnx"):
        attrs["weight_inputs"] = (1, 2)  # W and R; X is input 0
    if node.op_type == "Dropout" and node.domain in ("", "ai.onnx"):  # the identity but in training: a
        training_mode = len(node.input) > 2 and bool(node.input[2])  # training_mode input, or opset < 7's is_test=0
        attrs["train"] = training_mode or any(a.name == "is_test" and a.i == 0 for a in node.attribute)
    for attr in node.attribute:
        if attr.name in _COST_ATTRS:
            try:
                value = onnx.helper.get_attribute_value(attr)
            except Exception:  # a malformed attribute: the cost model falls back to memory traffic
                continue
            attrs[attr.name] = value.decode() if isinstance(value, bytes) else value
    return attrs
