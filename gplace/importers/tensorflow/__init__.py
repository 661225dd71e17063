"""Import a TensorFlow program into gplace's op graph.

This package and :mod:`gplace.zoo.keras_models` are the only places in gplace that import ``tensorflow``; they
import it lazily, inside the functions. Its modules: this one (:func:`from_tensorflow`, :class:`TensorFlowSource`),
:mod:`.tracing` (any input to a GraphDef), :mod:`.functions` (a concrete function's captures made nodes),
:mod:`.saved_model`, :mod:`.keras_step` (a Keras model's inference or training step), :mod:`.graph_checks` (control
flow and registered ops refused, calls inlined, batch dimensions fixed), :mod:`.builder` (a GraphDef to ops and
edges), :mod:`.costs` (FLOPs of TensorFlow layouts), :mod:`.training` (a training step's phases), :mod:`.op_types`
and :mod:`.errors`.

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
- **Pruning**: as TensorFlow prunes a function's body before running it, only the inputs and the nodes that the
  fetched outputs or a stateful op (a variable's assignment, the optimiser's update, a random op, an ``Assert``;
  not a variable's handle) depend on, through data or control edges, are kept (in the kept GraphDef too): an
  unused ``tf.matmul`` in a function, a Keras training step's gradient of the model's input
  (``Conv2DBackpropInput`` of a first convolution), a Keras RNN's step-0 cell that it computes outside its loop
  only for the output's dtype are not imported. A GraphDef without ``outputs=`` fetches every node nothing reads.
- **Shapes and dtypes**: TensorFlow's shape inference on import, merged with the ``_output_shapes`` attribute
  where the GraphDef has one. A placeholder's unknown leading (batch) dimension takes ``batch_size``, in the
  kept GraphDef too (a function or Keras model is traced at that batch), so the placed program runs at that batch
  size only. A ``batch_size`` that sets no input while an input's leading dimension is fixed at another size
  (``keras.Input((64,), batch_size=5)`` imported at ``batch_size=3``) is refused, naming the input. A
  **ragged or sparse input** of a function or Keras model (``tf.RaggedTensorSpec``,
  ``tf.SparseTensorSpec``, anywhere in a nest of its arguments; ``keras.Input(sparse=True)`` or ``ragged=True``) is
  refused, naming it (``x``, ``d['b']``): the count of its values, which sizes its component tensors, is known only
  at run time and no argument sets it; the message says which dense inputs to trace at instead (a padded tensor, or
  the components as ``tf.TensorSpec`` of fixed sizes, rebuilt inside). A ragged or sparse output is fetched as its
  component tensors, sized as any other. A tensor
  that some op reads and whose shape is still unknown is an error naming its node (the reduction axes that
  ``BroadcastGradientArgs`` computes count at their bound, the rank). Bytes are ``numel * itemsize``;
  strings count 8 bytes an element (an estimate), resource handles and variants 0, except ``TensorList``
  variants (a loop's sequences, as a Keras RNN's): one made by ``TensorListFromTensor`` carries its tensor's
  bytes; one made by ``TensorListReserve`` carries nothing (its elements are not set) but can hold
  ``num_elements`` x ``element_shape`` when both are constants; a ``While`` output carries what its input list
  can hold (the loop is taken to fill it), else what the input carries; ``Identity`` passes a list on. A
  ``While``'s list output of unknown capacity (a ``TensorArray`` of the default ``element_shape``) that a
  ``TensorListStack`` of known output shape reads (directly or through ``Identity``) holds what the stack returns;
  one that nothing sizes counts 0 bytes, with a warning naming it.
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
  gradients) counted here (the DEBUG log of :mod:`gplace.costmodel` names the op types really left at 0 FLOPs,
  none of these; shapes that do not fit one of these rules are logged by :mod:`.costs`). Bookkeeping ops
  (``NoOp``, ``Const``, ``Placeholder``, variables, reads, reshapes, identities; :data:`FREE_OPS`) cost 0.
- **Phases** (a Keras training step only; :func:`training_phases`): ops under TensorFlow's ``gradient_tape/``
  name scope (not variables or inputs: a layer named ``gradient_tape`` has its variable nodes there), the other
  ops ``tape.gradient`` made while tracing (its seed ``ones``), and those of the gradient functions they call
  (inlined: a Keras grouped ``Conv2D``'s ``PartitionedCall/gradients/...``), are ``backward`` (with ``grad_of``
  the forward op their name points to, where it is one; for a called gradient function's, in the forward call
  whose outputs it reads); every op the optimiser's ``apply_gradients`` made while tracing (those that read no
  gradient too: learning rate, step counter, bias corrections, weight decay), every other op that depends on a
  gradient, and what runs after them are ``update``; the rest ``forward`` (a batch normalisation's moving
  averages, updated in the forward pass, too).
- **Control flow**: functional ``While``, ``If`` and ``Case`` (TensorFlow 2's, e.g. a Keras ``LSTM``) are one op
  each, placed as a unit (their functions run where they run), colocated with the variables they read. The cost
  is that of one call of their functions' ops (shapes inferred from the op's inputs; a variable read inside
  has the variable's shape): an ``If``'s or ``Case``'s dearer branch, a ``While``'s condition and body times
  its trip count where its ``maximum_iterations`` is computed from constants only, else one pass, with a
  warning. Ops of a function whose shapes stay unknown count 0 seconds, with a warning. While it runs, the op
  holds what one call of its functions holds at once, their ops run in order (what a function returns not
  counted; the most of its functions), as ``temporary_memory``. v1 control flow
  (``Enter``/``Exit``/``Switch``/``Merge``) is not handled: an :class:`~gplace.ir.UnsupportedGraphError`
  names the node.

No TensorFlow or protobuf exception leaves :func:`from_tensorflow`: each becomes an
:class:`~gplace.ir.UnsupportedGraphError` naming the node or the stage that failed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gplace.importers.tensorflow.builder import Builder, import_graph_def
from gplace.importers.tensorflow.errors import wrap_errors
from gplace.importers.tensorflow.graph_checks import prepare
from gplace.importers.tensorflow.op_types import CONTROL_FLOW_OPS, CPU_ONLY_OPS, FREE_OPS, FUNCTIONAL_CONTROL_FLOW
from gplace.importers.tensorflow.tracing import is_keras_model, trace
from gplace.importers.tensorflow.training import GRADIENT_SCOPE, training_phases
from gplace.ir import GraphError, OpGraph, UnsupportedGraphError
from gplace.ir.errors import check_flags, error_summary, name_list

__all__ = [
    "CONTROL_FLOW_OPS", "CPU_ONLY_OPS", "FREE_OPS", "FUNCTIONAL_CONTROL_FLOW", "GRADIENT_SCOPE", "TensorFlowSource",
    "from_tensorflow", "training_phases",
]

logger = logging.getLogger(__name__)


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
    input_names: tuple[str, ...] = ()
    """The program's own name of each of :attr:`inputs`, in their order, where the tensor names do not keep it: a
    Keras model's input names (``"in:1"`` is fed by a placeholder ``in_1``, and an input ``"in_1"`` beside it by
    ``in_1_1``), then a training step's targets (``y0``, ...) by their tensor names; empty for other programs."""

    def variable_values(self, names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """Node name -> value of each of :attr:`variables` (those in ``names``). With eager execution off
        (``tf.compat.v1.disable_eager_execution()``) a variable's value lives in a session: they are read in the
        default one (``with session.as_default():``), which must have initialised them.

        Raises:
            UnsupportedGraphError: eager execution is off and there is no default session, or it cannot read a
                variable (not initialised there, or of another graph).
        """
        wanted = set(self.variables) if names is None else set(names)
        variables = {name: v for name, v in self.variables.items() if name in wanted}
        tf = _import_tf()
        if not variables or tf.executing_eagerly():
            return {name: np.asarray(v.numpy()) for name, v in variables.items()}
        return _session_values(tf, variables)


def from_tensorflow(
    obj: Any,
    *,
    training: bool = False,
    batch_size: int | None = None,
    name: str | None = None,
    loss: Any = None,
    optimizer: Any = None,
    outputs: str | Iterable[str] | None = None,
    signature: str | None = None,
) -> OpGraph:
    """Import a TensorFlow program as an op graph (see the package docstring for the mapping).

    With eager execution off (``tf.compat.v1.disable_eager_execution()``) it imports as usual; running the graph
    (``tf-v1``) or exporting it then reads its variables' values in the default session
    (:meth:`TensorFlowSource.variable_values`).

    Args:
        obj: a ``GraphDef``, a path (a str or ``os.PathLike``) to a GraphDef file (``.pb``, ``.pbtxt``) or to a
            SavedModel directory, a ``tf.Graph``, a ``tf.function`` with an ``input_signature``, a concrete
            function, or a Keras model.
        training: for a Keras model, import one training step (forward, loss, gradients, optimiser update)
            instead of inference. Other programs are imported as they are. (default: ``False``)
        batch_size: size of an unknown leading (batch) dimension of the ``Placeholder`` inputs (a
            ``PlaceholderWithDefault``'s is not set). It is written into the kept GraphDef (a function or Keras
            model is traced at it), so the placed program runs at the batch size it was imported with; import
            again for another. Refused where it sets no input and an input's leading dimension is fixed at another
            size. It sizes no ragged or sparse input (refused: the package docstring). (default:
            ``None``, an unknown dimension is an error)
        name: graph name. (default: the model's, function's, file's or ``"tensorflow"``)
        loss: training loss of a Keras model: a Keras loss name, a loss object or a callable
            ``(y_true, y_pred) -> scalar``. Targets are fed like the outputs, or as integer class ids without
            the last axis for a ``sparse_*`` loss. (default: the model's compiled loss with its ``loss_weights``,
            else mean squared error). As in Keras's own training step, the model's ``losses`` (regularisers,
            ``add_loss``) are added, and the gradients are of the optimiser's ``scale_loss`` of the total (a
            ``LossScaleOptimizer``'s, as ``mixed_float16`` compiles one, scales it up; its update scales back).
        optimizer: training optimiser of a Keras model, a Keras optimiser or its name. (default: the model's
            compiled optimiser, else ``"sgd"``)
        outputs: for a GraphDef (or its file) or ``tf.Graph``, the name of the node (or tensor) one step runs, or
            an iterable of names; only they and what they depend on are imported. Refused for other programs,
            which are imported with their own outputs. (default: every node)
        signature: for a SavedModel directory, the signature to import. (default: ``serving_default``, else the
            first by name)

    Returns:
        The op graph; its ``source`` is a :class:`TensorFlowSource`.

    Raises:
        TypeError: ``obj`` is none of the above, or ``outputs`` not a name or names.
        ValueError: ``batch_size`` is not a positive int, or ``training`` not ``True`` or ``False``.
        FileNotFoundError: a path that does not exist.
        UnsupportedGraphError: the program cannot be imported; the message names the node (or the stage) and
            the reason (control flow, an unknown dimension, an unregistered op, a failed trace, a ragged or sparse
            input of a function or Keras model, named, an input whose fixed batch is not ``batch_size``, ...); or
            ``signature`` is given for what is not a SavedModel, or names none of its signatures (lists them); or
            ``outputs`` for what is not a GraphDef or ``tf.Graph``.
    """
    check_flags("from_tensorflow", training=training)  # "false" imported the training step
    if training and not is_keras_model(obj):
        raise UnsupportedGraphError("training=True needs a Keras model; other programs are imported as given")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive int or None, got {batch_size!r}")
    outputs = None if outputs is None else tuple(name_list(outputs, "from_tensorflow: outputs", "['logits']"))
    tf = _import_tf()
    if signature is not None and not isinstance(obj, str | os.PathLike):
        raise UnsupportedGraphError(f"signature={signature!r} names a signature of a SavedModel directory; "
                                    f"got a {type(obj).__name__}")
    traced = trace(tf, obj, training, batch_size, loss, optimizer, outputs, signature)
    graph_name = name or traced.name
    where = f"TensorFlow graph {graph_name!r}"
    with wrap_errors(where):
        graph_def = prepare(tf, traced, batch_size, where)
        with wrap_errors(f"{where}: TensorFlow could not import it"):
            graph = import_graph_def(tf, graph_def)
        ops, edges = Builder(tf, graph, graph_def, where, batch_size, traced.at_batch).build()
    if training:
        ops = training_phases(ops, edges, traced.phases)
    names = {node.name for node in graph_def.node}
    resources = tuple(r for r in traced.resources if r in names)
    if resources:
        logger.warning("%s: captured resource(s) without a value stay placeholders (lookup tables, or the variables "
                       "of a function graph's GraphDef: import the function itself): %s; the graph can be placed and "
                       "simulated, not run by tf-v1", where, ", ".join(resources[:5]))
    source = TensorFlowSource(graph_def, traced.inputs, traced.outputs,
                              {k: v for k, v in traced.variables.items() if k in names}, resources,
                              traced.output_names, traced.input_names)
    try:
        return OpGraph.from_ops(ops, edges, name=graph_name, source=source)
    except GraphError as err:
        raise UnsupportedGraphError(f"{where}: {err}") from None


def _session_values(tf: Any, variables: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The variables' values read in the default session (eager execution is off)."""
    names = ", ".join(repr(name) for name in list(variables)[:3]) + (", ..." if len(variables) > 3 else "")
    session = tf.compat.v1.get_default_session()
    if session is None:
        raise UnsupportedGraphError(f"eager execution is off: the values of variables {names} live in a session; "
                                    "call this inside `with session.as_default():` of the session that initialised "
                                    "them, or keep eager execution on")
    try:
        values = session.run(list(variables.values()))
    except (tf.errors.OpError, TypeError, ValueError) as err:
        raise UnsupportedGraphError(f"eager execution is off, and the default session cannot read variables {names} "
                                    f"(initialise them in it): {type(err).__name__}: {error_summary(err)}") from None
    return {name: np.asarray(value) for name, value in zip(variables, values, strict=True)}


def _import_tf() -> Any:
    from gplace.tensorflow_setup import import_tensorflow

    return import_tensorflow()
