"""Write a placement back into the ONNX model it was imported from (:func:`gplace.from_onnx`).

``onnx`` and ``onnxruntime`` are imported only inside the functions of this module.

- :func:`annotate_onnx`: the model with ONNX's own multi-device fields filled in: ``ModelProto.configuration``
  names the cluster (one ``DeviceConfigurationProto``: the cluster's name, its device count and device names),
  and each node's ``device_configurations`` holds one ``NodeDeviceConfigurationProto`` (that configuration, a
  ``ShardingSpecProto`` per output tensor naming the node's device index, unsharded, and the node's
  ``pipeline_stage``: its part in run order, see :mod:`gplace.export.parts`). Each node's ``metadata_props``
  also gets :data:`DEVICE_KEY` (the device's name) and :data:`STAGE_KEY`, for tools that read only metadata.
  Nodes inside subgraphs (an ``If``'s branches, a ``Loop``'s body) and local functions get neither, and lose
  those an earlier tool wrote: they run where the node holding them is placed. The model keeps its
  ``ir_version``, though the fields are IR 11's (node metadata IR 10's): onnxruntime 1.21 and 1.22 refuse to
  load an IR 11 model.
- :func:`split_onnx`: one ONNX model per part (one per device where the devices' data flow has no cycle), with
  the cut tensors as graph inputs and outputs; :func:`run_parts` runs them in order with onnxruntime.

The model written is the imported one: input dimensions that were dynamic carry the shapes given to
``from_onnx``, and inferred shapes are recorded in ``value_info``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gplace.export.parts import Part, check_types, device_parts, part_of
from gplace.importers.onnx import OnnxSource, node_reads
from gplace.importers.onnx.tensors import subgraphs
from gplace.ir import Cluster, OpGraph, Placement, UnsupportedGraphError
from gplace.ir.errors import name_list
from gplace.ir.serialize import atomic_path, write_bytes_atomic, write_error

if TYPE_CHECKING:
    from onnx import ModelProto
else:  # typing.get_type_hints resolves the annotations without importing onnx
    ModelProto = Any

logger = logging.getLogger(__name__)

DEVICE_KEY = "pkg.gplace.device"
"""``metadata_props`` key holding a node's device name."""
STAGE_KEY = "pkg.gplace.stage"
"""``metadata_props`` key holding a node's stage (its part in run order)."""


@dataclass(frozen=True)
class OnnxPart:
    """One device's share of the model: a runnable ONNX model reading and writing named tensors."""

    device: str
    """Cluster device name."""
    model: ModelProto
    """``onnx.ModelProto``: the part's nodes, the initialisers they read, cut tensors as inputs and outputs."""
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    base_dir: str | None = None
    """Where the original model's external weight data lives, for initialisers the part reads from there."""


def annotate_onnx(graph: OpGraph, cluster: Cluster, placement: Placement) -> ModelProto:
    """A copy of ``graph``'s ONNX model with every node's device and stage written in (module docstring).

    Raises:
        TypeError: ``graph``, ``cluster`` or ``placement`` is of the wrong type (names it).
        UnsupportedGraphError: ``graph`` was not imported from ONNX.
        InvalidPlacementError: the placement is not for ``graph`` and ``cluster`` (names the op and device).
    """
    check_types(graph, cluster, placement)
    source = _source(graph)  # a graph from ONNX: onnx is installed
    stage = _node_stages(graph, cluster, placement, source)
    import onnx

    model = onnx.ModelProto()
    model.CopyFrom(source.model)
    del model.configuration[:]
    model.configuration.add(name=cluster.name, num_devices=cluster.num_devices, device=list(cluster.device_names))
    devices = placement.devices
    for op, k in source.node_index.items():
        node, d = model.graph.node[k], int(devices[graph.op_index[op]])
        del node.device_configurations[:]
        config = node.device_configurations.add(configuration_id=cluster.name, pipeline_stage=stage[op])
        for tensor in node.output:
            if tensor:
                config.sharding_spec.add(tensor_name=tensor, device=[d])
        _set_metadata(node, {DEVICE_KEY: cluster.device_names[d], STAGE_KEY: str(stage[op])})
    for node in _inner_nodes(model):  # run where the node holding them is placed
        del node.device_configurations[:]
        _set_metadata(node, {})
    return model


def split_onnx(graph: OpGraph, cluster: Cluster, placement: Placement) -> list[OnnxPart]:
    """One ONNX model per part of the placed graph, in run order (see :mod:`gplace.export.parts`).

    Each part holds its nodes (in the model's order), the initialisers they read, the tensors it reads from
    earlier parts or the model's inputs as graph inputs, and the tensors later parts or the model's outputs read
    as graph outputs. A model output keeps the type the model declares for it, a sequence or map included (an
    sklearn converter's ``ZipMap``); what passes between parts must be a tensor of known type.

    Raises:
        TypeError: ``graph``, ``cluster`` or ``placement`` is of the wrong type (names it).
        UnsupportedGraphError: ``graph`` was not imported from ONNX, or a cut tensor has no known tensor type.
        InvalidPlacementError: the placement is not for ``graph`` and ``cluster``.
    """
    check_types(graph, cluster, placement)
    source = _source(graph)
    parts = _parts(graph, cluster, placement, source)
    model = annotate_onnx(graph, cluster, placement)  # a node keeps its own device and stage, not an earlier placing's
    owner = part_of(parts, graph.num_ops)
    nodes_of: list[list[int]] = [[] for _ in parts]
    for op, k in source.node_index.items():
        nodes_of[owner[graph.op_index[op]]].append(k)
    g = model.graph
    produced_in = {t: owner[graph.op_index[op]] for op, k in source.node_index.items() for t in g.node[k].output}
    readers: dict[str, set[int]] = {}
    for k, node_ids in enumerate(nodes_of):
        for n in node_ids:
            for t in node_reads(g.node[n]):
                readers.setdefault(t, set()).add(k)
    model_outputs = {v.name for v in g.output}
    out = []
    for k, node_ids in enumerate(nodes_of):
        if not node_ids:
            continue
        outputs = sorted(t for t, p in produced_in.items() if p == k and (
            t in model_outputs or readers.get(t, set()) - {k}))
        if not outputs:  # dead code: a model with no outputs cannot run, and nothing reads what these nodes make
            logger.info("split_onnx: the %d node(s) on %s compute nothing a later part or the model's outputs read; "
                        "no part for them", len(node_ids), cluster.device_names[parts[k].device])
            continue
        out.append(_part_model(model, sorted(node_ids), outputs, cluster.device_names[parts[k].device],
                               source.base_dir))
    return out


def run_parts(parts: list[OnnxPart], feeds: Mapping[str, Any], outputs: Iterable[str] | str | None = None,
              ) -> dict[str, Any]:
    """Run ``parts`` in order with onnxruntime (CPU), passing cut tensors along.

    Cut tensors pass between parts as ``onnxruntime.OrtValue``, so tensors of types numpy lacks (bfloat16,
    float8, 4-bit integers, ...) cross devices too. The tensors returned are numpy arrays where numpy has
    their type; one it lacks is returned as its ``OrtValue`` (``.data_type()`` names the type).

    Args:
        parts: from :func:`split_onnx`.
        feeds: the model's inputs by name (numpy arrays; an ``OrtValue`` for a type numpy lacks).
        outputs: tensor names to return, or one name (default: every part's outputs).

    Raises:
        TypeError: ``feeds`` is not a mapping, or ``outputs`` holds something other than names.
        UnsupportedGraphError: a part reads a tensor no feed or earlier part gives (names it and the part).
    """
    from gplace.extras import require

    if not isinstance(feeds, Mapping):  # a list failed in dict(): "dictionary update sequence element #0 ..."
        raise TypeError(f"run_parts: feeds must map the model's input names to arrays, e.g. {{'x': array}}, got "
                        f"{type(feeds).__name__}")
    wanted = None if outputs is None else name_list(outputs, "run_parts: outputs", "['y']")
    ort = require("onnxruntime", "onnx", "running ONNX parts")
    values: dict[str, Any] = dict(feeds)
    for part in parts:
        defaults = {t.name for t in part.model.graph.initializer}  # an initialiser the model also takes as input
        missing = [t for t in part.inputs if t not in values and t not in defaults]
        if missing:
            raise UnsupportedGraphError(f"part on {part.device!r} reads {missing[0]!r}, which no feed or earlier "
                                        "part gives")
        options = ort.SessionOptions()
        if part.base_dir is not None:  # a model read from bytes finds external weights only where it is told
            options.add_session_config_entry("session.model_external_initializers_file_folder_path", part.base_dir)
        session = ort.InferenceSession(part.model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        given = {t: _ort_value(values[t]) for t in part.inputs if t in values}
        if all(isinstance(v, ort.OrtValue) for v in given.values()):
            results = session.run_with_ort_values(list(part.outputs), given)
        else:  # onnxruntime makes no OrtValue of numpy strings; session.run takes them (and OrtValues beside)
            results = session.run(list(part.outputs), given)
        values.update(zip(part.outputs, results, strict=True))
    names = wanted if wanted is not None else [t for part in parts for t in part.outputs]
    unknown = [t for t in names if t not in values]
    if unknown:
        raise UnsupportedGraphError(f"no part computes {unknown[0]!r} and no feed gives it (a model output that is "
                                    "an initialiser passes through no node: read it from the model)")
    return {t: _to_numpy(values[t]) for t in names}


_NUMPY_TYPES = frozenset(f"tensor({t})" for t in (
    "float", "float16", "double", "bool", "string", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64"))
"""onnxruntime's names of the tensor types numpy has (``OrtValue.data_type()``)."""


def _ort_value(value: Any) -> Any:
    """``value`` as an ``OrtValue``; a numpy string array stays as it is (onnxruntime makes no OrtValue of it)."""
    import onnxruntime as ort

    if isinstance(value, ort.OrtValue):
        return value
    array = np.asarray(value)
    if array.dtype.kind in "OSU":
        return array
    return ort.OrtValue.ortvalue_from_numpy(array if array.flags.c_contiguous else array.copy(order="C"))


def _to_numpy(value: Any) -> Any:
    """An ``OrtValue`` of a type numpy has as a numpy array; anything else as it is."""
    import onnxruntime as ort

    if isinstance(value, ort.OrtValue) and value.data_type() in _NUMPY_TYPES:
        return value.numpy()
    return value


# ---------------------------------------------------------------------- helpers
def _source(graph: OpGraph) -> OnnxSource:
    if not isinstance(graph.source, OnnxSource):
        raise UnsupportedGraphError(f"graph {graph.name!r} was not imported from ONNX (gplace.from_onnx); "
                                    "it has no ONNX model to write a placement into")
    return graph.source


def _node_stages(graph: OpGraph, cluster: Cluster, placement: Placement, source: OnnxSource) -> dict[str, int]:
    """Op name of each node -> its part's position in run order."""
    parts = _parts(graph, cluster, placement, source)
    owner = part_of(parts, graph.num_ops)
    return {op: parts[owner[graph.op_index[op]]].stage for op in source.node_index}


def _parts(graph: OpGraph, cluster: Cluster, placement: Placement, source: OnnxSource) -> list[Part]:
    """The parts of the model's nodes; graph inputs and shared initialisers go to every part that reads them."""
    nodes = {graph.op_index[op] for op in source.node_index}
    return device_parts(graph, cluster, placement, skip=[i for i in range(graph.num_ops) if i not in nodes])


def _inner_nodes(model: Any) -> Iterator[Any]:
    """The nodes of ``model``'s subgraphs (``If``, ``Loop``, ``Scan`` bodies, at any depth) and of its local
    functions: none is an op of its own."""
    def within(nodes: Any) -> Iterator[Any]:
        for graph in (graph for node in nodes for graph in subgraphs(node)):
            yield from graph.node
            yield from within(graph.node)

    yield from within(model.graph.node)
    for function in model.functions:
        yield from function.node
        yield from within(function.node)


def _set_metadata(node: Any, entries: Mapping[str, str]) -> None:
    """Set ``node.metadata_props`` entries, replacing earlier values of the same keys and of gplace's own
    (:data:`DEVICE_KEY`, :data:`STAGE_KEY`: an earlier placing's)."""
    dropped = {*entries, DEVICE_KEY, STAGE_KEY}
    kept = [(p.key, p.value) for p in node.metadata_props if p.key not in dropped]
    del node.metadata_props[:]
    for key, value in [*kept, *entries.items()]:
        node.metadata_props.add(key=key, value=value)


def save_onnx(model: ModelProto, path: str | Path, base_dir: str | None = None) -> list[Path]:
    """Write ``model`` to ``path`` as a file that stands alone; return the paths written.

    Where any tensor's data is external (read from ``base_dir``, the original model's directory): initialisers
    of the graph or of its control-flow subgraphs, sparse initialisers, or tensor attributes (``Constant``
    values, in the graph, its subgraphs or the model's functions), every one is read in; the initialisers among
    them are then written to ``<path>.data`` beside it and the rest inline, so the file never points back into
    the original model's directory. Tensors inline in the original stay inline (a shape a ``Reshape`` reads, a
    ``Loop``'s trip count), as onnxruntime's and gplace's shape inference read no external data. A model without
    external data is written as one file. Each file is written beside its place and renamed there, so a full disk
    leaves the earlier files whole.

    Raises:
        OSError: a file cannot be written (a full disk), naming it.
        UnsupportedGraphError: a tensor's external data cannot be read (missing, outside ``base_dir``, absolute, a
            symbolic link, not a regular file: onnx reads none of these; or shorter than the tensor says); names
            the tensor, its location and why, in one line.
    """
    import onnx
    from onnx.external_data_helper import set_external_data, uses_external_data

    path = Path(path)
    if not any(uses_external_data(t) for t in _all_tensors(model)):
        return [write_bytes_atomic(path, model.SerializeToString())]
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for initializers in (False, True):  # the other tensors first: the external ones left are initialisers
        for tensor in _all_tensors(copy, initializers):
            if uses_external_data(tensor):
                _load_external(tensor, base_dir or ".", path)
                tensor.data_location = onnx.TensorProto.DEFAULT
                del tensor.external_data[:]
                if initializers:  # written out again, to <path>.data
                    set_external_data(tensor, path.name + ".data")
    data = path.with_name(path.name + ".data")
    with atomic_path(path) as tmp, atomic_path(data) as tmp_data:
        _save_with_data(copy, path, tmp, tmp_data)
        wrote_data = tmp_data.exists()
    if not wrote_data:  # no initialiser with data to move out
        data.unlink(missing_ok=True)
        return [path]
    return [path, data]


def _save_with_data(model: Any, path: Path, tmp: Path, tmp_data: Path) -> None:
    """Write ``model`` to ``tmp`` and the data of its tensors marked external (read in) to ``tmp_data``, the
    temporaries of ``path`` and of ``<path>.data``, which the model names."""
    from onnx.external_data_helper import write_external_data_tensors

    data = path.with_name(path.name + ".data")
    _locate_external_data(model, tmp_data.name)
    try:
        write_external_data_tensors(model, str(tmp_data.parent))
    except OSError as err:
        raise write_error(data, err) from None
    _locate_external_data(model, data.name)  # the data is renamed to <path>.data
    try:
        tmp.write_bytes(model.SerializeToString())
    except OSError as err:
        raise write_error(path, err) from None
    if tmp_data.exists():  # onnx makes it readable by its owner only; match the model file
        tmp_data.chmod(tmp.stat().st_mode & 0o777)


def _locate_external_data(model: Any, location: str) -> None:
    """Point every tensor of ``model`` marked external at the file ``location``."""
    from onnx.external_data_helper import uses_external_data

    for tensor in _all_tensors(model):
        for entry in tensor.external_data if uses_external_data(tensor) else ():
            if entry.key == "location":
                entry.value = location


def _load_external(tensor: Any, base_dir: str, path: Path) -> None:
    """Read ``tensor``'s external data from ``base_dir`` into it, as onnx allows (never from outside the folder)."""
    from onnx.checker import ValidationError
    from onnx.external_data_helper import ExternalDataInfo, load_external_data_for_tensor

    try:
        load_external_data_for_tensor(tensor, base_dir)
    except (ValidationError, OSError, ValueError) as err:
        location = ExternalDataInfo(tensor).location
        raise UnsupportedGraphError(
            f"cannot write {path.name}: tensor {tensor.name!r} has its external data in {location!r}, "
            f"{_external_problem(location, base_dir, err)} (model folder {base_dir!r}); no placed model is written "
            "(the placement itself is not: gplace place writes placement.json first; write_back=false skips "
            "the model)"
        ) from None


def _external_problem(location: str, base_dir: str, err: Exception) -> str:
    """Why onnx read no data at ``location`` (relative to ``base_dir``), from the file system's own answers."""
    if not location:
        return "which is empty"
    if os.path.isabs(location):
        return "which is an absolute path (onnx reads only relative ones)"
    full = os.path.normpath(os.path.join(base_dir, location))
    if os.path.relpath(full, os.path.normpath(base_dir)).split(os.sep)[0] == os.pardir:
        return "which is outside the model's folder"
    if os.path.islink(full):
        return "which is a symbolic link (onnx reads only regular files)"
    if not os.path.lexists(full):
        return "which is missing"
    if not os.path.isfile(full):
        return "which is not a regular file"
    return "which onnx could not read: " + " ".join(str(err).split())


def _all_tensors(model: Any, initializers: bool = True) -> Iterator[Any]:
    """Every ``TensorProto`` of ``model``: initialisers (dense and sparse) and tensor attributes, in the graph, in
    every subgraph of its nodes (at any depth) and in the model's functions; without ``initializers``, all but the
    dense initialisers."""
    yield from _graph_tensors(model.graph, initializers)
    for function in model.functions:
        yield from _node_tensors(function.node, initializers)


def _graph_tensors(graph: Any, initializers: bool = True) -> Iterator[Any]:
    if initializers:
        yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    yield from _node_tensors(graph.node, initializers)


def _node_tensors(nodes: Any, initializers: bool = True) -> Iterator[Any]:
    """The tensors in ``nodes``' attributes, the initialisers and attributes of their subgraphs included."""
    for node in nodes:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            for sparse in [*([attr.sparse_tensor] if attr.HasField("sparse_tensor") else []), *attr.sparse_tensors]:
                yield from (sparse.values, sparse.indices)
            for graph in [*([attr.g] if attr.HasField("g") else []), *attr.graphs]:
                yield from _graph_tensors(graph, initializers)


def _part_model(model: Any, node_ids: list[int], outputs: list[str], device: str,
                base_dir: str | None = None) -> OnnxPart:
    """The ONNX model of one part: its nodes, the initialisers they read, and typed inputs and outputs."""
    import onnx

    g = model.graph
    nodes = [g.node[n] for n in node_ids]
    made = list(dict.fromkeys(t for node in nodes for t in node.output))  # in node order: the same file every run
    made_here = set(made)
    initializers = {t.name: t for t in g.initializer}
    sparse = {t.values.name: t for t in g.sparse_initializer}
    overridable = {v.name for v in g.input}  # an initialiser that is also an input is only a default
    read = list(dict.fromkeys(t for node in nodes for t in node_reads(node)))
    inputs = [t for t in read if t not in made_here and t not in sparse and (t not in initializers or t in overridable)]
    types = {v.name: v for v in [*g.input, *g.value_info, *g.output]}
    declared = {v.name for v in g.output if v.type.WhichOneof("value")}  # the model's outputs: any type it declares
    for t in [*inputs, *(t for t in outputs if t not in declared)]:
        if t not in types or not types[t].type.HasField("tensor_type"):
            raise UnsupportedGraphError(f"tensor {t!r} cut between devices has no known type in the model")
    part_graph = onnx.helper.make_graph(
        nodes, f"{g.name}_{device}", [types[t] for t in inputs], [types[t] for t in outputs],
        initializer=[initializers[t] for t in read if t in initializers],
        value_info=[types[t] for t in made if t in types and t not in outputs],
        sparse_initializer=[sparse[t] for t in read if t in sparse],
    )
    part_graph.doc_string = g.doc_string
    part_graph.metadata_props.extend(g.metadata_props)  # IR 10's graph metadata, beside the model's below
    part = onnx.helper.make_model(part_graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    part.functions.extend(model.functions)
    for field in ("producer_name", "producer_version", "domain", "model_version", "doc_string"):
        setattr(part, field, getattr(model, field))
    part.metadata_props.extend(model.metadata_props)
    part.configuration.extend(model.configuration)  # the configuration its nodes' device_configurations name
    return OnnxPart(device, part, tuple(inputs), tuple(outputs), base_dir)
