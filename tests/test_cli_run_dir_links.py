"""A run directory (``hydra.run.dir``, ``hydra.sweep.dir``) on a dangling symbolic link, a link loop, a folder below
either, or with a name too long for the file system: one ``gplace: error:`` line naming the path and what is wrong,
exit status 2 (each was a traceback and exit status 1)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _gplace(*args, cwd):
    env = {**os.environ, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "gplace", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _error_line(stderr: str) -> str:
    lines = [x for x in stderr.splitlines() if x.startswith("gplace: error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


@pytest.fixture
def links(tmp_path):
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    return tmp_path


@pytest.mark.parametrize(("name", "named", "why"), [
    ("dangling", "dangling", "dangling symbolic link"),
    ("dangling/sub", "dangling", "dangling symbolic link"),
    ("loop1", "loop1", "symbolic link loop"),
    ("loop1/sub", "loop1", "symbolic link loop"),
    ("a" * 300, "a" * 300, "name too long"),
    ("a" * 300 + "/sub", "a" * 300, "name too long"),
], ids=["dangling", "dangling-sub", "loop", "loop-sub", "long-name", "long-name-sub"])
def test_a_run_dir_on_a_bad_link_or_name_is_one_line_naming_it(links, name, named, why):
    proc = _gplace("place", "method=heft", f"hydra.run.dir={links / name}", cwd=links)
    line = _error_line(proc.stderr)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"{links / named} " in line and why in line and "hydra.run.dir=" in line, line


def test_a_sweep_dir_on_a_dangling_link_is_one_line_naming_it(links):
    proc = _gplace("-m", "place", "method=heft", f"hydra.sweep.dir={links / 'dangling'}", cwd=links)
    line = _error_line(proc.stderr)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"{links / 'dangling'} " in line and "dangling symbolic link" in line and "hydra.sweep.dir=" in line, line


def test_a_dangling_outputs_link_in_the_working_directory_names_it(links):
    """./outputs a link to scratch space that is not mounted: Hydra's default run directory is under it."""
    (links / "outputs").symlink_to(links / "scratch")
    proc = _gplace("place", "method=heft", cwd=links)
    line = _error_line(proc.stderr)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"{links / 'outputs'} is a dangling symbolic link" in line, line


def test_a_run_dir_where_no_folder_can_be_made_though_access_says_writable_is_one_line():
    """As root, os.access(/proc, W_OK) is true but mkdir there fails: a traceback and exit status 1."""
    proc = _gplace("place", "method=heft", "hydra.run.dir=/proc/gplace_run", cwd="/tmp")
    line = _error_line(proc.stderr)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "hydra.run.dir=/proc/gplace_run: /proc " in line, line
