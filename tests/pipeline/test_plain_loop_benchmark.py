"""The benchmarks' plain-Python pipe-v3 loop (the yardstick simulator.md's pipe-v3 rows are checked against) still
reads the simulator's prepared arrays and agrees with it: when their number grew, simulator_throughput.py failed
before timing anything, and no test noticed."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from gplace.pipeline import PipelineSimulator
from gplace.testing import uniform_cluster

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "pipeline_simulator_speed.py"


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_the_plain_loop_equals_the_simulator(schedule):
    spec = importlib.util.spec_from_file_location("pipeline_simulator_speed", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    graph, cluster = bench.training_dag(40, seed=1), uniform_cluster(3)
    sim = PipelineSimulator(4, schedule, threads=1)
    rows = bench.contiguous_placements(graph, 3, 5, seed=2)
    plain = [bench.plain_minibatch_time(sim._prepared(graph, cluster), row) for row in rows]
    assert np.array(plain).tolist() == sim.minibatch_times(graph, cluster, rows).tolist()


def test_the_strict_torch_order_of_the_order_benchmark_gives_pipe_v3s_time_where_the_orders_agree():
    """benchmarks/pipeline_torch_order.py's strict simulation of torch's 1F1B order (the figures docs/runtimes.md
    gives for pipe-v3 against torch) models pipe-v3's costs and transfers: on chains where pipe-v3 ran torch's order
    on every device, the two times are equal."""
    path = SCRIPT.with_name("pipeline_torch_order.py")
    spec = importlib.util.spec_from_file_location("pipeline_torch_order", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rng, agreed = np.random.default_rng(3), 0
    for index in range(40):
        graph, microbatches, devices = bench.random_chain(rng, index)
        time_v3, in_order = bench.pipe_v3_order(graph, microbatches, devices)
        if in_order:
            agreed += 1
            assert time_v3 == pytest.approx(bench.strict_minibatch_time(graph, microbatches, devices), rel=1e-9)
    assert agreed >= 20
    row = bench.measure(seed=0, chains=20)
    assert row["same_time"] >= row["same_order"] and row["low"] <= 1.0 <= row["high"]


def test_the_plain_loop_ranks_stages_by_the_forward_ops_that_run():
    """A forward input that takes no time (ops_that_run leaves it out) ranked its device first under 1F1B in the
    plain loop, whose time then differed from the simulator's (1.5 against 2.0 on three ops, M = 2)."""
    from gplace.ir import Edge, Op, OpGraph

    spec = importlib.util.spec_from_file_location("pipeline_simulator_speed", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    ops = [Op("f0", "F", 0.0, output_bytes=1, phase="forward"), Op("f1", "F", 1.0, output_bytes=1, phase="forward"),
           Op("f2", "F", 1.0, output_bytes=1, phase="forward")]
    graph = OpGraph.from_ops(ops, [Edge("f0", "f1", 0), Edge("f1", "f2", 0)], name="zero_input")
    cluster, row = uniform_cluster(2), np.array([0, 1, 0])
    sim = PipelineSimulator(2, "1f1b", threads=1)
    assert bench.plain_minibatch_time(sim._prepared(graph, cluster), row) == sim.minibatch_times(graph, cluster,
                                                                                                 row[None])[0]
