"""Import a TensorFlow program into gplace's op graph.

This module and :mod:`gplace.zoo.keras_models` are the only places in gplace that import ``tensorflow``; they
import it lazily, inside the functions.

What can be imported (:func:`from_tensorflow`): a ``GraphDef`` (or a path to a binary ``.pb`` / text
``.pbtxt`` one), a ``tf.Graph``, a ``tf.function`` with an ``input_signature`` or a concrete function, a
SavedModel directory (the signature named by ``signature=``, else its ``serving_default``, else the first by name,
logged at INFO with the others), or a Keras model, as inference or,
with ``training=True``, as one full training step (forward, loss, gradients and the optimiser's update traced
as one ``tf.function`` with a ``GradientTape``), as the paper placed training steps.

How a program maps onto the IR:

- Everything is first turned into one **self-contained GraphDef**, kept as the graph's ``source``
  (:class:`TensorFlowSource`) with **one node per op under the same name**, so a runtime can set
  ``NodeDef.device`` from a placement. Variables captured by a function become ``VarHandleOp`` nodes,
  captured constants ``Const`` nodes; function calls (``PartitionedCall``, ``StatefulPartitionedCall``, as in
  a SavedModel) are inlined with Grappler's function optimiser, XLA-compiled ones included (their ops are
  then placed one by one).
- **Shapes and dtypes**: TensorFlow's shape inference on import, merged with the ``_output_shapes`` attribute
  where the GraphDef has one. A placeholder's unknown leading (batch) dimension takes ``batch_size``, in the
  kept GraphDef too (a function or Keras model is traced at that batch), so the placed program runs at that batch
  size only. A tensor
  that some op reads and whose shape is still unknown is an error naming its node (the reduction axes that
  ``BroadcastGradientArgs`` computes count at their bound, the rank). Bytes are ``numel * itemsize``;
  strings count 8 bytes an element (an estimate), resource handles and variants 0, except ``TensorList``
  variants (a loop's sequences, as a Keras RNN's): one made by ``TensorListFromTensor`` carries its tensor's
  bytes; one made by ``TensorListReserve`` carries nothing (its elements are not set) but can hold
  ``num_elements`` x ``element_shape`` when both are constants; a ``While`` output carries what its input list
  can hold (the loop is taken to fill it), else what the input carries; ``Identity`` passes a list on.
- **Variables** (``VarHandleOp``, ``VariableV2``) hold their size as ``persistent_memory``; so do ``Const``
  nodes. A ``ReadVariableOp`` or ``Const`` output aliases that resident buffer, so it adds no
  ``output_bytes``, but its edges carry the value's bytes (a reader on another device pays the copy).
- **Colocation**: ``_class: loc:@x`` constraints, and TensorFlow's rule that an op reading a resource handle
  or a reference variable runs where the variable lives, become :attr:`Op.colocation` groups (named after a
  variable of the group where there is one).
- **CPU-only ops** (strings, input pipelines, ``PyFunc``, checkpoint I/O, see :data:`CPU_ONLY_OPS`; on a GPU
  build also every op TensorFlow's kernel registry has no GPU kernel for) are pinned to ``"cpu"``.
- **Edges**: one per (producer, consumer) pair carrying the bytes of the distinct tensors read; control
  dependencies (``^x``) are 0-byte edges.
- **Costs**: ``kind_cost`` from :mod:`gplace.costmodel` (roofline on the reference GPU and CPU), with the
  FLOPs of TensorFlow-specific layouts (``MatMul`` transposes, ``HWIO`` filters, convolution and pooling
  gradients) counted here. Bookkeeping ops (``NoOp``, ``Const``, ``Placeholder``, variables, reads,
  reshapes, identities; :data:`FREE_OPS`) cost 0.
- **Phases** (a Keras training step only; :func:`training_phases`): ops under TensorFlow's ``gradient_tape/``
  name scope are ``backward`` (with ``grad_of`` the forward op their name points to, where it is one), every other
  op that depends on a gradient is ``update`` (the optimiser and what runs after it), the rest ``forward``.
- **Control flow**: functional ``While``, ``If`` and ``Case`` (TensorFlow 2's, e.g. a Keras ``LSTM``) are one op
  each, placed as a unit (their functions run where they run), colocated with the variables they read. The cost
  is that of one call of their functions' ops (shapes inferred from the op's inputs; a variable read inside
  has the variable's shape): an ``If``'s or ``Case``'s dearer branch, a ``While``'s condition and body times
  its trip count where its ``maximum_iterations`` is computed from constants only, else one pass, with a
  warning. Ops of a function whose shapes stay unknown count 0 seconds, with a warning. v1 control flow
  (``Enter``/``Exit``/``Switch``/``Merge``) is not handled: an :class:`~gplace.ir.UnsupportedGraphError`
  names the node.

No TensorFlow or protobuf exception leaves :func:`from_tensorflow`: each becomes an
:class:`~gplace.ir.UnsupportedGraphError` naming the node or the stage that failed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gplace.costmodel import TensorSpec, op_work, roofline_costs
from gplace.ir import Edge, GraphError, Op, OpGraph, UnsupportedGraphError
from gplace.ir.errors import error_summary

logger = logging.getLogger(__name__)

CONTROL_FLOW_OPS = frozenset({
    "While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase", "For", "Enter", "RefEnter", "Exit",
    "RefExit", "Switch", "RefSwitch", "_SwitchN", "Merge", "RefMerge", "NextIteration", "RefNextIteration",
    "LoopCond",
})
"""Op types whose op count per step depends on the data: not handled."""

CPU_ONLY_OPS = frozenset({
    "PyFunc", "PyFuncStateless", "EagerPyFunc", "IteratorGetNext", "IteratorGetNextSync", "IteratorV2",
    "Iterator", "AnonymousIterator", "AnonymousIteratorV2", "AnonymousIteratorV3", "MakeIterator",
    "OneShotIterator", "IteratorToStringHandle", "IteratorFromStringHandleV2", "SaveV2", "RestoreV2",
    "MergeV2Checkpoints", "ShardedFilename", "ShardedFilespec", "Print", "PrintV2", "StringFormat", "DecodeJpeg",
    "DecodePng", "DecodeImage", "DecodeRaw", "ParseExample", "ParseExampleV2", "ParseSingleExample",
    "ReaderReadV2", "FIFOQueueV2", "RandomShuffleQueueV2", "QueueDequeueV2", "QueueDequeueManyV2",
    "QueueEnqueueV2", "HashTableV2", "MutableHashTableV2", "LookupTableFindV2", "LookupTableImportV2",
    "InitializeTableV2", "InitializeTableFromTextFileV2",
})
"""Op types with no GPU kernel (besides any op reading or writing strings, and ``*Dataset`` ops)."""

FREE_OPS = frozenset({
    "NoOp", "Const", "HostConst", "Placeholder", "PlaceholderWithDefault", "VarHandleOp", "VariableV2", "Variable",
    "VarIsInitializedOp", "ReadVariableOp", "Identity", "IdentityN", "Reshape", "Squeeze", "ExpandDims", "Shape",
    "ShapeN", "Size", "Rank", "StopGradient", "PreventGradient", "Snapshot", "EnsureShape", "DestroyResourceOp",
})
"""Bookkeeping op types: no kernel worth timing (cost 0 on every kind)."""

_VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable"})
_ALIAS_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable", "Const", "HostConst", "ReadVariableOp"})
"""Ops whose outputs alias resident (persistent) memory: no ``output_bytes`` of their own."""
FUNCTIONAL_CONTROL_FLOW = frozenset({"While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase"})
"""Control-flow ops imported as one op each (the module docstring); the rest of :data:`CONTROL_FLOW_OPS` is refused."""
_CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
_NO_INLINE_ATTRS = ("_noinline", "_XlaMustCompile", "api_implements")
_NO_TENSOR = ("resource", "variant")
_LIST_PASSING = frozenset({"Identity", "TensorListSetItem", "TensorListPushBack"})
"""Ops whose ``TensorList`` output is (a version of) their first input's list (bytes: the module docstring)."""
_STRING_BYTES = 8

_COST_NAMES = {
    "AddV2": "add", "BiasAdd": "add", "RealDiv": "div", "DivNoNan": "div", "FloorDiv": "div",
    "SquaredDifference": "sub", "ReluGrad": "threshold_backward", "Relu6": "clip", "Relu6Grad": "threshold_backward",
    "SigmoidGrad": "sigmoid_backward", "TanhGrad": "tanh_backward", "RsqrtGrad": "mul", "SqrtGrad": "mul",
    "FusedBatchNorm": "native_batch_norm", "FusedBatchNormV2": "native_batch_norm",
    "FusedBatchNormV3": "native_batch_norm", "FusedBatchNormGrad": "native_batch_norm_backward",
    "FusedBatchNormGradV2": "native_batch_norm_backward", "FusedBatchNormGradV3": "native_batch_norm_backward",
    "SparseSoftmaxCrossEntropyWithLogits": "softmax", "SoftmaxCrossEntropyWithLogits": "softmax",
    "LogSoftmax": "logsoftmax", "AddN": "sum", "GatherV2": "gather", "ResourceGather": "gather",
    "Sum": "reducesum", "Mean": "reducemean", "Max": "reducemax", "Min": "reducemin", "Prod": "reduceprod",
    "BiasAddGrad": "reducesum", "ArgMax": "argmax", "ArgMin": "argmin", "TopKV2": "topk",
}
"""TensorFlow op type -> the :mod:`gplace.costmodel` name counting the same work."""


@dataclass(frozen=True)
class TensorFlowSource:
    """The graph's ``source`` handle: the GraphDef its ops came from (one node per op, same names)."""

    graph_def: Any = field(repr=False)
    """A ``tf.compat.v1.GraphDef``; set ``node.device`` from a placement to run it placed."""
    inputs: tuple[str, ...] = ()
    """Tensors to feed, e.g. ``("x:0",)``."""
    outputs: tuple[str, ...] = ()
    """Tensors one step fetches (a training step's loss, a model's outputs), e.g. ``("y:0",)``; a node without
    outputs (a ``tf.group``'s ``NoOp``, a GraphDef's training step) by its name: one step runs it."""
    variables: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """``VarHandleOp`` node name -> the ``tf.Variable`` it stands for, where the program held one (a function,
    SavedModel or Keras model; empty for a GraphDef; for a TF1 SavedModel's in-graph handles, as
    :func:`gplace.export.tensorflow.save_saved_model` writes, a variable holding the value its init op or checkpoint
    gives): where a placed program's weights come from."""
    resources: tuple[str, ...] = ()
    """Placeholders of captured resources that are not variables (a lookup table, say): nothing in the GraphDef
    creates them, so the graph can be placed and simulated but not run by ``tf-v1``."""
    output_names: tuple[str, ...] = ()
    """The program's own name of each of :attr:`outputs`, in their order, where it has them: the keys of the dict a
    function (a SavedModel signature's, a Keras model's) returns, or a multi-output Keras model's
    ``output_names``; empty where it has none (a GraphDef, one unnamed tensor)."""


@dataclass
class _Traced:
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
    """Node names of captured resources left placeholders (:attr:`TensorFlowSource.resources`)."""
    output_names: tuple[str, ...] = ()
    """:attr:`TensorFlowSource.output_names`."""


def from_tensorflow(
    obj: Any,
    *,
    training: bool = False,
    batch_size: int | None = None,
    name: str | None = None,
    loss: Any = None,
    optimizer: Any = None,
    outputs: str | Sequence[str] | None = None,
    signature: str | None = None,
) -> OpGraph:
    """Import a TensorFlow program as an op graph (see the module docstring for the mapping).

    Args:
        obj: a ``GraphDef``, a path to a GraphDef file (``.pb``, ``.pbtxt``) or to a SavedModel directory, a
            ``tf.Graph``, a ``tf.function`` with an ``input_signature``, a concrete function, or a Keras model.
        training: for a Keras model, import one training step (forward, loss, gradients, optimiser update)
            instead of inference. Other programs are imported as they are. (default: ``False``)
        batch_size: size of an unknown leading (batch) dimension of the ``Placeholder`` inputs (a
            ``PlaceholderWithDefault``'s is not set). It is written into the kept GraphDef (a function or Keras
            model is traced at it), so the placed program runs at the batch size it was imported with; import
            again for another. (default: ``None``, an unknown dimension is an error)
        name: graph name. (default: the model's, function's, file's or ``"tensorflow"``)
        loss: training loss of a Keras model: a Keras loss name, a loss object or a callable
            ``(y_true, y_pred) -> scalar``. Targets are fed like the outputs, or as integer class ids without
            the last axis for a ``sparse_*`` loss. (default: the model's compiled loss with its ``loss_weights``,
            else mean squared error). As in Keras's own training step, the model's ``losses`` (regularisers,
            ``add_loss``) are added, and the gradients are of the optimiser's ``scale_loss`` of the total (a
            ``LossScaleOptimizer``'s, as ``mixed_float16`` compiles one, scales it up; its update scales back).
        optimizer: training optimiser of a Keras model, a Keras optimiser or its name. (default: the model's
            compiled optimiser, else ``"sgd"``)
        outputs: for a GraphDef or ``tf.Graph``, the node (or tensor) or nodes one step runs; only they and what
            they depend on are imported. (default: every node)
        signature: for a SavedModel directory, the signature to import. (default: ``serving_default``, else the
            first by name)

    Returns:
        The op graph; its ``source`` is a :class:`TensorFlowSource`.

    Raises:
        TypeError: ``obj`` is none of the above.
        ValueError: ``batch_size`` is not a positive int.
        FileNotFoundError: a path that does not exist.
        UnsupportedGraphError: the program cannot be imported; the message names the node (or the stage) and
            the reason (control flow, an unknown dimension, an unregistered op, a failed trace, ...); or
            ``signature`` is given for what is not a SavedModel, or names none of its signatures (lists them).
    """
    if training and not _is_keras_model(obj):
        raise UnsupportedGraphError("training=True needs a Keras model; other programs are imported as given")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive int or None, got {batch_size!r}")
    tf = _import_tf()
    outputs = [outputs] if isinstance(outputs, str) else outputs  # one name, not a list of its letters
    if signature is not None and not isinstance(obj, str | Path):
        raise UnsupportedGraphError(f"signature={signature!r} names a signature of a SavedModel directory; "
                                    f"got a {type(obj).__name__}")
    traced = _trace(tf, obj, training, batch_size, loss, optimizer, outputs, signature)
    graph_name = name or traced.name
    where = f"TensorFlow graph {graph_name!r}"
    with _wrap_errors(where):
        graph_def = _prepare(tf, traced, batch_size, where)
        with _wrap_errors(f"{where}: TensorFlow could not import it"):
            graph = _import_graph_def(tf, graph_def)
        ops, edges = _Builder(tf, graph, graph_def, where, batch_size).build()
    if training:
        ops = training_phases(ops, edges)
    names = {node.name for node in graph_def.node}
    resources = tuple(r for r in traced.resources if r in names)
    if resources:
        logger.warning("%s: captured resource(s) without a value stay placeholders (lookup tables, or the variables "
                       "of a function graph's GraphDef: import the function itself): %s; the graph can be placed and "
                       "simulated, not run by tf-v1", where, ", ".join(resources[:5]))
    source = TensorFlowSource(graph_def, traced.inputs, traced.outputs,
                              {k: v for k, v in traced.variables.items() if k in names}, resources,
                              traced.output_names)
    try:
        return OpGraph.from_ops(ops, edges, name=graph_name, source=source)
    except GraphError as err:
        raise UnsupportedGraphError(f"{where}: {err}") from None


GRADIENT_SCOPE = "gradient_tape/"
"""Name scope of the ops ``tf.GradientTape.gradient`` adds."""


def training_phases(ops: list[Op], edges: list[Edge]) -> list[Op]:
    """The ops of a traced training step with their phases (:attr:`Op.phase`).

    ``backward``: the ops under :data:`GRADIENT_SCOPE` (but those a forward control-flow op reads that depend on
    no data: a loop's gradient accumulators, created empty), and the ops between two of them (the tape sums the
    gradients of a tensor read twice with a top-level ``AddN``); ``grad_of`` is the forward op their name points to
    (:func:`_differentiated`), where there is one. ``update``: every other op that depends on a backward op (the
    final sums of a weight's gradients, the optimiser's ops and what the step runs after them), and every op that
    depends on an update op. ``forward``: the rest.
    So no backward op feeds a forward op and update ops feed only update ops, as the pipeline runtimes require.
    Without gradient ops (not a training step) the ops are returned as they are.
    """
    tape = {op.name for op in ops if op.name.startswith(GRADIENT_SCOPE)}
    if not tape:
        return ops
    consumers: dict[str, list[str]] = defaultdict(list)
    producers: dict[str, list[str]] = defaultdict(list)
    for e in edges:
        consumers[e.src].append(e.dst)
        producers[e.dst].append(e.src)
    tape -= _constants_for_forward(ops, tape, consumers, producers)
    backward = tape | (_downstream(tape, consumers) & _downstream(tape, producers))  # e.g. AddN of two gradients
    after_gradients = _downstream(backward, consumers) - backward
    update = _downstream(after_gradients, consumers)
    forward = {op.name for op in ops} - backward - update
    out = []
    for op in ops:
        if op.name in update:
            out.append(dataclasses.replace(op, phase="update"))
        elif op.name in backward:
            of = _differentiated(op.name, forward) if op.name in tape else None
            out.append(dataclasses.replace(op, phase="backward", grad_of=of))
        else:
            out.append(dataclasses.replace(op, phase="forward"))
    return out


def _differentiated(name: str, forward: set[str]) -> str | None:
    """The forward op a gradient-tape op differentiates, by TensorFlow's names, without the tape's prefix: the
    scope the op is in (``gradient_tape/dense/MatMul/MatMul_1``: ``dense/MatMul``), else ``<scope>/<T>`` for an
    op ``<scope>/<T>Grad`` (``re_lu/ReluGrad``: ``re_lu/Relu``), else the scope ``.../<loop>`` that holds a loop's
    gradient loop ``.../<loop>/.../<loop>_grad`` (``lstm/while/lstm/while_grad``: ``lstm/while``); ``None`` if none
    of these is a forward op."""
    path = name.removeprefix(GRADIENT_SCOPE)
    parts = path.split("/")
    scope, last = "/".join(parts[:-1]), parts[-1]
    candidates = [scope]
    if grad := re.fullmatch(r"(\w+)Grad(_\d+)?", last):
        candidates.append(f"{scope}/{grad[1]}" if scope else grad[1])
    if last.endswith("_grad"):
        candidates += ["/".join(parts[:k + 1]) for k in range(len(parts) - 1) if parts[k] == last[:-5]]
    return next((c for c in candidates if c in forward), None)


def _constants_for_forward(ops: list[Op], tape: set[str], consumers: Mapping[str, list[str]],
                           producers: Mapping[str, list[str]]) -> set[str]:
    """The tape's ops that a forward control-flow op reads and that depend on no data (a loop's gradient
    accumulators, which the tape creates empty and the forward ``While`` fills), with the constants they read."""
    data = _downstream({op.name for op in ops if op.type in ("Placeholder", *_VARIABLE_OPS)}, consumers)
    loops = {op.name for op in ops if op.type in FUNCTIONAL_CONTROL_FLOW and op.name not in tape}
    undetermined = tape - data
    read = {name for name in undetermined if loops.intersection(consumers.get(name, ()))}
    return _downstream(read, producers) & undetermined


def _downstream(start: set[str], consumers: Mapping[str, list[str]]) -> set[str]:
    """``start`` and every op reachable from one of them along ``consumers`` (ops that depend on them; with
    producers instead, the ops they depend on)."""
    seen, stack = set(start), list(start)
    while stack:
        for nxt in consumers.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


# ---------------------------------------------------------------------- errors and imports
def _import_tf() -> Any:
    from gplace.tensorflow_setup import import_tensorflow

    return import_tensorflow()


@contextlib.contextmanager
def _wrap_errors(where: str) -> Iterator[None]:
    """Turn any exception but ours into an :class:`UnsupportedGraphError` that says where it happened."""
    try:
        yield
    except UnsupportedGraphError:
        raise
    except Exception as err:  # TensorFlow raises ValueError, TypeError, InvalidArgumentError, DecodeError, ...
        logger.debug("%s failed", where, exc_info=True)
        raise UnsupportedGraphError(f"{where} ({type(err).__name__}: {error_summary(err, limit=400)})") from None


# ---------------------------------------------------------------------- tracing any input to a GraphDef
def _is_keras_model(obj: Any) -> bool:
    for module in ("keras", "tf_keras"):
        keras = sys.modules.get(module)
        if keras is not None and isinstance(obj, keras.Model):
            return True
    return False


def _trace(tf: Any, obj: Any, training: bool, batch_size: int | None, loss: Any, optimizer: Any,
           outputs: Sequence[str] | None, signature: str | None = None) -> _Traced:
    from tensorflow.core.framework import graph_pb2

    if isinstance(obj, str | Path):
        return _trace_path(tf, Path(obj), outputs, signature)
    if isinstance(obj, graph_pb2.GraphDef):
        return _graph_def_traced(tf, obj, "tensorflow", outputs)
    if isinstance(obj, tf.Graph):
        with _wrap_errors("tf.Graph.as_graph_def"):
            graph_def = obj.as_graph_def(add_shapes=True)
        return _graph_def_traced(tf, graph_def, "tensorflow", outputs)
    if isinstance(obj, tf.types.experimental.ConcreteFunction):
        return _function_traced(tf, obj)
    if isinstance(obj, tf.types.experimental.PolymorphicFunction):
        with _wrap_errors(f"tf.function {getattr(obj, '__name__', '?')!r} (give it an input_signature)"):
            specs = getattr(obj, "input_signature", None)
            if specs and batch_size and getattr(obj, "python_function", None):  # traced again at that batch
                obj = tf.function(obj.python_function, input_signature=_batched(tf, specs, batch_size))
            concrete = obj.get_concrete_function()
        return _function_traced(tf, concrete)
    if _is_keras_model(obj):
        return _keras_traced(tf, obj, training, batch_size, loss, optimizer)
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


def _trace_path(tf: Any, path: Path, outputs: Sequence[str] | None, signature: str | None = None) -> _Traced:
    if path.is_dir():
        return _saved_model_traced(tf, path, signature)
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
    with _wrap_errors(f"{path}: not a readable GraphDef"):
        if path.suffix in (".pbtxt", ".txt"):
            text_format.Parse(path.read_text(), graph_def)
        else:
            graph_def.ParseFromString(path.read_bytes())
    if not graph_def.node:
        raise UnsupportedGraphError(f"{path}: a GraphDef with no nodes (an empty file, or not a GraphDef)")
    return _graph_def_traced(tf, graph_def, path.stem, outputs)


def _graph_def_traced(tf: Any, graph_def: Any, name: str, outputs: Sequence[str] | None) -> _Traced:
    graph_def = _copy(graph_def)
    if outputs:
        keep = [o.lstrip("^").split(":")[0] for o in outputs]
        with _wrap_errors(f"GraphDef: extracting the subgraph of {keep}"):
            graph_def = tf.compat.v1.graph_util.extract_sub_graph(graph_def, keep)
    read = {i.lstrip("^").split(":")[0] for node in graph_def.node for i in node.input}
    nodes = {n.name: n for n in graph_def.node}
    sinks = [n.name for n in graph_def.node if n.name not in read]
    placeholders = [n for n in graph_def.node if n.op == "Placeholder"]
    resource = tf.resource.as_datatype_enum  # a captured variable or table: no value can be fed
    feeds = tuple(f"{n.name}:0" for n in placeholders if n.attr["dtype"].type != resource)
    fetched = [o.lstrip("^") for o in outputs or sinks]
    return _Traced(graph_def, name, feeds, tuple(o if ":" in o or not _has_outputs(nodes[o]) else f"{o}:0"
                                                 for o in fetched),
                   resources=tuple(n.name for n in placeholders if n.attr["dtype"].type == resource))


def _copy(message: Any) -> Any:
    copy = type(message)()
    copy.CopyFrom(message)
    return copy


def _has_outputs(node: Any) -> bool:
    """Whether the node's op has outputs (``NoOp``, ``AssignVariableOp``, ``Assert``, ``ResourceApply*`` have none),
    by TensorFlow's registry of ops."""
    from tensorflow.python.framework import op_def_registry

    op_def = op_def_registry.get(node.op)
    if op_def is None:  # a custom op not loaded here: as the usual ops without outputs
        return node.op not in ("NoOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp")
    return bool(op_def.output_arg)


def _saved_model_traced(tf: Any, path: Path, signature: str | None = None) -> _Traced:
    with _wrap_errors(f"SavedModel {str(path)!r}: could not load it"):
        loaded = tf.saved_model.load(str(path))
        signatures = dict(loaded.signatures)
    if not signatures:
        raise UnsupportedGraphError(f"SavedModel {str(path)!r} has no signatures; save it with signatures=...")
    key = _signature_key(path, sorted(signatures), signature)
    traced = _function_traced(tf, signatures[key])
    traced.name, traced.keepalive = path.name, loaded
    handles = {n.name: n for n in traced.graph_def.node if n.op == "VarHandleOp" and n.name not in traced.variables}
    if handles:  # a TF1 SavedModel's variables left in the signature's graph (gplace's save_saved_model writes them)
        traced.variables.update(_saved_model_values(tf, path, key, handles))
        missing = [name for name in handles if name not in traced.variables]
        if missing:
            logger.warning("SavedModel %r: %d variable(s) without a value in its checkpoint or init op: %s; it can be "
                           "placed and simulated, but tf-v1 runs it with made-up values and save_saved_model cannot "
                           "write it", str(path), len(missing), ", ".join(missing[:5]))
    return traced


def _signature_key(path: Path, names: list[str], signature: str | None) -> str:
    """The signature to import: ``signature``, else ``serving_default``, else the first of ``names`` (sorted)."""
    if signature is not None:
        if signature not in names:
            raise UnsupportedGraphError(f"SavedModel {str(path)!r} has no signature {signature!r}; its signatures: "
                                        f"{', '.join(names)}")
        return signature
    key = "serving_default" if "serving_default" in names else names[0]
    if len(names) > 1:
        logger.info("SavedModel %r: importing signature %r of %s (give signature= for another)", str(path), key,
                    ", ".join(names))
    return key


def _saved_model_values(tf: Any, path: Path, signature: str, handles: Mapping[str, Any]) -> dict[str, Any]:
    """Values (``tf.Variable``) of the in-graph ``VarHandleOp`` nodes ``handles`` (node name -> node) of a TF1
    SavedModel's signature: the constants its init op (``main_op``, ``legacy_init_op``) assigns them, as
    :func:`gplace.export.tensorflow.save_saved_model` writes them, else its checkpoint
    ``<path>/variables/variables``; matched by the handle's ``shared_name`` (the variable a session shares), else
    its node name. A value of another dtype or shape than the handle's is left out."""
    from tensorflow.python.saved_model import loader_impl

    with _wrap_errors(f"SavedModel {str(path)!r}: could not read its MetaGraphDef"):
        saved = loader_impl.parse_saved_model(str(path))
    metas = [m for m in saved.meta_graphs if signature in m.signature_def]
    if not metas:
        return {}
    meta = metas[0]
    found: dict[str, Any] = {}
    prefix = str(path / "variables" / "variables")
    if Path(prefix + ".index").is_file():
        with _wrap_errors(f"SavedModel {str(path)!r}: could not read its checkpoint"):
            reader = tf.train.load_checkpoint(prefix)
            keys = set(reader.get_variable_to_shape_map())
            for name, node in handles.items():
                key = next((k for k in (node.attr["shared_name"].s.decode(), name) if k and k in keys), None)
                if key is not None:
                    found[name] = reader.get_tensor(key)
    found.update(_init_op_values(tf, meta, handles))
    values: dict[str, Any] = {}
    with tf.init_scope():
        for name, value in found.items():
            node = handles[name]
            dtype, shape = tf.dtypes.as_dtype(node.attr["dtype"].type), tf.TensorShape(node.attr["shape"].shape)
            value = np.asarray(value)
            if value.dtype == dtype.as_numpy_dtype and shape.is_compatible_with(value.shape):
                values[name] = tf.Variable(value, trainable=False, name=name)
    return values


def _init_op_values(tf: Any, meta: Any, handles: Mapping[str, Any]) -> dict[str, Any]:
    """Handle node name -> the constant (an array) the MetaGraphDef's init op assigns the variable."""
    nodes = {n.name: n for n in meta.graph_def.node}
    roots = [name for key in ("saved_model_main_op", "legacy_init_op", "saved_model_legacy_init_op")
             if key in meta.collection_def for name in meta.collection_def[key].node_list.value]
    init = meta.signature_def.get("__saved_model_init_op")
    if init is not None:
        roots += [t.name for t in init.outputs.values()]
    by_shared = {}
    for name, node in handles.items():
        by_shared.setdefault(node.attr["shared_name"].s.decode() or name, name)
    assigned: dict[str, Any] = {}
    seen, stack = set(), [r.lstrip("^").split(":")[0] for r in roots]
    while stack:
        node = nodes.get(stack.pop())
        if node is None or node.name in seen:
            continue
        seen.add(node.name)
        stack.extend(i.lstrip("^").split(":")[0] for i in node.input)
        if node.op != "AssignVariableOp" or len(node.input) < 2:
            continue
        handle, value = (nodes.get(i.split(":")[0]) for i in node.input[:2])
        if handle is None or value is None or handle.op != "VarHandleOp" or value.op != "Const":
            continue
        name = by_shared.get(handle.attr["shared_name"].s.decode() or handle.name)
        if name is None and handle.name in handles:
            name = handle.name
        if name is not None:
            assigned[name] = tf.make_ndarray(value.attr["value"].tensor)
    return assigned


_NODE_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\-/>]*")
"""The node names TensorFlow's GraphDef importer accepts."""


def _function_traced(tf: Any, concrete: Any) -> _Traced:
    """The function's GraphDef with its captures made nodes: variables ``VarHandleOp``, tensors ``Const``.

    A variable's node is renamed after the variable where that name is free and a legal node name (a variable
    may be called ``"my var"`` or ``"_x"``; a node may not).
    """
    fname = getattr(concrete, "name", "function")
    fname = fname.decode() if isinstance(fname, bytes) else str(fname)
    with _wrap_errors(f"concrete function {fname!r}: could not read its graph"):
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
    return _Traced(graph_def, fname.removeprefix("__inference_"), inputs, outputs,
                   variables={renames.get(k, k): v for k, v in held.items()}, resources=tuple(others),
                   output_names=names)


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
    _reset(node, "VarHandleOp")
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
    _reset(node, "Const")
    node.attr["dtype"].type = proto.dtype
    node.attr["value"].tensor.CopyFrom(proto)


def _reset(node: Any, op_type: str) -> None:
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


# ---------------------------------------------------------------------- Keras
def _keras_traced(tf: Any, model: Any, training: bool, batch_size: int | None, loss: Any,
                  optimizer: Any) -> _Traced:
    where = f"Keras model {model.name!r}"
    opt = None
    with _wrap_errors(f"{where}: could not trace it"):
        specs = _keras_input_specs(tf, model, batch_size, where)
        if training:
            concrete, opt = _keras_train_step(tf, model, specs, batch_size, loss, optimizer)
        else:
            fn = tf.function(lambda inputs: model(_packed(model, inputs), training=False), input_signature=[specs],
                             autograph=False)
            concrete = fn.get_concrete_function()
    traced = _function_traced(tf, concrete)
    names = tuple(getattr(model, "output_names", None) or ())
    if not training and not traced.output_names and len(names) == len(traced.outputs) > 1:
        traced.output_names = names  # a list of outputs, in model.outputs order (a dict's keys are taken already)
    traced.name = model.name + ("_train" if training else "")
    traced.keepalive = opt  # the optimiser owns the slot variables the GraphDef refers to
    return traced


def _packed(model: Any, inputs: list[Any]) -> Any:
    """``inputs`` (in ``model.inputs`` order) in the structure the model was built with (a dict, say)."""
    import keras

    structure = getattr(model, "input", None)
    if isinstance(structure, dict | list | tuple) and len(keras.tree.flatten(structure)) == len(inputs):
        return keras.tree.pack_sequence_as(structure, inputs)
    return inputs[0] if len(inputs) == 1 else inputs


def _keras_input_specs(tf: Any, model: Any, batch_size: int | None, where: str) -> list[Any]:
    try:
        inputs = list(model.inputs or [])
    except (AttributeError, ValueError):
        inputs = []
    if not inputs:
        raise UnsupportedGraphError(f"{where} has no symbolic inputs (a subclassed model never built?); build it "
                                    "with keras.Input, or pass a tf.function with an input_signature")
    return [_batch_spec(tf, t.shape, t.dtype, batch_size, t.name) for t in inputs]


def _batch_spec(tf: Any, shape: Sequence[int | None], dtype: Any, batch_size: int | None, name: str) -> Any:
    dims = list(shape)
    if dims and dims[0] is None:
        dims[0] = batch_size
    return tf.TensorSpec(dims, tf.dtypes.as_dtype(dtype), name=name.replace(":", "_"))


def _keras_train_step(tf: Any, model: Any, specs: list[Any], batch_size: int | None, loss: Any,
                      optimizer: Any) -> tuple[Any, Any]:
    """A concrete ``tf.function`` (forward, loss, ``GradientTape`` gradients, optimiser update) and the optimiser,
    as Keras's ``train_step`` computes them: each output's loss times its weight, plus ``model.losses``, the
    gradient of the optimiser's ``scale_loss`` of the total; the step returns the unscaled total.

    Sparse gradients (``IndexedSlices``, e.g. of an embedding) are made dense before the update: Keras 3's
    sparse update paths branch with ``tf.cond``, which the importer does not handle.
    """
    import keras

    loss_fns = _output_losses(keras, model, loss)
    weights = _loss_weights(model) if loss is None else [1.0] * len(loss_fns)
    targets = []
    for i, (t, fn) in enumerate(zip(model.outputs, loss_fns, strict=True)):
        sparse = "sparse" in str(getattr(fn, "name", None) or getattr(fn, "__name__", ""))
        targets.append(_batch_spec(tf, t.shape[:-1] if sparse else t.shape, "int32" if sparse else t.dtype,
                                   batch_size, f"y{i}"))
    opt = optimizer if optimizer is not None else getattr(model, "optimizer", None) or "sgd"
    if isinstance(opt, str):  # its variables' scope is its name, which Keras numbers per process (sgd, sgd_1, ...)
        made = keras.optimizers.get(opt)
        opt = type(made).from_config({**made.get_config(), "name": re.sub(r"_\d+$", "", made.name)})
    variables = model.trainable_variables
    if not getattr(opt, "built", False):
        opt.build(variables)

    def step(inputs: list[Any], labels: list[Any]) -> Any:
        with tf.GradientTape() as tape:
            preds = keras.tree.flatten(model(_packed(model, inputs), training=True))
            terms = [_batch_mean(tf, fn(y, p)) * w if w != 1.0 else _batch_mean(tf, fn(y, p))
                     for fn, y, p, w in zip(loss_fns, labels, preds, weights, strict=True)]
            terms += [tf.reduce_sum(tf.cast(extra, terms[0].dtype)) for extra in model.losses]  # regularisers
            total = tf.add_n(terms)
            scaled = opt.scale_loss(total) if hasattr(opt, "scale_loss") else total
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                 for g in tape.gradient(scaled, variables)]  # Keras's sparse updates use tf.cond
        opt.apply_gradients(zip(grads, variables, strict=True))
        return total

    return tf.function(step, input_signature=[specs, targets], autograph=False).get_concrete_function(), opt


def _batch_mean(tf: Any, loss: Any) -> Any:
    """A per-sample loss averaged over the batch (Keras's default reduction); a scalar one as it is."""
    return loss if loss.shape.rank == 0 else tf.reduce_mean(loss)


def _output_names(model: Any) -> list[str]:
    """A Keras model's output names, in ``model.outputs`` order (its outputs' tensor names where it has none)."""
    return list(getattr(model, "output_names", None) or [t.name for t in model.outputs])


def _loss_weights(model: Any) -> list[float]:
    """The compiled ``loss_weights`` per output of ``model`` (in ``model.outputs`` order; 1.0 where none)."""
    config = model.get_compile_config() if getattr(model, "compiled", False) else None
    given = (config or {}).get("loss_weights")
    names = _output_names(model)
    if given is None:
        return [1.0] * len(names)
    if isinstance(given, dict):
        return [float(given.get(n, 1.0)) for n in names]
    if isinstance(given, list | tuple):
        if len(given) != len(names):
            raise UnsupportedGraphError(f"Keras model {model.name!r}: {len(given)} loss weights for "
                                        f"{len(names)} outputs")
        return [float(w) for w in given]
    return [float(given)] * len(names)


def _output_losses(keras: Any, model: Any, loss: Any) -> list[Any]:
    """One loss function per output of ``model`` (in ``model.outputs`` order) from ``loss`` or the compiled
    loss: one for all, a list (one per output) or a dict (by output name); each is averaged over the batch in
    the step, as Keras's default reduction does."""
    given = loss if loss is not None else getattr(model, "loss", None) or "mean_squared_error"
    names = _output_names(model)
    if isinstance(given, dict):
        missing = [n for n in names if n not in given]
        if missing:
            raise UnsupportedGraphError(f"Keras model {model.name!r}: the loss names outputs {sorted(given)}, "
                                        f"not {missing} (of its outputs {names})")
        given = [given[n] for n in names]
    if isinstance(given, list | tuple):
        if len(given) != len(model.outputs):
            raise UnsupportedGraphError(f"Keras model {model.name!r}: {len(given)} losses for "
                                        f"{len(model.outputs)} outputs")
        return [keras.losses.get(g) for g in given]
    return [keras.losses.get(given)] * len(model.outputs)


# ---------------------------------------------------------------------- preparing the GraphDef
def _prepare(tf: Any, traced: _Traced, batch_size: int | None, where: str) -> Any:
    """Check for control flow and unregistered ops, inline function calls, fix batch dimensions."""
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
    if batch_size is not None:
        _fix_batch_dims(tf, graph_def, batch_size)
    return graph_def


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
    with _wrap_errors(f"{where}: inlining function calls failed"):
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


def _import_graph_def(tf: Any, graph_def: Any) -> Any:
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    return graph


# ---------------------------------------------------------------------- building ops and edges
@dataclass(frozen=True)
class _Tensor:
    """One output of one op."""

    shape: tuple[int, ...] | None
    """Known dimensions, ``None`` where any dimension (or the rank) is unknown."""
    nbytes: int
    """Bytes it carries (0 for handles, variants and unknown shapes)."""
    kind: str
    """``"data"``, ``"resource"`` or ``"ref"``."""
    partial: tuple[int, ...] = ()
    """The dimensions with -1 where unknown (``()`` for an unknown rank)."""


class _Builder:
    """Turns an imported ``tf.Graph`` into op and edge records (one pass over the ops)."""

    def __init__(self, tf: Any, graph: Any, graph_def: Any, where: str, batch_size: int | None = None) -> None:
        self.tf = tf
        self.where = where
        self.batch_size = batch_size
        self.ops = graph.get_operations()
        self.nodes = {n.name: n for n in graph_def.node}
        self.tensors: dict[str, _Tensor] = {}
        self.variables: dict[str, TensorSpec] = {}
        """Tensor name of a resource handle or reference -> the variable it points at."""
        self.readers: dict[str, list[str]] = defaultdict(list)
        self.list_capacity: dict[str, int] = {}
        """Tensor name of a ``TensorList`` -> the bytes it can hold, where known (the module docstring)."""
        self.gpu_kernel = _gpu_kernel_lookup()
        self.graph, self.library = graph, graph_def.library

    def build(self) -> tuple[list[Op], list[Edge]]:
        for op in self.ops:
            self._add_outputs(op)
            for t in op.inputs:
                self.readers[t.name].append(op.name)
        groups = self._colocation()
        records = [self._op(op, groups.get(op.name)) for op in self.ops]
        self._warn_unknown()
        return records, self._edges()

    # -------------------------------------------------------------- tensors
    def _add_outputs(self, op: Any) -> None:
        recorded = self._recorded_shapes(op.name)
        variable = self._variable_spec(op) if op.type in _VARIABLE_OPS else None
        for i, t in enumerate(op.outputs):
            dims = _merge_dims(t.shape, recorded[i] if i < len(recorded) else None)
            if op.type == "BroadcastGradientArgs" and dims == (-1,):
                dims = (max(s.shape[0] or 0 for s in op.inputs),)  # reduction axes: at most the shapes' rank
            kind = "resource" if t.dtype == self.tf.resource else "ref" if t.dtype != t.dtype.base_dtype else "data"
            self.tensors[t.name] = _tensor(dims, t.dtype, kind)
            if variable is not None:
                self.variables[t.name] = variable
            elif kind != "data":
                source = next((s.name for s in op.inputs if s.name in self.variables), None)
                if source is not None:
                    self.variables[t.name] = self.variables[source]
        if any(t.dtype == self.tf.variant for t in op.outputs):
            self._size_lists(op)

    def _size_lists(self, op: Any) -> None:
        """Bytes of ``op``'s ``TensorList`` outputs (the module docstring), from its inputs'."""
        capacity = self.list_capacity
        if op.type == "TensorListFromTensor":
            capacity[op.outputs[0].name] = self.tensors[op.inputs[0].name].nbytes
            self._set_bytes(op.outputs[0].name, capacity[op.outputs[0].name])
        elif op.type == "TensorListReserve":
            shape, count = (self.tf.get_static_value(t) for t in op.inputs[:2])
            if shape is not None and count is not None and min([*shape.reshape(-1).tolist(), int(count)]) >= 0:
                size = _itemsize(self.tf.dtypes.as_dtype(op.get_attr("element_dtype")))
                capacity[op.outputs[0].name] = int(count) * math.prod(shape.reshape(-1).tolist()) * size
        elif op.type in ("While", "StatelessWhile") or op.type in _LIST_PASSING:
            loop = op.type.endswith("While")
            pairs = zip(op.inputs, op.outputs, strict=False) if loop else [(op.inputs[0], op.outputs[0])]
            for src, out in pairs:
                if out.dtype != self.tf.variant:
                    continue
                if src.name in capacity:
                    capacity[out.name] = capacity[src.name]
                full = src.name in capacity and (loop or op.type == "Identity")
                self._set_bytes(out.name, capacity[src.name] if full else self.tensors[src.name].nbytes)

    def _set_bytes(self, name: str, nbytes: int) -> None:
        self.tensors[name] = dataclasses.replace(self.tensors[name], nbytes=nbytes)

    def _recorded_shapes(self, name: str) -> list[Any]:
        node = self.nodes.get(name)
        if node is None or "_output_shapes" not in node.attr:
            return []
        return list(node.attr["_output_shapes"].list.shape)

    def _variable_spec(self, op: Any) -> TensorSpec:
        shape = self.tf.TensorShape(op.get_attr("shape"))
        if not shape.is_fully_defined():
            raise UnsupportedGraphError(
                f"{self.where}: node {op.name!r} ({op.type}): variable of unknown shape {shape}"
            )
        dtype = self.tf.dtypes.as_dtype(op.get_attr("dtype"))
        dims = tuple(int(d) for d in shape)
        return TensorSpec(dims, math.prod(dims) * _itemsize(dtype))

    def _value(self, name: str) -> TensorSpec:
        """What reading tensor ``name`` touches: the variable behind a handle, else the tensor itself."""
        if name in self.variables:
            return self.variables[name]
        t = self.tensors[name]
        return TensorSpec(t.shape or (), t.nbytes)

    # -------------------------------------------------------------- ops
    def _op(self, op: Any, group: str | None) -> Op:
        outputs = [self.tensors[t.name] for t in op.outputs]
        for i, t in enumerate(outputs):
            if t.shape is None and t.kind == "data" and self.readers.get(f"{op.name}:{i}"):
                self._unknown_shape(op, i, t)
        persistent = 0
        shapes = tuple(t.shape if t.shape is not None else t.partial or (-1,) for t in outputs)
        if op.type in _VARIABLE_OPS:
            variable = self.variables[op.outputs[0].name]
            persistent, shapes = variable.nbytes, (variable.shape,)
        elif op.type in ("Const", "HostConst"):
            persistent = sum(t.nbytes for t in outputs)
        return Op(
            op.name, op.type, None, self._kind_costs(op, outputs), persistent_memory=persistent,
            output_bytes=0 if op.type in _ALIAS_OPS else sum(t.nbytes for t in outputs), output_shapes=shapes,
            colocation=group, pinned="cpu" if self._cpu_only(op) else None,
        )

    def _unknown_shape(self, op: Any, i: int, t: _Tensor) -> None:
        shown = "unknown rank" if not t.partial else str(list(t.partial))
        batch_only = t.partial and t.partial[0] < 0 and min(t.partial[1:], default=0) >= 0
        hint = self._batch_hint(op) if batch_only else ""
        raise UnsupportedGraphError(
            f"{self.where}: node {op.name!r} ({op.type}): output {i} has an unknown shape {shown}, read by "
            f"{self.readers[op.outputs[i].name][0]!r}{hint}"
        )

    def _batch_hint(self, op: Any) -> str:
        """What to do about ``op``'s unknown leading dimension: ``batch_size`` sets only ``Placeholder`` inputs."""
        if op.type == "Placeholder":
            return " (give batch_size)" if self.batch_size is None else ""
        given = f"batch_size={self.batch_size} is given, but " if self.batch_size is not None else ""
        if op.type.startswith("Placeholder") or not op.inputs:  # an input of another kind (PlaceholderWithDefault)
            return (f" ({given}batch_size sets only Placeholder inputs, not a {op.type}: feed the input through a "
                    "Placeholder, or give outputs= that do not need it)")
        return (f" ({given}batch_size sets only Placeholder inputs; this {op.type}'s size depends on values known "
                "only at run time: give outputs= that do not need it)")

    def _kind_costs(self, op: Any, outputs: list[_Tensor]) -> dict[str, float]:
        """Roofline seconds per device kind; a tensor read twice (``x * x``) is read once, as the other
        importers count it."""
        if op.type in FUNCTIONAL_CONTROL_FLOW:
            return self._control_flow_costs(op)
        if op.type in FREE_OPS or not (outputs or op.inputs):
            return {"gpu": 0.0, "cpu": 0.0}
        ins = [self._value(t.name) for t in op.inputs]
        distinct = [self._value(name) for name in dict.fromkeys(t.name for t in op.inputs)]
        outs = [TensorSpec(t.shape, t.nbytes) for t in outputs if t.shape is not None and t.kind == "data"]
        attrs = _cost_attrs(self.nodes.get(op.name))
        cost_name = _COST_NAMES.get(op.type, op.type)
        work = op_work(cost_name, ins, outs, attrs, distinct)
        flops = _tf_flops(op.type, ins, outs, attrs)
        return roofline_costs(work.flops if flops is None else flops, work.nbytes)

    # -------------------------------------------------------------- control flow
    def _control_flow_costs(self, op: Any) -> dict[str, float]:
        """An ``If``'s or ``Case``'s dearer branch, or a ``While``'s condition and body times its trip count."""
        if op.type.endswith("While"):
            passes = [self._function_costs(op.get_attr(key).name, list(op.inputs)) for key in ("cond", "body")]
            trips = self._trip_count(op)
            if trips is None:
                logger.warning("%s: node %r (%s): trip count unknown, its cost counts one pass", self.where, op.name,
                               op.type)
            return {kind: (trips or 1) * sum(c[kind] for c in passes) for kind in passes[0]}
        names = ([f.name for f in op.get_attr("branches")] if op.type.endswith("Case")
                 else [op.get_attr("then_branch").name, op.get_attr("else_branch").name])
        branches = [self._function_costs(name, list(op.inputs)[1:]) for name in names]
        return {kind: max(c[kind] for c in branches) for kind in branches[0]}

    def _function_costs(self, name: str, inputs: list[Any]) -> dict[str, float]:
        """Seconds per device kind of one call of function ``name`` on ``inputs``: its ops' costs, with the shapes
        TensorFlow infers from the inputs' (a variable handle passed in becomes that variable, so its reads have
        its shape)."""
        from tensorflow.python.framework import function_def_to_graph

        fdef = next(f for f in self.library.function if f.signature.name == name)
        graph_def, _ = function_def_to_graph.function_def_to_graph_def(fdef, [t.shape for t in inputs])
        nodes = {n.name: n for n in graph_def.node}
        for arg, t in zip(fdef.signature.input_arg, inputs, strict=True):
            if t.op.type == "VarHandleOp":
                _reset(nodes[arg.name], "VarHandleOp")
                for key in ("dtype", "shape"):
                    nodes[arg.name].attr[key].CopyFrom(t.op.node_def.attr[key])
                nodes[arg.name].attr["shared_name"].s = arg.name.encode()
        graph_def.library.CopyFrom(self.library)
        with _wrap_errors(f"{self.where}: function {name!r} of a control-flow op could not be imported"):
            graph = _import_graph_def(self.tf, graph_def)
        inner = _Builder(self.tf, graph, graph_def, f"{self.where}: function {name!r}")
        for op in inner.ops:
            inner._add_outputs(op)
        total, unknown = {"gpu": 0.0, "cpu": 0.0}, 0
        for op in inner.ops:
            outputs = [inner.tensors[t.name] for t in op.outputs]
            if any(inner.tensors[t.name].shape is None and inner.tensors[t.name].kind == "data"
                   for t in [*op.inputs, *op.outputs]):
                unknown += 1
                continue
            for kind, seconds in inner._kind_costs(op, outputs).items():
                total[kind] += seconds
        if unknown:
            logger.warning("%s: function %r: %d op(s) with a shape unknown count 0 seconds", self.where, name,
                           unknown)
        return total

    def _trip_count(self, op: Any) -> int | None:
        """A ``While``'s ``maximum_iterations`` (its second input, as ``tf.while_loop`` writes it) when only
        constants compute it and it is not -1 (no limit)."""
        if len(op.inputs) < 2 or op.inputs[1].dtype not in (self.tf.int32, self.tf.int64) or op.inputs[1].shape.rank:
            return None
        seen, stack = set(), [op.inputs[1].op]
        while stack:
            producer = stack.pop()
            if producer.name in seen:
                continue
            seen.add(producer.name)
            if producer.type in ("Placeholder", *_VARIABLE_OPS, "ReadVariableOp") or producer.op_def.is_stateful:
                return None
            stack += [t.op for t in producer.inputs]
        with self.tf.compat.v1.Session(graph=self.graph) as session:
            trips = int(session.run(op.inputs[1]))
        return trips if trips >= 0 else None

    def _cpu_only(self, op: Any) -> bool:
        if op.type in CPU_ONLY_OPS or op.type.endswith(("Dataset", "DatasetV2", "DatasetV3")):
            return True
        if any(t.dtype == self.tf.string for t in [*op.inputs, *op.outputs]):
            return True
        return self.gpu_kernel is not None and op.type not in FREE_OPS and not self.gpu_kernel(op.type)

    # -------------------------------------------------------------- colocation and edges
    def _colocation(self) -> dict[str, str]:
        """Op name -> group name for ops in a group of two or more (``_class`` and resource/ref readers)."""
        parent = {op.name: op.name for op in self.ops}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for op in self.ops:
            for other in self._colocated_with(op):
                if other in parent:
                    parent[find(op.name)] = find(other)
        members: dict[str, list[str]] = defaultdict(list)
        for op in self.ops:
            members[find(op.name)].append(op.name)
        types = {op.name: op.type for op in self.ops}
        groups = {}
        for names in members.values():
            if len(names) > 1:
                label = next((n for n in names if types[n] in _VARIABLE_OPS), names[0])
                groups.update(dict.fromkeys(names, label))
        return groups

    def _colocated_with(self, op: Any) -> list[str]:
        node = self.nodes.get(op.name)
        names = []
        if node is not None and "_class" in node.attr:
            names = [s.decode().removeprefix("loc:@") for s in node.attr["_class"].list.s if s.startswith(b"loc:@")]
        names += [t.op.name for t in op.inputs if self.tensors[t.name].kind != "data"]
        return names

    def _edges(self) -> list[Edge]:
        nbytes: dict[tuple[str, str], int] = {}
        for op in self.ops:
            for t in dict.fromkeys(op.inputs):
                key = (t.op.name, op.name)
                nbytes[key] = nbytes.get(key, 0) + self.tensors[t.name].nbytes
            for dep in sorted(op.control_inputs, key=lambda d: d.name):  # TensorFlow's order varies by process
                nbytes.setdefault((dep.name, op.name), 0)
        return [Edge(src, dst, b) for (src, dst), b in nbytes.items() if src != dst]

    def _warn_unknown(self) -> None:
        unread = [name for name, t in self.tensors.items() if t.shape is None and t.kind == "data"]
        if unread:
            logger.warning("%s: %d output(s) of unknown shape that no op reads count 0 bytes: %s",
                           self.where, len(unread), ", ".join(unread[:5]))


def _merge_dims(inferred: Any, recorded: Any) -> tuple[int, ...] | None:
    """Dimensions from shape inference, each unknown one filled from the recorded ``_output_shapes``."""
    dims = None if inferred.rank is None else [-1 if d is None else int(d) for d in inferred.as_list()]
    if recorded is not None and not recorded.unknown_rank:
        rec = [int(d.size) for d in recorded.dim]
        if dims is None:
            dims = rec
        elif len(rec) == len(dims):
            dims = [d if d >= 0 else r for d, r in zip(dims, rec, strict=True)]
    return None if dims is None else tuple(dims)


def _tensor(dims: tuple[int, ...] | None, dtype: Any, kind: str) -> _Tensor:
    if kind == "resource" or dtype.base_dtype.name in _NO_TENSOR:
        return _Tensor(dims if dims is not None and min(dims, default=0) >= 0 else (), 0, kind, dims or ())
    if dims is None or min(dims, default=0) < 0:
        return _Tensor(None, 0, kind, dims or ())
    return _Tensor(dims, math.prod(dims) * _itemsize(dtype), kind, dims)


def _itemsize(dtype: Any) -> int:
    base = dtype.base_dtype
    if base.name in _NO_TENSOR:
        return 0
    return _STRING_BYTES if base.name == "string" else int(base.size)


@functools.cache
def _gpu_kernel_lookup() -> Callable[[str], bool] | None:
    """Whether an op type has a GPU kernel, from TensorFlow's kernel registry; ``None`` on a CPU-only build."""
    from tensorflow.python.framework import kernels

    def has_gpu(op_type: str) -> bool:
        try:
            return any(k.device_type == "GPU" for k in kernels.get_registered_kernels_for_op(op_type).kernel)
        except Exception:  # an op type the registry does not know: assume it has one
            return True

    return functools.cache(has_gpu) if has_gpu("MatMul") else None


# ---------------------------------------------------------------------- FLOPs of TensorFlow layouts
def _cost_attrs(node: Any) -> dict[str, Any]:
    """The attributes the FLOP rules read (transposes, pooling window, einsum equation), from the NodeDef."""
    attrs: dict[str, Any] = {}
    if node is None:
        return attrs
    for key in ("transpose_a", "adj_x"):
        if key in node.attr:
            attrs[key] = node.attr[key].b
    if "ksize" in node.attr:
        attrs["ksize"] = list(node.attr["ksize"].list.i)
    if "equation" in node.attr:
        attrs["equation"] = node.attr["equation"].s.decode()
    return attrs


def _tf_flops(op_type: str, ins: Sequence[TensorSpec], outs: Sequence[TensorSpec],
              attrs: dict[str, Any]) -> float | None:
    """FLOPs of ops whose TensorFlow layout the generic rules do not fit; ``None``: use the generic rule."""
    rule = _TF_RULES.get(op_type)
    if rule is None:
        return None
    try:
        return float(rule(ins, outs, attrs))
    except (IndexError, ValueError, ZeroDivisionError):
        return 0.0  # shapes do not fit: memory traffic only


def _matmul(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: dict[str, Any]) -> float:
    a = ins[0].shape
    k = a[-2] if attrs.get("transpose_a") or attrs.get("adj_x") else a[-1]
    return 2.0 * outs[0].numel * k


def _per_output(filter_shape: tuple[int, ...], depthwise: bool) -> int:
    """Multiply-adds per output element of an ``HWIO`` (or depthwise ``HWCM``) filter."""
    return math.prod(filter_shape[:-2]) if depthwise else math.prod(filter_shape[:-1])


def _conv_rule(grad_input: int | None, filter_of: str, depthwise: bool) -> Callable[..., float]:
    """Forward conv (``grad_input=None``) or a backprop op reading the output gradient at ``grad_input``."""

    def rule(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: dict[str, Any]) -> float:
        w = ins[1].shape if filter_of == "input" else outs[0].shape
        out = outs[0] if grad_input is None else ins[grad_input]
        return 2.0 * out.numel * _per_output(w, depthwise)

    return rule


def _pool_rule(grad_input: int | None) -> Callable[..., float]:
    def rule(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: dict[str, Any]) -> float:
        out = outs[0] if grad_input is None else ins[grad_input]
        return float(out.numel * math.prod(int(k) for k in attrs.get("ksize", ())))

    return rule


_TF_RULES: dict[str, Callable[..., float]] = {
    **dict.fromkeys(["MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"], _matmul),
    **dict.fromkeys(["Conv2D", "Conv3D", "Conv"], _conv_rule(None, "input", False)),
    "DepthwiseConv2dNative": _conv_rule(None, "input", True),
    **dict.fromkeys(["Conv2DBackpropInput", "Conv3DBackpropInputV2"], _conv_rule(2, "input", False)),
    **dict.fromkeys(["Conv2DBackpropFilter", "Conv3DBackpropFilterV2"], _conv_rule(2, "output", False)),
    "DepthwiseConv2dNativeBackpropInput": _conv_rule(2, "input", True),
    "DepthwiseConv2dNativeBackpropFilter": _conv_rule(2, "output", True),
    **dict.fromkeys(["MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D"], _pool_rule(None)),
    **dict.fromkeys(["MaxPoolGrad", "MaxPool3DGrad"], _pool_rule(2)),
    **dict.fromkeys(["AvgPoolGrad", "AvgPool3DGrad"], _pool_rule(1)),
}
