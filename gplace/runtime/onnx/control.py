"""ONNX control flow for ``torch-v1``: ``If``, ``Loop`` and ``Scan`` run their subgraphs as small programs.

The importer makes each control-flow node one op (:mod:`gplace.importers.onnx`), so the node runs on one device:
its FX call gets the node's inputs, then the outer values its subgraphs read (in
:func:`~gplace.importers.onnx.node_reads` order), all on that device, and runs the subgraph's nodes one by one
with the same op functions as the main program (a :class:`Subprogram`). The subgraphs' own weights and constants
move to the device of the node's first input. Decisions read values on the host: an ``If``'s condition, a
``Loop``'s trip count and condition after each pass.

``Loop`` (opset 11 on): at most ``M`` passes (no limit when ``M`` is empty) while the condition holds; the
loop-carried values go round, the scan outputs of every pass are stacked along a new first axis (a loop that runs
no pass and has scan outputs fails: their shape is unknown). ``Scan`` (opset 9 on): ``scan_input_axes``,
``scan_input_directions``, ``scan_output_axes`` and ``scan_output_directions`` as the ONNX operator defines them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from gplace.importers.onnx import node_reads, subgraphs
from gplace.ir import UnsupportedGraphError
from gplace.runtime.onnx.ops import Attrs, constant_value, tensor_from_proto

__all__ = ["CONTROL_FLOW", "Subprogram", "convert_control_flow", "outer_reads"]

CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
"""The ONNX ops with subgraphs that ``torch-v1`` runs."""

Convert = Callable[[Any, int, str], tuple[Any, dict[str, Any]]]
"""``(node, opset, label) -> (torch function, keyword arguments)``: the main program's converter."""


@dataclass(frozen=True, eq=False)
class Subprogram:
    """A subgraph as a list of calls, run on a dictionary of named values."""

    inputs: tuple[str, ...]
    """The subgraph's formal inputs (a ``Loop`` body's iteration number, condition, carried values, ...)."""
    outputs: tuple[str, ...]
    """The subgraph's outputs, in order."""
    calls: tuple[tuple[tuple[str, ...], tuple[str, ...], Any, dict[str, Any]], ...]
    """(input names, '' for a skipped one; output names; torch function; keyword arguments) per node."""
    constants: Mapping[str, torch.Tensor]
    """The subgraph's initialisers and ``Constant`` values (host tensors)."""
    _placed: dict[torch.device, dict[str, torch.Tensor]] = field(default_factory=dict, repr=False)
    """``constants`` moved to each device they ran on (moved once, not on every pass of a loop)."""

    def __call__(self, values: dict[str, Any], device: torch.device) -> list[Any]:
        """Run the calls on ``values`` (the formal inputs and the outer values read); return the outputs."""
        if device not in self._placed:
            self._placed[device] = {name: v.to(device) for name, v in self.constants.items()}
        env = {**values, **self._placed[device]}
        for inputs, outputs, target, kwargs in self.calls:
            result = target(*(env[t] if t else None for t in inputs), **kwargs)
            if len(outputs) == 1:
                env[outputs[0]] = result
            else:
                env.update((t, r) for t, r in zip(outputs, result, strict=False) if t)
        return [env[t] for t in self.outputs]


def convert_control_flow(attrs: Attrs, convert: Convert, base_dir: str | None) -> tuple[Any, dict[str, Any]]:
    """The torch function and keyword arguments of an ``If``, ``Loop`` or ``Scan`` node; its FX call passes the
    node's inputs, then the outer values its subgraphs read.

    Raises:
        UnsupportedGraphError: a node of a subgraph cannot run, or the node has an attribute no rule reads.
    """
    target, kwargs = _convert_control_flow(attrs, convert, base_dir)
    attrs.finish()
    return target, kwargs


def _convert_control_flow(attrs: Attrs, convert: Convert, base_dir: str | None) -> tuple[Any, dict[str, Any]]:
    node = attrs.node
    kwargs: dict[str, Any] = {"names": tuple(node.input), "outer": outer_reads(node), "single": len(node.output) == 1}
    if node.op_type == "If":
        return _Bound(_if, then=_subprogram(attrs.get("then_branch"), attrs, convert, base_dir),
                      otherwise=_subprogram(attrs.get("else_branch"), attrs, convert, base_dir)), kwargs
    body = _subprogram(attrs.get("body"), attrs, convert, base_dir)
    if node.op_type == "Loop":
        if attrs.opset < 11:
            raise attrs.error("Loop before opset 11 is not supported")
        return _Bound(_loop, body=body), kwargs
    if attrs.opset < 9:
        raise attrs.error("Scan before opset 9 is not supported")
    scans = attrs.get("num_scan_inputs")
    states = len(node.input) - scans
    outputs = len(node.output) - states
    kwargs.update(states=states, in_axes=attrs.get("scan_input_axes", [0] * scans),
                  in_reverse=attrs.get("scan_input_directions", [0] * scans),
                  out_axes=attrs.get("scan_output_axes", [0] * outputs),
                  out_reverse=attrs.get("scan_output_directions", [0] * outputs))
    return _Bound(_scan, body=body), kwargs


class _Bound:
    """A control-flow node's FX call target: its function with its subprograms bound (FX code names a target by
    ``__name__``, and writes keyword arguments as literals)."""

    def __init__(self, function: Callable[..., Any], **subprograms: Subprogram) -> None:
        self.function, self.subprograms = function, subprograms
        self.__name__ = f"onnx{function.__name__}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **self.subprograms, **kwargs)


def outer_reads(node: Any) -> tuple[str, ...]:
    """The outer values a node's subgraphs read that are not among its own inputs (its FX call's last arguments)."""
    own = set(node.input)
    return tuple(t for t in node_reads(node) if t not in own)


def _subprogram(graph: Any, attrs: Attrs, convert: Convert, base_dir: str | None) -> Subprogram:
    """Convert one subgraph (nested control flow included); a node it cannot run is named with its parent."""
    constants = {}
    for tensor in graph.initializer:
        value = tensor_from_proto(tensor, f"initializer {tensor.name!r} of {attrs.label!r}", base_dir)
        if value is None:
            raise attrs.error(f"initializer {tensor.name!r} of a subgraph has no data")
        constants[tensor.name] = value
    calls = []
    for i, node in enumerate(graph.node):
        label = f"{attrs.label}/{node.name or f'{node.op_type}_{i}'}"
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            inner = Attrs(node, attrs.opset, label)
            constants[node.output[0]] = constant_value(inner)
            inner.finish()
            continue
        if subgraphs(node) and node.op_type in CONTROL_FLOW and node.domain in ("", "ai.onnx"):
            target, kwargs = convert_control_flow(Attrs(node, attrs.opset, label), convert, base_dir)
            calls.append(((*node.input, *outer_reads(node)), tuple(node.output), target, kwargs))
            continue
        target, kwargs = convert(node, attrs.opset, label)
        calls.append((tuple(node.input), tuple(node.output), target, kwargs))
    return Subprogram(tuple(v.name for v in graph.input), tuple(v.name for v in graph.output), tuple(calls),
                      constants)


def _split(args: Sequence[Any], names: Sequence[str], outer: Sequence[str]) -> tuple[list[Any], dict[str, Any]]:
    """The node's own inputs, and every value a subgraph may read by name (its inputs and the outer values)."""
    given = list(args[:len(names)])
    return given, {**{t: v for t, v in zip(names, given, strict=True) if t},
                   **dict(zip(outer, args[len(names):], strict=True))}


def _device(args: Sequence[Any]) -> torch.device:
    return next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))


def _result(values: list[Any], single: bool) -> Any:
    return values[0] if single else tuple(values)


def _if(*args: Any, names: Sequence[str], outer: Sequence[str], single: bool, then: Subprogram,
        otherwise: Subprogram) -> Any:
    (cond,), captured = _split(args, names, outer)
    branch = then if bool(cond) else otherwise
    return _result(branch(captured, _device(args)), single)


def _loop(*args: Any, names: Sequence[str], outer: Sequence[str], single: bool, body: Subprogram) -> Any:
    given, captured = _split(args, names, outer)
    trips, cond, carried = given[0], given[1], list(given[2:])
    device = _device(args)
    limit = int(trips) if trips is not None else None
    keep = bool(cond) if cond is not None else True
    scans: list[list[Any]] = []
    i = 0
    while keep and (limit is None or i < limit):
        state = dict(zip(body.inputs, [torch.tensor(i, device=device), torch.tensor(keep, device=device),
                                       *carried], strict=True))
        out = body({**captured, **state}, device)
        keep, carried = bool(out[0]), out[1:1 + len(carried)]
        scans.append(out[1 + len(carried):])
        i += 1
    stacked = [torch.stack(list(column)) for column in zip(*scans, strict=True)] if scans else []
    if not scans and len(body.outputs) > 1 + len(carried):
        raise UnsupportedGraphError("a Loop with scan outputs ran no pass: their shape is unknown")
    return _result([*carried, *stacked], single)


def _scan(*args: Any, names: Sequence[str], outer: Sequence[str], single: bool, body: Subprogram, states: int,
          in_axes: Sequence[int], in_reverse: Sequence[int], out_axes: Sequence[int],
          out_reverse: Sequence[int]) -> Any:
    given, captured = _split(args, names, outer)
    carried, sequences = given[:states], given[states:]
    sequences = [x.flip(a % x.dim()) if r else x for x, a, r in zip(sequences, in_axes, in_reverse, strict=True)]
    axes = [a % x.dim() for x, a in zip(sequences, in_axes, strict=True)]
    steps = sequences[0].shape[axes[0]] if sequences else 0
    device = _device(args)
    outputs: list[list[Any]] = []
    for t in range(steps):
        sliced = [x.select(a, t) for x, a in zip(sequences, axes, strict=True)]
        out = body({**captured, **dict(zip(body.inputs, [*carried, *sliced], strict=True))}, device)
        carried = out[:states]
        outputs.append(out[states:])
    stacked = []
    for k, column in enumerate(zip(*outputs, strict=True)):
        y = torch.stack(list(column), dim=out_axes[k] % (column[0].dim() + 1))
        stacked.append(y.flip(out_axes[k] % y.dim()) if out_reverse[k] else y)
    return _result([*carried, *stacked], single)
