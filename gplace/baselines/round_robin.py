"""Round-robin placement over units in topological order."""

from __future__ import annotations

import numpy as np

from gplace.baselines._common import build_units
from gplace.baselines.base import Placer
from gplace.ir import Cluster, OpGraph


class RoundRobin(Placer):
    """Deal units (colocation groups and lone ops) to devices in turn, in topological order of first ops.

    A unit that may not run on the next device in turn goes to the next one it may run on; the turn then
    continues after that device. Not memory-aware.
    """

    name = "round_robin"

    def _place(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        units = build_units(graph, cluster)
        num_devices = cluster.num_devices
        unit_device = np.full(units.num_units, -1, dtype=np.int64)
        turn = 0
        for op in graph.topological_order.tolist():
            unit = units.unit_of[op]
            if unit_device[unit] >= 0:
                continue
            allowed = units.allowed[unit]
            while not allowed[turn % num_devices]:
                turn += 1
            unit_device[unit] = turn % num_devices
            turn += 1
        return unit_device[units.unit_of]
