"""Shapes of an ONNX model's values: input dimensions fixed, ``onnx.shape_inference``, shape arithmetic folded
(the package docstring)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from gplace.importers.onnx.tensors import spec_of, subgraphs, tensor_spec, value_types
from gplace.ir import UnsupportedGraphError
from gplace.ir.errors import error_summary

if TYPE_CHECKING:
    import onnx


_FOLD_LIMIT = 4096
"""Most elements a value read or made while folding shape arithmetic may have (no weights are evaluated)."""
_FOLD_ROUNDS = 64
"""Most rounds of folding and re-inference (each must make a new value known)."""
_NOT_FOLDED = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
                         "Bernoulli", "Dropout"})
"""Nodes never evaluated while folding: their outputs are random."""


def fix_input_shapes(graph: onnx.GraphProto, given: dict[str, Sequence[int]]) -> None:
    """Write concrete dimensions into the graph inputs, and into every use of the symbols they resolve."""
    initializers = {t.name for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in initializers]
    unknown = sorted(set(given) - {v.name for v in inputs})
    if unknown:
        raise UnsupportedGraphError(
            f"input_shapes names {unknown}, which are not inputs of the model; inputs: {[v.name for v in inputs]}"
        )
    symbols: dict[str, int] = {}
    for value in inputs:
        _fix_one_input(value, given.get(value.name), symbols)
    for value in [*graph.value_info, *graph.output]:
        if value.type.HasField("tensor_type"):
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_param") and dim.dim_param in symbols:
                    dim.dim_value = symbols[dim.dim_param]


def _fix_one_input(value: onnx.ValueInfoProto, shape: Sequence[int] | None, symbols: dict[str, int]) -> None:
    if not value.type.HasField("tensor_type"):
        if shape is not None:
            raise UnsupportedGraphError(f"input {value.name!r} is a {value.type.WhichOneof('value')}, not a tensor")
        return  # a sequence/map/optional input: its readers fail later if its size matters
    tensor_type = value.type.tensor_type
    if shape is None:
        if not tensor_type.HasField("shape"):
            raise UnsupportedGraphError(f"input {value.name!r} has no shape; give it in input_shapes")
        for i, dim in enumerate(tensor_type.shape.dim):
            if not dim.HasField("dim_value"):
                raise UnsupportedGraphError(
                    f"input {value.name!r}: dimension {i} ({dim.dim_param or 'unnamed'}) is unknown; "
                    f"give the full shape in input_shapes={{{value.name!r}: [...]}}"
                )
        return
    shape = [int(d) for d in shape]
    dims = tensor_type.shape.dim
    if tensor_type.HasField("shape") and len(dims) != len(shape):
        raise UnsupportedGraphError(f"input {value.name!r} has rank {len(dims)}, input_shapes gives {shape}")
    for i, (dim, size) in enumerate(zip(dims, shape, strict=False)):
        if size < 0 or (dim.HasField("dim_value") and dim.dim_value != size):
            raise UnsupportedGraphError(
                f"input {value.name!r}: dimension {i} is {dim.dim_value or dim.dim_param!r}, input_shapes gives {size}"
            )
        if dim.HasField("dim_param"):
            symbols[dim.dim_param] = size
    tensor_type.shape.Clear()
    for size in shape:
        tensor_type.shape.dim.add().dim_value = size


def infer_shapes(model: onnx.ModelProto, graph_name: str) -> onnx.ModelProto:
    """The shape-inferred model; while consumed shapes stay unknown, shape arithmetic is folded (package doc)."""
    import onnx

    inferred = _run_inference(model, graph_name)
    values: dict[str, np.ndarray] = {}
    carried: dict[str, onnx.ValueInfoProto] = {}
    for _ in range(_FOLD_ROUNDS):
        if not _unknown_needed(inferred.graph):
            break
        new_values = fold(inferred.graph, inferred.opset_import, values)
        new_carried = _carry(inferred.graph, carried)
        if not (new_values or new_carried):
            break
        folded = onnx.ModelProto()
        folded.CopyFrom(model)
        kept = [v for v in folded.graph.value_info if v.name not in carried]
        del folded.graph.value_info[:]
        folded.graph.value_info.extend([*kept, *carried.values()])
        del folded.graph.node[:]
        for node in model.graph.node:
            outputs = [t for t in node.output if t]
            if node.op_type == "Constant" or not outputs or any(t not in values for t in outputs):
                folded.graph.node.append(node)
                continue
            for t in outputs:
                folded.graph.node.append(onnx.helper.make_node(
                    "Constant", [], [t], value=onnx.numpy_helper.from_array(values[t])))
        inferred = _run_inference(folded, graph_name)
        del inferred.graph.node[:]
        inferred.graph.node.extend(model.graph.node)  # the original nodes, with the shapes learned on the copy
    return inferred


def _unknown_needed(graph: onnx.GraphProto) -> bool:
    """Whether a tensor that a node reads, or a graph output, has a shape unknown."""
    known = {v.name for v in [*graph.input, *graph.value_info, *graph.output] if tensor_spec(v.type) is not None}
    known.update(t.name for t in graph.initializer)
    known.update(t.values.name for t in graph.sparse_initializer)
    needed = [*(t for node in graph.node for t in node.input), *(v.name for v in graph.output)]
    return any(t and t not in known for t in needed)


def _carry(graph: onnx.GraphProto, carried: dict[str, onnx.ValueInfoProto]) -> bool:
    """Add to ``carried`` the type of each ``Loop``- or ``Scan``-carried output that inference left unknown, taken
    from its initial value (a carried value is taken to keep its shape from pass to pass); True if anything is
    new."""
    import onnx

    types = value_types(graph)
    before = len(carried)
    for node in graph.node:
        if node.op_type not in ("Loop", "Scan"):
            continue
        first = 2 if node.op_type == "Loop" else 0
        scans = next((a.i for a in node.attribute if a.name == "num_scan_inputs"), 0)
        for out, initial in zip(node.output, node.input[first:len(node.input) - scans], strict=False):
            if out and out not in carried and spec_of(types, initial) is not None and spec_of(types, out) is None:
                carried[out] = onnx.helper.make_value_info(out, types[initial])
    return len(carried) > before


def fold(graph: onnx.GraphProto, opset_import: Any, values: dict[str, np.ndarray]) -> bool:
    """Add to ``values`` what is computable from small known values, in node order; True if anything is new.

    Known values: small dense initialisers, ``Shape``/``Size`` of tensors whose inferred shape is static, and
    the outputs of evaluated nodes (default domain, not random, all inputs known).
    """
    import onnx

    specs = {v.name: tensor_spec(v.type) for v in [*graph.input, *graph.value_info, *graph.output]}
    overridable = {v.name for v in graph.input}  # an initialiser that is also an input is only a default
    for tensor in graph.initializer:
        if (tensor.name not in values and tensor.name not in overridable and math.prod(tensor.dims) <= _FOLD_LIMIT
                and tensor.data_location != onnx.TensorProto.EXTERNAL):
            values[tensor.name] = onnx.numpy_helper.to_array(tensor)
    before = len(values)
    for node in graph.node:
        inputs = [t for t in node.input if t]
        if all(t in values for t in node.output if t):
            continue
        if node.op_type in ("Shape", "Size") and specs.get(node.input[0]) is not None:
            shape = specs[node.input[0]].shape
            bounds = {a.name: a.i for a in node.attribute}
            dims = shape[bounds.get("start", 0):bounds.get("end")] if node.op_type == "Shape" else math.prod(shape)
            values[node.output[0]] = np.array(dims, dtype=np.int64)
        elif (node.domain in ("", "ai.onnx") and node.op_type not in _NOT_FOLDED and not subgraphs(node)
              and all(t in values for t in inputs)):
            values.update(_evaluate(node, {t: values[t] for t in inputs}, opset_import))
    return len(values) > before


def _evaluate(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset_import: Any) -> dict[str, np.ndarray]:
    """The node's outputs on ``feeds`` (``onnx.reference``), or nothing unless onnx infers them all small."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    opsets = {o.domain or "": o.version for o in opset_import}
    try:
        types = {t: onnx.helper.make_tensor_type_proto(onnx.helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                 for t, v in feeds.items()}
        data = {t: onnx.numpy_helper.from_array(v, t) for t, v in feeds.items()}
        schema = onnx.defs.get_schema(node.op_type, opsets.get("", 1), "")
        inferred = onnx.shape_inference.infer_node_outputs(schema, node, types, data, None, list(opset_import))
        specs = [tensor_spec(inferred[t]) if t in inferred else None for t in node.output if t]
        if any(s is None or math.prod(s.shape) > _FOLD_LIMIT for s in specs):
            return {}
        results = ReferenceEvaluator(node, opsets=opsets).run(None, feeds)
    except Exception:  # an op that onnx cannot infer or run here: its outputs stay unknown
        return {}
    return {t: np.asarray(r) for t, r in zip(node.output, results, strict=False) if t}


def _run_inference(model: onnx.ModelProto, graph_name: str) -> onnx.ModelProto:
    import onnx

    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception as err:  # onnx raises InferenceError, ValidationError, RuntimeError, ...
        reason = error_summary(err)
        raise UnsupportedGraphError(f"ONNX model {graph_name!r}: shape inference failed ({reason})") from None
