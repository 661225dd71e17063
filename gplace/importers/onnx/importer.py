"""Import an ONNX model as an op graph: one op per node (the package docstring)."""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gplace.costmodel import TensorSpec, op_kind_costs
from gplace.importers.onnx.control import (
    SubgraphCosts,
    call_values,
    check_expansion,
    subgraph_weights,
    trip_constants,
)
from gplace.importers.onnx.shapes import fix_input_shapes, infer_shapes, input_shape_map
from gplace.importers.onnx.tensors import (
    cost_attrs,
    initializer_spec,
    node_reads,
    qualified_op_type,
    subgraphs,
    tensor_spec,
    unsized_elem_type,
    value_types,
)
from gplace.ir import Edge, GraphError, Op, OpGraph, UnsupportedGraphError
from gplace.ir.errors import error_summary
from gplace.ir.serialize import as_path, refuse_special_file

if TYPE_CHECKING:
    import onnx


logger = logging.getLogger(__name__)

_QDQ_DOMAINS = frozenset({"", "ai.onnx", "com.microsoft"})
"""Domains whose ``DequantizeLinear`` is QDQ's (``com.microsoft``: onnxruntime's quantiser, for 16- and 4-bit)."""


@dataclass(frozen=True)
class OnnxSource:
    """The graph's ``source`` handle: the shape-inferred model and where each op came from."""

    model: Any = field(repr=False)
    """The ``onnx.ModelProto`` after input shapes were fixed and shapes inferred."""
    node_index: Mapping[str, int]
    """Op name -> index of its node in ``model.graph.node`` (``Input``/``Initializer`` ops are absent)."""
    base_dir: str | None = None
    """The directory of the file the model was read from, where its external weight data lives: the folder of the
    path as given, made absolute but not resolved (a symbolic link to the model file is not followed, as onnx and
    onnxruntime look for the data beside the link); ``None`` for a model given in memory: its external data, if
    any, is found from the working directory."""


def from_onnx(
    model_or_path: onnx.ModelProto | str | os.PathLike[str],
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    name: str | None = None,
) -> OpGraph:
    """Import an ONNX model as an op graph.

    Args:
        model_or_path: a ``ModelProto`` (not modified) or the path (a str or ``os.PathLike``) of a ``.onnx``
            file. External weight data is not loaded: only the shapes of the weights are needed.
        input_shapes: ``{input name: full shape}`` for inputs with dynamic or missing dimensions; a given
            shape must agree with the model's fixed dimensions, and give a symbol that several inputs share one
            size. The shapes of the model's values follow from these, not from the model's ``value_info`` or
            declared output shapes (package doc). An input that is also an initialiser (IR version < 4) has the
            initialiser's shape, whatever its declared dims; one given for it must equal that. (default: none)
        name: graph name. (default: the file name without suffix, else the model's graph name, else ``"onnx"``)

    Returns:
        The op graph; its ``source`` is an :class:`OnnxSource`.

    Raises:
        FileNotFoundError: ``model_or_path`` is a path that does not exist.
        IsADirectoryError: ``model_or_path`` is a folder.
        ImportError: ``onnx`` is not installed (naming the ``onnx`` extra).
        UnsupportedGraphError: the model cannot be read or imported; the message names the node, tensor or
            input and the reason (an unknown dimension with no input shape, a symbol given two sizes, an unknown
            shape after inference, an element type of no known size, a failed shape inference, ...).
    """
    given = input_shape_map(input_shapes)
    path = as_path(model_or_path, "from_onnx: model_or_path") if _is_path(model_or_path) else None
    model = _load(model_or_path if path is None else path)
    graph_name = name or (model.graph.name if path is None else path.stem) or "onnx"
    fix_input_shapes(model.graph, given)
    check_expansion(model, graph_name)
    model = infer_shapes(model, graph_name)
    try:
        ops, edges, node_index = _Builder(model.graph, graph_name, model.opset_import, model.functions).build()
        base_dir = None if path is None else str(path.absolute().parent)
        return OpGraph.from_ops(ops, edges, name=graph_name, source=OnnxSource(model, node_index, base_dir))
    except GraphError as err:
        if isinstance(err, UnsupportedGraphError):
            raise
        raise UnsupportedGraphError(f"ONNX model {graph_name!r}: {err}") from None


def _is_path(obj: object) -> bool:
    return isinstance(obj, str | os.PathLike)


def _load(model_or_path: object) -> onnx.ModelProto:
    """A private copy of the model, read from disk if given a path; protobuf errors become ours."""
    from gplace.extras import require

    onnx = require("onnx", "onnx", "importing ONNX models")

    if _is_path(model_or_path):
        path = as_path(model_or_path, "from_onnx: model_or_path")
        refuse_special_file(path, "an ONNX file")
        if path.is_dir():
            raise IsADirectoryError(f"{str(path)!r} is a folder, not an ONNX file: give the .onnx file in it")
        if not path.is_file():
            raise FileNotFoundError(f"no ONNX file at {str(path)!r}")
        try:
            model = onnx.load(str(path), load_external_data=False)
        except Exception as err:  # protobuf raises DecodeError, RuntimeError, ...
            raise UnsupportedGraphError(f"{path}: not a readable ONNX model ({error_summary(err)})") from None
        if not model.graph.node:
            raise UnsupportedGraphError(f"{path}: an ONNX model with no nodes (an empty file, or not an ONNX model)")
        _check_model_text(model, str(path))
        return model
    if not isinstance(model_or_path, onnx.ModelProto):
        raise TypeError(f"from_onnx expects an onnx.ModelProto or a path, got {type(model_or_path).__name__}")
    model = onnx.ModelProto()
    model.CopyFrom(model_or_path)
    _check_model_text(model, "the ONNX model")
    return model


def _check_model_text(model: onnx.ModelProto, where: str) -> None:
    """:func:`_check_text` on the main graph and on every local function's body."""
    _check_text(model.graph, where)
    for function in model.functions:
        if not isinstance(function.name, str) or not isinstance(function.domain, str):
            raise UnsupportedGraphError(f"{where}: a local function's name or domain {function.name!r} is not UTF-8 "
                                        "text")
        _check_node_text(function.node, f"{where}, function {function.name!r}")


def _check_text(graph: onnx.GraphProto, where: str) -> None:
    """Refuse a name, op type or domain that is not UTF-8 text (protobuf hands such a string field over as
    ``bytes``, which failed deep inside the import or the write-back), naming the node or value and the field; the
    subgraphs of control-flow nodes too."""
    if not isinstance(graph.name, str):
        raise UnsupportedGraphError(f"{where}: the graph name {graph.name!r} is not UTF-8 text")
    values = [*graph.input, *graph.output, *graph.value_info, *graph.initializer]
    for value in values:
        if not isinstance(value.name, str):
            raise UnsupportedGraphError(f"{where}: the value name {value.name!r} is not UTF-8 text")
    _check_node_text(graph.node, where)


def _check_node_text(nodes: Any, where: str) -> None:
    for i, node in enumerate(nodes):
        for field_name in ("name", "op_type", "domain"):
            if not isinstance(getattr(node, field_name), str):
                raise UnsupportedGraphError(f"{where}: node {i} ({node.name!r}): its {field_name} "
                                            f"{getattr(node, field_name)!r} is not UTF-8 text")
        for field_name in ("input", "output"):
            bad = [t for t in getattr(node, field_name) if not isinstance(t, str)]
            if bad:
                raise UnsupportedGraphError(f"{where}: node {i} ({node.name!r}): its {field_name} {bad[0]!r} is not "
                                            "UTF-8 text")
        for inner in subgraphs(node):
            _check_text(inner, f"{where}, subgraph of node {node.name!r}")


class _Builder:
    """Turns a shape-inferred ``GraphProto`` into op and edge records (one pass over the nodes)."""

    def __init__(self, graph: onnx.GraphProto, graph_name: str, opset_import: Any = (), functions: Any = ()) -> None:
        self.graph = graph
        self.graph_name = graph_name
        self.specs: dict[str, TensorSpec | None] = {}
        self.value_kind: dict[str, str | None] = {}
        self.types: dict[str, onnx.TypeProto] = {}
        for value in [*graph.input, *graph.value_info, *graph.output]:
            self.specs.setdefault(value.name, None)
            self.value_kind.setdefault(value.name, value.type.WhichOneof("value"))
            self.types.setdefault(value.name, value.type)
            spec = tensor_spec(value.type)
            if spec is not None:
                self.specs[value.name] = spec
                self.types[value.name] = value.type
        self.initializers = {t.name: initializer_spec(t) for t in graph.initializer}
        for sparse in graph.sparse_initializer:
            dense = initializer_spec(sparse.values)
            nbytes = dense.nbytes + initializer_spec(sparse.indices).nbytes
            self.initializers[sparse.values.name] = TensorSpec(tuple(int(d) for d in sparse.dims), nbytes)
        self.specs.update(self.initializers)
        self.readers: dict[str, list[int]] = defaultdict(list)
        self.writer: dict[str, int] = {}
        self.input_names = {v.name for v in graph.input}
        for i, node in enumerate(graph.node):
            for tensor in node_reads(node):
                self.readers[tensor].append(i)
            for tensor in node.output:
                if tensor:
                    self._check_single_writer(tensor, i)
                    self.writer[tensor] = i
        values = call_values(graph, opset_import) if functions or any(map(subgraphs, graph.node)) else {}
        self.subgraph_costs = SubgraphCosts(value_types(graph), trip_constants(graph, opset_import),
                                             opset_import, functions, values)
        self.producer: dict[str, str] = {}
        self.used: set[str] = set()
        self.explicit = {node.name for node in graph.node if node.name}
        """Names nodes are given: no other node's name made here takes one of them."""
        self.ops: list[Op] = []
        self.unknown_outputs: list[str] = []
        self.edge_bytes: dict[tuple[str, str], int] = defaultdict(int)

    def _check_single_writer(self, tensor: str, i: int) -> None:
        """ONNX graphs are in SSA form: each tensor has one definition (a node output, an input or a weight)."""
        node = self.graph.node[i]
        if tensor in self.writer:
            first = _node_label(self.graph, self.writer[tensor])
            raise UnsupportedGraphError(f"tensor {tensor!r} is an output of two nodes, {first} and "
                                        f"{_node_label(self.graph, i)} (an ONNX tensor has one producer)")
        if tensor in self.initializers or tensor in self.input_names:
            what = "an initializer" if tensor in self.initializers else "a graph input"
            raise UnsupportedGraphError(f"node {_node_label(self.graph, i)} ({node.op_type}) writes tensor {tensor!r}, "
                                        f"which is also {what} (an ONNX tensor has one producer)")

    def build(self) -> tuple[list[Op], list[Edge], dict[str, int]]:
        self._add_inputs()
        self._add_shared_initializers()
        node_index = {self._add_node(i, node): i for i, node in enumerate(self.graph.node)}
        self._colocate_dequantize({i: op for op, i in node_index.items()})
        edges = [Edge(src, dst, nbytes) for (src, dst), nbytes in self.edge_bytes.items()]
        if self.unknown_outputs:
            logger.warning("ONNX model %r: %d output(s) with an unknown shape and no readers count 0 bytes: %s",
                           self.graph_name, len(self.unknown_outputs), ", ".join(self.unknown_outputs[:5]))
        return self.ops, edges, node_index

    def _colocate_dequantize(self, op_of: Mapping[int, str]) -> None:
        """Put each ``DequantizeLinear`` read by one node in a colocation group with that node (joining the
        node's group where it has one): QDQ's quantised op, which backends fuse (module docstring)."""
        group: dict[int, str] = {}
        for i in reversed(range(len(self.graph.node))):  # a reader comes later: its group is known first
            node = self.graph.node[i]
            if node.op_type != "DequantizeLinear" or node.domain not in _QDQ_DOMAINS:
                continue
            readers = {r for t in node.output if t for r in self.readers.get(t, ())}
            if len(readers) == 1:
                [reader] = readers
                group[i] = group[reader] = group.get(reader, f"qdq:{op_of[reader]}")
        named = {op_of[i]: name for i, name in group.items()}
        self.ops = [replace(op, colocation=named[op.name]) if op.name in named else op for op in self.ops]

    def _unique(self, name: str, skip: Collection[str] = ()) -> str:
        """``name``, or where that is taken or in ``skip`` the first ``name_<k>`` that is neither."""
        candidate, k = name, 1
        while candidate in self.used or candidate in skip:
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
                elem = unsized_elem_type(value.type) if kind == "tensor_type" else None
                if elem is not None:
                    raise UnsupportedGraphError(f"input {value.name!r} {elem}")
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
            self.ops.append(Op(op_name, "Initializer", 0.0, persistent_memory=spec.nbytes,  # held once, as
                               output_bytes=0, output_shapes=(spec.shape,)))  # TensorFlow's variables are

    def _add_node(self, i: int, node: onnx.NodeProto) -> str:
        if node.name and node.name not in self.used:
            op_name = self._unique(node.name)
        else:  # made here: never another node's given name
            op_name = self._unique(node.name or f"{node.op_type}_{i}", skip=self.explicit)
        op_type = qualified_op_type(node)
        read = {tensor: self._read(tensor, node, op_name) for tensor in node_reads(node)}
        inputs = [read[tensor] for tensor in node.input if tensor]
        outputs = [self._output_spec(tensor, op_name) for tensor in node.output if tensor]
        folded = sum(self.initializers[t].nbytes for t in read
                     if t in self.initializers and len(self.readers[t]) == 1)
        known_outputs = [t for t in outputs if t is not None]
        self._add_edges(read, op_name)
        if subgraphs(node):
            costs = self._control_flow_costs(node, op_name)
        elif self.subgraph_costs.is_call(node):
            costs = self._call_costs(node, op_name)
        else:
            costs = op_kind_costs(op_type, inputs, known_outputs, cost_attrs(node), list(read.values()))
        self.ops.append(Op(
            op_name, op_type, None, costs,
            persistent_memory=folded + _constant_bytes(node, outputs) + subgraph_weights(node),
            temporary_memory=self.subgraph_costs.held(node) if subgraphs(node) else 0,
            output_bytes=0 if node.op_type == "Constant" else sum(t.nbytes for t in known_outputs),
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
            later = self.writer.get(tensor)
            if tensor in node.output:
                raise UnsupportedGraphError(f"node {op_name!r} ({node.op_type}) reads tensor {tensor!r}, "
                                            "which it produces itself (a cycle)")
            if later is not None:
                raise UnsupportedGraphError(
                    f"node {op_name!r} ({node.op_type}) reads tensor {tensor!r}, which only a later node, "
                    f"{_node_label(self.graph, later)}, produces: the nodes are not in topological order, "
                    "or form a cycle")
            raise UnsupportedGraphError(f"node {op_name!r} ({node.op_type}) reads tensor {tensor!r}, which nothing "
                                        "produces (not a graph input, an initializer or an earlier node's output)")
        if spec is None:
            kind = self.value_kind.get(tensor)
            elem = unsized_elem_type(self.types[tensor]) if kind == "tensor_type" else None
            what = (f"is a {kind.removesuffix('_type')} value, not a tensor (not handled)"
                    if kind not in (None, "tensor_type") else elem or self._unknown_shape(tensor))
            raise UnsupportedGraphError(f"node {src!r}: its output {tensor!r} (read by {op_name!r}) {what}")
        return spec

    def _unknown_shape(self, tensor: str) -> str:
        """Why ``tensor``'s shape is unknown: where its producer's op is one onnx has no shape inference rule for
        (a custom op; an onnxruntime contrib op, as its optimiser writes them), that, and what to do."""
        i = self.writer.get(tensor)
        node = None if i is None else self.graph.node[i]
        if node is None or subgraphs(node) or self.subgraph_costs.is_call(node) or _has_schema(node):
            return "has a shape unknown after shape inference" + self._value_inputs_hint(tensor)
        return (f"has a shape unknown after shape inference: onnx's shape inference has no rule for its op, type "
                f"{node.op_type!r} of domain {node.domain!r} (a custom op, or an onnxruntime contrib op as its "
                "optimiser writes them); save the model before onnxruntime's extended optimisations "
                "(graph_optimization_level ORT_ENABLE_BASIC) or add value_info with the shapes of its outputs")

    def _value_inputs_hint(self, tensor: str) -> str:
        """Where ``tensor`` is computed from graph inputs that look like values, not data (scalars, integer
        vectors: an axes, shape or size input), words naming them: its shape may depend on their values, which
        gplace does not have; else ``""``."""
        import onnx

        named = [name for name in self._graph_input_ancestors(tensor)
                 if (spec := self.specs.get(name)) is not None and name not in self.initializers
                 and (not spec.shape or (len(spec.shape) == 1 and self.types[name].tensor_type.elem_type in
                                         (onnx.TensorProto.INT64, onnx.TensorProto.INT32)))]
        if not named:
            return ""
        return (f": it may depend on the value of graph input(s) {', '.join(map(repr, named))}, and gplace sizes "
                "tensors from the inputs' shapes, not their values (make such an input an initializer or a "
                "Constant, or add value_info with the shape)")

    def _graph_input_ancestors(self, tensor: str) -> list[str]:
        """The graph inputs ``tensor`` is computed from, in the graph's order."""
        seen, stack, found = {tensor}, [tensor], []
        while stack:
            name = stack.pop()
            if name in self.input_names:
                found.append(name)
            i = self.writer.get(name)
            for read in node_reads(self.graph.node[i]) if i is not None else ():
                if read not in seen:
                    seen.add(read)
                    stack.append(read)
        return [v.name for v in self.graph.input if v.name in found]

    def _control_flow_costs(self, node: onnx.NodeProto, op_name: str) -> dict[str, float]:
        costs, trips, unknown = self.subgraph_costs.node(node)
        if trips is None:
            logger.warning("ONNX model %r: %s %r: trip count unknown, its cost counts one pass of its body",
                           self.graph_name, node.op_type, op_name)
        if unknown:
            logger.warning("ONNX model %r: %s %r: %d node(s) of its subgraphs have a shape unknown after shape "
                           "inference and count 0 seconds", self.graph_name, node.op_type, op_name, unknown)
        return costs

    def _call_costs(self, node: onnx.NodeProto, op_name: str) -> dict[str, float]:
        costs, unknown = self.subgraph_costs.call(node)
        if unknown:
            logger.warning("ONNX model %r: %s %r: %d node(s) of its function's body have a shape unknown and count "
                           "0 seconds", self.graph_name, node.op_type, op_name, unknown)
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


def _has_schema(node: onnx.NodeProto) -> bool:
    """Whether onnx knows ``node``'s op (and so has a shape inference rule for it)."""
    import onnx

    return onnx.defs.has(node.op_type, "" if node.domain == "ai.onnx" else node.domain)


def _node_label(graph: onnx.GraphProto, i: int) -> str:
    """A node as the error messages name it: its name, else ``<op_type>_<i>`` (as its op would be named)."""
    node = graph.node[i]
    return repr(node.name or f"{node.op_type}_{i}")


def _constant_bytes(node: onnx.NodeProto, outputs: Sequence[TensorSpec | None]) -> int:
    return sum(t.nbytes for t in outputs if t is not None) if node.op_type == "Constant" else 0


def _shapes(specs: Sequence[TensorSpec | None]) -> tuple[tuple[int, ...], ...]:
    """Output shapes for the IR; an unknown one is ``(-1,)``."""
    return tuple(s.shape if s is not None else (-1,) for s in specs)
