"""Import an ONNX model into gplace's op graph.

This module is the only place in gplace that imports ``onnx``; it is imported lazily, inside the functions.

How a model maps onto the IR:

- **One op per node**, named ``node.name`` or, where that is empty or taken, ``"<op_type>_<i>"`` (``i`` the
  node's position; a further ``_<k>`` suffix keeps names unique). Op types of non-default domains are written
  ``"<domain>::<op_type>"``.
- **Graph inputs** that are not initialisers become ``"Input"`` ops (cost 0) named after the tensor, so that
  moving the input to the device of its consumers is a transfer like any other.
- **Initialisers** (dense or sparse) are weights: one read by a single node is *folded* into that node's
  ``persistent_memory``; one shared by several nodes (tied weights, an unrolled RNN's matrices, shape
  constants) or by none becomes an ``"Initializer"`` op (cost 0) holding it as persistent memory, with an
  edge to every reader, so a reader on another device pays for the copy. ``Constant`` nodes are ops whose
  value is their persistent memory.
- **Edges** run from a tensor's producer to each node reading it; several tensors between the same two ops
  make one edge carrying their summed bytes. Bytes are ``numel * itemsize`` from the inferred shape and dtype
  (sub-byte types count fractions of a byte; strings count 8 bytes an element, an estimate).
- **Costs**: ``kind_cost`` from the analytic model in :mod:`gplace.costmodel` (roofline on the reference GPU
  and CPU); ``cost`` is left ``None``.
- **Shapes**: ``onnx.shape_inference`` (non-strict, with data propagation) after the dynamic dimensions of the
  inputs are fixed from ``input_shapes``. Where that leaves a consumed tensor's shape unknown (a ``Slice`` or
  ``Reshape`` whose bounds come from ``Shape -> Gather -> Mod -> ...``), the *shape arithmetic* is folded:
  nodes whose inputs are all small known values (initialisers, ``Constant`` outputs, ``Shape``/``Size`` of
  statically shaped tensors) are evaluated with ``onnx.reference``, their outputs become constants in a copy of
  the model, and inference runs again, while new values appear (or until the graph's outputs are known too).
  A ``Loop``- or ``Scan``-carried output whose shape inference leaves unknown takes its initial value's (a
  carried value is taken to keep its shape). The copy only teaches shapes: the kept model has the original
  nodes (folded ones stay ops). A consumed tensor whose shape stays unknown is an error; an unknown output
  nobody reads counts 0 bytes, with a warning.
- **Control flow** (``If``, ``Loop``, ``Scan``: any node with a graph attribute) is one op, placed as a unit
  (its subgraphs run where it runs). Its inputs are the node's own and the outer values its subgraphs read
  (ONNX's implicit inputs, :func:`node_reads`), so a producer on another device pays for the copy. Its cost is
  that of its subgraphs' nodes (shapes as inferred inside them; a body's carried input without a known shape
  takes its initial value's, a ``Scan`` element its sequence's less the scanned axis): the dearer branch of an
  ``If``; a ``Loop``'s body times its trip count ``M`` when that is a constant or folded shape arithmetic (at the
  top level: ``Gather(Shape(x), 0)`` for ``range(x.size(0))``), a ``Scan``'s body times its sequence length,
  else one trip, with a warning. Body nodes with a shape left unknown count 0 seconds, with a warning; the weights of
  the subgraphs are the op's persistent memory.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gplace.costmodel import TensorSpec, op_kind_costs
from gplace.ir import Edge, GraphError, Op, OpGraph, UnsupportedGraphError
from gplace.ir.errors import error_summary
from gplace.zoo import roofline

if TYPE_CHECKING:
    import onnx

logger = logging.getLogger(__name__)

_COST_ATTRS = ("kernel_shape", "size", "equation")
"""Node attributes the cost model reads."""

_RECURRENT = frozenset({"LSTM", "GRU", "RNN"})

_FOLD_LIMIT = 4096
"""Most elements a value read or made while folding shape arithmetic may have (no weights are evaluated)."""
_FOLD_ROUNDS = 64
"""Most rounds of folding and re-inference (each must make a new value known)."""
_NOT_FOLDED = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
                         "Bernoulli", "Dropout"})
"""Nodes never evaluated while folding: their outputs are random."""

_BITS = {
    "FLOAT": 32, "UINT8": 8, "INT8": 8, "UINT16": 16, "INT16": 16, "INT32": 32, "INT64": 64, "STRING": 64,
    "BOOL": 8, "FLOAT16": 16, "DOUBLE": 64, "UINT32": 32, "UINT64": 64, "COMPLEX64": 64, "COMPLEX128": 128,
    "BFLOAT16": 16, "FLOAT8E4M3FN": 8, "FLOAT8E4M3FNUZ": 8, "FLOAT8E5M2": 8, "FLOAT8E5M2FNUZ": 8,
    "FLOAT8E8M0": 8, "UINT4": 4, "INT4": 4, "FLOAT4E2M1": 4, "UINT2": 2, "INT2": 2,
}
"""Bits per element of each ONNX tensor element type (``STRING`` is an estimate: one pointer)."""


@dataclass(frozen=True)
class OnnxSource:
    """The graph's ``source`` handle: the shape-inferred model and where each op came from."""

    model: Any = field(repr=False)
    """The ``onnx.ModelProto`` after input shapes were fixed and shapes inferred."""
    node_index: Mapping[str, int]
    """Op name -> index of its node in ``model.graph.node`` (``Input``/``Initializer`` ops are absent)."""
    base_dir: str | None = None
    """The directory of the file the model was read from, where its external weight data lives (``None`` for a
    model given in memory: its external data, if any, is found from the working directory)."""


def from_onnx(
    model_or_path: onnx.ModelProto | str | Path,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    name: str | None = None,
) -> OpGraph:
    """Import an ONNX model as an op graph.

    Args:
        model_or_path: a ``ModelProto`` (not modified) or the path of a ``.onnx`` file. External weight data
            is not loaded: only the shapes of the weights are needed.
        input_shapes: ``{input name: full shape}`` for inputs with dynamic or missing dimensions; a given
            shape must agree with the model's fixed dimensions. (default: none)
        name: graph name. (default: the file name without suffix, else the model's graph name, else ``"onnx"``)

    Returns:
        The op graph; its ``source`` is an :class:`OnnxSource`.

    Raises:
        FileNotFoundError: ``model_or_path`` is a path that does not exist.
        UnsupportedGraphError: the model cannot be read or imported; the message names the node, tensor or
            input and the reason (an unknown dimension with no input shape, a control-flow subgraph, an
            unknown shape after inference, a failed shape inference, ...).
    """
    model = _load(model_or_path)
    graph_name = name or (Path(model_or_path).stem if _is_path(model_or_path) else model.graph.name) or "onnx"
    _fix_input_shapes(model.graph, dict(input_shapes or {}))
    model = _infer_shapes(model, graph_name)
    try:
        ops, edges, node_index = _Builder(model.graph, graph_name, model.opset_import).build()
        base_dir = str(Path(model_or_path).resolve().parent) if _is_path(model_or_path) else None
        return OpGraph.from_ops(ops, edges, name=graph_name, source=OnnxSource(model, node_index, base_dir))
    except GraphError as err:
        if isinstance(err, UnsupportedGraphError):
            raise
        raise UnsupportedGraphError(f"ONNX model {graph_name!r}: {err}") from None


# ---------------------------------------------------------------------- loading and preparing
def _is_path(obj: object) -> bool:
    return isinstance(obj, str | Path)


def _load(model_or_path: object) -> onnx.ModelProto:
    """A private copy of the model, read from disk if given a path; protobuf errors become ours."""
    import onnx

    if _is_path(model_or_path):
        path = Path(model_or_path)  # type: ignore[arg-type]
        if not path.is_file():
            raise FileNotFoundError(f"no ONNX file at {str(path)!r}")
        try:
            model = onnx.load(str(path), load_external_data=False)
        except Exception as err:  # protobuf raises DecodeError, RuntimeError, ...
            raise UnsupportedGraphError(f"{path}: not a readable ONNX model ({error_summary(err)})") from None
        if not model.graph.node:
            raise UnsupportedGraphError(f"{path}: an ONNX model with no nodes (an empty file, or not an ONNX model)")
        return model
    if not isinstance(model_or_path, onnx.ModelProto):
        raise TypeError(f"from_onnx expects an onnx.ModelProto or a path, got {type(model_or_path).__name__}")
    model = onnx.ModelProto()
    model.CopyFrom(model_or_path)
    return model


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


def _fix_input_shapes(graph: onnx.GraphProto, given: dict[str, Sequence[int]]) -> None:
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


def _infer_shapes(model: onnx.ModelProto, graph_name: str) -> onnx.ModelProto:
    """The shape-inferred model; while consumed shapes stay unknown, shape arithmetic is folded (module doc)."""
    import onnx

    inferred = _run_inference(model, graph_name)
    values: dict[str, np.ndarray] = {}
    carried: dict[str, onnx.ValueInfoProto] = {}
    for _ in range(_FOLD_ROUNDS):
        if not _unknown_needed(inferred.graph):
            break
        new_values = _fold(inferred.graph, inferred.opset_import, values)
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
    known = {v.name for v in [*graph.input, *graph.value_info, *graph.output] if _tensor_spec(v.type) is not None}
    known.update(t.name for t in graph.initializer)
    known.update(t.values.name for t in graph.sparse_initializer)
    needed = [*(t for node in graph.node for t in node.input), *(v.name for v in graph.output)]
    return any(t and t not in known for t in needed)


def _carry(graph: onnx.GraphProto, carried: dict[str, onnx.ValueInfoProto]) -> bool:
    """Add to ``carried`` the type of each ``Loop``- or ``Scan``-carried output that inference left unknown, taken
    from its initial value (a carried value is taken to keep its shape from pass to pass); True if anything is
    new."""
    import onnx

    types = _value_types(graph)
    before = len(carried)
    for node in graph.node:
        if node.op_type not in ("Loop", "Scan"):
            continue
        first = 2 if node.op_type == "Loop" else 0
        scans = next((a.i for a in node.attribute if a.name == "num_scan_inputs"), 0)
        for out, initial in zip(node.output, node.input[first:len(node.input) - scans], strict=False):
            if out and out not in carried and _spec_of(types, initial) is not None and _spec_of(types, out) is None:
                carried[out] = onnx.helper.make_value_info(out, types[initial])
    return len(carried) > before


def _fold(graph: onnx.GraphProto, opset_import: Any, values: dict[str, np.ndarray]) -> bool:
    """Add to ``values`` what is computable from small known values, in node order; True if anything is new.

    Known values: small dense initialisers, ``Shape``/``Size`` of tensors whose inferred shape is static, and
    the outputs of evaluated nodes (default domain, not random, all inputs known).
    """
    import onnx

    specs = {v.name: _tensor_spec(v.type) for v in [*graph.input, *graph.value_info, *graph.output]}
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
        specs = [_tensor_spec(inferred[t]) if t in inferred else None for t in node.output if t]
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


# ---------------------------------------------------------------------- tensors
def _tensor_spec(type_proto: onnx.TypeProto) -> TensorSpec | None:
    """Shape and bytes of a fully known tensor type, else ``None``."""
    if not type_proto.HasField("tensor_type"):
        return None
    tensor_type = type_proto.tensor_type
    if not tensor_type.HasField("shape") or any(not d.HasField("dim_value") for d in tensor_type.shape.dim):
        return None
    shape = tuple(int(d.dim_value) for d in tensor_type.shape.dim)
    bits = _elem_bits(tensor_type.elem_type)
    return None if bits is None else TensorSpec(shape, math.ceil(math.prod(shape) * bits / 8))


def _elem_bits(elem_type: int) -> int | None:
    import onnx

    try:
        return _BITS.get(onnx.TensorProto.DataType.Name(elem_type))
    except ValueError:
        return None


def _initializer_spec(tensor: onnx.TensorProto) -> TensorSpec:
    shape = tuple(int(d) for d in tensor.dims)
    bits = _elem_bits(tensor.data_type) or 32
    return TensorSpec(shape, math.ceil(math.prod(shape) * bits / 8))


def _constant_bytes(node: onnx.NodeProto, outputs: Sequence[TensorSpec | None]) -> int:
    return sum(t.nbytes for t in outputs if t is not None) if node.op_type == "Constant" else 0


def _cost_attrs(node: onnx.NodeProto) -> dict[str, Any]:
    import onnx

    attrs: dict[str, Any] = {}
    if node.op_type in _RECURRENT and node.domain in ("", "ai.onnx"):
        attrs["weight_inputs"] = (1, 2)  # W and R; X is input 0
    for attr in node.attribute:
        if attr.name in _COST_ATTRS:
            try:
                value = onnx.helper.get_attribute_value(attr)
            except Exception:  # a malformed attribute: the cost model falls back to memory traffic
                continue
            attrs[attr.name] = value.decode() if isinstance(value, bytes) else value
    return attrs


# ---------------------------------------------------------------------- control flow
class _SubgraphCosts:
    """Costs of control-flow nodes from their subgraphs' nodes (the module docstring); where the model's inference
    left a shape inside a subgraph out, it is inferred node by node here."""

    def __init__(self, types: Mapping[str, onnx.TypeProto], constants: Mapping[str, int], opset_import: Any) -> None:
        self.types, self.constants, self.opset_import = types, constants, list(opset_import)

    def node(self, node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto] | None = None,
             constants: Mapping[str, int] | None = None) -> tuple[dict[str, float], int | None, int]:
        """Seconds per device kind of a control-flow node, its trip count (``None``: unknown, one pass counted)
        and how many of its subgraphs' nodes had a shape unknown (0 s each); ``types`` and ``constants``: of its
        scope (default: the main graph's)."""
        types = self.types if types is None else types
        constants = self.constants if constants is None else constants
        bodies = [self._graph(graph, {**types, **_carried_types(node, graph, types)}, constants)
                  for graph in subgraphs(node)]
        unknown = sum(n for _, n in bodies)
        if node.op_type == "If":
            return {k: max(c[k] for c, _ in bodies) for k in roofline.REFERENCE}, 1, unknown
        trips = _trips(node, types, constants)
        return {k: (trips or 1) * sum(c[k] for c, _ in bodies) for k in roofline.REFERENCE}, trips, unknown

    def _graph(self, graph: onnx.GraphProto, outer: Mapping[str, onnx.TypeProto],
               constants: Mapping[str, int]) -> tuple[dict[str, float], int]:
        """Summed seconds per device kind of one pass over ``graph``'s nodes, and how many had a shape unknown."""
        types = {**outer, **{t: v for t, v in _value_types(graph).items() if t not in outer or _tensor_spec(v)}}
        constants = {**constants, **_scalar_constants(graph)}
        total, unknown = dict.fromkeys(roofline.REFERENCE, 0.0), 0
        for node in graph.node:
            if subgraphs(node):
                costs, _, inner = self.node(node, types, constants)
                unknown += inner
            else:
                inputs = [_spec_of(types, t) for t in node.input if t]
                if any(spec is None for spec in inputs):
                    unknown += 1
                    continue
                self._infer(node, types)
                outputs = [spec for t in node.output if t and (spec := _spec_of(types, t)) is not None]
                costs = op_kind_costs(_op_type(node), inputs, outputs, _cost_attrs(node))
            for kind in total:
                total[kind] += costs[kind]
        return total, unknown

    def _infer(self, node: onnx.NodeProto, types: dict[str, onnx.TypeProto]) -> None:
        """Add the types of ``node``'s outputs that are unknown, as onnx infers them from its inputs' (if it can)."""
        import onnx

        if all(_spec_of(types, t) is not None for t in node.output if t):
            return
        opsets = {o.domain or "": o.version for o in self.opset_import}
        try:
            schema = onnx.defs.get_schema(node.op_type, opsets.get(node.domain or "", 1), node.domain or "")
            inferred = onnx.shape_inference.infer_node_outputs(
                schema, node, {t: types[t] for t in node.input if t}, None, None, self.opset_import)
        except Exception:  # an op onnx cannot infer here: its outputs stay unknown
            return
        for t, type_proto in inferred.items():
            if _spec_of(types, t) is None:
                types[t] = type_proto


def _carried_types(node: onnx.NodeProto, body: onnx.GraphProto,
                   types: Mapping[str, onnx.TypeProto]) -> dict[str, onnx.TypeProto]:
    """Types for a ``Loop``'s or ``Scan``'s body inputs from the node's inputs in scope ``types``: a carried value
    has its initial value's type (it is taken to keep its shape), a ``Scan`` element its sequence's without the
    scanned axis. A body input of known shape keeps its own (:meth:`_SubgraphCosts._graph`)."""
    import onnx

    if node.op_type not in ("Loop", "Scan"):
        return {}
    names = [v.name for v in body.input]
    if node.op_type == "Loop":
        return {b: types[t] for b, t in zip(names[2:], node.input[2:], strict=False) if t in types}
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute if a.name != "body"}
    scans = int(attrs.get("num_scan_inputs", 1))
    states = len(node.input) - scans
    seeds = {b: types[t] for b, t in zip(names[:states], node.input[:states], strict=False) if t in types}
    axes = list(attrs.get("scan_input_axes", [0] * scans))
    for b, t, axis in zip(names[states:], node.input[states:], axes, strict=False):
        spec = _spec_of(types, t)
        if spec is not None and spec.shape:
            shape = list(spec.shape)
            del shape[axis % len(shape)]
            seeds[b] = onnx.helper.make_tensor_type_proto(types[t].tensor_type.elem_type, shape)
    return seeds


def _value_types(graph: onnx.GraphProto) -> dict[str, onnx.TypeProto]:
    """Name -> type of a graph's inputs, outputs, value_info and initialisers (known shapes win)."""
    import onnx

    types: dict[str, onnx.TypeProto] = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.name not in types or _tensor_spec(value.type) is not None:
            types[value.name] = value.type
    for tensor in graph.initializer:
        types[tensor.name] = onnx.helper.make_tensor_type_proto(tensor.data_type, tensor.dims)
    return types


def _spec_of(types: Mapping[str, onnx.TypeProto], name: str) -> TensorSpec | None:
    type_proto = types.get(name)
    return None if type_proto is None else _tensor_spec(type_proto)


def _trips(node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto], constants: Mapping[str, int]) -> int | None:
    """A ``Loop``'s constant trip count ``M``, or a ``Scan``'s sequence length, where known."""
    if node.op_type == "Loop":
        return constants.get(node.input[0]) if node.input else None
    if node.op_type == "Scan":
        import onnx

        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute if a.name != "body"}
        first = node.input[len(node.input) - int(attrs.get("num_scan_inputs", 1))]
        spec = _spec_of(types, first)
        axes = list(attrs.get("scan_input_axes", [0]))
        if spec is not None and spec.shape:
            return spec.shape[axes[0] % len(spec.shape) if axes else 0]
    return None


def _subgraph_weights(node: onnx.NodeProto) -> int:
    """Bytes of the initialisers inside a node's subgraphs, at any depth."""
    total = 0
    for graph in subgraphs(node):
        total += sum(_initializer_spec(t).nbytes for t in graph.initializer)
        total += sum(_subgraph_weights(inner) for inner in graph.node)
    return total


def _scalar_constants(graph: onnx.GraphProto) -> dict[str, int]:
    """Integer scalars the graph holds as initialisers or ``Constant`` nodes (a ``Loop``'s trip count, say)."""
    import onnx

    held = [(t.name, t) for t in graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL]
    held += [(n.output[0], a.t) for n in graph.node if n.op_type == "Constant" and n.output
             for a in n.attribute if a.name == "value"]
    constants = {}
    for name, tensor in held:
        if math.prod(tensor.dims) == 1 and tensor.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
            constants[name] = int(onnx.numpy_helper.to_array(tensor).reshape(()))
    return constants


def _trip_constants(graph: onnx.GraphProto, opset_import: Any) -> dict[str, int]:
    """:func:`_scalar_constants`, plus the trip counts of the graph's ``Loop`` nodes that shape arithmetic
    computes (``Shape -> Gather``, as an exporter writes ``range(x.size(0))``), folded as :func:`_fold` does."""
    constants = _scalar_constants(graph)
    counts = {node.input[0] for node in graph.node if node.op_type == "Loop" and node.input and node.input[0]}
    if counts <= constants.keys():
        return constants
    values: dict[str, np.ndarray] = {}
    while _fold(graph, opset_import, values) and not counts <= values.keys():
        pass
    for name in counts - constants.keys():
        value = values.get(name)
        if value is not None and value.size == 1 and np.issubdtype(value.dtype, np.integer):
            constants[name] = int(value.reshape(()))
    return constants


def _op_type(node: onnx.NodeProto) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"


# ---------------------------------------------------------------------- graph building
class _Builder:
    """Turns a shape-inferred ``GraphProto`` into op and edge records (one pass over the nodes)."""

    def __init__(self, graph: onnx.GraphProto, graph_name: str, opset_import: Any = ()) -> None:
        self.graph = graph
        self.graph_name = graph_name
        self.specs: dict[str, TensorSpec | None] = {}
        self.value_kind: dict[str, str | None] = {}
        for value in [*graph.input, *graph.value_info, *graph.output]:
            self.specs.setdefault(value.name, None)
            self.value_kind.setdefault(value.name, value.type.WhichOneof("value"))
            spec = _tensor_spec(value.type)
            if spec is not None:
                self.specs[value.name] = spec
        self.initializers = {t.name: _initializer_spec(t) for t in graph.initializer}
        for sparse in graph.sparse_initializer:
            dense = _initializer_spec(sparse.values)
            nbytes = dense.nbytes + _initializer_spec(sparse.indices).nbytes
            self.initializers[sparse.values.name] = TensorSpec(tuple(int(d) for d in sparse.dims), nbytes)
        self.specs.update(self.initializers)
        self.readers: dict[str, list[int]] = defaultdict(list)
        for i, node in enumerate(graph.node):
            for tensor in node_reads(node):
                self.readers[tensor].append(i)
        self.subgraph_costs = _SubgraphCosts(_value_types(graph), _trip_constants(graph, opset_import),
                                             opset_import)
        self.producer: dict[str, str] = {}
        self.used: set[str] = set()
        self.ops: list[Op] = []
        self.unknown_outputs: list[str] = []
        self.edge_bytes: dict[tuple[str, str], int] = defaultdict(int)

    def build(self) -> tuple[list[Op], list[Edge], dict[str, int]]:
        self._add_inputs()
        self._add_shared_initializers()
        node_index = {self._add_node(i, node): i for i, node in enumerate(self.graph.node)}
        edges = [Edge(src, dst, nbytes) for (src, dst), nbytes in self.edge_bytes.items()]
        if self.unknown_outputs:
            logger.warning("ONNX model %r: %d output(s) with an unknown shape and no readers count 0 bytes: %s",
                           self.graph_name, len(self.unknown_outputs), ", ".join(self.unknown_outputs[:5]))
        return self.ops, edges, node_index

    def _unique(self, name: str) -> str:
        candidate, k = name, 1
        while candidate in self.used:
            candidate, k = f"{name}_{k}", k + 1
        self.used.add(candidate)
        return candidate

    def _add_inputs(self) -> None:
        for value in self.graph.input:
            if value.name in self.initializers or value.name in self.producer:
                continue
            spec = self.specs.get(value.name)
            if spec is None and self.readers.get(value.name):
                kind = value.type.WhichOneof("value") or "untyped"
                raise UnsupportedGraphError(f"input {value.name!r} is of type {kind.removesuffix('_type')}, "
                                            "not a tensor of known shape (not handled)")
            op_name = self._unique(value.name)
            self.producer[value.name] = op_name
            nbytes = spec.nbytes if spec else 0
            self.ops.append(Op(op_name, "Input", 0.0, output_bytes=nbytes, output_shapes=_shapes([spec])))

    def _add_shared_initializers(self) -> None:
        for tensor, spec in self.initializers.items():
            if len(self.readers.get(tensor, ())) == 1:
                continue  # folded into its reader
            op_name = self._unique(tensor)
            self.producer[tensor] = op_name
            self.ops.append(Op(op_name, "Initializer", 0.0, persistent_memory=spec.nbytes,
                               output_bytes=spec.nbytes, output_shapes=(spec.shape,)))

    def _add_node(self, i: int, node: onnx.NodeProto) -> str:
        op_name = self._unique(node.name or f"{node.op_type}_{i}")
        op_type = _op_type(node)
        read = {tensor: self._read(tensor, node, op_name) for tensor in node_reads(node)}
        inputs = [read[tensor] for tensor in node.input if tensor]
        outputs = [self._output_spec(tensor, op_name) for tensor in node.output if tensor]
        folded = sum(self.initializers[t].nbytes for t in read
                     if t in self.initializers and len(self.readers[t]) == 1)
        known_outputs = [t for t in outputs if t is not None]
        self._add_edges(read, op_name)
        if subgraphs(node):
            costs = self._control_flow_costs(node, op_name)
        else:
            costs = op_kind_costs(op_type, inputs, known_outputs, _cost_attrs(node))
        self.ops.append(Op(
            op_name, op_type, None, costs,
            persistent_memory=folded + _constant_bytes(node, outputs) + _subgraph_weights(node),
            output_bytes=sum(t.nbytes for t in known_outputs),
            output_shapes=_shapes(outputs),
        ))
        for tensor in node.output:
            if tensor:
                self.producer[tensor] = op_name
        return op_name

    def _read(self, tensor: str, node: onnx.NodeProto, op_name: str) -> TensorSpec:
        """The spec of an input tensor; it must have a producer (or be an initializer) and a known shape."""
        spec = self.specs.get(tensor)
        src = self.producer.get(tensor)
        if src is None and tensor not in self.initializers:
            raise UnsupportedGraphError(f"node {op_name!r} ({node.op_type}) reads tensor {tensor!r}, which nothing "
                                        "produces (not a graph input, an initializer or an earlier node's output)")
        if spec is None:
            kind = self.value_kind.get(tensor)
            what = (f"is a {kind.removesuffix('_type')} value, not a tensor (not handled)"
                    if kind not in (None, "tensor_type") else "has a shape unknown after shape inference")
            raise UnsupportedGraphError(f"node {src!r}: its output {tensor!r} (read by {op_name!r}) {what}")
        return spec

    def _control_flow_costs(self, node: onnx.NodeProto, op_name: str) -> dict[str, float]:
        costs, trips, unknown = self.subgraph_costs.node(node)
        if trips is None:
            logger.warning("ONNX model %r: %s %r: trip count unknown, its cost counts one pass of its body",
                           self.graph_name, node.op_type, op_name)
        if unknown:
            logger.warning("ONNX model %r: %s %r: %d node(s) of its subgraphs have a shape unknown after shape "
                           "inference and count 0 seconds", self.graph_name, node.op_type, op_name, unknown)
        return costs

    def _add_edges(self, read: Mapping[str, TensorSpec], op_name: str) -> None:
        for tensor in read:
            src = self.producer.get(tensor)
            if src is not None:
                self.edge_bytes[(src, op_name)] += self.specs[tensor].nbytes

    def _output_spec(self, tensor: str, op_name: str) -> TensorSpec | None:
        spec = self.specs.get(tensor)
        if spec is None and not self.readers.get(tensor):
            self.unknown_outputs.append(f"{op_name}:{tensor}")
        return spec


def _shapes(specs: Sequence[TensorSpec | None]) -> tuple[tuple[int, ...], ...]:
    """Output shapes for the IR; an unknown one is ``(-1,)``."""
    return tuple(s.shape if s is not None else (-1,) for s in specs)
