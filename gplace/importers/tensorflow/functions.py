"""A concrete function's graph as a self-contained GraphDef (captured variables become ``VarHandleOp`` nodes,
captured tensors ``Const`` nodes), and :class:`Traced`, the record every tracer returns."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gplace.importers.tensorflow.errors import wrap_errors
from gplace.ir import UnsupportedGraphError


@dataclass
class Traced:
    """A program turned into a GraphDef, before inlining and shape inference."""

    graph_def: Any
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    keepalive: Any = None
    """An object whose variables the GraphDef refers to (a loaded SavedModel), kept alive while building."""
    variables: dict[str, Any] = field(default_factory=dict)
    """``VarHandleOp`` node name -> its ``tf.Variable``."""
    resources: tuple[str, ...] = ()
    """Node names of captured resources left placeholders
    (:attr:`~gplace.importers.tensorflow.TensorFlowSource.resources`)."""
    output_names: tuple[str, ...] = ()
    """:attr:`~gplace.importers.tensorflow.TensorFlowSource.output_names`."""
    input_names: tuple[str, ...] = ()
    """:attr:`~gplace.importers.tensorflow.TensorFlowSource.input_names`."""
    at_batch: bool = False
    """Traced with every input's shape known (a Keras model or ``tf.function`` traced by gplace at
    ``from_tensorflow``'s ``batch_size``, or a function of a fixed-batch signature), so the shapes its loops and
    branches recorded follow them; a saved program traced at an unknown batch (a SavedModel's, a GraphDef, a
    restored function's calls) keeps that."""
    phases: dict[str, str] = field(default_factory=dict)
    """A training step's node name -> the phase of the call that made it while tracing (``backward``:
    ``tape.gradient``, ``update``: the optimiser's ``apply_gradients``), for :func:`~.training.training_phases`."""


_NODE_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\-/>]*")
"""The node names TensorFlow's GraphDef importer accepts."""


def function_traced(tf: Any, concrete: Any) -> Traced:
    """The function's GraphDef with its captures made nodes: variables ``VarHandleOp``, tensors ``Const``.

    A variable's node is renamed after the variable where that name is free and a legal node name (a variable
    may be called ``"my var"`` or ``"_x"``; a node may not).
    """
    fname = getattr(concrete, "name", "function")
    fname = fname.decode() if isinstance(fname, bytes) else str(fname)
    with wrap_errors(f"concrete function {fname!r}: could not read its graph"):
        graph_def = concrete.graph.as_graph_def(add_shapes=True)
        nodes = {n.name: n for n in graph_def.node}
        variables = {id(v.handle): v for v in concrete.graph.variables}
        captured, renames, handles, held, others = set(), {}, [], {}, []
        for external, internal in concrete.graph.captures:
            node = nodes[internal.op.name]
            captured.add(internal.name)
            if internal.dtype != tf.resource:
                _as_const(tf, node, external)
            elif _as_var_handle(tf, node, variables.get(id(external)), internal):
                handles.append(node)
                if id(external) in variables:
                    held[node.name] = variables[id(external)]
                wanted = node.attr["shared_name"].s.decode()
                if _NODE_NAME.fullmatch(wanted) and wanted not in nodes and wanted not in renames.values():
                    renames[node.name] = wanted
            else:
                others.append(node.name)
        _rename_nodes(graph_def, renames)
        _separate_shared_names(handles)
        inputs = tuple(t.name for t in concrete.inputs if t.name not in captured)
        outputs = tuple(t.name for t in concrete.outputs)
        names = _structured_names(tf, getattr(concrete, "structured_outputs", None), outputs)
    fixed = all(t.shape.is_fully_defined() for t in concrete.inputs if t.name not in captured)
    return Traced(graph_def, fname.removeprefix("__inference_"), inputs, outputs,
                  variables={renames.get(k, k): v for k, v in held.items()}, resources=tuple(others),
                  output_names=names, at_batch=fixed)


def refuse_composite_inputs(tf: Any, concrete: Any, where: str) -> None:
    """Refuse a function taking a ragged or sparse tensor (anywhere in a nested structure of its arguments): the
    count of its values, which sizes its component tensors, is known only at run time, and no argument of
    ``from_tensorflow`` can set it (``batch_size`` sets dense inputs only).

    Raises:
        UnsupportedGraphError: naming the first such input by its argument path (``x``, ``d['b']``) and saying which
            dense inputs to give instead.
    """
    args, kwargs = concrete.structured_input_signature
    params = list(getattr(getattr(concrete, "function_type", None), "parameters", None) or ())
    names = params if len(params) >= len(args) else [f"argument {i}" for i in range(len(args))]
    for name, value in [*zip(names, args, strict=False), *sorted(kwargs.items())]:
        for path, spec in _spec_leaves(value, name):
            message = _composite_message(tf, spec)
            if message:
                raise UnsupportedGraphError(f"{where}: input {path!r} is {message}")


def _spec_leaves(value: Any, path: str) -> list[tuple[str, Any]]:
    """(path, leaf) of each leaf of a nest of specs (dict keys sorted, as ``tf.nest`` orders them)."""
    if isinstance(value, Mapping):
        return [leaf for key in sorted(value) for leaf in _spec_leaves(value[key], f"{path}[{key!r}]")]
    if isinstance(value, list | tuple):
        return [leaf for i, item in enumerate(value) for leaf in _spec_leaves(item, f"{path}[{i}]")]
    return [(path, value)]


_SIZED_BY_RUN = ("known only at run time, and no argument of from_tensorflow sets it (batch_size sets the leading "
                 "dimension of dense Placeholder inputs only)")


def _composite_message(tf: Any, spec: Any) -> str:
    """What is wrong with a ragged or sparse input ``spec`` and what to give instead; ``""`` for any other."""
    if isinstance(spec, tf.RaggedTensorSpec) and spec.ragged_rank > 0:
        dims, dtype = _dims(spec.shape), f"tf.{spec.dtype.name}"
        return (f"a ragged tensor (tf.RaggedTensorSpec, shape [{', '.join(dims)}], {spec.dtype.name}): the count of "
                f"its values, which sizes its values and the ops that follow its row lengths, is {_SIZED_BY_RUN}. "
                f"Trace the function at dense inputs of the sizes to place for: the tensor padded, "
                f"tf.TensorSpec([{', '.join(_padded(dims))}], {dtype}); or {_ragged_components(spec, dims)} (this "
                "imports only where no op's size follows the row lengths)")
    if isinstance(spec, tf.SparseTensorSpec):
        dims, dtype = _dims(spec.shape), f"tf.{spec.dtype.name}"
        rank = str(len(dims)) if spec.shape.rank is not None else "R"
        return (f"a sparse tensor (tf.SparseTensorSpec, shape [{', '.join(dims)}], {spec.dtype.name}): the count of "
                f"its values (nnz), which sizes its indices and values, is {_SIZED_BY_RUN}. Trace the function at "
                f"dense inputs of the sizes to place for: its indices and values, tf.TensorSpec([NNZ, {rank}], "
                f"tf.int64) and tf.TensorSpec([NNZ], {dtype}), rebuilt inside with tf.SparseTensor(indices, values, "
                f"dense_shape); or the dense tensor, tf.TensorSpec([{', '.join(_padded(dims))}], {dtype})")
    return ""


def _ragged_components(spec: Any, dims: list[str]) -> str:
    """The dense inputs a ragged tensor is built from, and how to rebuild it."""
    values = f"tf.TensorSpec([{', '.join(['N', *dims[spec.ragged_rank + 1:]])}], tf.{spec.dtype.name})"
    splits = f"tf.TensorSpec([B + 1], tf.{spec.row_splits_dtype.name})"
    if spec.ragged_rank == 1:
        return f"its values and row_splits, {values} and {splits}, rebuilt inside with tf.RaggedTensor.from_row_splits"
    return (f"its flat values, {values}, and its {spec.ragged_rank} nested row_splits (the outermost {splits}), "
            "rebuilt inside with tf.RaggedTensor.from_nested_row_splits")


def _padded(dims: list[str]) -> list[str]:
    """Dimensions to give: an unknown leading one ``B``, another unknown one (a ragged one's padded length) ``L``."""
    return [("B" if i == 0 else "L") if d == "None" else d for i, d in enumerate(dims)]


def _dims(shape: Any) -> list[str]:
    return ["..."] if shape.rank is None else ["None" if d is None else str(d) for d in shape.as_list()]


def _structured_names(tf: Any, structured: Any, outputs: tuple[str, ...]) -> tuple[str, ...]:
    """The dict key of each output where the function returns a flat dict of tensors (as a SavedModel signature
    does; a loaded one describes them by ``TensorSpec``), in TensorFlow's order of its values (keys sorted); else
    ``()``."""
    if not isinstance(structured, Mapping) or not all(isinstance(k, str) for k in structured):
        return ()
    keys = sorted(structured)
    values = [structured[k] for k in keys]
    if len(values) != len(outputs) or not all(isinstance(v, tf.Tensor | tf.TensorSpec) for v in values):
        return ()
    if any(isinstance(v, tf.Tensor) and v.name != t for v, t in zip(values, outputs, strict=True)):
        return ()
    return tuple(keys)


def _as_var_handle(tf: Any, node: Any, variable: Any, placeholder: Any) -> bool:
    """Rewrite a captured resource placeholder into the ``VarHandleOp`` of the variable it stands for.

    Returns:
        Whether it was rewritten (a resource that is not a variable, e.g. a table, stays a placeholder).
    """
    if variable is not None:
        shape, dtype, shared = variable.shape, variable.dtype, variable.name.split(":")[0]
    else:
        from tensorflow.python.ops import handle_data_util

        data = handle_data_util.get_resource_handle_data(placeholder)
        if not data.is_set or not data.shape_and_type:
            return False
        shape = tf.TensorShape(data.shape_and_type[0].shape)
        dtype, shared = tf.dtypes.as_dtype(data.shape_and_type[0].dtype), node.name
    reset(node, "VarHandleOp")
    node.attr["dtype"].type = dtype.as_datatype_enum
    node.attr["shape"].shape.CopyFrom(tf.TensorShape(shape).as_proto())
    node.attr["shared_name"].s = shared.encode()
    node.attr["container"].s = b""
    return True


def _separate_shared_names(handles: list[Any]) -> None:
    """Give variable handles that share a ``shared_name`` their node names as shared names.

    Unnamed ``tf.Variable`` objects captured by one function are all named ``"Variable"``; handles with one shared
    name are one variable in a session, so they would overwrite each other.
    """
    counts = Counter(node.attr["shared_name"].s for node in handles)
    for node in handles:
        if counts[node.attr["shared_name"].s] > 1:
            node.attr["shared_name"].s = node.name.encode()


def _as_const(tf: Any, node: Any, value: Any) -> None:
    proto = tf.make_tensor_proto(value.numpy() if hasattr(value, "numpy") else value)
    reset(node, "Const")
    node.attr["dtype"].type = proto.dtype
    node.attr["value"].tensor.CopyFrom(proto)


def reset(node: Any, op_type: str) -> None:
    """Make ``node`` an input-less node of ``op_type`` with no attributes, keeping its name and device."""
    name, device = node.name, node.device
    node.Clear()
    node.name, node.op, node.device = name, op_type, device


def _rename_nodes(graph_def: Any, renames: dict[str, str]) -> None:
    if not renames:
        return
    for node in graph_def.node:
        node.name = renames.get(node.name, node.name)
        for i, ref in enumerate(node.input):
            ctrl, base = ref.startswith("^"), ref.lstrip("^")
            src, sep, port = base.partition(":")
            if src in renames:
                node.input[i] = ("^" if ctrl else "") + renames[src] + sep + port
