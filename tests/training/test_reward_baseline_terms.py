"""The EMA reward baseline's documented edges, pinned by hand: a decay of 0 (allowed, ``[0, 1)``) follows the latest
batch mean, and a checkpoint restores the value but not the decay (the resumed run's setting)."""

from __future__ import annotations

import pytest

from gplace.training import EMABaseline


def test_a_decay_of_zero_follows_the_latest_batch_mean() -> None:
    """b <- 0 x b + 1 x mean: -2 after [-1, -3], then -5 after [-5]."""
    b = EMABaseline(decay=0.0)
    b.update([-1.0, -3.0])
    assert b.value == -2.0
    b.update([-5.0])
    assert b.value == -5.0


def test_a_checkpoint_restores_the_value_but_keeps_the_resumed_runs_decay() -> None:
    """A state saved at decay 0.9 and value -3 loaded into a decay-0.5 baseline: value -3, decay still 0.5, so the
    next update of [-1] gives 0.5 x -3 + 0.5 x -1 = -2."""
    saved = EMABaseline(decay=0.9)
    saved.update([-3.0])
    resumed = EMABaseline(decay=0.5)
    resumed.load_state_dict(saved.state_dict())
    assert resumed.value == -3.0 and resumed.decay == 0.5
    resumed.update([-1.0])
    assert resumed.value == pytest.approx(-2.0)
