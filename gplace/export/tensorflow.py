"""Write a placement back into the TensorFlow program it was imported from (:func:`gplace.from_tensorflow`).

``tensorflow`` is imported only inside the functions of this module.

:func:`place_graph_def` returns a copy of the graph's self-contained ``GraphDef`` (one node per op, same names;
see :class:`~gplace.importers.tensorflow.TensorFlowSource`) with every ``NodeDef.device`` set from the
placement: cluster device ``"/CPU:i"`` becomes ``"/device:CPU:i"``, ``"/GPU:i"`` ``"/device:GPU:i"``
(:func:`~gplace.runtime.tf_runtime.tf_device`; ``device_map`` renames others). :func:`session_config` is a
``ConfigProto`` that runs it as placed: soft placement off, as many logical CPU devices as the placement uses.
Variables stay handles (``VarHandleOp``) as in the imported GraphDef: initialise or restore them as for any
GraphDef.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gplace.importers.tensorflow import TensorFlowSource
from gplace.ir import Cluster, InvalidPlacementError, OpGraph, Placement, UnsupportedGraphError
from gplace.runtime.tf_runtime import tf_device


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
        UnsupportedGraphError: ``graph`` was not imported from TensorFlow, or its GraphDef and ops differ.
        InvalidPlacementError: the placement is not for ``graph`` and ``cluster``, or a device maps to no
            TensorFlow device (names it).
    """
    source = _source(graph)
    placement.validate(graph, cluster)
    names = {d: _tf_name(name, device_map) for d, name in enumerate(cluster.device_names)}
    placed = type(source.graph_def)()
    placed.CopyFrom(source.graph_def)
    devices = placement.devices.tolist()
    for node in placed.node:
        i = graph.op_index.get(node.name)
        if i is None:
            raise UnsupportedGraphError(f"node {node.name!r} of the GraphDef is not an op of graph {graph.name!r}")
        node.device = names[devices[i]]
    if len(placed.node) != graph.num_ops:
        raise UnsupportedGraphError(f"graph {graph.name!r} has {graph.num_ops} ops but its GraphDef "
                                    f"{len(placed.node)} nodes")
    return placed


def session_config(graph_def: Any) -> Any:
    """A ``tf.compat.v1.ConfigProto`` that runs ``graph_def`` as placed: no soft placement, one logical CPU device
    per ``/device:CPU:i`` it names (GPUs as the machine has them)."""
    import tensorflow as tf

    cpus = 1 + max((int(n.device.rpartition(":")[2]) for n in graph_def.node if "CPU:" in n.device), default=0)
    return tf.compat.v1.ConfigProto(device_count={"CPU": cpus}, allow_soft_placement=False)


def _tf_name(name: str, device_map: Mapping[str, str] | None) -> str:
    try:
        return tf_device(name, device_map)
    except ValueError as err:
        raise InvalidPlacementError(str(err)) from None


def _source(graph: OpGraph) -> TensorFlowSource:
    if not isinstance(graph.source, TensorFlowSource):
        raise UnsupportedGraphError(f"graph {graph.name!r} was not imported from TensorFlow "
                                    "(gplace.from_tensorflow); it has no GraphDef to write a placement into")
    return graph.source
