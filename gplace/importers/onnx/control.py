"""Costs of ONNX control-flow nodes (``If``, ``Loop``, ``Scan``) from their subgraphs (the package docstring)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from gplace.costmodel import op_kind_costs, peak_held
from gplace.importers.onnx.shapes import body_types, carried_types, fold, infer_node, infer_shapes, initial_values
from gplace.importers.onnx.tensors import (
    call_key,
    cost_attrs,
    function_key,
    initializer_spec,
    qualified_op_type,
    spec_of,
    subgraphs,
    value_types,
)
from gplace.ir import UnsupportedGraphError
from gplace.zoo import roofline

if TYPE_CHECKING:
    import onnx

INLINE_LIMIT = 100_000
"""The most nodes a top-level call's inlined body may have (:func:`inlined_sizes`) for it to be inlined
(:meth:`SubgraphCosts.call`); a larger one (functions each calling the one below twice: 2**depth nodes from a few
KB) is costed node by node, each function's body once per input types (memoised), the sum still exact."""

CALL_DEPTH = 64
"""How deep calls nest where bodies are costed node by node (a control-flow subgraph is no level of its own); a
call deeper counts as a node of unknown shape."""


class SubgraphCosts:
    """Costs of control-flow nodes from their subgraphs' nodes, and of calls of the model's local functions from
    their bodies' (the package docstring); where the model's inference left a shape inside a subgraph or body out,
    it is inferred node by node here."""

    def __init__(self, types: Mapping[str, onnx.TypeProto], constants: Mapping[str, int], opset_import: Any,
                 functions: Any = (), values: Mapping[str, np.ndarray] | None = None) -> None:
        self.types, self.constants, self.opset_import = types, constants, list(opset_import)
        self.functions = {function_key(f): f for f in functions}
        """(domain, name, overload) -> the model's local ``FunctionProto`` (IR 10: one name, several overloads)."""
        self.values = values or {}
        """Small values the main graph knows (:func:`fold`): a top-level call's inputs among them are constants of
        its inlined body."""
        self.sizes = inlined_sizes(self.functions)
        """(domain, name, overload) -> how many nodes the function's body has inlined (:func:`inlined_sizes`)."""
        self._calls: dict[tuple, tuple[dict[str, float], int]] = {}
        """:meth:`call`'s results by :meth:`_call_key`."""
        self._bodies: dict[tuple, tuple] = {}
        """:meth:`_call`'s results by its call's function, input types and scope (the scope's constants held)."""

    def is_call(self, node: onnx.NodeProto) -> bool:
        """Whether ``node`` calls one of the model's local functions."""
        return call_key(node) in self.functions

    def call(self, node: onnx.NodeProto) -> tuple[dict[str, float], int]:
        """Seconds per device kind of a top-level call of a local function and how many of its body's nodes had a
        shape unknown: the nodes of the call inlined (``onnx.inliner``: attribute references bound, calls inside
        it too) into a model of its own, its inputs' types and known values (:attr:`values`) given, shapes
        inferred as the main graph's are; where that model cannot be made, or would have more than
        :data:`INLINE_LIMIT` nodes, its body's nodes on the call's input types (a call inside it likewise, up to
        :data:`CALL_DEPTH` deep). Calls alike (:meth:`_call_key`) are costed once."""
        key = self._call_key(node)
        if key not in self._calls:
            self._calls[key] = self._call_costs(node)
        costs, unknown = self._calls[key]
        return dict(costs), unknown

    def _call_costs(self, node: onnx.NodeProto) -> tuple[dict[str, float], int]:
        """:meth:`call`, not memoised."""
        inlined = self._inlined(node) if self.sizes[call_key(node)] <= INLINE_LIMIT else None
        if inlined is None:
            costs, unknown, _ = self._call(node, self.types, self.constants, 0)
            return costs, unknown
        graph, opsets = inlined.graph, inlined.opset_import
        scope = SubgraphCosts(value_types(graph), trip_constants(graph, opsets), opsets)
        return scope._nodes(graph.node, dict(scope.types), scope.constants, opsets, 0)

    def _call_key(self, node: onnx.NodeProto) -> tuple:
        """What a top-level call's costs follow from: its function and attributes, which of its inputs are one
        tensor, each input's type (one of known value: its name), its outputs' types."""
        first: dict[str, int] = {}
        inputs = tuple((first.setdefault(t, i), t if t in self.values else _serial(self.types.get(t)))
                       for i, t in enumerate(node.input) if t)
        outputs = tuple(_serial(self.types.get(t)) if t else None for t in node.output)
        attributes = tuple(a.SerializeToString(deterministic=True) for a in node.attribute)
        return call_key(node), attributes, inputs, outputs

    def _inlined(self, node: onnx.NodeProto) -> onnx.ModelProto | None:
        """A model of ``node`` alone, its function inlined and shapes inferred; ``None`` where an input's type is
        unknown or onnx cannot inline or infer it."""
        import onnx
        from onnx.inliner import inline_local_functions

        names = [t for t in dict.fromkeys(node.input) if t]
        if any(t not in self.values and spec_of(self.types, t) is None for t in names):
            return None
        helper = onnx.helper
        inputs = [helper.make_value_info(t, self.types[t]) for t in names if t not in self.values]
        held = [onnx.numpy_helper.from_array(self.values[t], t) for t in names if t in self.values]
        outputs = [helper.make_value_info(t, self.types.get(t, onnx.TypeProto())) for t in node.output if t]
        graph = helper.make_graph([node], "call", inputs, outputs, held)
        model = helper.make_model(graph, opset_imports=self.opset_import, functions=self.functions.values())
        try:
            return infer_shapes(inline_local_functions(model), node.name or node.op_type)
        except Exception:  # onnx's inliner or inference refuses it: the body is costed node by node instead
            return None

    def node(self, node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto] | None = None,
             constants: Mapping[str, int] | None = None, depth: int = 0) -> tuple[dict[str, float], int | None, int]:
        """Seconds per device kind of a control-flow node, its trip count (``None``: unknown, one pass counted)
        and how many of its subgraphs' nodes had a shape unknown (0 s each), of the subgraphs that may run
        (:meth:`_running`); ``types`` and ``constants``: of its scope (default: the main graph's); ``depth``: how
        many calls it is inside (:data:`CALL_DEPTH`)."""
        types = self.types if types is None else types
        constants = self.constants if constants is None else constants
        bodies = [self._nodes(graph.node, body_types(graph, {**types, **carried_types(node, graph, types)}),
                              {**constants, **_scalar_constants(graph)}, self.opset_import, depth)
                  for graph in self._running(node, types)]
        unknown = sum(n for _, n in bodies)
        if node.op_type == "If":
            return {k: max(c[k] for c, _ in bodies) for k in roofline.REFERENCE}, 1, unknown
        trips = _trips(node, types, constants, _default_opset(self.opset_import))
        passes = 1 if trips is None else trips
        return {k: passes * sum(c[k] for c, _ in bodies) for k in roofline.REFERENCE}, trips, unknown

    def held(self, node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto] | None = None) -> int:
        """Bytes a control-flow node's subgraphs hold at once while it runs (its ``temporary_memory``): the most
        any that may run (:meth:`_running`) holds in one pass (an ``If`` runs one branch; a loop's passes run one
        after another), in the scope of ``types`` (default: the main graph's)."""
        types = self.types if types is None else types
        return max((self._pass_peak(graph, body_types(graph, {**types, **carried_types(node, graph, types)}))
                    for graph in self._running(node, types)), default=0)

    def _running(self, node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto]) -> list[onnx.GraphProto]:
        """The subgraphs of ``node`` that may run: an ``If`` whose condition is a known value (shape arithmetic,
        folded) runs the branch it takes, any other both (the dearer counts)."""
        condition = self._outer_values(node, types).get(node.input[0]) if node.op_type == "If" and node.input else None
        if condition is None or condition.size != 1:
            return subgraphs(node)
        taken = "then_branch" if condition.item() else "else_branch"
        return [a.g for a in node.attribute if a.name == taken]

    def _pass_peak(self, graph: onnx.GraphProto, types: dict[str, onnx.TypeProto]) -> int:
        """The most bytes one pass over ``graph``'s nodes holds at once, run in order: each output from its node
        until its last reader there (one of unknown shape: 0), a nested control-flow node's own while it runs;
        the subgraph's inputs and outputs are not counted (the node's operands and results)."""
        nodes = list(graph.node)
        last = {t: i for i, step in enumerate(nodes) for t in step.input if t}
        returned = {value.name for value in graph.output}
        steps = []
        for i, step in enumerate(nodes):
            inner = self.held(step, types) if subgraphs(step) else 0
            infer_node(step, types, self.opset_import, self._outer_values(step, types))
            steps.append(([(spec.nbytes, last.get(t, i)) for t in step.output
                           if t and t not in returned and (spec := spec_of(types, t)) is not None], inner))
        return peak_held(steps)

    def _call(self, node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto], constants: Mapping[str, int],
              depth: int) -> tuple[dict[str, float], int, dict[str, onnx.TypeProto]]:
        """:meth:`call` in the scope of ``types``, with the types its body gives the call's outputs; a call of the
        same function on the same input types in the same scope, at the same depth, reuses the first's costs."""
        function = self.functions[call_key(node)]
        pairs = [(formal, actual) for formal, actual in zip(function.input, node.input, strict=False)
                 if actual and actual in types]
        inner = {formal: types[actual] for formal, actual in pairs}
        key = (call_key(node), depth, id(constants),
               tuple((formal, _serial(inner[formal]), inner[formal] is self.types.get(formal)) for formal, _ in pairs))
        if key not in self._bodies:
            costs, unknown = self._nodes(function.node, inner, constants,
                                         function.opset_import or self.opset_import, depth + 1)
            made = {formal: inner[formal] for formal in function.output if formal in inner}
            self._bodies[key] = (constants, costs, unknown, made)  # constants held: its id names no other scope
        _, costs, unknown, made = self._bodies[key]
        given = {formal: types[actual] for formal, actual in pairs}
        outputs = {actual: given.get(formal, made.get(formal))
                   for formal, actual in zip(function.output, node.output, strict=False)
                   if actual and (formal in given or formal in made)}
        return costs, unknown, outputs

    def _nodes(self, nodes: Any, types: dict[str, onnx.TypeProto], constants: Mapping[str, int], opset_import: Any,
               depth: int) -> tuple[dict[str, float], int]:
        """Summed seconds per device kind of one pass over ``nodes`` (a graph's or a function body's), whose
        scope's value types ``types`` gains their outputs' as it goes, and how many had a shape unknown."""
        total, unknown = dict.fromkeys(roofline.REFERENCE, 0.0), 0
        for step in nodes:
            if subgraphs(step):
                costs, _, inner = self.node(step, types, constants, depth)
            elif self.is_call(step) and depth < CALL_DEPTH:
                costs, inner, outputs = self._call(step, types, constants, depth)
                types.update(outputs)
            else:
                costs, inner = self._plain(step, types, opset_import, self._outer_values(step, types))
            unknown += inner
            for kind in total:
                total[kind] += costs[kind]
        return total, unknown

    def _outer_values(self, node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto]) -> dict[str, np.ndarray]:
        """The known values (:attr:`values`) of the main graph's tensors ``node`` reads, where ``types`` is their
        scope's view of them (not a function body's or subgraph's own tensor of the same name)."""
        return {t: self.values[t] for t in node.input
                if t in self.values and t in types and types[t] is self.types.get(t)}

    @staticmethod
    def _plain(node: onnx.NodeProto, types: dict[str, onnx.TypeProto], opset_import: Any,
               values: Mapping[str, np.ndarray]) -> tuple[dict[str, float], int]:
        """Seconds per device kind of a node with no subgraph (its outputs' types inferred into ``types``, from
        the small ``values`` the main graph knows too: an outer ``Constant`` a body's ``Unsqueeze`` takes its axes
        from), and 1 where an input's or every output's shape is unknown (0 s then)."""
        infer_node(node, types, opset_import, values)
        inputs = [spec_of(types, t) for t in node.input if t]
        outputs = [spec for t in node.output if t and (spec := spec_of(types, t)) is not None]
        if any(spec is None for spec in inputs) or not outputs:
            return dict.fromkeys(roofline.REFERENCE, 0.0), 1
        distinct = [spec_of(types, t) for t in dict.fromkeys(t for t in node.input if t)]
        return op_kind_costs(qualified_op_type(node), inputs, outputs, cost_attrs(node), distinct), 0


WHILE_BOUND = 2**31 - 1
"""A ``Loop`` trip count at least this large is read as unknown (the bound of a while loop, not its passes)."""


def _trips(node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto], constants: Mapping[str, int],
           opset: int | None = None) -> int | None:
    """A ``Loop``'s constant trip count ``M``, or a ``Scan``'s sequence length (opset 8's ``Scan``, whose scan
    inputs are ``[batch, sequence, ...]``: batch times sequence length, a pass per entry and step), where known; an
    ``M`` of :data:`WHILE_BOUND` or more is a while loop's bound (exporters write INT64_MAX and stop on ``cond``):
    unknown; a negative ``M`` runs no pass, as 0 does. ``opset``: the model's default-domain opset."""
    if node.op_type == "Loop":
        trips = constants.get(node.input[0]) if node.input else None
        return None if trips is None or trips >= WHILE_BOUND else max(trips, 0)
    if node.op_type == "Scan":
        spec = spec_of(types, node.input[len(initial_values(node))])
        if spec is None or not spec.shape:
            return None
        if opset is not None and opset < 9:
            return spec.shape[0] * spec.shape[1] if len(spec.shape) >= 2 else None
        axes = next((list(a.ints) for a in node.attribute if a.name == "scan_input_axes"), [0])
        return spec.shape[axes[0] % len(spec.shape) if axes else 0]
    return None


def _default_opset(opset_import: Any) -> int | None:
    """The version of the default (``ai.onnx``) domain among a model's ``opset_import``, if it lists one."""
    return next((o.version for o in opset_import if o.domain in ("", "ai.onnx")), None)


EXPANSION_LIMIT = 2**21
"""Most nodes a model may have with its local functions' calls expanded (about 2 million): onnx's shape inference
works through a call's body anew at every call, so a 2 KB model of functions each calling the next twice took
minutes (2**20 nodes: 14 s; 2**22: 40 s)."""


def check_expansion(model: onnx.ModelProto, graph_name: str) -> None:
    """Refuse, before any inference, a model whose local functions' calls expand past :data:`EXPANSION_LIMIT`
    nodes, naming the function whose calls weigh most.

    Raises:
        UnsupportedGraphError: the expanded model is larger than the limit.
    """
    functions = {function_key(f): f for f in model.functions}
    if not functions:
        return
    sizes, calls = inlined_sizes(functions), Counter()
    total = _own_nodes(model.graph.node, functions, calls) + sum(n * sizes[key] for key, n in calls.items())
    if math.isfinite(total) and total > EXPANSION_LIMIT:
        heaviest = max(calls, key=lambda key: calls[key] * sizes[key])
        raise UnsupportedGraphError(
            f"ONNX model {graph_name!r}: its calls of local functions expand to {total:,.0f} nodes (each call of "
            f"{heaviest[1]!r} to {sizes[heaviest]:,.0f}), more than the {EXPANSION_LIMIT:,} gplace gives onnx's "
            "shape inference, which works through every call's body anew")


def inlined_sizes(functions: Mapping[tuple[str, str, str], onnx.FunctionProto]) -> dict[tuple[str, str, str], float]:
    """How many nodes each local function's body has with its calls inlined, at any depth (its subgraphs' nodes
    included): its own plus each callee's size per call; ``math.inf`` for one on or above a cycle of calls (ONNX
    forbids them). Callees are sized before their callers, so each body is read once."""
    calls = {key: Counter() for key in functions}
    own = {key: _own_nodes(function.node, functions, calls[key]) for key, function in functions.items()}
    callers = defaultdict(list)
    for key, callees in calls.items():
        for callee in callees:
            callers[callee].append(key)
    waiting = {key: len(callees) for key, callees in calls.items()}
    ready = [key for key, count in waiting.items() if not count]
    sizes: dict[tuple[str, str, str], float] = {}
    while ready:
        key = ready.pop()
        sizes[key] = own[key] + sum(n * sizes[callee] for callee, n in calls[key].items())
        for caller in callers[key]:
            waiting[caller] -= 1
            if not waiting[caller]:
                ready.append(caller)
    return {key: sizes.get(key, math.inf) for key in functions}


def _own_nodes(nodes: Any, functions: Mapping[tuple[str, str, str], Any], calls: Counter) -> int:
    """How many of ``nodes``, and of their subgraphs' at any depth, call none of ``functions``; the calls of each
    function among them are counted into ``calls``."""
    own = 0
    for node in nodes:
        if call_key(node) in functions:
            calls[call_key(node)] += 1
        else:
            own += 1 + sum(_own_nodes(graph.node, functions, calls) for graph in subgraphs(node))
    return own


def _serial(type_proto: onnx.TypeProto | None) -> bytes | None:
    """A type as a dictionary key."""
    return None if type_proto is None else type_proto.SerializeToString(deterministic=True)


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


def call_values(graph: onnx.GraphProto, opset_import: Any) -> dict[str, np.ndarray]:
    """The small values of ``graph`` that :func:`fold` computes: constants of the inlined body of a call that
    reads them (:meth:`SubgraphCosts.call`)."""
    values: dict[str, np.ndarray] = {}
    fold(graph, opset_import, values)
    return values


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
