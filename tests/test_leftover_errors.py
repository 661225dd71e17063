"""Errors whose cause was hidden: a read-only working directory, a failed sweep job's log file, and a pool of
workers started by a script without the ``if __name__ == "__main__":`` guard."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import types

import pytest
import torch

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
    assert "ValueError: encoder: LSTMEncoder: hidden_size" in (sweep / "0" / "cli.log").read_text()


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


def test_an_error_line_a_full_log_file_cannot_take_adds_nothing_to_the_terminal(capfd):
    """A job's error written to its cli.log on a full disk (/dev/full) is dropped there, not a '--- Logging error ---'
    traceback after the one-line error."""
    import logging

    from gplace import cli

    handler = logging.FileHandler("/dev/full")
    logging.getLogger().addHandler(handler)
    try:
        cli._log_to_files("OSError: [Errno 28] No space left on device")
    finally:
        logging.getLogger().removeHandler(handler)
        with contextlib.suppress(OSError):
            handler.close()
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize("error", [
    RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried to "
                 "allocate 784000000 bytes"),
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
], ids=["cpu", "cuda"])
def test_out_of_memory_in_the_networks_is_one_line_naming_the_settings(error, capsys):
    from omegaconf import OmegaConf

    from gplace import cli

    def job():
        raise error

    with pytest.raises(SystemExit) as exit_:
        cli._guard(job, OmegaConf.create({}), "train")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("gplace: error: out of memory in the placement networks") and err.count("\n") == 1
    assert "policy.hidden_size" in err and "resumes from its last checkpoint" in err


def test_a_memory_error_is_one_line_without_advice_about_networks(capsys):
    """numpy's MemoryError (gplace place samples=100000000: 1.10 TiB of sample arrays) came out as a traceback,
    exit 1; it may come from building a graph too, so the line gives no advice about the placement networks."""
    from omegaconf import OmegaConf

    from gplace import cli

    def job():
        raise MemoryError("Unable to allocate 1.10 TiB for an array with shape (100000000, 126, 3, 8) and data type "
                          "int64")

    with pytest.raises(SystemExit) as exit_:
        cli._guard(job, OmegaConf.create({}), "place")
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1
    assert err.startswith("gplace: error: out of memory: MemoryError: Unable to allocate 1.10 TiB")
    assert "placement networks" not in err


@pytest.mark.parametrize(("command", "config", "keys"), [
    ("place", "place", ["samples", "checkpoint"]),
    ("bench", "bench", ["learned"]),
])
def test_out_of_memory_advice_names_settings_the_command_has(command, config, keys, capsys):
    """gplace place and gplace bench were told to set trainer.samples_per_update, encoder.hidden_size or device=,
    which neither has (each ended in Hydra's "Could not override")."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from gplace import cli

    def job():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    with pytest.raises(SystemExit):
        cli._guard(job, OmegaConf.create({}), command)
    err = capsys.readouterr().err
    assert "trainer.samples_per_update" not in err and "device=" not in err and "resumes" not in err
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name=config)
    assert all(f"{key}" in err and key in cfg for key in keys), err
