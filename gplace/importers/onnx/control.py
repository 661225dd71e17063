"""Costs of ONNX control-flow nodes (``If``, ``Loop``, ``Scan``) from their subgraphs (the package docstring)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from gplace.costmodel import op_kind_costs
from gplace.importers.onnx.shapes import body_types, carried_types, fold, infer_node, initial_values
from gplace.importers.onnx.tensors import (
    cost_attrs,
    initializer_spec,
    qualified_op_type,
    spec_of,
    subgraphs,
)
from gplace.zoo import roofline

if TYPE_CHECKING:
    import onnx


class SubgraphCosts:
    """Costs of control-flow nodes from their subgraphs' nodes, and of calls of the model's local functions from
    their bodies' (the package docstring); where the model's inference left a shape inside a subgraph or body out,
    it is inferred node by node here."""

    def __init__(self, types: Mapping[str, onnx.TypeProto], constants: Mapping[str, int], opset_import: Any,
                 functions: Any = ()) -> None:
        self.types, self.constants, self.opset_import = types, constants, list(opset_import)
        self.functions = {(f.domain, f.name): f for f in functions}
        """(domain, name) -> the model's local ``FunctionProto``."""

    def is_call(self, node: onnx.NodeProto) -> bool:
        """Whether ``node`` calls one of the model's local functions."""
        return (node.domain, node.op_type) in self.functions

    def call(self, node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto] | None = None,
             depth: int = 0) -> tuple[dict[str, float], int]:
        """Seconds per device kind of a call of a local function (its body's nodes, on the call's input types; a
        call inside it likewise, up to 16 deep) and how many of its body's nodes had a shape unknown."""
        types = self.types if types is None else types
        function = self.functions[(node.domain, node.op_type)]
        inner = {formal: types[actual] for formal, actual in zip(function.input, node.input, strict=False)
                 if actual and actual in types}
        total, unknown = dict.fromkeys(roofline.REFERENCE, 0.0), 0
        for step in function.node:
            if self.is_call(step) and depth < 16:
                costs, deeper = self.call(step, inner, depth + 1)
                unknown += deeper
                for t, out in zip(step.output, self.functions[(step.domain, step.op_type)].output, strict=False):
                    if t and out in inner:
                        inner[t] = inner[out]
            else:
                infer_node(step, inner, function.opset_import or self.opset_import)
                inputs = [spec_of(inner, t) for t in step.input if t]
                outputs = [spec for t in step.output if t and (spec := spec_of(inner, t)) is not None]
                if any(spec is None for spec in inputs) or not outputs:
                    unknown += 1
                    continue
                distinct = [spec_of(inner, t) for t in dict.fromkeys(t for t in step.input if t)]
                costs = op_kind_costs(qualified_op_type(step), inputs, outputs, cost_attrs(step), distinct)
            for kind in total:
                total[kind] += costs[kind]
        return total, unknown

    def node(self, node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto] | None = None,
             constants: Mapping[str, int] | None = None) -> tuple[dict[str, float], int | None, int]:
        """Seconds per device kind of a control-flow node, its trip count (``None``: unknown, one pass counted)
        and how many of its subgraphs' nodes had a shape unknown (0 s each); ``types`` and ``constants``: of its
        scope (default: the main graph's)."""
        types = self.types if types is None else types
        constants = self.constants if constants is None else constants
        bodies = [self._graph(graph, {**types, **carried_types(node, graph, types)}, constants)
                  for graph in subgraphs(node)]
        unknown = sum(n for _, n in bodies)
        if node.op_type == "If":
            return {k: max(c[k] for c, _ in bodies) for k in roofline.REFERENCE}, 1, unknown
        trips = _trips(node, types, constants)
        return {k: (trips or 1) * sum(c[k] for c, _ in bodies) for k in roofline.REFERENCE}, trips, unknown

    def _graph(self, graph: onnx.GraphProto, outer: Mapping[str, onnx.TypeProto],
               constants: Mapping[str, int]) -> tuple[dict[str, float], int]:
        """Summed seconds per device kind of one pass over ``graph``'s nodes, and how many had a shape unknown."""
        types = body_types(graph, outer)
        constants = {**constants, **_scalar_constants(graph)}
        total, unknown = dict.fromkeys(roofline.REFERENCE, 0.0), 0
        for node in graph.node:
            if subgraphs(node):
                costs, _, inner = self.node(node, types, constants)
                unknown += inner
            else:
                inputs = [spec_of(types, t) for t in node.input if t]
                if any(spec is None for spec in inputs):
                    unknown += 1
                    continue
                infer_node(node, types, self.opset_import)
                outputs = [spec for t in node.output if t and (spec := spec_of(types, t)) is not None]
                distinct = [spec_of(types, t) for t in dict.fromkeys(t for t in node.input if t)]
                costs = op_kind_costs(qualified_op_type(node), inputs, outputs, cost_attrs(node), distinct)
            for kind in total:
                total[kind] += costs[kind]
        return total, unknown


def _trips(node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto], constants: Mapping[str, int]) -> int | None:
    """A ``Loop``'s constant trip count ``M``, or a ``Scan``'s sequence length, where known."""
    if node.op_type == "Loop":
        return constants.get(node.input[0]) if node.input else None
    if node.op_type == "Scan":
        spec = spec_of(types, node.input[len(initial_values(node))])
        axes = next((list(a.ints) for a in node.attribute if a.name == "scan_input_axes"), [0])
        if spec is not None and spec.shape:
            return spec.shape[axes[0] % len(spec.shape) if axes else 0]
    return None


def subgraph_weights(node: onnx.NodeProto) -> int:
    """Bytes of the initialisers inside a node's subgraphs, at any depth."""
    total = 0
    for graph in subgraphs(node):
        total += sum(initializer_spec(t).nbytes for t in graph.initializer)
        total += sum(subgraph_weights(inner) for inner in graph.node)
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


def trip_constants(graph: onnx.GraphProto, opset_import: Any) -> dict[str, int]:
    """:func:`_scalar_constants`, plus the trip counts of the graph's ``Loop`` nodes that shape arithmetic
    computes (``Shape -> Gather``, as an exporter writes ``range(x.size(0))``), folded as :func:`fold` does."""
    constants = _scalar_constants(graph)
    counts = {node.input[0] for node in graph.node if node.op_type == "Loop" and node.input and node.input[0]}
    if counts <= constants.keys():
        return constants
    values: dict[str, np.ndarray] = {}
    while fold(graph, opset_import, values) and not counts <= values.keys():
        pass
    for name in counts - constants.keys():
        value = values.get(name)
        if value is not None and value.size == 1 and np.issubdtype(value.dtype, np.integer):
            constants[name] = int(value.reshape(()))
    return constants
