"""A learned search of which no placement runs (every one out of memory) is recorded with the samples it measured
and its own seconds: results.json said ``samples: 0`` after the log said "failed measurements, 8 of 8 placements"."""

import math

import gplace
from gplace.bench.runner import run_learned
from gplace.ir import Cluster, Device, Edge, Op, OpGraph


def test_a_search_where_nothing_fits_records_the_samples_it_measured():
    ops = [Op(f"op{i}", "X", 1e-3, output_bytes=100, persistent_memory=10**12) for i in range(4)]
    graph = OpGraph.from_ops(ops, [Edge(f"op{i}", f"op{i + 1}") for i in range(3)], name="too_big")
    cluster = Cluster.build([Device(f"/GPU:{i}", "gpu", 1.0, 10**9) for i in range(2)], default_bandwidth=1e9,
                            name="small")

    def search(run_dir):
        return gplace.place(graph, cluster, method="learned", budget="8 samples", seed=0)

    record, report = run_learned(graph, cluster, "seq2seq", search, lower_bound=0.0)
    assert report is None and record.failed and math.isinf(record.step_time)
    assert record.samples == 8
    assert record.search_seconds > 0
