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
