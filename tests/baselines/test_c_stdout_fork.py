"""fd 1 redirected for C code's output (METIS, HiGHS): forks beside and inside the redirection, nested blocks."""

from __future__ import annotations

import contextlib
import logging
import os

import pytest
from forking import assert_forked_child_passes

from gplace.baselines._c_stdout import c_stdout_to_debug_log

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
log = logging.getLogger(__name__)


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


@needs_fork
def test_a_forked_child_finds_the_lock_free_and_its_stdout_back():
    """Another thread of the parent had fd 1 redirected at the fork (METIS running): the child's METIS waited for
    the lock for ever, and the child's fd 1 stayed the parent's temporary file (the parent's thread, which frees
    and puts back both, is not in the child)."""
    real = os.fstat(1)

    def check() -> bool:
        back = _same_file(os.fstat(1), real)
        with c_stdout_to_debug_log(log, "child"):
            pass
        return back and _same_file(os.fstat(1), real)

    assert_forked_child_passes(lambda: c_stdout_to_debug_log(log, "test"), check, timeout=30)


@needs_fork
def test_a_child_forked_inside_the_block_gets_its_stdout_back_at_the_end_of_it():
    """The thread that redirected fd 1 forked: the child's fd 1 was put back at the fork and its saved copy closed,
    so the end of the block, which the child runs too, pointed fd 1 at whatever file reused that number."""
    real = os.fstat(1)
    pid = -1
    try:
        with c_stdout_to_debug_log(log, "test"):
            pid = os.fork()
            if pid == 0:
                os.open(os.devnull, os.O_RDONLY)  # the lowest free number: the saved copy's, had it been closed
    finally:
        if pid == 0:  # the child, at the end of the block, whatever happened there
            same = False
            with contextlib.suppress(Exception):
                same = _same_file(os.fstat(1), real)
            os._exit(0 if same else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def test_a_block_inside_another_is_part_of_it(capfd, caplog):
    """Two nested blocks (one thread) waited for each other for ever."""
    with caplog.at_level(logging.DEBUG, logger=__name__), c_stdout_to_debug_log(log, "outer"):
        with c_stdout_to_debug_log(log, "inner"):
            os.write(1, b"from C\n")
        os.write(1, b"after\n")
    assert "from C" not in capfd.readouterr().out
    assert "outer printed: from C\nafter" in caplog.text
