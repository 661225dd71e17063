"""JSON readers given JSON that Python cannot read (nested 200,000 deep, a 5,000-digit number) raise their own
error naming the file, or skip the line, not a raw RecursionError or ValueError."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gplace.bench.runner import load_records
from gplace.loggers import JsonlLogger
from gplace.profiling import ProfileError, read_ort_profile

DEEP = "[" * 200_000 + "]" * 200_000
BIG = "[" + "9" * 5000 + "]"
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("text, why", [(DEEP, "nested too deeply"), (BIG, "more than")], ids=["deep", "big"])
def test_an_ort_profile_python_cannot_read_is_a_profile_error_naming_the_file(tmp_path, text, why):
    path = tmp_path / "profile.json"
    path.write_text(text)
    with pytest.raises(ProfileError, match=f"profile.json: not an onnxruntime profile .*{why}"):
        read_ort_profile(path)


@pytest.mark.parametrize("text", [DEEP, BIG], ids=["deep", "big"])
def test_bench_results_python_cannot_read_are_a_value_error_naming_the_file(tmp_path, text):
    path = tmp_path / "results.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"results.json: not a gplace bench results file \((JSON nested too deeply "
                                         r"to read|not valid JSON for gplace: a number in it has more than)"):
        load_records(path)


@pytest.mark.parametrize("text", [DEEP, BIG], ids=["deep", "big"])
def test_a_metrics_line_python_cannot_read_is_torn(tmp_path, text):
    """Such a line in metrics.jsonl failed a resume as 'checkpoint.pt cannot be resumed: a part does not fit'."""
    path = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"step": 0, "x": 1.0}), text, json.dumps({"step": 1, "x": 2.0})]
    path.write_text("\n".join(lines) + "\n")
    logger = JsonlLogger(path)
    assert logger.restore_steps([{"update": 0, "x": 1.0}, {"update": 1, "x": 2.0}]) == 0
    logger.drop_from(1)
    assert path.read_text() == lines[0] + "\n"


@pytest.mark.slow
def test_a_run_whose_metrics_hold_such_a_line_resumes(tmp_path):
    """End to end: the second run of one command resumes the first's run directory past the line."""
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps({"format": "gplace.graph", "version": 1, "name": "mlp",
                                 "ops": [{"name": "x", "cost": 1e-3}], "edges": []}))
    args = [sys.executable, "-m", "gplace", "graph=file", f"graph.path={graph}", "trainer.updates=2", "logger=none",
            f"hydra.run.dir={tmp_path / 'run'}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0"}
    first = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert first.returncode == 0, first.stderr.decode()
    metrics = tmp_path / "run" / "metrics.jsonl"
    metrics.write_text(metrics.read_text() + BIG + "\n")
    again = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr.decode()
