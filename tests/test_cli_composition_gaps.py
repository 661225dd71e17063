"""From a probe of the Hydra command line: a search that found nothing that ran was reported as "the trained
policy's greedy placement" (it is the single-device fallback); a resumed bench kept results measured with other
settings of a method; ``--help`` listed groups ``gplace place`` and ``gplace bench`` refuse; ``gplace show`` drew
a placement on a device its file does not list."""

from __future__ import annotations

import logging
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gplace
from gplace.baselines import RandomPlacer, RoundRobin
from gplace.bench import BenchCase, run_suite
from gplace.runtime import Simulator
from gplace.show import check_shown
from gplace.testing import random_dag
from gplace.zoo import paper_cluster

ROOT = Path(__file__).resolve().parents[1]


def test_a_search_that_ran_nothing_reports_the_single_device_fallback_as_such():
    graph, cluster = random_dag(20, seed=0), paper_cluster(2, gpu_memory=30_000_000)
    report = gplace.place(graph, cluster, method="learned", budget="16 samples", seed=0)
    assert report.train.best_sample is None
    assert report.train.found_at == -math.inf  # gplace's summary: "every op on one device"


def test_a_resumed_bench_measures_again_a_case_whose_methods_are_set_otherwise(tmp_path, caplog):
    graph = random_dag(12, seed=1)

    def case() -> BenchCase:
        return BenchCase(graph, paper_cluster(2), Simulator())

    placers = {"round_robin": RoundRobin(), "random": RandomPlacer(seed=0)}
    first = run_suite([case], placers, {}, tmp_path, plots=False, settings={"round_robin": "a", "random": "s0"})
    with caplog.at_level(logging.INFO):
        again = run_suite([case], placers, {}, tmp_path, plots=False, previous=first,
                          settings={"round_robin": "a", "random": "s0"})
    assert "skipped" in caplog.text and again == first
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        changed = run_suite([case], {**placers, "random": RandomPlacer(seed=7)}, {}, tmp_path, plots=False,
                            previous=first, settings={"round_robin": "a", "random": "s7"})
    assert "random set otherwise than when measured" in caplog.text
    assert {r.method: r.settings for r in changed} == {"round_robin": "a", "random": "s7"}


@pytest.mark.parametrize(("command", "listed", "absent"), [
    ("place", "objective: ", "policy: "),
    ("bench", "(none: this command selects no group)", "graph: "),
])
def test_help_lists_only_the_groups_a_command_takes(command, listed, absent):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    out = subprocess.run([sys.executable, "-m", "gplace", command, "--help"], capture_output=True, text=True,
                         timeout=300, env=env).stdout
    groups = out.split("== Configuration groups ==")[1].split("== Config ==")[0]
    assert listed in groups and absent not in groups, groups


def test_show_refuses_an_op_on_a_device_its_file_does_not_list():
    doc = {"placement": {"a": "/GPU:7"}, "devices": ["/CPU:0", "/GPU:0"], "step_time": None}
    with pytest.raises(ValueError, match="op 'a' is placed on '/GPU:7', which is not among its 'devices'"):
        check_shown(doc, "p.json")


def test_place_says_samples_is_unused_by_a_pipeline_placer(tmp_path):
    """``samples=50`` was ignored without a word: local_search ran its own 10 s (115,436 samples)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "-m", "gplace", "place", "objective=pipeline", "method=gpipe", "samples=50",
                           "graph.steps=2", "graph.hidden=64", "graph.vocab=100", f"hydra.run.dir={tmp_path / 'run'}"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "samples=50 is unused: pipeline placer gpipe takes budget=" in proc.stderr


def test_a_resumed_bench_keeps_what_plots_do_not_change_and_measures_again_a_case_set_otherwise(tmp_path):
    """The digest of a learned search took in search.plots (turning plots off removed every search's run
    directory) and not the case's own overrides (a case's other seed kept the old results)."""
    from gplace.ir.serialize import graph_to_dict, save_json

    save_json(graph_to_dict(random_dag(10, seed=0)), tmp_path / "tiny.json")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}

    def bench(case: str, *more: str) -> str:
        cases = f"cases=[['graph=file','graph.path=tiny.json'{case}]]"
        learned = "+learned={x: {overrides: ['encoder=sage','policy=mlp'], warm_start: false}}"
        proc = subprocess.run([sys.executable, "-m", "gplace", "bench", cases, "~learned", learned,
                               "~baselines", "+baselines={rr: {_target_: gplace.baselines.RoundRobin}}",
                               "out_dir=out", "search.seconds=5", "search.updates=1", *more],
                              capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout + proc.stderr

    bench("")
    assert "already in the results, skipped" in bench("", "search.plots=false")
    assert "set otherwise than when measured" in bench(",'seed=3'")
