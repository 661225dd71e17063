"""A run directory from someone else whose ``.lock`` is a symbolic link, or no regular file: gplace refuses it,
naming it, and writes nothing through it (its pid emptied the file the link pointed to)."""

from __future__ import annotations

import os

import pytest

from gplace import place
from gplace.run_dir import RunDirConflictError, hold_dir
from gplace.testing import chain, uniform_cluster

NOTES = "my notes: 1000 lines of work\n"


@pytest.fixture
def linked_lock(tmp_path):
    """A run directory whose ``.lock`` links to a file of the user's."""
    victim = tmp_path / "notes.txt"
    victim.write_text(NOTES)
    run_dir = tmp_path / "shared_run"
    run_dir.mkdir()
    (run_dir / ".lock").symlink_to(victim)
    return run_dir, victim


def test_place_refuses_a_lock_that_is_a_link_and_leaves_its_target(linked_lock):
    run_dir, victim = linked_lock
    with pytest.raises(RunDirConflictError, match="is a symbolic link") as err:
        place(chain(), uniform_cluster(2), method="heft", run_dir=run_dir)
    assert str(run_dir / ".lock") in str(err.value) and "remove it" in str(err.value)
    assert victim.read_text() == NOTES
    assert (run_dir / ".lock").is_symlink()


def test_a_lock_to_nothing_makes_no_file(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ".lock").symlink_to(tmp_path / "made_through_the_link")
    with pytest.raises(RunDirConflictError, match="symbolic link"), hold_dir(run_dir):
        pass
    assert not (tmp_path / "made_through_the_link").exists()


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_lock_that_is_no_regular_file_is_refused_naming_it(tmp_path, kind):
    lock = tmp_path / ".lock"
    lock.mkdir() if kind == "folder" else os.mkfifo(lock)
    with pytest.raises(RunDirConflictError, match="not a regular file") as err, hold_dir(tmp_path):
        pass
    assert str(lock) in str(err.value)


def test_a_lock_gplace_made_is_still_held_and_reused(tmp_path):
    with hold_dir(tmp_path):
        assert (tmp_path / ".lock").read_text() == str(os.getpid())
    with hold_dir(tmp_path):
        assert (tmp_path / ".lock").read_text() == str(os.getpid())
