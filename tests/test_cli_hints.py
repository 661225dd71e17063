"""Hints and refusals of the command line that users copy: each works as written, and a mistake in an override
ends in one line naming it (a probe ran every example and hint)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _gplace(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    return subprocess.run([sys.executable, "-m", "gplace", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_a_hydra_value_read_without_the_resolver_is_named_in_one_line(tmp_path: Path) -> None:
    """`${hydra.job.num}` (the bench sweep's own hint, until corrected) failed with a traceback."""
    proc = _gplace("place", "seed=${hydra.job.num}", "logger=none", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "Interpolation key 'hydra.job.num' not found" in proc.stderr and "${hydra:job.num}" in proc.stderr


def test_a_target_that_cannot_be_imported_is_named_in_one_line(tmp_path: Path) -> None:
    """Hydra's generic "Error locating target" hid the cause (a module not installed, or a misspelt path)."""
    proc = _gplace("place", "graph=torch", "graph.module._target_=no_such_package.Net", "graph.input_shapes=[[2,8]]",
                   "logger=none", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "gplace: error: ImportError" in proc.stderr and "no_such_package" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_the_resolver_hint_is_for_hydra_keys_only(tmp_path: Path) -> None:
    proc = _gplace("place", "seed=${no_such.key}", "logger=none", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert "Interpolation key 'no_such.key' not found" in proc.stderr and "hydra:job.num" not in proc.stderr


def test_the_bench_sweep_hint_runs_as_written(tmp_path: Path) -> None:
    """The refusal of a bench sweep without out_dir per job offers 'out_dir=bench/${hydra:job.num}' (it offered
    ${hydra.job.num}, which failed); the sweep given it writes one directory per job."""
    case = "cases=[['graph=lstm_lm','graph.steps=2','graph.hidden=64','graph.vocab=100','cluster=paper_2gpu']]"
    common = ["bench", "-m", case, "search.seconds=0.5,0.6", "learned={}", "search.plots=false",
              "baselines={single_gpu: {_target_: gplace.baselines.SingleDevice, kind: gpu}}"]
    refused = _gplace(*common, f"hydra.sweep.dir={tmp_path / 'a'}", cwd=tmp_path)
    assert "'out_dir=bench/${hydra:job.num}'" in refused.stderr
    ran = _gplace(*common, "out_dir=bench/${hydra:job.num}", f"hydra.sweep.dir={tmp_path / 'b'}", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "bench").iterdir()) == ["0", "1"]
    forced = _gplace(*common, "++out_dir=forced/${hydra:job.num}", f"hydra.sweep.dir={tmp_path / 'c'}", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr[-2000:]  # '++out_dir=' was refused: only 'out_dir=' was looked for
    assert sorted(p.name for p in (tmp_path / "forced").iterdir()) == ["0", "1"]


@pytest.mark.parametrize("argv, guess", [(["shwo", "run"], "did you mean 'show'?"),
                                         (["plce", "method=heft"], "did you mean 'place'?"), (["xyz"], "")])
def test_a_mistyped_command_is_named_with_the_closest_one(monkeypatch, capsys, argv, guess):
    """``gplace shwo r2`` was Hydra's "Error parsing override 'shwo' missing EQUAL", status 1."""
    from gplace.cli import main

    monkeypatch.setattr(sys, "argv", ["gplace", *argv])
    with pytest.raises(SystemExit) as stop:
        main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"unknown command {argv[0]!r}: {guess}" in err, err


@pytest.mark.parametrize(("command", "args", "message"), [
    ("train", ["--config-name", "bench_pipeline"], "--config-name bench_pipeline is the config of `gplace bench`, "
                                                   "not of `gplace`: run `gplace bench --config-name bench_pipeline"),
    ("place", ["-cn=bench"], "--config-name bench is the config of `gplace bench`, not of `gplace place`"),
    ("bench", ["--config-name=config"], "--config-name config is the config of `gplace`, not of `gplace bench`"),
])
def test_a_primary_config_given_to_another_command_names_the_command(capsys, command, args, message):
    """`gplace --config-name bench_pipeline` (bench forgotten) said "seed must be a whole number from 0 to
    4294967295, got None"."""
    from gplace import cli

    with pytest.raises(SystemExit):
        cli._check_config_command(command, args)
    assert message in capsys.readouterr().err
    cli._check_config_command("bench", ["--config-name", "bench_paper"])  # its own command: nothing said
    cli._check_config_command("train", ["--config-name", "my_own"])  # a config of one's own: not known here
    cli._check_config_command("train", ["--config-path", "/my/conf", "--config-name", "bench"])  # one's own folder
