"""The FX program ``torch-v1`` runs for a graph, and its values: parameters, given inputs, and values made from
metadata (:mod:`gplace.runtime.torch_runtime`, Program and Values)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree

from gplace.importers.onnx import OnnxSource
from gplace.importers.torch_export import TorchSource, exported_values
from gplace.ir import OpGraph, UnsupportedGraphError
from gplace.runtime.synthetic import synthesised
from gplace.runtime.torch_errors import TorchRunError

__all__ = ["given_inputs", "graph_module", "no_program", "onnx_torch_program", "op_name_of", "program_values"]


def onnx_torch_program(source: OnnxSource, graph: OpGraph) -> Any:
    """The converted ONNX model; a node without a torch implementation becomes a run error naming it."""
    from gplace.runtime.onnx.program import onnx_program

    try:
        return onnx_program(source, graph)
    except UnsupportedGraphError as err:
        raise TorchRunError(f"graph {graph.name!r} cannot run on torch: {err}") from err


def graph_module(source: TorchSource) -> torch.fx.GraphModule:
    """The FX graph module of ``source``'s program (an exported program's, or the module itself)."""
    program = source.program
    return program if isinstance(program, torch.fx.GraphModule) else program.graph_module


def program_values(source: TorchSource, gm: torch.fx.GraphModule) -> dict[str, Any]:
    """Real values where the program holds them, else values made from each node's metadata."""
    known = source.values if source.training else exported_values(source.program)
    values = {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            values[node.name] = known[node.name] if node.name in known else _synthesise(node)
        elif node.op == "get_attr":
            value = _attribute(gm, str(node.target))
            if isinstance(value, torch.Tensor):
                real = not isinstance(value, torch._subclasses.FakeTensor)
                values[node.name] = value if real else _synthesise(node)
            elif isinstance(value, torch.fx.GraphModule):  # a torch.cond branch or while_loop body, run as given
                values[node.name] = value
    return values


def given_inputs(source: TorchSource, gm: torch.fx.GraphModule, inputs: Any) -> dict[str, Any]:
    """``inputs`` of :meth:`~gplace.runtime.torch_runtime.TorchRuntime.run` as placeholder name -> value.

    Raises:
        ValueError: an input name that is no placeholder, a count other than the program's, or another value for an
            ``int``, ``float`` or ``bool`` input than the constant torch.export traced (inference graphs: a joint
            training graph keeps no record of it, so there it goes unchecked).
    """
    names = [n.name for n in gm.graph.find_nodes(op="placeholder")]
    if inputs is None:
        return {}
    if isinstance(inputs, Mapping):
        unknown = sorted(set(inputs) - set(names))
        if unknown:
            raise ValueError(f"inputs name {unknown[0]!r}, not a placeholder of the program; it has {names}")
        given = dict(inputs)
    else:
        user = _user_inputs(source, gm)
        leaves = pytree.tree_leaves(inputs)
        if len(leaves) != len(user):
            raise ValueError(f"got {len(leaves)} inputs, the program takes {len(user)}: {user}")
        given = {}
        for k, (name, value) in enumerate(zip(user, leaves, strict=True)):
            if isinstance(name, str):
                given[name] = value
            else:  # the signature lists a constant input by its value
                _check_constant(f"input {k}", name, value)
    for node in gm.graph.find_nodes(op="placeholder"):
        if node.name in given:
            _check_constant(f"input {node.name!r}", node.meta.get("val"), given[node.name])
    return given


def _check_constant(label: str, traced: Any, value: Any) -> None:
    """Refuse a ``value`` for an input torch.export traced as the constant ``traced`` (an ``int``, ``float`` or
    ``bool``) other than it: the program computes with the traced one whatever is given (5 for an ``n`` traced at 3
    gave the results of 3), where ``ExportedProgram.module()`` refuses it. Nothing for tensor inputs."""
    if isinstance(traced, torch.Tensor) or not isinstance(traced, int | float | bool):
        return
    if isinstance(value, torch.Tensor | np.ndarray | np.generic) and value.ndim == 0:  # torch.tensor(3), np.bool_
        value = value.item()
    if not isinstance(value, numbers.Number) or not (
            value == traced or (isinstance(value, float) and math.isnan(value) and math.isnan(traced))):
        raise ValueError(f"{label} was traced as the constant {traced!r}, so the program computes with it whatever "
                         f"is given: got {value!r} (import the module again with that value)")


def _user_inputs(source: TorchSource, gm: torch.fx.GraphModule) -> list[str]:
    if not source.training:
        return list(source.program.graph_signature.user_inputs)
    return [n.name for n in gm.graph.find_nodes(op="placeholder")
            if type(n.meta.get("desc")).__name__ == "PlainAOTInput"]


def _attribute(gm: torch.fx.GraphModule, target: str) -> Any:
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part, None)
    return value


def _synthesise(node: torch.fx.Node) -> Any:
    """A value with the shape and dtype of ``meta["val"]`` (:func:`synthesised`, seeded by the node name)."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return synthesised(node.name, [_hint(d) for d in val.shape], val.dtype)
    if isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool):
        return _hint(val)
    if isinstance(val, int | float | bool):
        return val
    if val is None and not node.users:  # an argument nothing reads, e.g. a flag such as use_cache=False
        return None
    raise TorchRunError(f"input {node.name!r} has no value and no metadata to make one from; pass it in inputs")


def _hint(value: Any) -> Any:
    if isinstance(value, int | float | bool):
        return value
    hint = getattr(getattr(value, "node", None), "hint", None)
    if hint is None:
        raise TorchRunError(f"symbolic size {value} has no example value")
    return hint


def op_name_of(node: torch.fx.Node) -> str:
    """The gplace op an FX node stands for: ``meta["gplace_op"]`` (ONNX programs), else its name."""
    return node.meta.get("gplace_op", node.name)


def no_program(graph: OpGraph) -> str:
    return (f"graph {graph.name!r} has no torch program to run (its source is {type(graph.source).__name__}); "
            "TorchRuntime runs graphs imported by gplace.importers.torch_export.from_torch or "
            "gplace.importers.onnx.from_onnx")
