"""Shape-like inputs whose values are known before a step runs, so that no timed step reads them on the host.

An op function marks the inputs it reads on the host with :func:`~gplace.runtime.onnx.ops.reads_on_host`
(``Reshape``'s shape, ``Slice``'s bounds, ...). On a GPU each such read waits for the device's stream and stalls
the one thread that launches every device's work. :func:`known_inputs` evaluates the program once, abstractly,
when a step is planned:

- **Known values**: a placeholder that is not a graph input (an initialiser or a ``Constant``) with at most
  :data:`SMALL` elements; the output of ``Shape`` and ``Size`` (a tensor's shape is fixed for a plan); and the
  output of any op whose tensor inputs are all known, when it has at most :data:`SMALL` elements (checked on
  ``meta`` tensors first). These are computed on the host, for real.
- **Everything else** (graph inputs, weights, activations) is a ``meta`` tensor: shape and type, no data.
- An op that fails on ``meta`` tensors (it reads data on the host, e.g. ``TopK`` with a computed ``k``) makes
  its outputs unknown, and so everything that depends on them; such inputs are still read when the op runs.

The ops still run each step on their devices; only the host reads of known inputs move to plan time.
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Mapping
from typing import Any

import torch
from torch.fx.node import map_aggregate, map_arg
from torch.utils import _pytree as pytree

from gplace.runtime.onnx.ops import Known, host_inputs

__all__ = ["SMALL", "known_inputs"]

SMALL = 1024
"""Most elements a computed value may have to count as known (shape arithmetic is small)."""

_SHAPE_ONLY = frozenset({"Shape", "Size"})
_META = torch.device("meta")
_HOST = torch.device("cpu")
_UNKNOWN = object()


def known_inputs(
    module: torch.fx.GraphModule, values: Mapping[str, Any], data: Collection[str],
) -> dict[str, dict[int, Known]]:
    """Node name -> {argument position: its value} for each host-read input known before the step runs.

    Args:
        module: the ONNX program (see :func:`~gplace.runtime.onnx.program.onnx_program`).
        values: placeholder name -> value, as the step will get them.
        data: the placeholders holding graph inputs (never known).
    """
    env: dict[str, Any] = {}
    known: dict[str, dict[int, Known]] = {}
    for node in module.graph.nodes:
        if node.op == "placeholder":
            env[node.name] = _abstract(values.get(node.name), node.name not in data)
        elif node.op == "call_function":
            env[node.name] = _evaluate(node, env, known)
    return known


def _abstract(value: Any, may_know: bool) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    if may_know and value.numel() <= SMALL:
        return value.detach().cpu().clone()  # an op evaluated here must not touch the program's own value
    return torch.empty_like(value, device=_META)


def _is_known(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type != "meta"


def _evaluate(node: torch.fx.Node, env: dict[str, Any], known: dict[str, dict[int, Known]]) -> Any:
    """The node's abstract output: host tensors where known, ``meta`` tensors elsewhere, or ``_UNKNOWN``."""
    if node.target is operator.getitem:
        parent = env[node.args[0].name]
        return _UNKNOWN if parent is _UNKNOWN else operator.getitem(parent, *node.args[1:])
    args = list(map_arg(node.args, lambda n: env[n.name]))
    if any(leaf is _UNKNOWN for leaf in pytree.tree_leaves(args)):
        return _UNKNOWN
    for i in host_inputs(node.target):
        if i < len(args) and _is_known(args[i]):
            args[i] = Known(args[i])
            known.setdefault(node.name, {})[i] = args[i]
    tensors = [t for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor)]
    if node.meta.get("onnx_op_type") in _SHAPE_ONLY:
        return _run(node, [_shape_only(t) for t in args], _HOST)
    abstract = _run(node, pytree.tree_map_only(torch.Tensor, lambda t: t.to(_META), args), _META)
    if abstract is _UNKNOWN or not all(_is_known(t) for t in tensors) or not _small(abstract):
        return abstract
    return _run(node, args, _HOST)


def _run(node: torch.fx.Node, args: list[Any], device: torch.device) -> Any:
    kwargs = map_aggregate(node.kwargs, lambda v: device if isinstance(v, torch.device) else v)
    try:
        return node.target(*args, **kwargs)
    except Exception:  # reads data that is not there (meta), or anything else: read when the op runs
        return _UNKNOWN


def _shape_only(value: Any) -> Any:
    """A host tensor with ``value``'s shape and no memory (for ops that read only the shape)."""
    if isinstance(value, torch.Tensor) and not _is_known(value):
        return torch.zeros((), dtype=value.dtype).expand(value.shape)
    return value


def _small(value: Any) -> bool:
    return all(t.numel() <= SMALL for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor))
