"""METIS in a forked child while another thread of the parent redirects fd 1 for METIS."""

from __future__ import annotations

import logging
import os
import sys
import threading

import pytest

from gplace.baselines import METIS
from gplace.baselines.c_stdout import c_stdout_to_debug_log
from gplace.testing import random_dag, uniform_cluster


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs fork")
def test_a_forked_child_finds_the_stdout_lock_free_and_its_stdout_back():
    """Another thread of the parent had fd 1 redirected for METIS at the fork: the child's METIS waited for the
    lock for ever, and the child's fd 1 stayed the parent's temporary file (the parent's thread, which frees and
    puts back both, is not in the child)."""
    pytest.importorskip("pymetis")
    graph, cluster = random_dag(12, seed=0), uniform_cluster(2)
    expected = METIS(seed=0).place(graph, cluster).devices.tolist()
    held, release = threading.Event(), threading.Event()

    real = os.fstat(1)

    def hold():
        with c_stdout_to_debug_log(logging.getLogger(__name__), "test"):
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only if it places the same, within the alarm
            import signal

            signal.alarm(30)
            now = os.fstat(1)
            same = METIS(seed=0).place(graph, cluster).devices.tolist() == expected
            os._exit(0 if same and (now.st_dev, now.st_ino) == (real.st_dev, real.st_ino) else 1)
        assert os.waitpid(pid, 0)[1] == 0
    finally:
        release.set()
        holder.join()
