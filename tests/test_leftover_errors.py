"""Errors whose cause was hidden: a read-only working directory, a failed sweep job's log file, and a pool of
workers started by a script without the ``if __name__ == "__main__":`` guard."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types

import pytest

from gplace.runtime import parallel

FAST = ["logger=none", "trainer.updates=2", "trainer.samples_per_update=2", "trainer.progress=false",
        "graph.layers=1", "graph.steps=2", "graph.hidden=64", "graph.vocab=100", "max_groups=8",
        "encoder.hidden_size=16", "policy.hidden_size=16", "policy.attention_size=8"]


def _gplace(*args, cwd):
    env = {**os.environ, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "gplace", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def read_only_dir(tmp_path):
    """A folder nobody may write to: mode 555 for a user, a read-only tmpfs for root (chmod does not stop root);
    skipped where neither can be made."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
    elif subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
                        capture_output=True).returncode != 0:
        pytest.skip("cannot mount a read-only folder")
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("the folder is writable (chmod does not stop this user)")
        yield folder
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(folder)], capture_output=True)
        folder.chmod(0o755)


def _error_line(stderr: str) -> str:
    lines = [x for x in stderr.splitlines() if x.startswith("gplace: error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize("args", [["trainer.updates=2"], ["place", "method=heft"], ["-m", "seed=0,1"]])
def test_a_run_in_a_read_only_working_directory_is_one_line_naming_it_and_the_override(read_only_dir, args):
    """Hydra could not make outputs/<date>/<time> (multirun/... for -m) there: a chained traceback of mkdir."""
    proc = _gplace(*args, cwd=read_only_dir)
    line = _error_line(proc.stderr)
    key = "hydra.sweep.dir" if "-m" in args else "hydra.run.dir"
    assert proc.returncode == 2 and f"{read_only_dir} is not writable" in line and f"{key}=" in line, line


def test_a_bench_with_its_out_dir_in_a_read_only_folder_names_out_dir(read_only_dir, tmp_path):
    """The bench's default out_dir (benchmarks, under the working directory) failed as a bare OSError."""
    proc = _gplace("bench", f"hydra.run.dir={tmp_path / 'h'}", cwd=read_only_dir)
    line = _error_line(proc.stderr)
    assert proc.returncode == 2 and line.startswith("gplace: error: out_dir=benchmarks: ") and "writable" in line


def test_a_failed_sweep_jobs_log_file_holds_its_error(tmp_path):
    """The one-line error went to the terminal only: the job's cli.log was empty."""
    sweep = tmp_path / "sweep"
    proc = _gplace("-m", *FAST, "encoder.hidden_size=0", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert proc.returncode != 0
    assert "ValueError: LSTMEncoder: hidden_size" in (sweep / "0" / "cli.log").read_text()


UNGUARDED = """
    import numpy as np
    from gplace.ir import Placement
    from gplace.runtime.parallel import PoolRuntime
    from gplace.runtime.simulator import Simulator
    from gplace.testing import chain, uniform_cluster

    g = chain()
    pool = PoolRuntime(Simulator(), workers=1)
    m = pool.measure_many(g, uniform_cluster(2), [Placement(np.zeros(g.num_ops, dtype=np.int64), g.fingerprint)])
    print("measured:", m[0].ok, m[0].reason)
"""


def test_a_pool_in_a_script_without_the_main_guard_says_so(tmp_path):
    """Each spawned worker re-ran the script and died; the placement was blamed ("worker process died while
    measuring this placement") and the script went on."""
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent(UNGUARDED))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "measured:" not in proc.stdout, proc.stdout
    assert last.startswith("RuntimeError: PoolRuntime: the worker processes could not start: ") and str(script) in last
    assert 'if __name__ == "__main__":' in last


@pytest.mark.parametrize(("source", "refused"), [("x = 1\n", True), ("if __name__ == '__main__':\n    x = 1\n", False)])
def test_the_main_guard_check_refuses_only_a_script_without_it(tmp_path, monkeypatch, source, refused):
    """A broken pool is blamed on the script only where its main module lacks the guard."""
    script = tmp_path / "script.py"
    script.write_text(source)
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", main)
    if refused:
        with pytest.raises(RuntimeError, match="guard"):
            parallel._check_main_guard()
    else:
        parallel._check_main_guard()
