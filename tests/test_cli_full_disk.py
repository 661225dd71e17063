"""A command whose output does not fit on the disk exits with its own status (74, sysexits' EX_IOERR), which a script
can tell from bad input (2): every one was 2, which the README calls bad input."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = ["graph=lstm_lm", "graph.steps=2", "graph.hidden=64", "graph.vocab=100"]

FULL_ON_PATH_OPEN = """
import sys, pytest
from tests.full_disk import fill_disk_on_write
fill_disk_on_write(pytest.MonkeyPatch())
from gplace.cli import main
sys.argv = ["gplace", *sys.argv[1:]]
main()
"""

FULL_ON_TORCH_SAVE = """
import sys, torch
def full(*args, **kwargs):  # torch's C++ writer on a full disk
    raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 0")
torch.save = full
from gplace.cli import main
sys.argv = ["gplace", *sys.argv[1:]]
main()
"""


def _gplace(script: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """``args`` start with the command (``place``) where there is one."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    return subprocess.run([sys.executable, "-c", script, *args, *TINY, f"hydra.run.dir={tmp_path / 'run'}"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


def _error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.startswith("gplace: error:")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return lines[0]


def test_a_placement_that_does_not_fit_on_the_disk_exits_74(tmp_path):
    proc = _gplace(FULL_ON_PATH_OPEN, tmp_path, "place", "method=heft")
    assert proc.returncode == 74, proc.stderr[-3000:]
    assert "placement.json: No space left on device" in _error_line(proc)


def test_a_checkpoint_that_does_not_fit_on_the_disk_exits_74(tmp_path):
    """torch says a full disk with a RuntimeError and no errno; save_checkpoint's OSError keeps ENOSPC."""
    proc = _gplace(FULL_ON_TORCH_SAVE, tmp_path, "trainer.updates=2", "trainer.checkpoint_every=1")
    assert proc.returncode == 74, proc.stderr[-3000:]
    assert "checkpoint.pt" in _error_line(proc) and "is the disk full?" in _error_line(proc)


def test_bad_input_still_exits_2(tmp_path):
    proc = _gplace(FULL_ON_TORCH_SAVE, tmp_path, "place", "method=no_such_method")
    assert proc.returncode == 2, proc.stderr[-3000:]
