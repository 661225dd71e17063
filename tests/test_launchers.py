"""Cluster launchers: the Slurm launcher composes for `gplace -m`; the local submitit launcher runs a sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hydra_plugins.hydra_submitit_launcher")

from hydra import compose, initialize_config_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FAST = ["graph.steps=2", "graph.hidden=64", "graph.vocab=100", "trainer.updates=2", "trainer.progress=false",
        "max_groups=8", "logger=none"]


@pytest.mark.parametrize("launcher, target", [
    ("gplace_slurm", "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"),
    ("submitit_slurm", "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"),
    ("submitit_local", "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"),
])
def test_a_sweep_composes_with_the_launcher(launcher, target):
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"hydra/launcher={launcher}", "seed=1"],
                      return_hydra_config=True)
    assert cfg.hydra.launcher._target_ == target
    if launcher == "gplace_slurm":
        assert cfg.hydra.launcher.gpus_per_node is None and cfg.hydra.launcher.timeout_min == 240
    assert cfg.seed == 1 and cfg.graph._target_ == "gplace.zoo.lstm_lm"


def test_the_local_submitit_launcher_runs_a_two_job_sweep(tmp_path):
    sweep = tmp_path / "sweep"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    proc = subprocess.run(
        [sys.executable, "-m", "gplace", "-m", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10",
         "hydra.launcher.cpus_per_task=1", *FAST, "seed=0,1", f"hydra.sweep.dir={sweep}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    docs = [json.loads(p.read_text()) for p in sorted(sweep.glob("*/placement.json"))]
    assert len(docs) == 2 and all(doc["step_time"] > 0 for doc in docs)
    assert list((sweep / ".submitit").iterdir())  # the jobs went through submitit
