"""What HiGHS prints to fd 1 while the pipeline ILP solves goes to the DEBUG log, not to the caller's stdout."""

from __future__ import annotations

import ctypes
import logging

import scipy.optimize

from gplace.baselines.pipeline import PipelineILPPlacer
from gplace.testing import chain, uniform_cluster


def test_what_highs_prints_goes_to_the_debug_log(monkeypatch, capfd, caplog):
    """HiGHS prints "HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();" to fd 1 on some
    time-limited solves whatever its output settings (ERGO-Code/HiGHS#2783): into the stdout of a tool that wraps
    gplace. Its C code's printf is reproduced around the real solve, as HiGHS writes it (then flushed)."""
    libc = ctypes.CDLL(None)
    real = scipy.optimize.milp

    def printing_milp(*args, **kwargs):
        libc.printf(b"HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();\n")
        libc.fflush(None)
        return real(*args, **kwargs)

    monkeypatch.setattr(scipy.optimize, "milp", printing_milp)
    capfd.readouterr()
    with caplog.at_level(logging.DEBUG, logger="gplace.baselines.pipeline.ilp"):
        placement = PipelineILPPlacer(microbatches=4).place(chain((1, 2, 3, 1, 2, 3)), uniform_cluster(2))
    assert len(placement) == 6
    assert "HighsMipSolverData" not in capfd.readouterr().out
    assert "HiGHS printed: HighsMipSolverData::transformNewIntegerFeasibleSolution" in caplog.text
