"""What C libraries print to file descriptor 1 (METIS's errors on wide clusters, a line HiGHS prints whatever its
settings), sent to the DEBUG log: the stdout of a tool that wraps gplace stays its own."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import sys
import tempfile
from collections.abc import Iterator

from gplace.ir.locks import ForkSafeLock

__all__ = ["c_stdout_to_debug_log", "flush_c_stdio"]

_FD1 = ForkSafeLock(reentrant=True)
"""Held while fd 1 is redirected: two threads' redirections would restore each other's (and lose stdout)."""
_saved_fd1: int | None = None
"""The real fd 1, duplicated, while a temporary file is in its place."""


def _restore_fd1_in_child() -> None:
    """In a forked child: put back the real fd 1 that another thread of the parent had redirected (that thread,
    which would have put it back, is not in the child; the forking thread itself goes on and puts it back)."""
    global _saved_fd1
    if _saved_fd1 is not None and not _FD1.held_here():
        with contextlib.suppress(OSError):
            os.dup2(_saved_fd1, 1)
            os.close(_saved_fd1)
        _saved_fd1 = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_restore_fd1_in_child)


@contextlib.contextmanager
def c_stdout_to_debug_log(log: logging.Logger, who: str) -> Iterator[None]:
    """Send what C code writes to file descriptor 1 in the block to a temporary file, then log it on ``log`` at
    DEBUG as ``"<who> printed: <text>"``.

    Process-wide, one block at a time: what other threads print to stdout in the meantime is logged too, their
    blocks wait, and a program they start then (``subprocess``) keeps the temporary file as its stdout. A block
    inside another of the same thread is part of the outer one.
    """
    with contextlib.suppress(AttributeError, OSError, ValueError):  # no sys.stdout, or a closed one
        sys.stdout.flush()
    flush_c_stdio()  # what C code printed before stays on stdout
    with _FD1, contextlib.ExitStack() as stack:
        global _saved_fd1
        if _saved_fd1 is not None:  # this thread's outer block redirected it: that block logs the output
            yield
            return
        try:
            sink = stack.enter_context(tempfile.TemporaryFile())
            saved = os.dup(1)
        except OSError:  # fd 1 closed, or no temporary file: C's output goes where it goes
            yield
            return
        _saved_fd1 = saved  # before the redirection: a child forked in between puts back what is there anyway
        try:
            os.dup2(sink.fileno(), 1)
            yield
        finally:
            flush_c_stdio()
            os.dup2(saved, 1)
            _saved_fd1 = None
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode(errors="replace").strip()
            if text:
                log.debug("%s printed: %s", who, text)


def flush_c_stdio() -> None:
    """Flush the C library's buffered stdout (``fflush(NULL)``), where the C library can be loaded."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        ctypes.CDLL(None).fflush(None)
