"""A job refused the run directory of an earlier run by that run's checkpoint (another seed, another trainer) leaves
the earlier run's ``cli.log`` as it was: the job's own "placing ..." line, written before the checkpoint was read,
was left at its end, as if that run had been killed mid-way."""

from __future__ import annotations

import os
import subprocess
import sys

FAST = ["logger=none", "trainer.updates=1", "trainer.samples_per_update=2", "trainer.progress=false",
        "graph.steps=2", "graph.hidden=32", "graph.vocab=50", "encoder.hidden_size=8", "policy.hidden_size=8",
        "policy.attention_size=4"]


def _gplace(*args, cwd):
    env = {**os.environ, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "gplace", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_resume_refused_by_the_checkpoint_leaves_the_runs_log_as_it_was(tmp_path):
    run_dir = tmp_path / "run"
    first = _gplace(*FAST, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    log = (run_dir / "cli.log").read_bytes()
    assert b"placing " in log
    refused = _gplace(*FAST, "seed=1", f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert refused.returncode == 2 and "seed" in refused.stderr, refused.stderr
    assert (run_dir / "cli.log").read_bytes() == log
