"""Link latency in the list-scheduling baselines, hand-computed: HEFT's and M-ETF's earliest finish times and the
mean transfer cost that ranks ops all add the link's latency to a transfer, even one of zero bytes."""

from __future__ import annotations

import pytest

from gplace.baselines import HEFT, METF
from gplace.baselines._common import mean_comm, mean_edge_cost
from gplace.ir import Edge, Op, OpGraph
from gplace.testing import uniform_cluster


def _fork() -> OpGraph:
    """a (1 s) feeds b and c (1 s each) with zero-byte edges."""
    ops = [Op("a", "MatMul", 1.0), Op("b", "MatMul", 1.0), Op("c", "MatMul", 1.0)]
    return OpGraph.from_ops(ops, [Edge("a", "b", 0), Edge("a", "c", 0)], name="fork")


@pytest.mark.parametrize("placer", [HEFT(), METF()], ids=["heft", "m_etf"])
def test_a_slow_link_keeps_a_fork_on_one_device(placer) -> None:
    """With 5 s links, moving b or c off a's device finishes at 1 + 5 + 1 = 7 s, after 3 s on a's device: every
    op stays there. Without latency the second branch finishes at 2 s on the other device: it moves."""
    g = _fork()
    assert len(set(placer.place(g, uniform_cluster(2, latency=5.0)).devices.tolist())) == 1
    assert len(set(placer.place(g, uniform_cluster(2, latency=0.0)).devices.tolist())) == 2


def test_mean_transfer_adds_the_mean_latency() -> None:
    """Two devices, 100 B/s and 0.5 s links: 0.01 s per byte and 0.5 s latency; a 100 B edge costs 1.5 s."""
    cluster = uniform_cluster(2, bandwidth=100.0, latency=0.5)
    ops = [Op("a", "MatMul", 1.0), Op("b", "MatMul", 1.0)]
    g = OpGraph.from_ops(ops, [Edge("a", "b", 100)], name="pair")
    assert mean_comm(cluster) == pytest.approx((0.01, 0.5))
    assert mean_edge_cost(g, cluster).tolist() == pytest.approx([1.5])
