"""The per-device figures of a run's results summary (W&B's) are one key per device: devices ``/GPU:0``,
``GPU:0`` and ``//GPU:0`` all became ``peak_memory/GPU:0``, so the summary kept one of the three."""

import gplace
from gplace.experiment import report_results
from gplace.ir import Edge, Op, OpGraph
from gplace.ir.serialize import cluster_from_dict
from gplace.runtime import Simulator


def _cluster(names):
    return cluster_from_dict({"format": "gplace.cluster", "version": 1, "name": "c",
                              "devices": [{"name": n, "kind": "gpu"} for n in names],
                              "default_link": {"bandwidth": 1e12, "latency": 0}})


def _summary(tmp_path, names):
    ops = [Op(f"o{i}", "MatMul", 1e-3, output_bytes=1000, persistent_memory=1000 * (i + 1)) for i in range(6)]
    graph = OpGraph.from_ops(ops, [Edge("o0", f"o{i}") for i in range(1, 6)], name="g")
    report = gplace.place(graph, _cluster(names), method="heft", run_dir=tmp_path)
    summary, _, _ = report_results(report, Simulator(), tmp_path)
    return {k: v for k, v in summary.items() if k.startswith("peak_memory/")}


def test_devices_whose_short_names_collide_keep_their_whole_names(tmp_path):
    names = ["/GPU:0", "GPU:0", "//GPU:0"]
    assert sorted(_summary(tmp_path, names)) == sorted(f"peak_memory/{n}" for n in names)


def test_devices_keep_short_keys_where_they_do_not_collide(tmp_path):
    assert sorted(_summary(tmp_path, ["/GPU:0", "/GPU:1"])) == ["peak_memory/GPU:0", "peak_memory/GPU:1"]
