"""Baechi's m-ETF: memory-constrained earliest-time-first list scheduling (Jeon et al., SoCC 2020)."""

from __future__ import annotations

import numpy as np

from gplace.baselines._common import build_units, mean_durations, mean_edge_cost, place_fitting, upward_rank
from gplace.baselines._list_scheduler import EtfScheduler
from gplace.baselines.base import Placer
from gplace.ir import Cluster, OpGraph


class METF(Placer):
    """Repeatedly start the (ready op, device) pair with the earliest start time.

    An op is ready once all its producers are scheduled; its start on a device is
    ``max(device free, inputs arrived)``, an input from another device arriving
    ``latency + bytes / bandwidth`` after its producer finishes. Ties between ops go to the higher HEFT
    upward rank (mean durations and mean transfers), ties between devices to the earlier finish.
    Devices run one op at a time, in the order scheduled.

    Colocation groups: when the chosen op is the first of its group (of more than one op) to be scheduled, it
    places the whole group, so it goes to the device where the group's work would end earliest, started with it:
    ``its start there + the summed durations there of every member``. It stays on the chosen device unless
    another device with room is strictly earlier (ties to the earlier start, then the lower index), and starts
    there (possibly later than the chosen start); the other members follow it. (The chosen pair alone would
    let, say, a weight with a negligible cost, starting at once on every device, take its heavy reader to
    device 0, the CPU.) An op outside any group is scheduled exactly as above.

    Memory-aware: an op is only started on a device with room for its unit (its colocation group, or
    the op alone; persistent memory plus output bytes). A group's first member reserves memory for the
    whole group; where the result still runs out of memory in ``sim-v1``, the pass is redone booking every copy
    as soon as both its ends' devices are known (:func:`~gplace.baselines._common.place_fitting`).

    Raises:
        PlacementInfeasibleError: from :meth:`place`, when an op fits on no device it may run on.
    """

    name = "m_etf"

    def _place(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        units = build_units(graph, cluster)
        durations = graph.durations(cluster)
        priority = upward_rank(graph, mean_durations(durations, units.allowed[units.unit_of]),
                               mean_edge_cost(graph, cluster))
        return place_fitting(graph, cluster, units,
                             lambda ledger: EtfScheduler(graph, cluster, ledger, durations, priority).run())
