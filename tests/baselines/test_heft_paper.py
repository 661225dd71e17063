"""HEFT on the worked example of its paper (Topcuoglu, Hariri & Wu 2002, Fig. 2 and Table 1): ranks, order,
processors."""

from __future__ import annotations

import pytest

from gplace.baselines import HEFT
from gplace.baselines._common import build_units, mean_durations, mean_edge_cost, rank_order, upward_rank
from gplace.ir import Cluster, Device, Edge, Op, OpGraph

COSTS = {1: (14, 16, 9), 2: (13, 19, 18), 3: (11, 13, 19), 4: (13, 8, 17), 5: (12, 13, 10),
         6: (13, 16, 9), 7: (7, 15, 11), 8: (5, 11, 14), 9: (18, 12, 20), 10: (21, 7, 16)}
"""Task -> its computation cost on P1, P2, P3 (Table 1)."""
COMMUNICATION = {(1, 2): 18, (1, 3): 12, (1, 4): 9, (1, 5): 11, (1, 6): 14, (2, 8): 19, (2, 9): 16, (3, 7): 23,
                 (4, 8): 27, (4, 9): 23, (5, 9): 13, (6, 8): 15, (7, 10): 17, (8, 10): 11, (9, 10): 13}
"""(task, task) -> its communication cost (Fig. 2), as bytes over links of 1 byte/s."""


def _paper_example() -> tuple[OpGraph, Cluster]:
    ops = [Op(f"n{i}", "T", None, kind_cost={f"p{k + 1}": float(c) for k, c in enumerate(costs)})
           for i, costs in COSTS.items()]
    edges = [Edge(f"n{a}", f"n{b}", bytes=c) for (a, b), c in COMMUNICATION.items()]
    cluster = Cluster.build([Device(f"P{k}", f"p{k}") for k in (1, 2, 3)], default_bandwidth=1.0, name="3p")
    return OpGraph.from_ops(ops, edges, name="topcuoglu"), cluster


def test_heft_ranks_orders_and_places_the_papers_example_as_the_paper_does():
    """n3's rank summed to 79.99999999999999 and n4's to 80.0: the tie went to n4 by rounding, where the paper
    (and rank_order's docstring) break it in topological order, n3 first (found by a probe of the baselines)."""
    graph, cluster = _paper_example()
    units = build_units(graph, cluster)
    weight = mean_durations(graph.durations(cluster), units.allowed[units.unit_of])
    rank = upward_rank(graph, weight, mean_edge_cost(graph, cluster))
    assert rank.tolist() == pytest.approx([108, 77, 80, 80, 69, 63.333, 42.667, 35.667, 44.333, 14.667], abs=1e-3)
    order = [graph.op_names[i] for i in rank_order(graph, rank)]
    assert order == ["n1", "n3", "n4", "n2", "n5", "n6", "n9", "n7", "n8", "n10"]
    placed = HEFT().place(graph, cluster).to_names(graph, cluster)
    assert placed == {"n1": "P3", "n2": "P1", "n3": "P3", "n4": "P2", "n5": "P3", "n6": "P2", "n7": "P3",
                      "n8": "P1", "n9": "P2", "n10": "P2"}


def test_infinite_ranks_keep_the_order_topological():
    """An infinite rank made the scale infinite and every rank NaN or 0: [inf, inf, 1] on a chain came out
    [2, 0, 1] (found by a review of the tie-breaking)."""
    import numpy as np

    from gplace.testing import chain

    assert rank_order(chain((1.0, 1.0, 1.0)), np.array([np.inf, np.inf, 1.0])).tolist() == [0, 1, 2]
