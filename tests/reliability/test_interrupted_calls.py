"""A library call interrupted or failing halfway inside a long-lived host: the host gets its own exception back, and
nothing of the call is left held, half-written or redirected."""

from __future__ import annotations

import io
import sys
import threading

import pytest
import torch

import gplace
from gplace.loggers import NullLogger
from gplace.run_dir import hold_dir
from gplace.testing import chain, uniform_cluster
from gplace.training._loop import progress_bar, start_loop
from gplace.training.checkpoint import save_checkpoint


def test_ctrl_c_while_a_checkpoint_is_written_leaves_no_temp_file(tmp_path, monkeypatch):
    """Only RuntimeError and OSError removed ``checkpoint.pt.tmp``: a Ctrl-C left up to 11 MB beside the run."""
    def interrupted(obj, f, *args, **kwargs):
        with open(f, "wb") as out:
            out.write(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path / "checkpoint.pt", {"x": 1})
    assert list(tmp_path.iterdir()) == []


def test_a_loop_that_cannot_start_gives_its_run_directory_back_at_once(tmp_path):
    """Adam's 'empty parameter list' was raised after the directory was taken and before the try that lets it go:
    it stayed held for as long as the host kept the exception (IPython keeps the last one)."""
    with pytest.raises(ValueError, match="empty parameter list") as kept:
        start_loop([], lr=1e-3, seed=0, run_dir=tmp_path, logger=None, run_id="r")
    taken = []

    def take() -> None:  # another thread (another holder) gets it while the exception is still alive
        with hold_dir(tmp_path):
            taken.append(True)

    worker = threading.Thread(target=take)
    worker.start()
    worker.join()
    assert taken == [True]
    del kept


def test_a_progress_bar_interrupted_while_it_starts_puts_the_host_streams_back(monkeypatch):
    """__exit__ is not called where __enter__ raises: sys.stdout and sys.stderr stayed rich's, its thread ran on."""
    from rich.progress import Progress

    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal, as far as rich can tell
    streams = sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    monkeypatch.setattr(Progress, "add_task", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        with pytest.raises(KeyboardInterrupt), progress_bar(True, total=3, completed=0):
            pass
        assert (sys.stdout, sys.stderr) == streams
    finally:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__


class _FinishFails(NullLogger):
    def finish(self, exit_code=None):
        raise ConnectionError("tracker unreachable")


class _ConfigFails(NullLogger):
    finished: list = []

    def log_config(self, config):
        raise RuntimeError("no config today")

    def finish(self, exit_code=None):
        self.finished.append(exit_code)


class _Interrupts(gplace.Simulator):
    def _measure(self, graph, cluster, placement):
        raise KeyboardInterrupt


def test_a_logger_whose_finish_fails_does_not_replace_the_hosts_exception():
    """The host got the logger's ConnectionError, its KeyboardInterrupt only as the context: ``except
    KeyboardInterrupt`` missed it."""
    with pytest.raises(KeyboardInterrupt):
        gplace.place(chain(), uniform_cluster(2), budget="4 samples", runtime=_Interrupts(), logger=_FinishFails())


def test_a_logger_whose_log_config_raises_is_still_finished():
    """log_config ran before the try that finishes the logger: a W&B run it started was left open."""
    with pytest.raises(RuntimeError, match="no config today"):
        gplace.place(chain(), uniform_cluster(2), method="heft", logger=_ConfigFails())
    assert _ConfigFails.finished == [1]
