"""A job's log file that cannot be written is one warning line, not a traceback per log line; ``gplace bench``
records its ``.hydra/`` itself, as train and place do, so a run directory where that record cannot be written is one
``gplace: error:`` line (exit 2), not Hydra's traceback (exit 1)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = "['graph=lstm_lm','cluster=paper_2gpu','graph.steps=2','graph.hidden=64','graph.vocab=100']"


def _bench(tmp_path: Path, run_dir: Path) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "gplace", "bench", f"cases=[{TINY}]", "~learned.seq2seq_warm",
            "baselines={heft:{_target_:gplace.baselines.HEFT}}", "search.seconds=1", "search.updates=1",
            "search.plots=false", f"out_dir={tmp_path / 'out'}", f"hydra.run.dir={run_dir}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_log_file_that_cannot_be_written_is_one_warning_line_and_the_bench_goes_on(tmp_path):
    """cli.log on /dev/full (every write: ENOSPC): a bench printed 15 '--- Logging error ---' tracebacks."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "cli.log").symlink_to("/dev/full")
    proc = _bench(tmp_path, run_dir)
    assert proc.returncode == 0, proc.stderr
    assert "Logging error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[:3000]
    warnings = [line for line in proc.stderr.splitlines() if "cannot write the log file" in line]
    assert len(warnings) == 1, proc.stderr[:3000]
    assert str(run_dir / "cli.log") in warnings[0] and "No space left on device" in warnings[0], warnings
    assert (tmp_path / "out" / "results.json").is_file()


def test_bench_records_its_job_in_the_run_directory_itself(tmp_path):
    """Hydra wrote the bench's .hydra/ before gplace ran: a run directory where it could not be written (a full
    disk; here a file in its place) ended in Hydra's chained traceback and exit status 1."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ".hydra").write_text("not a folder\n")
    proc = _bench(tmp_path, run_dir)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("gplace: error:")]
    assert len(errors) == 1 and ".hydra" in errors[0], proc.stderr[-3000:]

    good = tmp_path / "good"
    proc = _bench(tmp_path, good)
    assert proc.returncode == 0, proc.stderr
    assert "search.seconds=1" in (good / ".hydra" / "overrides.yaml").read_text()
    assert "out_dir:" in (good / ".hydra" / "config.yaml").read_text()
