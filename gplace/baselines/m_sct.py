"""Baechi's m-SCT: favourite children from an LP relaxation, then list scheduling that keeps them close."""

from __future__ import annotations

import logging
import math
import numbers

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from gplace.baselines._common import (
    MemoryLedger,
    build_units,
    mean_durations,
    mean_edge_cost,
    place_fitting,
    upward_rank,
)
from gplace.baselines._list_scheduler import EtfScheduler
from gplace.baselines.base import Placer
from gplace.ir import Cluster, OpGraph
from gplace.ir.errors import check_finite, check_sizes

logger = logging.getLogger(__name__)


class MSCT(Placer):
    """Small-communication-time list scheduling (Hanen and Munier; Baechi's m-SCT, Jeon et al., SoCC 2020).

    1. Favourite children: solve the LP relaxation over start times ``s``, makespan ``w`` and edge
       variables ``x_ij in [0, 1]`` (0: ``j`` is ``i``'s favourite child, so the transfer is free)::

           min w  s.t.  s_i + p_i + c_ij x_ij <= s_j   for every edge i -> j
                        s_i + p_i <= w,  s_i >= 0
                        sum_j x_ij >= outdeg(i) - 1    (at most one favourite child per op)
                        sum_i x_ij >= indeg(j) - 1     (at most one favourite parent per op)

       with ``p_i`` the mean duration over allowed devices and ``c_ij`` the mean transfer time, using
       SciPy's HiGHS. Edges are rounded to favourite when ``x_ij < 0.5`` (ties broken towards smaller
       ``x``, keeping at most one per parent and per child). When the LP has more than
       ``max_lp_variables`` variables, or fails, or takes longer than ``lp_seconds`` (a communication-heavy
       graph of 6,500 ops took 82 s), the favourite child is instead chosen greedily: the child over the edge with
       the most bytes (logged).
    2. Schedule as m-ETF (:class:`~gplace.baselines.METF`), except that a device whose last op has a
       ready, unscheduled favourite child is kept for that child when it can start there no later than
       on any other device (Baechi's "awake" state), so the parent's output need not move. A child that is
       the first of its colocation group (of more than one op) to be scheduled is kept when its group's work,
       started with it, would end there no later than on any other device with room (``start + the summed
       durations of the group's members``, ties to the earlier start), as m-ETF places such a group.

    Memory-aware as m-ETF; colocation groups as m-ETF's.

    Args:
        max_lp_variables: largest LP (edges + ops + 1 variables) solved before falling back to the
            greedy favourite child. (default: ``20_000``)
        threshold: an edge is a favourite-child edge when its LP value is below this. (default: ``0.5``)
        lp_seconds: HiGHS's time limit for the LP; past it, the greedy favourite child (so on a slower machine a
            large graph's placement may differ). (default: ``20.0``)

    Raises:
        ValueError: ``max_lp_variables`` not a whole number >= 0, ``threshold`` not a finite number or
            ``lp_seconds`` not a number > 0, naming it.
        PlacementInfeasibleError: from :meth:`place`, when an op fits on no device it may run on.
    """

    name = "m_sct"

    def __init__(self, max_lp_variables: int = 20_000, threshold: float = 0.5, lp_seconds: float = 20.0) -> None:
        check_sizes("MSCT", 0, max_lp_variables=max_lp_variables)  # 0: always the greedy favourite child
        check_finite("MSCT", threshold=threshold)
        if isinstance(lp_seconds, bool) or not isinstance(lp_seconds, numbers.Real) or not 0 < lp_seconds < math.inf:
            raise ValueError(f"MSCT: lp_seconds must be a number of seconds > 0, got {lp_seconds!r}")
        self.max_lp_variables = max_lp_variables
        self.threshold = threshold
        self.lp_seconds = float(lp_seconds)

    def _place(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        units = build_units(graph, cluster)
        durations = graph.durations(cluster)
        weight = mean_durations(durations, units.allowed[units.unit_of])
        edge_cost = mean_edge_cost(graph, cluster)
        favourite = self.favourite_children(graph, weight, edge_cost)
        priority = upward_rank(graph, weight, edge_cost)
        return place_fitting(graph, cluster, units, lambda ledger: _SctScheduler(
            graph, cluster, ledger, durations, priority, favourite).run())

    def favourite_children(self, graph: OpGraph, weight: np.ndarray, edge_cost: np.ndarray) -> np.ndarray:
        """(N,) int64 favourite child of every op, -1 for none.

        Shapes:
            ``weight`` (N,) seconds per op; ``edge_cost`` (E,) seconds per edge.
        """
        num_vars = graph.num_edges + graph.num_ops + 1
        if graph.num_edges == 0:
            return np.full(graph.num_ops, -1, dtype=np.int64)
        if num_vars > self.max_lp_variables:
            logger.info("m-SCT: LP for %r has %d variables (> %d); using the greedy favourite child "
                        "(largest edge bytes)", graph.name, num_vars, self.max_lp_variables)
            return _match(graph, np.argsort(-graph.edge_bytes, kind="stable"))
        unit = max(float(weight.max(initial=0.0)), float(edge_cost.max(initial=0.0))) or 1.0
        x = _solve_lp(graph, weight / unit, edge_cost / unit, self.lp_seconds)  # in units of the largest: HiGHS's
        # tolerances are absolute, so in seconds or in milliseconds it chose other favourite children (3.4 % apart)
        if x is None:
            logger.warning("m-SCT: LP for %r failed or took longer than lp_seconds=%g; using the greedy favourite "
                           "child", graph.name, self.lp_seconds)
            return _match(graph, np.argsort(-graph.edge_bytes, kind="stable"))
        order = np.argsort(x, kind="stable")
        return _match(graph, order[x[order] < self.threshold])


def _solve_lp(graph: OpGraph, weight: np.ndarray, edge_cost: np.ndarray,
              seconds: float | None = None) -> np.ndarray | None:
    """(E,) relaxed favourite-child edge values, or ``None`` when HiGHS does not find an optimum (in ``seconds``,
    where given).

    Variables are ordered ``[x (E), s (N), w]``.
    """
    n, e = graph.num_ops, graph.num_edges
    src, dst = graph.edge_index
    er, nr = np.arange(e), np.arange(n)
    # precedence rows: s_i - s_j + c_ij x_ij <= -p_i; makespan rows: s_i - w <= -p_i
    rows = [er, er, er, e + nr, e + nr]
    cols = [e + src, e + dst, er, e + nr, np.full(n, e + n)]
    vals = [np.ones(e), -np.ones(e), edge_cost, np.ones(n), -np.ones(n)]
    rhs = [-weight[src], -weight]
    num_rows = e + n
    for key in (src, dst):  # at most one favourite child per op; at most one favourite parent per op
        deg = np.bincount(key, minlength=n)
        many = deg >= 2
        row_of = np.cumsum(many) - 1
        sel = many[key]
        rows.append(num_rows + row_of[key[sel]])
        cols.append(np.flatnonzero(sel))
        vals.append(-np.ones(int(sel.sum())))
        rhs.append(1.0 - deg[many])
        num_rows += int(many.sum())
    a_ub = sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(num_rows, e + n + 1)).tocsr()
    cost = np.zeros(e + n + 1)
    cost[-1] = 1.0
    bounds = [(0.0, 1.0)] * e + [(0.0, None)] * (n + 1)
    result = linprog(cost, A_ub=a_ub, b_ub=np.concatenate(rhs), bounds=bounds, method="highs",
                     options={} if seconds is None else {"time_limit": seconds})
    return result.x[:e] if result.status == 0 else None


def _match(graph: OpGraph, edges: np.ndarray) -> np.ndarray:
    """Favourite child per op from candidate edges in preference order, one per parent and per child."""
    src, dst = graph.edge_index[0].tolist(), graph.edge_index[1].tolist()
    favourite = [-1] * graph.num_ops
    has_parent = [False] * graph.num_ops
    for k in edges.tolist():
        i, j = src[k], dst[k]
        if favourite[i] < 0 and not has_parent[j]:
            favourite[i], has_parent[j] = j, True
    return np.array(favourite, dtype=np.int64)


class _SctScheduler(EtfScheduler):
    """m-ETF that keeps a device for the favourite child of the op it ran last.

    Shapes:
        ``favourite`` (N,) int64, favourite child of every op, -1 for none.
    """

    def __init__(
        self, graph: OpGraph, cluster: Cluster, ledger: MemoryLedger, durations: np.ndarray,
        priority: np.ndarray, favourite: np.ndarray,
    ) -> None:
        super().__init__(graph, cluster, ledger, durations, priority)
        self.favourite: list[int] = favourite.tolist()

    def _candidate(self, d: int) -> tuple[float, int] | None:
        child = self._awaited_child(d)
        if child < 0:
            return super()._candidate(d)
        return max(self.avail[d], self.arrival[child][d]), child

    def _awaited_child(self, d: int) -> int:
        """The favourite child device ``d`` waits for, or -1: ready, unscheduled, and earliest on ``d``."""
        last = self.last[d]
        child = self.favourite[last] if last >= 0 else -1
        if child < 0 or self.device[child] >= 0 or self.arrival[child] is None:
            return -1
        arrival = self.arrival[child]
        if d not in arrival or not self.ledger.fits(child, d):
            return -1
        here = max(self.avail[d], arrival[d])
        if self.places_group(child):  # the group's work ending there, not the child's start
            key = self.group_finish(child, d, here)
            for other, t in arrival.items():
                if other != d and self.group_finish(child, other, max(self.avail[other], t)) < key \
                        and self.ledger.fits(child, other):
                    return -1
            return child
        for other, t in arrival.items():
            if other != d and max(self.avail[other], t) < here and self.ledger.fits(child, other):
                return -1
        return child
