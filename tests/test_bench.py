"""The bench: records, the Table-1-shaped results, a suite run with plots, and `gplace bench` end to end."""

import json
import math
import os
import subprocess
import sys

import pytest

from gplace.baselines import SingleDevice
from gplace.bench import BenchCase, BenchRecord, results_table, run_suite
from gplace.runtime import Simulator
from gplace.testing import two_branches, uniform_cluster


def _rec(method, step_time, reason="", seconds=1.0):
    return BenchRecord("g", "c", method, step_time, 2.0, seconds, not math.isfinite(step_time), reason)


def test_results_table_by_hand():
    records = [_rec("single", 8.0), _rec("heft", 5.0), _rec("oom", math.inf, "out of memory on /GPU:0"),
               _rec("learned", 4.0, seconds=30.0)]
    table = results_table(records, learned=["learned"])
    header, _, row = table.splitlines()
    assert header.split(" | ")[2:7] == ["single", "heft", "oom", "learned", "lower bound"]
    cells = [c.strip() for c in row.strip("| ").split("|")]
    assert cells[2:7] == ["8000 ms", "5000 ms", "OOM", "4000 ms", "2000 ms"]
    assert cells[7:] == ["1.250x", "2.000", "30 s"]  # 5.0 / 4.0 over the best baseline; 4.0 / 2.0 to the bound


def test_suite_writes_results_and_plots(tmp_path):
    from gplace.experiment import place
    from gplace.training import ReinforceTrainer

    def search(graph, cluster, runtime, run_dir, best_baseline):
        assert best_baseline is not None and best_baseline.devices.tolist() == [0] * graph.num_ops
        from gplace.encoders import LSTMEncoder
        from gplace.policies import Seq2SeqPolicy

        trainer = ReinforceTrainer(updates=3, samples_per_update=2, imitation_steps=5)
        return place(graph, cluster, encoder=LSTMEncoder(hidden_size=16), policy=Seq2SeqPolicy(2, hidden_size=16),
                     runtime=runtime, trainer=trainer, run_dir=run_dir, warm_start=best_baseline)

    case = BenchCase(two_branches(length=3), uniform_cluster(2), Simulator())
    records = run_suite([lambda: case], {"random": _Fixed([1, 0, 0, 0, 0, 0, 0, 0]), "single": SingleDevice(0)},
                        {"seq2seq": search}, tmp_path)
    assert [r.method for r in records] == ["random", "single", "seq2seq"]
    assert records[2].step_time <= records[1].step_time  # warm-started from the best baseline (single)
    doc = json.loads((tmp_path / "results.json").read_text())
    keys = {"graph", "cluster", "method", "step_time", "lower_bound", "search_seconds", "failed"}
    assert all(keys <= set(r) for r in doc)
    assert all(r["lower_bound"] <= r["step_time"] for r in doc)
    pngs = sorted(p.name.rsplit("-", 1)[1] for p in (tmp_path / "plots").glob("*.png"))
    assert pngs == ["curve.png", "timeline.png"]
    assert (tmp_path / "plots" / "two_branches-2xgpu-seq2seq-curve.png").read_bytes()[:4] == b"\x89PNG"
    # a fresh bench (resume=false) starts each learned search anew: its earlier run directory is removed
    run_dir = tmp_path / "runs" / "two_branches-2xgpu-seq2seq"
    assert (run_dir / "checkpoint.pt").is_file()
    (run_dir / "stale.txt").write_text("from the bench before")
    again = run_suite([lambda: case], {"single": SingleDevice(0)}, {"seq2seq": search}, tmp_path, plots=False,
                      fresh=True)
    assert not (run_dir / "stale.txt").exists() and (run_dir / "checkpoint.pt").is_file()
    assert again[1].step_time == records[2].step_time


@pytest.mark.slow
def test_gplace_bench_cli(tmp_path):
    args = [sys.executable, "-m", "gplace", "bench", f"out_dir={tmp_path}", "search.seconds=2", "search.updates=2",
            "search.plots=false", f"hydra.run.dir={tmp_path / 'h'}",
            "cases=[['graph=lstm_lm','cluster=paper_2gpu','graph.steps=2','graph.hidden=64','graph.vocab=100']]",
            "learned.seq2seq.overrides=['encoder.hidden_size=16','policy.hidden_size=16','policy.attention_size=8']",
            "learned.seq2seq_warm.overrides=['encoder.hidden_size=16','policy.hidden_size=16',"
            "'trainer.imitation_steps=3']"]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    methods = [r["method"] for r in json.loads((tmp_path / "results.json").read_text())]
    assert methods == ["single_cpu", "single_gpu", "round_robin", "random", "metis", "heft", "m_topo", "m_etf",
                       "m_sct", "seq2seq", "seq2seq_warm"]
    assert "seq2seq vs best baseline" in (tmp_path / "RESULTS.md").read_text()


class _Fixed:
    """A placer returning one fixed placement (a deliberately bad baseline)."""

    name = "fixed"

    def __init__(self, devices):
        self.devices = devices

    def place(self, graph, cluster):
        from gplace.ir import Placement

        return Placement.for_graph(graph, self.devices)
