"""Placers that rank devices by speed rank them by how fast each runs the graph: the ops' costs for the device's
kind, not only its ``speed``. On the paper's machines (a CPU and K80s, every speed 1.0) the CPU ranked first."""

from __future__ import annotations

import numpy as np
import pytest

from gplace.baselines import METIS, MTopo, SingleDevice
from gplace.baselines._common import graph_speeds
from gplace.ir import Cluster, Device, Edge, Op, OpGraph
from gplace.runtime import Simulator

MB = 10**6


def _kind_costed_chain(n: int = 12) -> OpGraph:
    """A chain whose ops take 4 ms on a CPU and 1 ms on a GPU (as an LSTM step on the paper's K80s)."""
    ops = [Op(f"a{i}", "MatMul", None, kind_cost={"cpu": 4e-3, "gpu": 1e-3}, output_bytes=MB) for i in range(n)]
    return OpGraph.from_ops(ops, [Edge(f"a{i}", f"a{i + 1}") for i in range(n - 1)], name="kind_costed")


def _cluster(cpu_speed: float = 1.0) -> Cluster:
    devices = [Device("/CPU:0", "cpu", cpu_speed), Device("/GPU:0", "gpu", 1.0), Device("/GPU:1", "gpu", 1.0)]
    return Cluster.build(devices, default_bandwidth=1e9, name="cpu+2gpu")


@pytest.mark.parametrize("cpu_speed", [1.0, 1.5])
def test_single_device_fills_the_device_that_runs_the_graph_fastest(cpu_speed):
    """SingleDevice() picked argmax(speed): the CPU at equal speeds (index 0) or at speed 1.5, 3.2x and 2.7x slower
    than a GPU here (408.9 ms against 95.8 ms for the default lstm_lm on paper_2gpu)."""
    graph, cluster = _kind_costed_chain(), _cluster(cpu_speed)
    devices = np.asarray(SingleDevice().place(graph, cluster).devices)
    assert set(devices.tolist()) == {1}
    assert Simulator().measure(graph, cluster, SingleDevice().place(graph, cluster)).step_time == pytest.approx(12e-3)


def test_m_topo_fills_the_fastest_device_first():
    """m-TOPO filled devices by speed, the CPU first: the chain's first ops ran 4x slower there."""
    graph, cluster = _kind_costed_chain(), _cluster()
    devices = np.asarray(MTopo().place(graph, cluster).devices)
    assert devices[0] == 1 and 0 not in devices[: len(devices) // 2], devices


def test_metis_gives_the_heaviest_part_to_a_gpu():
    pytest.importorskip("pymetis")
    graph, cluster = _kind_costed_chain(), _cluster()
    devices = np.asarray(METIS().place(graph, cluster).devices)
    counts = np.bincount(devices, minlength=3)
    assert counts[0] < counts[1:].max(), counts


def test_graph_speeds_follow_the_speeds_where_the_kinds_cost_the_same():
    durations = np.array([[2.0, 1.0, 0.5], [4.0, 2.0, 1.0]])
    allowed = np.ones((2, 3), dtype=bool)
    speeds = graph_speeds(durations, allowed, np.array([1.0, 2.0, 4.0]))
    assert speeds / speeds[0] == pytest.approx([1.0, 2.0, 4.0])
    assert graph_speeds(durations, ~allowed, np.array([1.0, 2.0, 4.0])).tolist() == [1.0, 2.0, 4.0]


def test_graph_speeds_of_subnormal_durations_fall_back_to_the_speeds_without_a_warning():
    """1 / 2.5e-323 overflowed: numpy's RuntimeWarning through gplace.place, and every device ranked at inf."""
    import warnings

    durations = np.full((5, 2), 5e-324)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert graph_speeds(durations, np.ones((5, 2), dtype=bool), np.array([1.0, 2.0])).tolist() == [1.0, 2.0]
