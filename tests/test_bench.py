"""The bench: records, the Table-1-shaped results, a suite run with plots, and `gplace bench` end to end."""

import json
import math
import os
import subprocess
import sys

import pytest

from gplace.baselines import SingleDevice
from gplace.bench import BenchCase, BenchRecord, results_table, run_suite
from gplace.run_dir import RunDirConflictError
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


def _search(graph, cluster, runtime, run_dir, best_baseline):
    from gplace.encoders import LSTMEncoder
    from gplace.experiment import place
    from gplace.policies import Seq2SeqPolicy
    from gplace.training import ReinforceTrainer

    return place(graph, cluster, encoder=LSTMEncoder(hidden_size=16), policy=Seq2SeqPolicy(2, hidden_size=16),
                 runtime=runtime, trainer=ReinforceTrainer(updates=2, samples_per_update=2), run_dir=run_dir)


def test_a_search_refused_its_run_directory_stops_the_bench_instead_of_recording_a_failure(tmp_path):
    """A damaged checkpoint (or another process in the directory) was recorded as a failed search, and a resumed
    bench then skipped the case for good."""
    case = BenchCase(two_branches(length=3), uniform_cluster(2), Simulator())
    run_dir = tmp_path / "runs" / "two_branches-2xgpu-seq2seq"
    run_dir.mkdir(parents=True)
    (run_dir / "checkpoint.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(RunDirConflictError, match="cannot be read"):
        run_suite([lambda: case], {"single": SingleDevice(0)}, {"seq2seq": _search}, tmp_path, plots=False)
    assert not (tmp_path / "results.json").exists()


def test_two_cases_of_one_graph_and_cluster_are_refused_not_skipped(tmp_path):
    """Results are keyed by graph and cluster: a second case of the pair (another seed) was silently skipped."""
    case = BenchCase(two_branches(length=3), uniform_cluster(2), Simulator())
    seen: set = set()
    run_suite([lambda: case], {"single": SingleDevice(0)}, {}, tmp_path, plots=False, seen=seen)
    with pytest.raises(ValueError, match="two bench cases place graph 'two_branches' on cluster '2xgpu'"):
        run_suite([lambda: case], {"single": SingleDevice(0)}, {}, tmp_path, plots=False, seen=seen)


def test_a_resumed_search_is_recorded_with_the_seconds_of_all_its_processes(tmp_path):
    """The record timed only the last process of a resumed search (1.97 s of a 4 s search)."""
    from gplace.bench.runner import run_learned

    graph, cluster = two_branches(length=3), uniform_cluster(2)
    record, report = run_learned(graph, cluster, "seq2seq", lambda d: _search(graph, cluster, Simulator(), d, None),
                                 1.0, tmp_path)
    assert record.search_seconds == report.train.seconds


def test_results_are_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    """A bench killed (or out of disk) while rewriting results.json left half a file, and every finished case
    with it; now the earlier file stays until the new one is complete."""
    import pathlib

    from gplace.bench.report import write_results

    write_results([_rec("single", 8.0)], tmp_path, learned=[])
    kept = (tmp_path / "results.json").read_bytes()
    real = pathlib.Path.write_text

    def disk_full(self, text, *args, **kwargs):
        real(self, text[:10], *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_text", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_results([_rec("single", 8.0), _rec("heft", 5.0)], tmp_path, learned=[])
    monkeypatch.undo()
    assert (tmp_path / "results.json").read_bytes() == kept


def test_a_damaged_pipeline_results_file_is_named(tmp_path):
    from gplace.bench.pipeline import load_pipeline_records

    for text in ("", "[{\"x\": 1}]", "{\"a\": 1}"):  # a raw JSONDecodeError, KeyError or TypeError before
        (tmp_path / "pipeline_results.json").write_text(text)
        with pytest.raises(ValueError, match="pipeline_results.json: not a gplace pipeline results file"):
            load_pipeline_records(tmp_path / "pipeline_results.json")


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


@pytest.mark.parametrize(("override", "message"), [
    ("search.seconds=-1", "search.seconds must be a finite number > 0 or null, got -1"),
    ("search.updates=abc", "search.updates must be a whole number >= 1, got 'abc'"),
    ("learned.seq2seq.overrides=['trainer.lr=-1']", "learned.seq2seq: lr must be > 0"),
])
def test_bad_search_settings_are_refused_before_any_baseline_runs(tmp_path, override, message):
    """They were refused by the first search's trainer, after every baseline had run, and named its own key
    (max_seconds for search.seconds)."""
    args = [sys.executable, "-m", "gplace", "bench", f"out_dir={tmp_path}", override, f"hydra.run.dir={tmp_path / 'h'}",
            "cases=[['graph=lstm_lm','cluster=paper_2gpu','graph.steps=2','graph.hidden=64','graph.vocab=100']]"]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "results.json").exists()


class _Fixed:
    """A placer returning one fixed placement (a deliberately bad baseline)."""

    name = "fixed"

    def __init__(self, devices):
        self.devices = devices

    def place(self, graph, cluster):
        from gplace.ir import Placement

        return Placement.for_graph(graph, self.devices)
