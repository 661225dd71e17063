"""A fork beside a thread that holds something (a lock, a redirected fd): the child must not hang on it."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest


def assert_forked_child_passes(hold: Callable[[], AbstractContextManager], check: Callable[[], bool],
                               timeout: float = 60.0) -> None:
    """Enter ``hold()`` in another thread, fork while it is held, and fail unless the child's ``check()`` returns
    true within ``timeout`` seconds (a child that hangs is killed, and the test fails saying so)."""
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with hold():
            held.set()
            release.wait(timeout)

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(10)
    try:
        pid = os.fork()
        if pid == 0:  # the child: exit status 0 only if the check passes
            try:
                os._exit(0 if check() else 1)
            finally:
                os._exit(2)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on what a thread of the parent held")
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        release.set()
        thread.join()
