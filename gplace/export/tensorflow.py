"""Write a placement back into the TensorFlow program it was imported from (:func:`gplace.from_tensorflow`).

``tensorflow`` is imported only inside the functions of this module.

:func:`place_graph_def` returns a copy of the graph's self-contained ``GraphDef`` (one node per op, same names;
see :class:`~gplace.importers.tensorflow.TensorFlowSource`) with every ``NodeDef.device`` set from the
placement (a device written inside a function, a ``While``'s or ``If``'s body, is dropped but the first CPU: the op
runs its body where it is placed): cluster device ``"/CPU:i"`` becomes ``"/device:CPU:i"``, ``"/GPU:i"``
``"/device:GPU:i"`` (:func:`~gplace.runtime.tf_runtime.tf_device`; ``device_map`` renames others).
:func:`session_config` is a ``ConfigProto`` that runs it as placed: soft placement off, as many logical CPU
devices as the placement uses, no graph rewriting.
Variables stay handles (``VarHandleOp``) as in the imported GraphDef: initialise or restore them as for any
GraphDef.

:func:`save_saved_model` writes the placed program as a SavedModel (TensorFlow's v1 layout, which keeps each
node's device): the placed GraphDef, one signature with the source's inputs and outputs, and the weights of the
program's variables (a function's, SavedModel's or Keras model's, kept by the importer) as constants its
``main_op`` assigns on load, each on its variable's device. The weights travel inside the graph, so the model
is bounded by protobuf's 2 GB.

The placed program (GraphDef or SavedModel) runs at the batch size it was imported with: ``from_tensorflow``'s
``batch_size`` is written into its input placeholders, and a function or Keras model is traced at it, so shapes
inside are fixed too. Import again with another ``batch_size`` for another.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gplace.export.parts import check_types, framework_devices
from gplace.importers.tensorflow import TensorFlowSource
from gplace.ir import Cluster, OpGraph, Placement, UnsupportedGraphError
from gplace.ir.errors import name_list
from gplace.ir.serialize import as_path, staged
from gplace.runtime.tf_runtime import as_placed, tf_device, with_devices


def place_graph_def(graph: OpGraph, cluster: Cluster, placement: Placement, *,
                    device_map: Mapping[str, str] | None = None) -> Any:
    """A copy of ``graph``'s ``GraphDef`` with each node's ``device`` set from ``placement``.

    Args:
        graph: imported with :func:`gplace.from_tensorflow`.
        cluster: the devices.
        placement: the placement of ``graph`` on ``cluster``.
        device_map: cluster device name -> TensorFlow device, for names that are not ``/CPU:i`` or ``/GPU:i``
            (default: none).

    Raises:
        TypeError: ``graph``, ``cluster`` or ``placement`` is of the wrong type (names it).
        UnsupportedGraphError: ``graph`` was not imported from TensorFlow, or its GraphDef and ops differ.
        InvalidPlacementError: the placement is not for ``graph`` and ``cluster``, a device maps to no
            TensorFlow device, or two cluster devices map to one (names them).
    """
    check_types(graph, cluster, placement)
    source = _source(graph)
    placement.validate(graph, cluster)
    names = framework_devices(cluster, tf_device, device_map)
    devices = placement.devices.tolist()
    node_devices = {}
    for node in source.graph_def.node:
        i = graph.op_index.get(node.name)
        if i is None:
            raise UnsupportedGraphError(f"node {node.name!r} of the GraphDef is not an op of graph {graph.name!r}")
        node_devices[node.name] = names[devices[i]]
    if len(source.graph_def.node) != graph.num_ops:
        raise UnsupportedGraphError(f"graph {graph.name!r} has {graph.num_ops} ops but its GraphDef "
                                    f"{len(source.graph_def.node)} nodes")
    return with_devices(source.graph_def, node_devices)


def session_config(graph_def: Any) -> Any:
    """A ``tf.compat.v1.ConfigProto`` that runs ``graph_def`` as placed: no soft placement, one logical CPU device
    per ``/device:CPU:i`` it names (GPUs as the machine has them), each GPU's memory taken as it is needed
    (``allow_growth``; TensorFlow's default reserves most of every GPU at the session's start), and no graph
    rewriting, as ``tf-v1`` measures (:func:`~gplace.runtime.tf_runtime.as_placed`): Grappler's remapper fuses
    ``MatMul`` + ``BiasAdd`` + ``Relu`` into one op on the ``MatMul``'s device whatever their devices."""
    import tensorflow as tf

    cpus = 1 + max((int(n.device.rpartition(":")[2]) for n in graph_def.node if "CPU:" in n.device), default=0)
    return as_placed(tf.compat.v1.ConfigProto(device_count={"CPU": cpus}, allow_soft_placement=False))


def save_saved_model(graph: OpGraph, cluster: Cluster, placement: Placement, export_dir: str | Path, *,
                     device_map: Mapping[str, str] | None = None, signature: str = "serving_default",
                     tags: Iterable[str] | str = ("serve",)) -> Path:
    """Write the placed program of ``graph`` as a SavedModel in ``export_dir`` (module docstring).

    Load it with ``tf.compat.v1.saved_model.loader.load(session, ["serve"], export_dir)`` (its ``tags``) in a
    session with :func:`session_config`. The signature's input keys are a Keras model's input names
    (:attr:`~gplace.importers.tensorflow.TensorFlowSource.input_names`) where they are Python names (as
    ``tf.saved_model.load`` requires of a signature's arguments), else the tensor names without ``":0"`` (e.g.
    ``"x"``, ``"in_1"`` for a Keras input ``"in:1"``); its output keys are the program's own output names where the
    importer kept them (:attr:`~gplace.importers.tensorflow.TensorFlowSource.output_names`: a SavedModel signature's
    keys, the keys of a dict a function or Keras model returns, a multi-output Keras model's ``output_names``), else
    the tensor names likewise, with ``"_N"`` for output ``N`` > 0 of an op (``"split:1"`` is ``"split_1"``). It
    takes inputs of the batch size the graph was imported with (module docstring). ``tags`` is a tag or several;
    ``signature`` the signature's key. It is written in a folder beside ``export_dir`` and renamed there once whole,
    so an interrupted save leaves no ``export_dir``.

    Raises:
        TypeError: ``graph``, ``cluster`` or ``placement`` is of the wrong type, ``signature`` is not a str or
            ``tags`` not tags (names it; before anything is written).
        ValueError: ``signature`` is empty.
        UnsupportedGraphError: ``graph`` was not imported from TensorFlow, or a variable's value is unknown (a
            GraphDef holds none; import the function, SavedModel or Keras model instead; a SavedModel's in-graph
            variable whose value is neither in its init op nor in its checkpoint), or the program captures
            a resource other than a variable (a lookup table), or an output is a node without outputs (a
            ``NoOp``); names the node; or two inputs would share a signature key (Keras inputs ``"in:1"`` and
            ``"in_1"``), naming them; or eager execution is off and the default session does not hold the
            variables' values (:meth:`~gplace.importers.tensorflow.TensorFlowSource.variable_values`).
        InvalidPlacementError: as :func:`place_graph_def`.
        FileExistsError: ``export_dir`` exists.
    """
    check_types(graph, cluster, placement)
    tags = name_list(tags, "save_saved_model: tags", "('serve',)")
    if not isinstance(signature, str):  # TF failed after creating export_dir: "bad argument type for built-in ..."
        raise TypeError(f"save_saved_model: signature must be a str such as 'serving_default', got {signature!r}")
    if not signature:
        raise ValueError("save_saved_model: signature must be a key such as 'serving_default', got ''")
    source = _source(graph)  # a graph from TensorFlow: tensorflow is installed
    import tensorflow as tf

    placed = place_graph_def(graph, cluster, placement, device_map=device_map)
    fed = {t.rpartition(":")[0] for t in source.inputs}
    for node in placed.node:
        if node.op in ("VarHandleOp", "VariableV2", "Variable") and node.name not in source.variables:
            raise UnsupportedGraphError(f"variable {node.name!r} of graph {graph.name!r} has no value (a GraphDef "
                                        "holds none; in a function, SavedModel or Keras model the importer found "
                                        "none for it); a SavedModel needs its weights")
        resource = node.op == "Placeholder" and node.attr["dtype"].type == tf.resource.as_datatype_enum
        if resource and node.name not in fed:
            raise UnsupportedGraphError(f"node {node.name!r} of graph {graph.name!r} is a captured resource (a lookup "
                                        "table, a dataset, ...) that a SavedModel written from the GraphDef cannot "
                                        "hold; only variables are restored")
    for name in source.outputs:
        if ":" not in name:
            raise UnsupportedGraphError(f"output {name!r} of graph {graph.name!r} is a node without outputs (a "
                                        "NoOp): a SavedModel's signature holds tensors; import it with outputs= "
                                        "naming the tensors to serve")
    input_keys = _input_keys(source)
    export_dir = as_path(export_dir, "save_saved_model: export_dir")
    if export_dir.exists():
        raise FileExistsError(f"SavedModel directory {str(export_dir)!r} exists; give a new one")
    values = source.variable_values()
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.graph_util.import_graph_def(placed, name="")
        restore = tf.group(*[_assign(tf, tf_graph.get_operation_by_name(name), value)
                             for name, value in values.items()], name="gplace_restore_weights")
        info = tf.compat.v1.saved_model.utils.build_tensor_info
        signature_def = tf.compat.v1.saved_model.signature_def_utils.build_signature_def(
            inputs={key: info(tf_graph.get_tensor_by_name(t)) for key, t in input_keys.items()},
            outputs={key: info(tf_graph.get_tensor_by_name(t))
                     for key, t in _signature_keys(source.outputs, source.output_names).items()},
            method_name=tf.compat.v1.saved_model.signature_constants.PREDICT_METHOD_NAME)
        with staged(export_dir.parent, [export_dir.name]) as stage:  # Ctrl-C mid-save leaves no export_dir
            builder = tf.compat.v1.saved_model.Builder(str(stage / export_dir.name))
            with tf.compat.v1.Session(graph=tf_graph, config=session_config(placed)) as session:
                builder.add_meta_graph_and_variables(session, tags, signature_def_map={signature: signature_def},
                                                     main_op=restore, clear_devices=False)
            builder.save()
    return export_dir


def _signature_keys(tensors: Sequence[str], names: Sequence[str] = ()) -> dict[str, str]:
    """Signature key -> tensor: ``names[i]`` for ``tensors[i]`` where ``names`` are given, else ``"x"`` for
    ``"x:0"`` and ``"split_1"`` for ``"split:1"``.

    Raises:
        UnsupportedGraphError: two tensors would share a key (``"a:1"`` beside a tensor ``"a_1:0"``).
    """
    keys: dict[str, str] = {}
    for i, tensor in enumerate(tensors):
        key = names[i] if len(names) == len(tensors) else _tensor_key(tensor)
        if key in keys:
            raise UnsupportedGraphError(f"tensors {keys[key]!r} and {tensor!r} would share the signature key {key!r}")
        keys[key] = tensor
    return keys


def _input_keys(source: TensorFlowSource) -> dict[str, str]:
    """Signature key -> input tensor: the input's own name (:attr:`TensorFlowSource.input_names`, a Keras model's)
    where it is an argument name (:func:`_argument_name`), else its tensor's key (:func:`_tensor_key`).

    Raises:
        UnsupportedGraphError: two inputs would share a key (Keras inputs ``"in:1"`` and ``"in_1"``, fed by
            ``in_1:0`` and ``in_1_1:0``, both ``"in_1"``), naming them.
    """
    names = source.input_names if len(source.input_names) == len(source.inputs) else ("",) * len(source.inputs)
    keys: dict[str, str] = {}
    labels: dict[str, str] = {}
    for name, tensor in zip(names, source.inputs, strict=True):
        key = name if _argument_name(name) else _tensor_key(tensor)
        label = f"{name!r} (tensor {tensor!r})" if name else repr(tensor)
        if key in keys:
            raise UnsupportedGraphError(f"inputs {labels[key]} and {label} would share the signature key {key!r} (an "
                                        "input's name where it is a Python name, as TensorFlow requires of a "
                                        "signature's arguments, else its tensor's name); rename one")
        keys[key], labels[key] = tensor, label
    return keys


def _argument_name(name: str) -> bool:
    """Whether ``name`` is a signature key that ``tf.saved_model.load`` keeps as its argument's name (it renames
    others, ``"in:1"`` to ``"in_1"``, so two may clash)."""
    return name[:1].isalpha() and all(c.isalnum() or c == "_" for c in name)


def _tensor_key(tensor: str) -> str:
    """``"x"`` for ``"x:0"``, ``"split_1"`` for ``"split:1"``."""
    name, _, port = tensor.rpartition(":")
    return name if port == "0" else f"{name}_{port}"


def _assign(tf: Any, handle: Any, value: Any) -> Any:
    """An op assigning ``value`` (an array) to the variable node ``handle``, on its device."""
    with tf.device(handle.device):
        value = tf.constant(value, name=f"{handle.name}/gplace_value")
        if handle.type == "VarHandleOp":
            return tf.raw_ops.AssignVariableOp(resource=handle.outputs[0], value=value)
        return tf.compat.v1.assign(handle.outputs[0], value)


def _source(graph: OpGraph) -> TensorFlowSource:
    if not isinstance(graph.source, TensorFlowSource):
        raise UnsupportedGraphError(f"graph {graph.name!r} was not imported from TensorFlow "
                                    "(gplace.from_tensorflow); it has no GraphDef to write a placement into")
    return graph.source
