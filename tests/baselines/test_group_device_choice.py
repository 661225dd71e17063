"""HEFT, m-ETF and m-SCT choose a colocation group's device for the whole group's work, not its first member's.

The first member of a group to be scheduled places the whole group. Before, the device was chosen for that op
alone: a weight with a negligible cost ties on every device, the tie went to device 0 (the CPU), and its heavy
reader, colocated with it, followed (4.0 s where the GPU takes 1.0 s).
"""

from __future__ import annotations

import pytest

from gplace.baselines import HEFT, METF, MSCT, Placer
from gplace.ir import Cluster, Device, Edge, Op, OpGraph
from gplace.runtime.simulator import schedule

MB = 2**20

PLACERS = {"heft": HEFT, "m_etf": METF, "m_sct": MSCT, "m_sct_greedy": lambda: MSCT(max_lp_variables=0)}


def _cpu_gpu() -> Cluster:
    return Cluster.build([Device("/CPU:0", "cpu", 1.0, 10**12), Device("/GPU:0", "gpu", 1.0, 10**12)],
                         default_bandwidth=1e9, name="cpu+gpu")


def _reader(colocation: str) -> Op:
    """The heavy op: 4 s on the CPU, 1 s on the GPU."""
    return Op("read", "MatMul", None, kind_cost={"cpu": 4.0, "gpu": 1.0}, output_bytes=MB, colocation=colocation)


def weight_and_reader() -> OpGraph:
    """A weight (1e-4 s anywhere, no inputs) colocated with the heavy op that reads it."""
    ops = [Op("weight", "VariableV2", 1e-4, persistent_memory=MB, output_bytes=MB, colocation="layer"),
           _reader("layer")]
    return OpGraph.from_ops(ops, [Edge("weight", "read")], name="weight_and_reader")


def cpu_input_to_group() -> OpGraph:
    """An op pinned to the CPU feeds a light op colocated with the heavy op after it: the light op starts
    earliest on the CPU (its input is there; for m-SCT it is also the CPU op's favourite child)."""
    ops = [Op("load", "Placeholder", 1e-3, output_bytes=MB, pinned="cpu"),
           Op("cast", "Cast", 1e-4, output_bytes=MB, colocation="layer"), _reader("layer")]
    return OpGraph.from_ops(ops, [Edge("load", "cast"), Edge("cast", "read")], name="cpu_input_to_group")


@pytest.fixture(params=list(PLACERS.values()), ids=list(PLACERS))
def placer(request: pytest.FixtureRequest) -> Placer:
    return request.param()


@pytest.mark.parametrize("build", [weight_and_reader, cpu_input_to_group])
def test_a_group_goes_where_its_whole_work_finishes_first(placer: Placer, build) -> None:
    graph, cluster = build(), _cpu_gpu()
    placement = placer.place(graph, cluster)
    names = placement.to_names(graph, cluster)
    assert names["read"] == "/GPU:0"
    assert names[graph.op_names[graph.colocation.index("layer")]] == "/GPU:0"
    assert schedule(graph, cluster, placement).step_time < 1.01  # on the CPU: over 4 s
