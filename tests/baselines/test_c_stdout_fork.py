"""METIS in a forked child while another thread of the parent has fd 1 redirected for C code's output."""

from __future__ import annotations

import logging
import os

import pytest
from forking import assert_forked_child_passes

from gplace.baselines import METIS
from gplace.baselines.c_stdout import c_stdout_to_debug_log
from gplace.testing import random_dag, uniform_cluster


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_finds_the_stdout_lock_free_and_its_stdout_back():
    """Another thread of the parent had fd 1 redirected for METIS at the fork: the child's METIS waited for the
    lock for ever, and the child's fd 1 stayed the parent's temporary file (the parent's thread, which frees and
    puts back both, is not in the child)."""
    pytest.importorskip("pymetis")
    graph, cluster = random_dag(12, seed=0), uniform_cluster(2)
    expected = METIS(seed=0).place(graph, cluster).devices.tolist()
    real = os.fstat(1)

    def check() -> bool:
        now = os.fstat(1)
        same = METIS(seed=0).place(graph, cluster).devices.tolist() == expected
        return same and (now.st_dev, now.st_ino) == (real.st_dev, real.st_ino)

    assert_forked_child_passes(lambda: c_stdout_to_debug_log(logging.getLogger(__name__), "test"), check,
                               timeout=30)
