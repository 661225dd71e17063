"""Every op on one device (the paper's "single CPU" and "single GPU" baselines)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from gplace.baselines._common import PlacementInfeasibleError, Units, build_units, graph_speeds, unit_durations
from gplace.baselines.base import Placer
from gplace.ir import Cluster, GraphError, OpGraph, Placement
from gplace.ir.placement import check_graph_and_cluster


class SingleDevice(Placer):
    """Put every op on one device; ops that may not run there go to their fastest allowed device.

    Not memory-aware: a graph too big for the device gives a placement the runtime reports as failed.

    Raises:
        PlacementInfeasibleError: no op of the graph may run on the device (none has a cost for its kind, or all are
            pinned elsewhere; with no ``device`` given, on any device of ``kind``): every op would go elsewhere, and
            the placement was reported as that device's.

    Args:
        device: device index or name. (default: ``None``, the device of ``kind`` that runs the graph fastest: by
            the ops' costs for each device's kind and its speed, :func:`~gplace.baselines._common.graph_speeds`)
        kind: device kind to pick the fastest device of, e.g. ``"gpu"``; ``None`` means any kind.
            Ignored when ``device`` is given. (default: ``None``)
    """

    name = "single"

    def __init__(self, device: int | str | None = None, kind: str | None = None) -> None:
        if device is not None and (isinstance(device, bool) or not isinstance(device, (int, np.integer, str))):
            raise TypeError(f"device must be a device index or name, got {device!r}")
        self.device = device
        self.kind = kind

    def target(self, cluster: Cluster, runnable: np.ndarray | None = None, speeds: np.ndarray | None = None) -> int:
        """Index of the device this placer fills: ``device``, else the fastest device of ``kind`` among those some
        op may run on (``runnable``, (D,) bool; every device when ``None``), by ``speeds`` ((D,), how fast each
        device runs the graph: :func:`~gplace.baselines._common.graph_speeds`; the devices' ``speed`` when
        ``None``).

        Raises:
            GraphError: the device is unknown, or the cluster has no device of ``kind``.
        """
        if isinstance(self.device, str):
            return cluster.index(self.device)
        if self.device is not None:
            if not 0 <= self.device < cluster.num_devices:
                raise GraphError(f"device index {self.device} out of range; cluster {cluster.name!r} "
                                 f"has {cluster.num_devices} devices")
            return int(self.device)
        ok = np.array([self.kind is None or k == self.kind for k in cluster.kinds])
        if not ok.any():
            raise GraphError(f"cluster {cluster.name!r} has no device of kind {self.kind!r}; "
                             f"kinds are {sorted(set(cluster.kinds))}")
        if runnable is not None and (ok & runnable).any():
            ok &= runnable
        speeds = cluster.speeds if speeds is None else speeds
        return int(np.argmax(np.where(ok, speeds, -np.inf)))

    def _place(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        return self._on(graph, cluster, _Shared.of(graph, cluster))

    def _on(self, graph: OpGraph, cluster: Cluster, shared: _Shared) -> np.ndarray:
        """(N,) devices of this placer's placement, from the work every device's shares."""
        units = shared.units
        target = self.target(cluster, units.allowed.any(0), shared.speeds)
        if units.num_units and not units.allowed[:, target].any():
            name = cluster.device_names[target]
            raise PlacementInfeasibleError(f"no op of graph {graph.name!r} may run on {name} (kind "
                                           f"{cluster.kinds[target]!r}: none has a cost for it or may go there)")
        unit_device = np.where(units.allowed[:, target], target, shared.fastest)
        return unit_device[units.unit_of]


@dataclass(frozen=True)
class _Shared:
    """What every device's :class:`SingleDevice` placement of one graph needs: its units, how fast each device runs
    the graph, and each unit's fastest allowed device."""

    units: Units
    speeds: np.ndarray
    """(D,) :func:`~gplace.baselines._common.graph_speeds`."""
    fastest: np.ndarray
    """(U,) int64: each unit's fastest allowed device."""

    @classmethod
    def of(cls, graph: OpGraph, cluster: Cluster) -> _Shared:
        units = build_units(graph, cluster)
        durations = graph.durations(cluster)
        speeds = graph_speeds(durations, units.allowed[units.unit_of], cluster.speeds)
        time = np.where(units.allowed, unit_durations(units, durations), np.inf)
        return cls(units, speeds, np.argmin(time, axis=1))


def each_device(graph: OpGraph, cluster: Cluster) -> Iterator[tuple[int, Placement | PlacementInfeasibleError]]:
    """:class:`SingleDevice` of each device of ``cluster`` in turn: ``(device, its placement)``, or ``(device, the
    error)`` where no op may run there. The units and durations are computed once (a placer per device computed
    them D times: 16 s for 20,000 ops on 128 devices)."""
    check_graph_and_cluster(graph, cluster)
    shared = _Shared.of(graph, cluster)
    for device in range(cluster.num_devices):
        try:
            devices = SingleDevice(device=device)._on(graph, cluster, shared)
        except PlacementInfeasibleError as err:
            yield device, err
            continue
        placement = Placement.for_graph(graph, devices)
        placement.validate(graph, cluster)
        yield device, placement
