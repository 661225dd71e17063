"""Any program :func:`~gplace.importers.tensorflow.from_tensorflow` takes turned into a GraphDef: a GraphDef
(or a file of one), a ``tf.Graph``, a ``tf.function`` or concrete function, a SavedModel directory, a Keras model."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gplace.importers.tensorflow.errors import wrap_errors
from gplace.importers.tensorflow.functions import Traced, function_traced, refuse_composite_inputs
from gplace.importers.tensorflow.keras_step import keras_traced
from gplace.importers.tensorflow.saved_model import saved_model_traced
from gplace.ir import UnsupportedGraphError
from gplace.ir.serialize import as_path, refuse_special_file


def is_keras_model(obj: Any) -> bool:
    for module in ("keras", "tf_keras"):
        keras = sys.modules.get(module)
        if keras is not None and isinstance(obj, keras.Model):
            return True
    return False


def trace(tf: Any, obj: Any, training: bool, batch_size: int | None, loss: Any, optimizer: Any,
          outputs: Sequence[str] | None, signature: str | None = None) -> Traced:
    from tensorflow.core.framework import graph_pb2

    if isinstance(obj, str | os.PathLike):
        return _trace_path(tf, as_path(obj, "from_tensorflow: obj"), outputs, signature)
    if isinstance(obj, graph_pb2.GraphDef):
        return _graph_def_traced(tf, obj, "tensorflow", outputs)
    if isinstance(obj, tf.Graph):
        with wrap_errors("tf.Graph.as_graph_def"):
            graph_def = obj.as_graph_def(add_shapes=True)
        return _graph_def_traced(tf, graph_def, "tensorflow", outputs)
    if isinstance(obj, tf.types.experimental.ConcreteFunction):
        _refuse_outputs(outputs, "a concrete function")
        refuse_composite_inputs(tf, obj, f"concrete function {_name(obj)!r}")
        return function_traced(tf, obj)
    if isinstance(obj, tf.types.experimental.PolymorphicFunction):
        _refuse_outputs(outputs, "a tf.function")
        restored = type(obj).__name__ == "RestoredFunction"  # tf.saved_model.load's: its saved calls keep their shapes
        specs = getattr(obj, "input_signature", None)
        # a function with a signature that fails fails in its own code: no hint to give it one
        where = (f"tf.function {getattr(obj, '__name__', '?')!r} failed while tracing at its input_signature"
                 if specs is not None else f"tf.function {getattr(obj, '__name__', '?')!r} failed while tracing "
                 "without arguments (give it an input_signature if it takes inputs)")
        with wrap_errors(where):
            if specs and batch_size and getattr(obj, "python_function", None):  # traced again at that batch
                obj = tf.function(obj.python_function, input_signature=_batched(tf, specs, batch_size))
            concrete = obj.get_concrete_function()
        refuse_composite_inputs(tf, concrete, f"tf.function {getattr(obj, '__name__', '?')!r}")
        traced = function_traced(tf, concrete)
        return dataclasses.replace(traced, at_batch=False) if restored else traced
    if is_keras_model(obj):
        _refuse_outputs(outputs, "a Keras model")
        return dataclasses.replace(keras_traced(tf, obj, training, batch_size, loss, optimizer), at_batch=True)
    raise TypeError(
        "from_tensorflow expects a GraphDef, a tf.Graph, a tf.function or concrete function, a Keras model, "
        f"or a path to a GraphDef file or SavedModel directory; got {type(obj).__name__}"
    )


def _batched(tf: Any, specs: Any, batch_size: int) -> Any:
    """``specs`` (an ``input_signature``) with ``batch_size`` for each unknown leading dimension, so the function is
    traced at that batch (shapes inside its loops and branches then follow; fixing the placeholders of a function
    traced with an unknown batch left them unknown there)."""
    def fix(spec: Any) -> Any:
        shape = getattr(spec, "shape", None)
        if not isinstance(spec, tf.TensorSpec) or shape is None or shape.rank is None or not shape.rank:
            return spec
        if shape[0] is not None:
            return spec
        return tf.TensorSpec([batch_size, *shape[1:]], spec.dtype, spec.name)
    return tf.nest.map_structure(fix, specs)


def _trace_path(tf: Any, path: Path, outputs: Sequence[str] | None, signature: str | None = None) -> Traced:
    if path.is_dir():
        _refuse_outputs(outputs, f"the SavedModel {str(path)!r}")
        return saved_model_traced(tf, path, signature)
    refuse_special_file(path, "a GraphDef file or SavedModel directory")
    if not path.is_file():
        raise FileNotFoundError(f"no GraphDef file or SavedModel directory at {str(path)!r}")
    if signature is not None:
        raise UnsupportedGraphError(f"{path}: signature={signature!r} names a signature of a SavedModel directory; "
                                    "this is a file")
    from google.protobuf import text_format
    from tensorflow.core.framework import graph_pb2

    graph_def = graph_pb2.GraphDef()
    if path.suffix in (".keras", ".h5", ".hdf5"):
        raise UnsupportedGraphError(f"{path}: a Keras model file, not a GraphDef; load it with keras.models."
                                    "load_model and pass the model (Python API), or export a SavedModel directory")
    with wrap_errors(f"{path}: not a readable GraphDef"):
        if path.suffix in (".pbtxt", ".txt"):
            text_format.Parse(path.read_text(), graph_def)
        else:
            graph_def.ParseFromString(path.read_bytes())
    if not graph_def.node:
        raise UnsupportedGraphError(f"{path}: a GraphDef with no nodes (an empty file, or not a GraphDef)")
    return _graph_def_traced(tf, graph_def, path.stem, outputs)


def _name(concrete: Any) -> str:
    name = getattr(concrete, "name", "function")
    return (name.decode() if isinstance(name, bytes) else str(name)).removeprefix("__inference_")


def _refuse_outputs(outputs: Sequence[str] | None, what: str) -> None:
    """Refuse ``outputs`` for a program that is imported with its own outputs (it was ignored without a word)."""
    if outputs:
        raise UnsupportedGraphError(f"outputs={list(outputs)!r} names nodes of a GraphDef, a tf.Graph or a GraphDef "
                                    f"file; {what} is imported with its own outputs")


def _graph_def_traced(tf: Any, graph_def: Any, name: str, outputs: Sequence[str] | None) -> Traced:
    graph_def = _copy(graph_def)
    if outputs:
        keep = [o.lstrip("^").split(":")[0] for o in outputs]
        with wrap_errors(f"GraphDef: extracting the subgraph of {keep}"):
            graph_def = tf.compat.v1.graph_util.extract_sub_graph(graph_def, keep)
    read = {i.lstrip("^").split(":")[0] for node in graph_def.node for i in node.input}
    nodes = {n.name: n for n in graph_def.node}
    for output in outputs or ():
        _check_output_index(output, nodes)
    sinks = [n.name for n in graph_def.node if n.name not in read]
    placeholders = [n for n in graph_def.node if n.op == "Placeholder"]
    resource = tf.resource.as_datatype_enum  # a captured variable or table: no value can be fed
    feeds = tuple(f"{n.name}:0" for n in placeholders if n.attr["dtype"].type != resource)
    fetched = [o.lstrip("^") for o in outputs or sinks]
    return Traced(graph_def, name, feeds, tuple(o if ":" in o or not _has_outputs(nodes[o]) else f"{o}:0"
                                                for o in fetched),
                  resources=tuple(n.name for n in placeholders if n.attr["dtype"].type == resource))


def _copy(message: Any) -> Any:
    copy = type(message)()
    copy.CopyFrom(message)
    return copy


def _check_output_index(output: str, nodes: dict[str, Any]) -> None:
    """Refuse an output ``name:N`` whose node has no output ``N`` (``y:3`` of a MatMul was taken, and failed only
    when a runtime fetched it)."""
    name, colon, index = output.lstrip("^").partition(":")
    if name not in nodes or not colon:
        return
    count = _output_count(nodes[name])
    if index.isdigit() and (count is None or int(index) < count):
        return
    have = (f"outputs {name}:N (N a whole number)" if count is None else "no outputs" if count == 0 else
            f"1 output, {name}:0" if count == 1 else f"{count} outputs, {name}:0 to {name}:{count - 1}")
    raise UnsupportedGraphError(f"output {output!r} is no tensor of the graph: node {name!r} ({nodes[name].op}) has "
                                f"{have}")


def _output_count(node: Any) -> int | None:
    """How many outputs the node has, by TensorFlow's registry of ops (``None``: an op not loaded here)."""
    from tensorflow.python.framework import op_def_registry

    op_def = op_def_registry.get(node.op)
    if op_def is None:
        return None
    return sum(node.attr[arg.number_attr].i if arg.number_attr else
               len(node.attr[arg.type_list_attr].list.type) if arg.type_list_attr else 1 for arg in op_def.output_arg)


def _has_outputs(node: Any) -> bool:
    """Whether the node's op has outputs (``NoOp``, ``AssignVariableOp``, ``Assert``, ``ResourceApply*`` have none),
    by TensorFlow's registry of ops."""
    from tensorflow.python.framework import op_def_registry

    op_def = op_def_registry.get(node.op)
    if op_def is None:  # a custom op not loaded here: as the usual ops without outputs
        return node.op not in ("NoOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp")
    return bool(op_def.output_arg)
