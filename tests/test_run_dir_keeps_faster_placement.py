"""A run directory whose placement.json is faster than a new run's result there (its checkpoint deleted, as a
refusal advised, and run again with a smaller budget; or run again without the refine that found it): the faster
one is kept beside the new one as placement.previous.json, with a warning. It was replaced silently."""

from __future__ import annotations

import json
import logging

import gplace
from gplace.testing import random_dag, uniform_cluster


def _step_time(path):
    return json.loads(path.read_text())["step_time"]


def test_a_faster_placement_is_kept_and_a_slower_one_is_not(tmp_path, caplog):
    graph, cluster = random_dag(24, seed=3), uniform_cluster(3)
    run_dir = tmp_path / "run"
    gplace.place(graph, cluster, method="heft", run_dir=run_dir)
    fast = _step_time(run_dir / "placement.json")
    with caplog.at_level(logging.WARNING, logger="gplace"):
        gplace.place(graph, cluster, method="single", run_dir=run_dir)
    slow = _step_time(run_dir / "placement.json")
    assert slow > fast
    assert _step_time(run_dir / "placement.previous.json") == fast
    assert "placement.previous.json" in caplog.text
    for method in ("round_robin", "single"):  # whatever they give, the fastest is the one kept
        gplace.place(graph, cluster, method=method, run_dir=run_dir)
        assert _step_time(run_dir / "placement.previous.json") == fast
    caplog.clear()
    (run_dir / "placement.previous.json").unlink()
    with caplog.at_level(logging.WARNING, logger="gplace"):
        gplace.place(graph, cluster, method="heft", run_dir=run_dir)  # faster than what it replaces: nothing kept
    assert not (run_dir / "placement.previous.json").exists() and "placement.previous.json" not in caplog.text


def test_the_same_placement_measured_slower_again_is_not_kept(tmp_path):
    """A noisy runtime measures one placement a little slower the second time: that is no other result to keep."""
    graph, cluster = random_dag(24, seed=3), uniform_cluster(3)
    run_dir = tmp_path / "run"
    gplace.place(graph, cluster, method="heft", run_dir=run_dir)
    doc = json.loads((run_dir / "placement.json").read_text())
    doc["step_time"] *= 0.9  # as a noisy runtime measured it the first time
    (run_dir / "placement.json").write_text(json.dumps(doc))
    gplace.place(graph, cluster, method="heft", run_dir=run_dir)
    assert not (run_dir / "placement.previous.json").exists()


def test_a_kept_placement_is_not_replaced_by_a_slower_one_though_it_is_measured_again(tmp_path):
    """placement.previous.json holds A (0.5 s), placement.json B (0.9 s), and A is measured again at 1 s: B is no
    faster than what is kept. A kept placement equal to the new one was taken as none, and B replaced it."""
    graph, cluster = random_dag(24, seed=3), uniform_cluster(3)
    run_dir = tmp_path / "run"
    gplace.place(graph, cluster, method="heft", run_dir=run_dir)
    a = _step_time(run_dir / "placement.json")
    gplace.place(graph, cluster, method="single", run_dir=run_dir)  # B: A is kept
    for name, step_time in (("placement.previous.json", 0.5 * a), ("placement.json", 0.9 * a)):
        doc = json.loads((run_dir / name).read_text())
        doc["step_time"] = step_time  # as a noisy runtime measured them
        (run_dir / name).write_text(json.dumps(doc))
    gplace.place(graph, cluster, method="heft", run_dir=run_dir)  # A again, at a
    assert _step_time(run_dir / "placement.previous.json") == 0.5 * a


def test_a_finished_runs_metrics_are_kept_when_a_run_starts_afresh_beside_them(tmp_path, caplog):
    """Its checkpoint deleted (as a refusal advised), a finished run's directory run again: the new search emptied
    the old metrics.jsonl."""
    graph, cluster = random_dag(12, seed=1), uniform_cluster(2)
    run_dir = tmp_path / "run"
    gplace.place(graph, cluster, budget="4 samples", seed=0, run_dir=run_dir)
    before = (run_dir / "metrics.jsonl").read_bytes()
    assert b'"step"' in before
    (run_dir / "checkpoint.pt").unlink()
    with caplog.at_level(logging.WARNING, logger="gplace"):
        gplace.place(graph, cluster, budget="4 samples", seed=0, run_dir=run_dir)
    assert (run_dir / "metrics.previous.jsonl").read_bytes() == before
    assert "metrics.previous.jsonl" in caplog.text and b'"step"' in (run_dir / "metrics.jsonl").read_bytes()
