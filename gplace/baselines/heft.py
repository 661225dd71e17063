"""HEFT: Heterogeneous Earliest Finish Time (Topcuoglu, Hariri and Wu, 2002), memory-aware."""

from __future__ import annotations

import numpy as np

from gplace.baselines._common import (
    MemoryLedger,
    Units,
    build_units,
    mean_durations,
    mean_edge_cost,
    place_fitting,
    rank_order,
    unit_durations,
    upward_rank,
)
from gplace.baselines.base import Placer
from gplace.ir import Cluster, OpGraph


class HEFT(Placer):
    """Upward-rank list scheduling onto the device with the earliest finish time.

    1. Rank: ``rank(i) = mean duration of i + max over successors j of (mean transfer(i->j) + rank(j))``,
       with durations averaged over the devices ``i`` may run on and transfers costed as
       ``bytes x mean(1 / bandwidth) + mean latency`` over pairs of distinct devices.
    2. Schedule ops by decreasing rank (ties in topological order). Each goes to the device giving the
       earliest finish time, ``max(device free, inputs arrived) + duration``, where an input from another
       device arrives ``latency + bytes / bandwidth`` after its producer finishes. Insertion-free: an op
       is appended after the last op on its device; links are not modelled as contended.
    3. Colocation groups: the first member of a group (of more than one op) to be scheduled places the whole
       group, so it goes to the device minimising its earliest finish plus the durations there of the group's
       other members (ties to its own earlier finish, then to the lower device index); the other members follow
       it there. (Its finish alone would let, say, a weight with a negligible cost, tied on every device, take
       its heavy reader to device 0, the CPU.) An op outside any group is scheduled by step 2 alone.

    Memory-aware: a device is skipped when the op's unit (its colocation group, or the op alone) does
    not fit in its remaining memory (see :class:`~gplace.baselines._common.MemoryLedger`: with the copies it
    would receive and its temporary memory); the first member of a group reserves memory for the whole group.
    Where the result still runs out of memory in ``sim-v1`` (copies a group's later members receive), the pass
    is redone booking every copy as soon as both its ends' devices are known
    (:func:`~gplace.baselines._common.place_fitting`).

    Raises:
        PlacementInfeasibleError: from :meth:`place`, when an op fits on no device it may run on.
    """

    name = "heft"

    def _place(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        units = build_units(graph, cluster)
        durations = graph.durations(cluster)
        weight = mean_durations(durations, units.allowed[units.unit_of])
        rank = upward_rank(graph, weight, mean_edge_cost(graph, cluster))
        order = rank_order(graph, rank)
        return place_fitting(graph, cluster, units,
                             lambda ledger: _schedule(graph, cluster, units, ledger, durations, order))


def _schedule(
    graph: OpGraph, cluster: Cluster, units: Units, ledger: MemoryLedger, durations: np.ndarray, order: np.ndarray
) -> np.ndarray:
    """Earliest-finish-time assignment of ops in ``order`` (a topological order); returns (N,) devices. The first
    member of a group of several ops to be scheduled adds, per device, the durations there of the group's other
    members (``units.size`` > 1)."""
    ptr, src, eid = graph.in_csr
    ptr_l, src_l = ptr.tolist(), src.tolist()
    nbytes = graph.edge_bytes[eid].astype(np.float64).tolist()
    inv_bw = (1.0 / cluster.bandwidth).tolist()
    lat = cluster.latency.tolist()
    dur = durations.tolist()
    finish = [0.0] * graph.num_ops
    device = [-1] * graph.num_ops
    avail = [0.0] * cluster.num_devices
    unit_of, unit_device = units.unit_of.tolist(), ledger.unit_device
    grouped = (units.size > 1).tolist()
    unit_dur = unit_durations(units, durations).tolist()
    for i in order.tolist():
        candidates = ledger.candidates(i)
        if not candidates:
            raise ledger.infeasible(graph, i)
        u = unit_of[i]
        group = unit_dur[u] if grouped[u] and unit_device[u] < 0 else None  # i places its group
        best_d, best_f, best_g = -1, np.inf, np.inf
        for d in candidates:
            ready = avail[d]
            for k in range(ptr_l[i], ptr_l[i + 1]):
                p = src_l[k]
                dp = device[p]
                t = finish[p] if dp == d else finish[p] + lat[dp][d] + nbytes[k] * inv_bw[dp][d]
                if t > ready:
                    ready = t
            f = ready + dur[i][d]
            g = f if group is None else f + (group[d] - dur[i][d])  # + the group's other members there
            if g < best_g or (g == best_g and f < best_f):
                best_d, best_f, best_g = d, f, g
        ledger.assign(i, best_d)
        device[i], finish[i], avail[best_d] = best_d, best_f, best_f
    return np.array(device, dtype=np.int64)
