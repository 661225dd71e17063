"""A placement as pipeline stages, and as the split points ``torch.distributed.pipelining`` takes.

The stages are the devices that hold ops, in the order of their first forward op that runs
(:func:`~gplace.pipeline.simulator.ops_that_run`: a zero-cost source such as a weight does not count), as in
pipe-v3; each lists its ops in ``graph.topological_order``. For a graph imported from torch.export (its ``source`` has
``module_paths``), every place where the device changes between consecutive forward ops (phase ``forward`` or
none, in topological order; ops of no module and ``"Parameter"`` ops, which only hold a weight or buffer that
torch keeps with its module, skipped) is a split. It maps to the outermost module called (in the op's
``nn_module_stack``: a container such as ``nn.ModuleList``, whose ``forward`` never runs, is no split point) that
begins at the new stage's first op: ``{module path: "BEGINNING"}``, the form of
``pipeline(module, ..., split_spec={path: SplitPoint.BEGINNING})``. A split at an op that begins no
module falls inside one: it is listed in ``unaligned`` instead (op name, the module it falls in); so is one at a
module entered more than once (called twice, as a shared layer, ``l(l(x))`` too: torch would split before every
call).
:func:`align_to_modules` colocates a graph's ops so that no placement of it has such a split.

Example:
    >>> from gplace.ir import Placement
    >>> from gplace.testing import chain, uniform_cluster
    >>> g, c = chain((1.0, 2.0, 3.0)), uniform_cluster(2)
    >>> pipeline_stages(g, c, Placement.for_graph(g, [1, 1, 0]))
    {'/GPU:1': ['a0', 'a1'], '/GPU:0': ['a2']}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gplace.ir import Cluster, GraphError, OpGraph, Placement
from gplace.ir.graph import FORWARD
from gplace.ir.placement import check_placement
from gplace.pipeline.simulator import ops_that_run

__all__ = ["SplitSpec", "align_to_modules", "pipeline_stages", "placement_extras", "split_spec"]


@dataclass(frozen=True)
class SplitSpec:
    """Where a placement splits a torch module."""

    split_spec: dict[str, str]
    """Module path -> ``"BEGINNING"`` (``torch.distributed.pipelining.SplitPoint.BEGINNING``)."""
    unaligned: list[dict[str, str]]
    """Splits that fall inside a module: ``{"op": first op of the new stage, "module": its module path}``."""
    stage_devices: list[int]
    """The device of each stage, in stage order; a device holding several stages (a non-contiguous placement)
    appears once per stage."""
    backward_away: int = 0
    """Backward ops placed on another device than the forward op they differentiate: torch runs each stage's
    backward on the stage's device, so a placement with any is not the one torch would run."""


def pipeline_stages(graph: OpGraph, cluster: Cluster, placement: Placement) -> dict[str, list[str]]:
    """Device name -> its ops in topological order, devices in stage order, ``pipe-v3``'s: the order of their first
    forward op that runs (:func:`~gplace.pipeline.simulator.ops_that_run`: not an input or weight, a source taking
    no time, which torch keeps with its module or feeds; an op without a phase counts as forward), then devices
    holding other ops that run (backward or update ops only), then devices holding ops that run nothing. Devices
    without ops are left out.

    Raises:
        InvalidPlacementError: ``placement`` does not fit ``graph`` and ``cluster`` (:meth:`Placement.validate`).
        TypeError: ``placement`` is not a :class:`~gplace.ir.Placement`.
    """
    check_placement(placement)
    placement.validate(graph, cluster)  # a negative index was the last device's, another graph's placement used
    names, order = cluster.device_names, graph.topological_order.tolist()
    runs, forward = ops_that_run(graph, cluster), graph.phase_codes() == FORWARD
    stages: dict[str, list[str]] = {}
    for i in sorted(order, key=lambda i: (not runs[i], not forward[i])):  # stable: in topological order
        stages.setdefault(names[placement.devices[i]], [])
    for i in order:
        stages[names[placement.devices[i]]].append(graph.op_names[i])
    return stages


def split_spec(graph: OpGraph, placement: Placement) -> SplitSpec | None:
    """The torch split points of ``placement``; ``None`` when the graph has no module paths.

    Raises:
        InvalidPlacementError: ``placement`` is not one of ``graph`` (:meth:`Placement.check_graph`).
        TypeError: ``placement`` is not a :class:`~gplace.ir.Placement`.
    """
    check_placement(placement)
    placement.check_graph(graph)
    paths: Mapping[str, str] | None = getattr(graph.source, "module_paths", None)
    if paths is None:
        return None
    ops = _forward_module_ops(graph, paths)
    calls = _module_calls(graph, paths, ops)
    first_op: dict[str, int] = {}  # module path (and every module it is called in) -> its first forward op
    for i in ops:
        for module, _ in calls[i]:
            first_op.setdefault(module, i)
    repeated = _entered_twice(calls, ops)
    spec, unaligned = {}, []
    stage_devices = [int(placement.devices[ops[0]])] if ops else []
    for prev, i in zip(ops, ops[1:], strict=False):
        if placement.devices[prev] == placement.devices[i]:
            continue
        stage_devices.append(int(placement.devices[i]))
        path = paths[graph.op_names[i]]
        starts = [p for p, _ in calls[i] if first_op[p] == i and p not in repeated]
        if starts:
            spec[starts[0]] = "BEGINNING"
        else:
            unaligned.append({"op": graph.op_names[i], "module": path})
    away = sum(int(placement.devices[i] != placement.devices[f]) for i, f in enumerate(graph.grad_of) if f >= 0)
    return SplitSpec(spec, unaligned, stage_devices, away)


def align_to_modules(graph: OpGraph) -> OpGraph:
    """``graph`` with its ops colocated so that any placement of it splits only where a module begins, which
    ``torch.distributed.pipelining`` can express (:func:`split_spec` finds no ``unaligned`` split).

    The forward ops with a module path, in topological order, form segments: a segment begins at an op that is
    the first op of some module and runs to the next such op. Each segment becomes one colocation group
    (``"module:<path of its first op>"``), merged with any group its ops were already in; a backward op joins its
    forward op's group. Every placer and search respects colocation, so all of them then return aligned
    placements (coarser ones: a split can no longer fall inside a module). Place the returned graph, and use it
    for :func:`~gplace.export.torch.pipeline_split` too (the placement is for it); its ``source`` is ``graph``'s.

    Raises:
        GraphError: ``graph`` has no module paths (it was not imported with :func:`gplace.from_torch`), or a
            merged group would pin ops to different device kinds.
    """
    paths: Mapping[str, str] | None = getattr(graph.source, "module_paths", None)
    if paths is None:
        raise GraphError(f"graph {graph.name!r} has no module paths: import it with gplace.from_torch to align "
                         "its splits to modules")
    parent = list(range(graph.num_ops))  # union-find over ops
    names = _join_segments(graph, paths, parent)
    first_of: dict[str, int] = {}
    for i, group in enumerate(graph.colocation):  # the groups the ops were in already
        if group is not None:
            _join(parent, i, first_of.setdefault(group, i))
    for i, forward in enumerate(graph.grad_of):
        if forward >= 0:
            _join(parent, i, forward)
    members: dict[int, list[int]] = {}
    for i in range(graph.num_ops):
        members.setdefault(_root(parent, i), []).append(i)
    colocation = list(graph.colocation)
    for group in (g for g in members.values() if len(g) > 1):
        name = next((names[i] for i in group if i in names), None) or graph.colocation[group[0]]
        for i in group:
            colocation[i] = name or f"module:{graph.op_names[group[0]]}"
    return dataclasses.replace(graph, colocation=tuple(colocation))


def _join_segments(graph: OpGraph, paths: Mapping[str, str], parent: list[int]) -> dict[int, str]:
    """Join each forward op with a module path to the op that begins its segment (see :func:`align_to_modules`);
    the group name of each segment's first op."""
    seen: set[str] = set()
    start, names = -1, {}
    ops = _forward_module_ops(graph, paths)
    calls = _module_calls(graph, paths, ops)
    repeated = _entered_twice(calls, ops)
    for i in ops:
        begins = [p for p, _ in calls[i] if p not in seen and p not in repeated]
        seen.update(begins)
        if begins or start < 0:
            start, names[i] = i, f"module:{paths[graph.op_names[i]]}"
        else:
            _join(parent, i, start)
    return names


def _entered_twice(calls: Mapping[int, list[tuple[str, str]]], ops: list[int]) -> set[str]:
    """Module paths whose run of ``ops`` is entered more than once (a module called twice, as a shared layer is,
    or twice in a row: the second call enters a new run): ``SplitPoint.BEGINNING`` there splits before every
    call, so no split may be placed at one."""
    entered: dict[str, int] = {}
    inside: set[tuple[str, str]] = set()
    for i in ops:
        now = set(calls[i])
        for module, _ in now - inside:
            entered[module] = entered.get(module, 0) + 1
        inside = now
    return {module for module, count in entered.items() if count > 1}


def _module_calls(graph: OpGraph, paths: Mapping[str, str], ops: list[int]) -> dict[int, list[tuple[str, str]]]:
    """Op -> the non-root module calls it runs in, outermost first: ``(module path, call)`` from the source's
    ``module_calls``; for a source without them, every ancestor path of the op's module, each its own call."""
    recorded: Mapping[str, tuple[tuple[str, str], ...]] = getattr(graph.source, "module_calls", None) or {}
    out = {}
    for i in ops:
        name = graph.op_names[i]
        stack = recorded.get(name) or [(p, p) for p in _prefixes(paths[name])]
        out[i] = [(module, call) for module, call in stack if module]
    return out


def _forward_module_ops(graph: OpGraph, paths: Mapping[str, str]) -> list[int]:
    """The forward ops (phase ``forward`` or none) of some module that compute, in topological order: a
    ``"Parameter"`` op only holds state, which torch's split keeps with the module owning it (counted, one held
    by a later module, a source, would split the pipeline before the first op)."""
    phases = graph.phase or (None,) * graph.num_ops
    return [i for i in graph.topological_order.tolist()
            if phases[i] in (None, "forward") and graph.op_names[i] in paths and graph.op_types[i] != "Parameter"]


def _root(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def _join(parent: list[int], i: int, j: int) -> None:
    parent[_root(parent, i)] = _root(parent, j)


def placement_extras(graph: OpGraph, cluster: Cluster, placement: Placement) -> dict[str, Any]:
    """The ``placement.json`` keys of this module: ``stages``, and for torch ``split_spec``, ``split_unaligned``
    and ``stage_devices`` (the device name of each stage of the split, for ``pipe.build_stage(k, device)``).

    Raises:
        InvalidPlacementError: ``placement`` does not fit ``graph`` and ``cluster`` (:meth:`Placement.validate`).
        TypeError: ``placement`` is not a :class:`~gplace.ir.Placement`.
    """
    extras: dict[str, Any] = {"stages": pipeline_stages(graph, cluster, placement)}
    spec = split_spec(graph, placement)
    if spec is not None:
        extras["split_spec"], extras["split_unaligned"] = spec.split_spec, spec.unaligned
        extras["split_backward_away"] = spec.backward_away
        extras["stage_devices"] = [cluster.device_names[d] for d in spec.stage_devices]
    return extras


def _prefixes(path: str) -> list[str]:
    """Non-root module paths from the outermost to ``path``: ``"a.b.c"`` -> ``["a", "a.b", "a.b.c"]``."""
    parts = path.split(".") if path else []
    return [".".join(parts[:k]) for k in range(1, len(parts) + 1)]
