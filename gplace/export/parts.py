"""Cut a placed graph into per-device parts that run one after another (framework-free).

A part is a set of ops on one device; every edge runs from a part to itself or to a later part, so a runtime
without multi-device support can run the parts in order, passing the cut tensors along. Where the devices'
data flow has no cycle (device A never feeds B that feeds A again) there is **one part per device**; otherwise
ops are taken in topological order, each joining the latest part of its device unless one of its inputs is in a
later part, in which case it opens a new part at the end; then the ops of a colocation group (``Op.colocation``) on
one device join the group's latest part there where their readers allow (a QDQ weight's ``DequantizeLinear``, which
reads nothing, with its ``Gemm``: the pair a runtime fuses stays in one part).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from gplace.ir import Cluster, InvalidPlacementError, OpGraph, Placement
from gplace.ir.errors import short_repr
from gplace.ir.placement import check_graph_and_cluster, check_placement

T = TypeVar("T")


@dataclass(frozen=True)
class Part:
    """Ops on one device that run together; parts run in list order."""

    device: int
    """Cluster device index."""
    stage: int
    """Position in the run order (0, 1, ...)."""
    ops: tuple[int, ...]
    """Op indices, in topological order."""


def device_parts(graph: OpGraph, cluster: Cluster, placement: Placement, *, skip: Collection[int] = ()
                 ) -> list[Part]:
    """The placed graph's parts in run order (see the module docstring); empty devices get none.

    Args:
        graph: the graph.
        cluster: the devices.
        placement: the placement of ``graph`` on ``cluster``.
        skip: ops in no part, whose edges constrain nothing: values every part is given (graph inputs, weights
            copied into each part that reads them). (default: none)

    Raises:
        TypeError: an argument is of the wrong type (names it), or ``skip`` holds no op indices.
        ValueError: an op index in ``skip`` is out of range.
        InvalidPlacementError: the placement does not fit the graph or cluster (names the op and device).
    """
    check_placement(placement)
    placement.validate(graph, cluster)  # checks the graph's and cluster's types
    devices = placement.devices
    skipped = np.zeros(graph.num_ops, dtype=bool)
    skipped[_op_indices(skip, graph.num_ops)] = True
    order = [i for i in graph.topological_order.tolist() if not skipped[i]]
    edges = graph.edge_index[:, ~(skipped[graph.edge_index[0]] | skipped[graph.edge_index[1]])]
    device_order = _device_order(edges, devices, order)
    if device_order is not None:
        keys = {d: k for k, d in enumerate(device_order)}
        key = {i: keys[int(devices[i])] for i in order}
    else:
        key = _greedy_parts(edges, devices, order, graph.colocation)
    members: dict[int, list[int]] = {}
    for i in order:
        members.setdefault(key[i], []).append(i)
    return [Part(int(devices[ops[0]]), k, tuple(ops)) for k, (_, ops) in enumerate(sorted(members.items()))]


def _op_indices(skip: Collection[int], num_ops: int) -> list[int]:
    """``skip`` as op indices, each an int in ``[0, num_ops)`` (a name, or -1 for the last op, is refused).

    Raises:
        TypeError: an entry is no int.
        ValueError: an entry is out of range.
    """
    ops = list(skip)
    for op in ops:
        if isinstance(op, bool) or not isinstance(op, int | np.integer):
            raise TypeError(f"skip holds op indices (ints), got {op!r}")
        if not 0 <= op < num_ops:
            raise ValueError(f"skip: op index {op} is out of range for a graph of {num_ops} ops")
    return ops


def check_types(graph: object, cluster: object, placement: object) -> None:
    """Refuse a ``graph``, ``cluster`` or ``placement`` of the wrong type (swapped, a list of device indices) in one
    line naming it, as :func:`~gplace.ir.placement.check_graph_and_cluster` and
    :func:`~gplace.ir.placement.check_placement` do: before reading ``graph.source`` (``Placement.validate``
    checks the types too, but after it).

    Raises:
        TypeError: names the argument.
    """
    check_graph_and_cluster(graph, cluster)
    check_placement(placement)


def check_device_map(device_map: object, framework: str, example: str) -> None:
    """Refuse a ``device_map`` that is neither ``None`` nor a mapping of cluster device names (a list of pairs or a
    str was ignored, or searched with ``in``), naming the ``framework`` its values are devices of.

    Raises:
        ValueError: in one line, with ``example`` of a good one.
    """
    if device_map is None:
        return
    if not isinstance(device_map, Mapping) or not all(isinstance(name, str) for name in device_map):
        raise ValueError(f"device_map must map cluster device names to {framework} devices, e.g. {example}, "
                         f"got {device_map!r}")


def framework_devices(cluster: Cluster, convert: Callable[[str, Mapping[str, str] | None], T],
                      device_map: Mapping[str, str] | None = None, distinct: bool = True) -> list[T]:
    """Each cluster device's framework device, ``convert(name, device_map)`` (e.g.
    :func:`gplace.runtime.torch_runtime.torch_device`), with ``distinct`` one per cluster device
    (:func:`merged_devices`; without: pipeline stages, which stay apart on one device).

    Raises:
        InvalidPlacementError: a device maps to none, or ``device_map`` is no mapping of names to devices
            (``convert`` raised ``ValueError``) or has a key that names no device of ``cluster`` (a misspelt one
            was ignored); or, with ``distinct``, cluster devices merge into one framework device (names them and
            it).
    """
    names = device_map if isinstance(device_map, Mapping) else {}  # another kind: convert names it
    unknown = [key for key in names if isinstance(key, str) and key not in cluster.device_names]
    if unknown:
        raise InvalidPlacementError(f"device_map names no device of cluster {cluster.name!r}: "
                                    f"{', '.join(map(short_repr, unknown))}; its devices are "
                                    f"{', '.join(map(repr, cluster.device_names))}")
    try:
        devices = [convert(name, device_map) for name in cluster.device_names]
    except ValueError as err:
        raise InvalidPlacementError(str(err)) from None
    problems = distinct and merged_devices(dict(zip(cluster.device_names, devices, strict=True)), device_map)
    if problems:
        raise InvalidPlacementError("; ".join(problems))
    return devices


def merged_devices(mapped: Mapping[str, object], device_map: Mapping[str, object] | None) -> list[str]:
    """A message per framework device that two or more cluster devices without a ``device_map`` entry map to
    (``"/CPU:0"`` and ``"/cpu:00"``: TensorFlow's ``/device:CPU:0``), where the placement's devices would silently
    become one; ``device_map`` entries share one on purpose. Torch's ``cpu`` is shared by design (every
    ``/CPU:i``)."""
    explicit = device_map or {}
    owners: dict[str, list[str]] = {}
    for name, device in mapped.items():
        owners.setdefault(str(device), []).append(name)
    return [f"cluster devices {' and '.join(map(repr, names))} all map to framework device {device!r}: give "
            "each its own, or share it on purpose with device_map entries for all of them but one"
            for device, names in owners.items()
            if device != "cpu" and sum(name not in explicit for name in names) > 1]


def part_of(parts: list[Part], num_ops: int) -> np.ndarray:
    """(N,) int64 index into ``parts`` of each op (-1 for an op in none)."""
    out = np.full(num_ops, -1, dtype=np.int64)
    for k, part in enumerate(parts):
        out[list(part.ops)] = k
    return out


def _device_order(edges: np.ndarray, devices: np.ndarray, ops: list[int]) -> list[int] | None:
    """The devices of ``ops`` in an order all cross-device ``edges`` (2, E) follow, or ``None`` if their data
    flow has a cycle."""
    src, dst = devices[edges[0]], devices[edges[1]]
    cross = {(int(a), int(b)) for a, b in zip(src.tolist(), dst.tolist(), strict=True) if a != b}
    used = sorted({int(devices[i]) for i in ops})
    indeg = {d: 0 for d in used}
    for _, b in cross:
        indeg[b] += 1
    ready, order = [d for d in used if indeg[d] == 0], []
    while ready:
        d = ready.pop(0)
        order.append(d)
        for a, b in sorted(cross):
            if a == d:
                indeg[b] -= 1
                if indeg[b] == 0:
                    ready.append(b)
    return order if len(order) == len(used) else None


def _greedy_parts(edges: np.ndarray, devices: np.ndarray, order: list[int],
                  colocation: tuple[str | None, ...] = ()) -> dict[int, int]:
    """Part index of each op of ``order``: the latest part of its device where no input is in a later part,
    else a new part at the end; then :func:`_join_groups`."""
    inputs: dict[int, list[int]] = {}
    for u, v in edges.T.tolist():
        inputs.setdefault(v, []).append(u)
    part: dict[int, int] = {}
    latest: dict[int, int] = {}  # device -> its latest part
    count = 0
    for v in order:
        d = int(devices[v])
        needed = max((part[u] for u in inputs.get(v, ())), default=-1)
        if latest.get(d, -1) < needed or d not in latest:
            latest[d], count = count, count + 1
        part[v] = latest[d]
    if colocation:
        _join_groups(part, edges, devices, order, colocation)
    return part


def _join_groups(part: dict[int, int], edges: np.ndarray, devices: np.ndarray, order: list[int],
                 colocation: tuple[str | None, ...]) -> None:
    """Move each colocation group's ops on one device into the group's latest part there, where every reader of
    the op moved is in that part or a later one (a ``DequantizeLinear`` of a weight, which reads nothing, went to
    an earlier part than its ``Gemm``: the pair onnxruntime fuses was cut)."""
    readers: dict[int, list[int]] = {}
    for u, v in edges.T.tolist():
        readers.setdefault(u, []).append(v)
    groups: dict[tuple[str, int], list[int]] = {}
    for v in order:
        if colocation[v] is not None:
            groups.setdefault((colocation[v], int(devices[v])), []).append(v)
    for members in groups.values():
        target = max(part[v] for v in members)
        for v in reversed(members):  # readers first: a member read by another moves after it
            if all(part[r] >= target for r in readers.get(v, ()) if r in part):
                part[v] = target
