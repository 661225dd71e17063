"""A placement: one device per op."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from gplace.ir.cluster import Cluster
from gplace.ir.errors import GraphError, InvalidPlacementError
from gplace.ir.frozen import ReadOnlyArrays
from gplace.ir.graph import OpGraph


def check_graph_and_cluster(graph: object, cluster: object) -> None:
    """Raise a ``TypeError`` naming the argument when ``graph`` is not an :class:`OpGraph` (e.g. an ONNX model or
    a torch module, which the importers convert) or ``cluster`` not a :class:`Cluster`."""
    check_op_graph(graph)
    check_cluster(cluster)


def check_cluster(cluster: object) -> None:
    """Raise a ``TypeError`` naming the argument when ``cluster`` is not a :class:`Cluster`."""
    if not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a gplace Cluster, got {type(cluster).__name__}; build one with "
                        f"Cluster.build or read a file with gplace.load_cluster")


def check_op_graph(graph: object) -> None:
    """Raise a ``TypeError`` naming the argument when ``graph`` is not an :class:`OpGraph`."""
    if not isinstance(graph, OpGraph):
        raise TypeError(f"graph must be a gplace OpGraph, got {type(graph).__name__}; convert a model with "
                        f"gplace.from_onnx, gplace.from_torch or gplace.from_tensorflow, or read a file with "
                        f"gplace.load_graph")


def check_has_ops(graph: OpGraph) -> None:
    """Raise :class:`~gplace.ir.errors.GraphError` when ``graph`` has no ops: nothing to place."""
    if graph.num_ops == 0:
        raise GraphError(f"graph {graph.name!r} has no ops: nothing to place")


@dataclass(frozen=True, eq=False)
class Placement(ReadOnlyArrays):
    """Device index per op, tied to the graph it was made for.

    Device indices are positions in :attr:`Cluster.devices`.
    """

    devices: np.ndarray = field(repr=False)
    """(N,) int64 device index of each op."""
    graph_fingerprint: str | None = None
    """:attr:`OpGraph.fingerprint` of the graph; ``None`` skips that check."""

    def __post_init__(self) -> None:
        arr = np.asarray(self.devices)
        if arr.ndim != 1 or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)):
            raise InvalidPlacementError(f"placement must be a 1-D integer array, got shape {arr.shape} {arr.dtype}")
        if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:  # int64 made it negative
            raise InvalidPlacementError(f"placement has device index {arr.max()}, too large for an int64 index")
        arr = arr.astype(np.int64, copy=True)
        arr.setflags(write=False)
        object.__setattr__(self, "devices", arr)

    @classmethod
    def for_graph(cls, graph: OpGraph, devices: Sequence[int] | np.ndarray) -> Placement:
        """A placement of ``graph`` (records its fingerprint).

        Raises:
            InvalidPlacementError: ``devices`` is not one integer per op of ``graph`` (named here, not when the
                placement is first measured).
            TypeError: ``graph`` is not an :class:`OpGraph`.
        """
        check_op_graph(graph)
        placement = cls(np.asarray(devices), graph.fingerprint)
        placement._check_length(graph)
        return placement

    @classmethod
    def single(cls, graph: OpGraph, device: int) -> Placement:
        """Every op on one device.

        Raises:
            InvalidPlacementError: ``device`` is not a device index: an int >= 0 (not a float or a bool).
            TypeError: ``graph`` is not an :class:`OpGraph`.
        """
        check_op_graph(graph)
        try:
            index = operator.index(device)  # an int, a NumPy or 0-d integer; not a float (1.5 was taken as 1)
        except TypeError:
            index = None
        if index is None or isinstance(device, bool) or str(getattr(device, "dtype", "")).endswith("bool"):
            raise InvalidPlacementError(f"device must be a device index (an int), got {device!r}")
        if not 0 <= index < 2**63:
            raise InvalidPlacementError(f"device is {index}, not a device index (0 up to a cluster's device count)")
        return cls.for_graph(graph, np.full(graph.num_ops, index, dtype=np.int64))

    @classmethod
    def from_names(cls, graph: OpGraph, cluster: Cluster, mapping: Mapping[str, str]) -> Placement:
        """From ``{op name: device name}``; every op must be named.

        Raises:
            InvalidPlacementError: an op is missing or unknown, or a device is unknown (every kind of problem
                found is named in one message).
            TypeError: ``graph`` or ``cluster`` is not gplace's, or ``mapping`` is no mapping (a list of pairs:
                ``dict(pairs)`` makes one).
        """
        check_graph_and_cluster(graph, cluster)
        if not isinstance(mapping, Mapping):
            raise TypeError(f"Placement.from_names: mapping must be a mapping of op name to device name (dict(pairs) "
                            f"makes one from pairs), got {type(mapping).__name__}")
        problems = []
        unknown = set(mapping) - set(graph.op_index)
        if unknown:
            problems.append(f"placement names op {sorted(unknown)[0]!r}, not in graph {graph.name!r}")
        missing = [op for op in graph.op_names if op not in mapping]
        if missing:
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            problems.append(f"placement has no device for op {missing[0]!r} ({len(missing)} ops of graph "
                            f"{graph.name!r} missing: {', '.join(map(repr, missing[:5]))}{more})")
        placed = [op for op in graph.op_names if op in mapping]
        unknown_devices = sorted({str(mapping[op]) for op in placed if mapping[op] not in cluster.device_names})
        if unknown_devices:
            first = next(op for op in placed if str(mapping[op]) == unknown_devices[0])
            problems.append(f"op {first!r} placed on unknown device {unknown_devices[0]!r} (unknown devices: "
                            f"{unknown_devices}); cluster has {list(cluster.device_names)}")
        if problems:
            raise InvalidPlacementError("; ".join(problems))
        index = {name: d for d, name in enumerate(cluster.device_names)}
        return cls.for_graph(graph, np.array([index[mapping[op]] for op in graph.op_names], dtype=np.int64))

    def __len__(self) -> int:
        return int(self.devices.size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Placement):
            return NotImplemented
        return self.graph_fingerprint == other.graph_fingerprint and np.array_equal(self.devices, other.devices)

    def __hash__(self) -> int:
        return hash((self.graph_fingerprint, self.devices.tobytes()))

    def to_names(self, graph: OpGraph, cluster: Cluster) -> dict[str, str]:
        """``{op name: device name}``.

        Raises:
            InvalidPlacementError: wrong length or graph, or a device index outside the cluster (naming the op).
        """
        self._check_indices(graph, cluster)
        names = cluster.device_names
        return {op: names[d] for op, d in zip(graph.op_names, self.devices.tolist(), strict=True)}

    def validate(self, graph: OpGraph, cluster: Cluster) -> None:
        """Check the placement against its graph and cluster.

        Raises:
            InvalidPlacementError: wrong length or graph, unknown device, a colocation group split,
                an op on a device kind it is not pinned to or has no cost for; the message names the op.
            TypeError: ``graph`` or ``cluster`` is not gplace's (:func:`check_graph_and_cluster`).
        """
        self._check_indices(graph, cluster)
        self._check_colocation(graph, cluster)
        self._check_pins(graph, cluster)

    def _check_length(self, graph: OpGraph) -> None:
        if len(self) != graph.num_ops:
            raise InvalidPlacementError(
                f"placement has {len(self)} entries but graph {graph.name!r} has {graph.num_ops} ops")

    def check_graph(self, graph: OpGraph) -> None:
        """The part of :meth:`validate` that needs no cluster: one device index >= 0 per op of ``graph``, and
        made for it (where the placement records a fingerprint).

        Raises:
            InvalidPlacementError: the first problem, naming the op where there is one.
        """
        self._check_length(graph)
        if self.graph_fingerprint is not None and self.graph_fingerprint != graph.fingerprint:
            raise InvalidPlacementError(
                f"placement was made for graph {self.graph_fingerprint}, not {graph.name!r} ({graph.fingerprint})"
            )
        bad = np.flatnonzero(self.devices < 0)
        if bad.size:
            i = bad[0]
            raise InvalidPlacementError(f"op {graph.op_names[i]!r} placed on device {self.devices[i]}, not a device "
                                        "index (>= 0)")

    def _check_indices(self, graph: OpGraph, cluster: Cluster) -> None:
        """One device index in the cluster per op of this graph."""
        check_graph_and_cluster(graph, cluster)
        self.check_graph(graph)
        d = cluster.num_devices
        bad = np.flatnonzero(self.devices >= d)
        if bad.size:
            i = bad[0]
            raise InvalidPlacementError(
                f"op {graph.op_names[i]!r} placed on device {self.devices[i]}; cluster {cluster.name!r} has {d} devices"
            )

    def _check_colocation(self, graph: OpGraph, cluster: Cluster) -> None:
        first: dict[str, int] = {}
        for i, group in enumerate(graph.colocation):
            if group is None:
                continue
            j = first.setdefault(group, i)
            if self.devices[j] != self.devices[i]:
                names = cluster.device_names
                raise InvalidPlacementError(
                    f"colocation group {group!r} split: op {graph.op_names[j]!r} on {names[self.devices[j]]!r}, "
                    f"op {graph.op_names[i]!r} on {names[self.devices[i]]!r}"
                )

    def _check_pins(self, graph: OpGraph, cluster: Cluster) -> None:
        for i, pin in enumerate(graph.pinned):
            if pin is not None and cluster.kinds[self.devices[i]] != pin:
                dev = cluster.devices[self.devices[i]]
                raise InvalidPlacementError(
                    f"op {graph.op_names[i]!r} is pinned to kind {pin!r} but placed on {dev.name!r} ({dev.kind})"
                )
        finite = np.isfinite(graph.durations(cluster)[np.arange(len(self)), self.devices])
        if not finite.all():
            i = int(np.flatnonzero(~finite)[0])
            dev = cluster.devices[self.devices[i]]
            raise InvalidPlacementError(
                f"op {graph.op_names[i]!r} has no cost for kind {dev.kind!r} but is placed on {dev.name!r}"
            )


def check_placement(placement: object, name: str = "placement") -> None:
    """Raise a ``TypeError`` naming the argument ``name`` when ``placement`` is not a :class:`Placement` (a list or
    array of device indices, say: a Placement also carries its graph's fingerprint, which measuring checks)."""
    if not isinstance(placement, Placement):
        raise TypeError(f"{name} must be a gplace Placement, got {type(placement).__name__}; make one from device "
                        f"indices with Placement.for_graph(graph, devices)")
