"""Preparing a traced GraphDef for import: refusing TensorFlow 1 control flow and unregistered ops,
inlining function calls, dropping the nodes TensorFlow prunes, fixing the placeholders' batch dimensions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gplace.importers.tensorflow.errors import wrap_errors
from gplace.importers.tensorflow.functions import Traced
from gplace.importers.tensorflow.op_types import CONTROL_FLOW_OPS, FUNCTIONAL_CONTROL_FLOW, VARIABLE_OPS
from gplace.ir import UnsupportedGraphError

_CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
_NO_INLINE_ATTRS = ("_noinline", "_XlaMustCompile", "api_implements")


def prepare(tf: Any, traced: Traced, batch_size: int | None, where: str) -> Any:
    """Check for control flow and unregistered ops, inline function calls, drop what TensorFlow does not run
    (:func:`prune`), fix batch dimensions."""
    graph_def = traced.graph_def
    _check_control_flow(graph_def, where)
    if any(n.op in _CALL_OPS for n in graph_def.node):
        graph_def = _inline_calls(tf, graph_def, traced.outputs, where)
        _check_control_flow(graph_def, where)
        left = [n for n in graph_def.node if n.op in _CALL_OPS]
        if left:
            raise UnsupportedGraphError(
                f"{where}: node {left[0].name!r} ({left[0].op}): function call could not be inlined"
            )
    _check_registered(graph_def, where)
    prune(graph_def, traced.outputs)
    if batch_size is not None:
        _check_fixed_batch(graph_def, traced.inputs, batch_size, where)
        _fix_batch_dims(tf, graph_def, batch_size)
    return graph_def


def _check_fixed_batch(graph_def: Any, inputs: Sequence[str], batch_size: int, where: str) -> None:
    """Refuse ``batch_size`` where it sets no input and an input's leading (batch) dimension is fixed at another
    size (``keras.Input((64,), batch_size=5)``, ``tf.TensorSpec((5, 64))``): it was ignored without a word."""
    names = {name.split(":")[0] for name in inputs}
    leading = {n.name: n.attr["shape"].shape.dim[0].size for n in graph_def.node
               if n.name in names and n.op == "Placeholder" and "shape" in n.attr
               and not n.attr["shape"].shape.unknown_rank and n.attr["shape"].shape.dim}
    if any(size < 0 or size == batch_size for size in leading.values()):
        return  # batch_size sets (or matches) an input
    for name, size in leading.items():
        raise UnsupportedGraphError(
            f"{where}: input {name!r} has a fixed batch (leading dimension) of {size}, but batch_size={batch_size} "
            "is given: batch_size sets only an unknown leading dimension; import without batch_size, or at "
            f"batch_size={size}, or build the input with an unknown batch (keras.Input without batch_size, "
            "tf.TensorSpec((None, ...)))"
        )


def prune(graph_def: Any, fetches: Sequence[str]) -> None:
    """Drop the nodes TensorFlow does not run, as its pruning of a function's body does: keep only the inputs
    (``Placeholder``s), and what the fetched outputs or a stateful op (a variable's assignment, the optimiser's
    update, a random op, an ``Assert``; not a variable's handle, as a captured one is an argument there) depend on,
    through data or control edges. An unused ``tf.matmul`` in a function, a Keras step's gradient of its first
    layer's input, a Keras RNN's step-0 cell computed outside its loop for the output dtype are dropped."""
    seeds = [name.lstrip("^").split(":")[0] for name in fetches]
    seeds += [n.name for n in graph_def.node if n.op == "Placeholder" or _stateful(n.op)]
    inputs = {n.name: [i.lstrip("^").split(":")[0] for i in n.input] for n in graph_def.node}
    keep, stack = set(), [s for s in seeds if s in inputs]
    while stack:
        name = stack.pop()
        if name not in keep:
            keep.add(name)
            stack += inputs.get(name, ())
    if len(keep) < len(inputs):
        kept = [n for n in graph_def.node if n.name in keep]
        del graph_def.node[:]
        graph_def.node.extend(kept)


def _stateful(op_type: str) -> bool:
    """Whether TensorFlow runs ``op_type`` whether or not what is fetched needs it (an op type it does not know:
    kept)."""
    from tensorflow.python.framework import op_def_registry

    op_def = op_def_registry.get(op_type)
    return op_type not in VARIABLE_OPS and (op_def is None or op_def.is_stateful)


def _check_control_flow(graph_def: Any, where: str) -> None:
    functions = {f.signature.name: f for f in graph_def.library.function}
    for node in graph_def.node:
        if node.op in CONTROL_FLOW_OPS - FUNCTIONAL_CONTROL_FLOW:
            raise UnsupportedGraphError(
                f"{where}: node {node.name!r} ({node.op}): TensorFlow 1 control flow is not handled; trace the "
                "program with TensorFlow 2 (tf.function: functional While and If are imported) or unroll loops"
            )
        for fname in _called_functions(node, functions):
            _check_function(fname, functions, f"{where}: node {node.name!r}", set())


def _called_functions(node: Any, functions: dict[str, Any]) -> list[str]:
    names = [node.op] if node.op in functions else []
    for attr in node.attr.values():
        if attr.HasField("func"):
            names.append(attr.func.name)
        names += [f.name for f in attr.list.func]
    return names


def _check_function(fname: str, functions: dict[str, Any], caller: str, seen: set[str]) -> None:
    if fname in seen or fname not in functions:
        return
    seen.add(fname)
    for node in functions[fname].node_def:
        if node.op in CONTROL_FLOW_OPS - FUNCTIONAL_CONTROL_FLOW:
            raise UnsupportedGraphError(
                f"{caller} calls function {fname!r}, whose node {node.name!r} ({node.op}) is TensorFlow 1 control "
                "flow, which is not handled (trace with TensorFlow 2, or unroll loops)"
            )
        for inner in _called_functions(node, functions):
            _check_function(inner, functions, caller, seen)


def _inline_calls(tf: Any, graph_def: Any, fetches: Sequence[str], where: str) -> Any:
    """Inline every function call with Grappler's function optimiser (no other rewrite)."""
    from tensorflow.core.protobuf import config_pb2, meta_graph_pb2
    from tensorflow.python.grappler import tf_optimizer

    meta = meta_graph_pb2.MetaGraphDef()
    meta.graph_def.CopyFrom(graph_def)
    for node in meta.graph_def.node:  # XLA-compiled calls (e.g. Keras's grouped convolutions) inline like others
        for key in _NO_INLINE_ATTRS:
            node.attr.pop(key, None)
    for function in meta.graph_def.library.function:
        for key in _NO_INLINE_ATTRS:
            function.attr.pop(key, None)
    meta.collection_def["train_op"].node_list.value.extend(fetches)
    config = config_pb2.ConfigProto()
    config.graph_options.rewrite_options.min_graph_nodes = -1
    config.graph_options.rewrite_options.optimizers.append("function")
    config.experimental.executor_type = "SINGLE_THREADED_EXECUTOR"  # so Grappler keeps While and If functional
    with wrap_errors(f"{where}: inlining function calls failed"):
        return tf_optimizer.OptimizeGraph(config, meta)


def _check_registered(graph_def: Any, where: str) -> None:
    from tensorflow.python.framework import op_def_registry

    functions = {f.signature.name for f in graph_def.library.function}
    for node in graph_def.node:
        if node.op not in functions and op_def_registry.get(node.op) is None:
            raise UnsupportedGraphError(
                f"{where}: node {node.name!r}: op type {node.op!r} is not registered in this TensorFlow (a custom op?)"
            )


def _fix_batch_dims(tf: Any, graph_def: Any, batch_size: int) -> None:
    """Give each placeholder with an unknown leading dimension ``batch_size`` there."""
    for node in graph_def.node:
        if node.op != "Placeholder" or "shape" not in node.attr:
            continue
        shape = node.attr["shape"].shape
        if not shape.unknown_rank and shape.dim and shape.dim[0].size < 0:
            shape.dim[0].size = batch_size
            if "_output_shapes" in node.attr:
                for out in node.attr["_output_shapes"].list.shape[:1]:
                    out.CopyFrom(shape)
