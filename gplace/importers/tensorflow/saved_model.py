"""A SavedModel directory's signature as a GraphDef, with the values of a TF1 SavedModel's in-graph
variables (its init op's constants, else its checkpoint's)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gplace.importers.tensorflow.errors import wrap_errors
from gplace.importers.tensorflow.functions import Traced, function_traced
from gplace.importers.tensorflow.op_types import VARIABLE_OPS
from gplace.ir import UnsupportedGraphError

logger = logging.getLogger(__name__)


def saved_model_traced(tf: Any, path: Path, signature: str | None = None) -> Traced:
    with wrap_errors(f"SavedModel {str(path)!r}: could not load it"):
        loaded = tf.saved_model.load(str(path))
        signatures = dict(loaded.signatures)
    if not signatures:
        raise UnsupportedGraphError(f"SavedModel {str(path)!r} has no signatures; save it with signatures=...")
    key = _signature_key(path, sorted(signatures), signature)
    traced = function_traced(tf, signatures[key])
    traced.name, traced.keepalive = path.name, loaded
    handles = {n.name: n for n in traced.graph_def.node if n.op in VARIABLE_OPS and n.name not in traced.variables}
    if handles:  # a TF1 SavedModel's variables (resource or reference) left in the signature's graph
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
    """Values (``tf.Variable``) of the in-graph variable nodes ``handles`` (node name -> node: ``VarHandleOp``, or
    a reference ``VariableV2``) of a TF1 SavedModel's signature: the constants its init op (``main_op``,
    ``legacy_init_op``) assigns them, as :func:`gplace.export.tensorflow.save_saved_model` writes them, else its
    checkpoint
    ``<path>/variables/variables``; matched by the handle's ``shared_name`` (the variable a session shares), else
    its node name. A value of another dtype or shape than the handle's is left out."""
    from tensorflow.python.saved_model import loader_impl

    with wrap_errors(f"SavedModel {str(path)!r}: could not read its MetaGraphDef"):
        saved = loader_impl.parse_saved_model(str(path))
    metas = [m for m in saved.meta_graphs if signature in m.signature_def]
    if not metas:
        return {}
    meta = metas[0]
    found: dict[str, Any] = {}
    prefix = str(path / "variables" / "variables")
    if Path(prefix + ".index").is_file():
        with wrap_errors(f"SavedModel {str(path)!r}: could not read its checkpoint"):
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
        if node.op not in ("AssignVariableOp", "Assign") or len(node.input) < 2:
            continue
        handle, value = (nodes.get(i.split(":")[0]) for i in node.input[:2])
        if handle is None or value is None or handle.op not in VARIABLE_OPS or value.op != "Const":
            continue
        name = by_shared.get(handle.attr["shared_name"].s.decode() or handle.name)
        if name is None and handle.name in handles:
            name = handle.name
        if name is not None:
            assigned[name] = tf.make_ndarray(value.attr["value"].tensor)
    return assigned
