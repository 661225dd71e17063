"""A run directory from someone else holding symbolic links in place of gplace's own files: ``gplace place``
writes its ``.hydra/`` record in place of the links (their targets were overwritten), and refuses a ``.hydra``,
``cli.log`` or ``.lock`` that is a link, naming it, before anything is written through it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ORIGINAL = "ORIGINAL CONTENT\n"


def _gplace(*args, cwd):
    env = {**os.environ, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "gplace", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _place(tmp_path, run_dir):
    return _gplace("place", "method=heft", "logger=none", f"hydra.run.dir={run_dir}", cwd=tmp_path)


def _victim(tmp_path, name):
    victim = tmp_path / f"victim_{name.replace('/', '_')}"
    victim.write_text(ORIGINAL)
    return victim


def test_place_replaces_hydra_record_links_and_leaves_their_targets(tmp_path):
    run_dir = tmp_path / "shared_run"
    (run_dir / ".hydra").mkdir(parents=True)
    names = ["config.yaml", "hydra.yaml", "overrides.yaml"]
    victims = {name: _victim(tmp_path, name) for name in names}
    for name, victim in victims.items():
        (run_dir / ".hydra" / name).symlink_to(victim)
    proc = _place(tmp_path, run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name, victim in victims.items():
        assert victim.read_text() == ORIGINAL, name
        record = run_dir / ".hydra" / name
        assert not record.is_symlink() and record.read_text() != ORIGINAL, name
    assert "method=heft" in (run_dir / ".hydra" / "overrides.yaml").read_text()


@pytest.mark.parametrize(("name", "said"), [
    ("cli.log", "is a symbolic link, not the job's log file"),
    (".lock", "is a symbolic link, not a regular file"),
], ids=["cli.log", ".lock"])
def test_place_refuses_a_linked_log_or_lock_and_leaves_its_target(tmp_path, name, said):
    run_dir = tmp_path / "shared_run"
    run_dir.mkdir()
    victim = _victim(tmp_path, name)
    (run_dir / name).symlink_to(victim)
    proc = _place(tmp_path, run_dir)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "gplace: error: " in proc.stderr and f"{run_dir / name} {said}" in proc.stderr, proc.stderr[-3000:]
    assert victim.read_text() == ORIGINAL
    assert not (run_dir / "placement.json").exists()


def test_place_refuses_a_hydra_folder_that_is_a_link_before_placing(tmp_path):
    run_dir = tmp_path / "shared_run"
    run_dir.mkdir()
    theirs = tmp_path / "their_records"
    theirs.mkdir()
    (theirs / "config.yaml").write_text(ORIGINAL)
    (run_dir / ".hydra").symlink_to(theirs)
    proc = _place(tmp_path, run_dir)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"{run_dir / '.hydra'} is a symbolic link" in proc.stderr, proc.stderr[-3000:]
    assert sorted(p.name for p in theirs.iterdir()) == ["config.yaml"]
    assert (theirs / "config.yaml").read_text() == ORIGINAL
    assert not (run_dir / "placement.json").exists()
