"""The plan of a ``torch-v1`` step: a program bound to a placement, each node on a cluster device, the calls
ready to run and the values on their devices (:mod:`gplace.runtime.torch_runtime`, Program and Transfers)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import torch
from torch.fx.node import map_aggregate

from gplace.importers.torch_export import written_inputs
from gplace.ir import OpGraph
from gplace.runtime.torch_errors import TorchRunError, failure
from gplace.runtime.torch_program import op_name_of
from gplace.runtime.torch_step import to_device

__all__ = ["LAYOUT_FREE", "Call", "Known", "Plan", "build_plan", "node_homes", "writes_in_place"]


Known = Mapping[str, Mapping[int, Any]]
"""Call name -> {argument position: host value} for shape-like inputs known when the step is planned."""


LAYOUT_FREE: dict[Any, Any] = {torch.ops.aten.view.default: torch.ops.aten.reshape.default}
"""Ops run in place of a program's, which torch.export traced with the example inputs' memory layouts. Another device
may lay out an op's output otherwise (on a CUDA GPU, ``nn.Transformer``'s attention output reaches a ``view`` that
the CPU-traced program cannot apply: "view size is not compatible with input tensor's size and stride"). Wherever
``view`` works, ``reshape`` returns that same view; only where it would raise, ``reshape`` copies (same values)."""


@dataclass(frozen=True, eq=False)
class Call:
    """One FX ``call_function`` node, ready to run on its cluster device."""

    node: torch.fx.Node
    device: int
    """Cluster device index."""
    args: tuple
    kwargs: dict
    """The node's arguments, ``device=`` values replaced by its torch device."""
    free: tuple[str, ...]
    """Values whose last reader this is."""
    event: bool
    """Whether a reader on another torch device waits on it (CUDA only)."""
    target: Callable[..., Any]
    """What runs: the node's target, or its :data:`LAYOUT_FREE` stand-in."""
    writes: bool = False
    """Whether it writes an argument in place (its schema says so; a higher-order op may): on a GPU it first
    waits for the copies its device has started, which may still be reading that value (CUDA only)."""


@dataclass(eq=False)
class Plan:
    """A program bound to a placement, with its inputs on their devices."""

    calls: list[Call]
    homes: dict[str, int]
    """FX node name -> cluster device index."""
    roots: dict[str, str]
    """FX node name -> the call that made its value (a getitem's tuple); itself for other nodes."""
    torch_devices: dict[int, torch.device]
    labels: dict[int, str]
    initial: dict[str, Any]
    """Placeholders and tensor attributes, on their devices."""
    outputs: Any
    """The output node's argument (a structure of nodes)."""
    streams: dict[torch.device, Any] = field(default_factory=dict)
    """The compute stream of each CUDA device."""
    copy_streams: dict[torch.device, Any] = field(default_factory=dict)
    """The copy stream of each CUDA device: copies into it and out of it run there."""
    host_readers: dict[str, frozenset[torch.device]] = field(default_factory=dict)
    """Call name -> the CPU devices reading its value, for calls on CUDA devices: sent as soon as it is made."""
    written: frozenset[str] = frozenset()
    """Placeholders and attributes some op writes in place: each step gets fresh copies of their values in
    :attr:`initial`, which no op writes."""

    @cached_property
    def device_set(self) -> frozenset[torch.device]:
        """The torch devices in use."""
        return frozenset(self.torch_devices.values())


def node_homes(gm: torch.fx.GraphModule, graph: OpGraph, devices: list[int]) -> dict[str, int]:
    """FX node name -> cluster device: ops by the placement, the other nodes by their neighbours."""
    homes: dict[str, int] = {}
    covered: set[str] = set()
    for node in gm.graph.nodes:
        op = op_name_of(node)
        i = graph.op_index.get(op)
        if i is not None:
            homes[node.name] = devices[i]
            covered.add(op)
        elif node.op == "call_function" and node.target is operator.getitem:
            homes[node.name] = homes[node.args[0].name]
        elif node.op == "call_function":
            raise TorchRunError(f"node {op!r} of the torch program is not an op of graph {graph.name!r}")
    missing = [name for name in graph.op_names if name not in covered]
    if missing:
        raise TorchRunError(f"op {missing[0]!r} of graph {graph.name!r} is not a node of its torch program")
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "get_attr") and node.name not in homes:
            readers = [homes[u.name] for u in node.users if u.name in homes]
            homes[node.name] = readers[0] if readers else devices[0]
    return homes


def build_plan(
    gm: torch.fx.GraphModule, homes: dict[str, int], devices: dict[int, torch.device],
    names: Sequence[str], values: dict[str, Any], known: Known,
) -> Plan:
    torch_devices = {d: devices[d] for d in sorted(set(homes.values()))}
    labels = {d: f"{names[d]} ({dev})" for d, dev in torch_devices.items()}
    roots = _roots(gm)
    cross = _cross_device_roots(gm, homes, torch_devices, roots)
    last = _last_readers(gm)
    calls = [
        Call(node, homes[node.name], *_retarget(node, torch_devices[homes[node.name]], known.get(node.name, {})),
              free=tuple(last.get(node.name, ())), event=node.name in cross,
              target=LAYOUT_FREE.get(node.target, node.target), writes=writes_in_place(node))
        for node in gm.graph.nodes if node.op == "call_function"
    ]
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    plan = Plan(calls, homes, roots, torch_devices, labels, {}, output.args[0])
    plan.initial = _place_values(gm, homes, torch_devices, labels, values)
    plan.host_readers = _host_readers(gm, homes, torch_devices)
    plan.written = written_inputs(gm) & plan.initial.keys()
    return plan


def _host_readers(
    gm: torch.fx.GraphModule, homes: dict[str, int], devices: dict[int, torch.device],
) -> dict[str, frozenset[torch.device]]:
    readers: dict[str, set[torch.device]] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function" or devices[homes[node.name]].type != "cuda":
            continue
        for user in node.users:
            dst = devices.get(homes.get(user.name, -1))
            if dst is not None and dst.type == "cpu":
                readers.setdefault(node.name, set()).add(dst)
    return {name: frozenset(cpus) for name, cpus in readers.items()}


def writes_in_place(node: torch.fx.Node) -> bool:
    """Whether call ``node`` may write one of its arguments in place: an argument its schema marks as written
    (``aten.relu_``, an ``out=``), or any higher-order op (its subgraph may)."""
    if isinstance(node.target, torch._ops.HigherOrderOperator):
        return True
    schema = getattr(node.target, "_schema", None)
    return schema is not None and any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def _roots(gm: torch.fx.GraphModule) -> dict[str, str]:
    roots: dict[str, str] = {}
    for node in gm.graph.nodes:
        getitem = node.op == "call_function" and node.target is operator.getitem
        roots[node.name] = roots[node.args[0].name] if getitem else node.name
    return roots


def _cross_device_roots(
    gm: torch.fx.GraphModule, homes: dict[str, int], devices: dict[int, torch.device], roots: dict[str, str]
) -> set[str]:
    """Calls whose value some call on another torch device reads."""
    cross = set()
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        for dep in node.all_input_nodes:
            if devices[homes[dep.name]] != devices[homes[node.name]]:
                cross.add(roots[dep.name])
    return cross


def _last_readers(gm: torch.fx.GraphModule) -> dict[str, list[str]]:
    """Call name -> the values it is the last call to read (outputs are kept to the end)."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    kept = {n.name for n in output.all_input_nodes}
    last: dict[str, str] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function":
            for dep in node.all_input_nodes:
                last[dep.name] = node.name
    freed: dict[str, list[str]] = {}
    for value, reader in last.items():
        if value not in kept:
            freed.setdefault(reader, []).append(value)
    return freed


def _retarget(node: torch.fx.Node, device: torch.device, known: Mapping[int, Any]) -> tuple[tuple, dict]:
    """The node's arguments with every ``torch.device`` replaced by ``device`` (factory ops follow placement) and
    the arguments in ``known`` (position -> value) replaced by their values."""
    def swap(value: Any) -> Any:
        return device if isinstance(value, torch.device) else value

    args = tuple(known.get(i, arg) for i, arg in enumerate(node.args))
    return map_aggregate(args, swap), map_aggregate(node.kwargs, swap)


def _place_values(
    gm: torch.fx.GraphModule, homes: dict[str, int], devices: dict[int, torch.device],
    labels: dict[int, str], values: dict[str, Any],
) -> dict[str, Any]:
    placed = {}
    for node in gm.graph.nodes:
        if node.name not in values:
            continue
        home = homes[node.name]
        try:
            placed[node.name] = to_device(values[node.name], devices[home])
        except Exception as err:  # OutOfMemoryError or a device that refuses the tensor
            raise failure(err, f"placing input {node.name!r}", labels[home]) from err
    return placed
