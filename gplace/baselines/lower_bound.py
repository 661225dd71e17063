"""A lower bound on the step time of any placement of a graph on a cluster."""

from __future__ import annotations

import numpy as np

from gplace.ir import Cluster, OpGraph
from gplace.ir.placement import check_graph_and_cluster


def step_time_lower_bound(graph: OpGraph, cluster: Cluster) -> float:
    """The largest of three bounds no placement and schedule can beat (up to rounding: a simulator's sum of the same
    durations in another order may come out an ulp below it).

    The runtime model assumed: each device runs one op at a time, an op takes ``durations[i, d]`` on
    device ``d``, starts after its inputs finish, and communication only adds time. Colocation is
    ignored (a relaxation, so the bound stays valid). With ``m_i = min over allowed d of
    durations[i, d]``:

    1. **Critical path**: the longest path with every op at ``m_i`` and free communication.
    2. **Work over devices**: ``sum_i m_i / D``. Device ``d`` is busy ``sum_{i on d} durations[i, d]``
       ``>= sum_{i on d} m_i``, and the busiest device is busy at least the average.
    3. **Work over speed**, per set of eligible devices: with ``w_i = min over allowed d of
       durations[i, d] x speed_d`` (the op's cost at speed 1 on its cheapest kind), device ``d`` does at
       most ``T x speed_d`` of such work in time ``T``, so ``T >= sum_{i in S} w_i / sum_{d in A(S)} speed_d``
       for any set ``S`` of ops that may only run on devices ``A(S)``. Taken for all ops (``A`` = every
       device) and for the ops restricted to each device kind (pinned ops). With equal speeds and
       kinds, (3) for all ops equals (2); with heterogeneous speeds and one generic cost per op it is the
       tighter of the two, but with per-kind costs (an op far dearer on the fast kind) (2) may be tighter.

    Returns:
        Seconds; 0.0 for an empty graph.

    Raises:
        GraphError: an op may run on no device of the cluster.
        TypeError: ``graph`` or ``cluster`` is not gplace's.
    """
    check_graph_and_cluster(graph, cluster)
    if graph.num_ops == 0:
        return 0.0
    durations = graph.durations(cluster)
    allowed = graph.allowed_devices(cluster)
    fastest = np.where(allowed, durations, np.inf).min(1)
    bounds = [critical_path(graph, fastest), float(fastest.sum()) / cluster.num_devices]
    bounds += _speed_bounds(durations, allowed, cluster)
    return max(bounds)


def critical_path(graph: OpGraph, durations: np.ndarray) -> float:
    """Length of the longest path when op ``i`` takes ``durations[i]`` and edges are free.

    Shapes:
        ``durations`` (N,) seconds.
    """
    ptr, src, _ = graph.in_csr
    ptr_l, src_l = ptr.tolist(), src.tolist()
    dur = durations.tolist()
    finish = [0.0] * graph.num_ops
    for i in graph.topological_order.tolist():
        start = 0.0
        for k in range(ptr_l[i], ptr_l[i + 1]):
            if finish[src_l[k]] > start:
                start = finish[src_l[k]]
        finish[i] = start + dur[i]
    return max(finish, default=0.0)


def _speed_bounds(durations: np.ndarray, allowed: np.ndarray, cluster: Cluster) -> list[float]:
    """Bound (3) for all ops and for the ops restricted to each device kind."""
    speeds = cluster.speeds
    work = np.where(allowed, durations * speeds[None, :], np.inf).min(1)
    out = [float(work.sum() / speeds.sum())]
    kinds = np.array(cluster.kinds)
    for kind in sorted(set(cluster.kinds)):
        on_kind = kinds == kind
        only_here = ~(allowed & ~on_kind[None, :]).any(1)
        if only_here.any():
            out.append(float(work[only_here].sum() / speeds[on_kind].sum()))
    return out
