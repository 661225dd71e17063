"""Whole numbers past a float's range (``10**400``: ``math.isfinite`` and ``float`` raise ``OverflowError``) and other
settings the CLI probe of 2026-12-06 found ending in a traceback or a many-line message: each is now refused in one
line naming the setting; a budget a method would ignore, or round down, is warned about."""

from __future__ import annotations

import logging

import pytest
from omegaconf import OmegaConf

import gplace
from gplace import cli
from gplace.encoders import LSTMEncoder
from gplace.ir.errors import check_finite, check_positive, is_finite
from gplace.methods import Budget
from gplace.placer import network_device
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import PPOTrainer, ReinforceTrainer

HUGE = 10**400


def test_is_finite_takes_a_huge_whole_number_as_infinite():
    assert is_finite(3) and is_finite(2.5) and is_finite(10**300)
    assert not any(is_finite(v) for v in (HUGE, -HUGE, float("nan"), float("inf"), True, "3", None))


@pytest.mark.parametrize("setting", ["updates", "lr", "entropy_coef"])
def test_a_trainer_setting_past_a_floats_range_is_named(setting):
    """ReinforceTrainer(updates=10**400) raised a bare OverflowError ('int too large to convert to float')."""
    for trainer in (ReinforceTrainer, PPOTrainer):
        with pytest.raises(ValueError, match=f"^{setting} must be a finite number, got 1000.*000$"):
            trainer(**{setting: HUGE})


def test_check_finite_and_check_positive_refuse_a_huge_whole_number():
    """check_positive took 10**400 (0 < 10**400 < inf holds); check_finite raised OverflowError."""
    with pytest.raises(ValueError, match="x: speed must be a finite number > 0, got 1000"):
        check_positive("x", speed=HUGE)
    with pytest.raises(ValueError, match="x: weight must be a finite number, got 1000"):
        check_finite("x", weight=HUGE)


@pytest.mark.parametrize(("budget", "match"), [
    (HUGE, "budget seconds must be a finite number > 0, got inf"),
    (f"{HUGE} samples", r"budget samples must be a whole number from 0 to 2\*\*63 - 1, got '1000.* samples'"),
    ("2.50 samples", "a number of samples is whole"),
], ids=["huge-seconds", "huge-samples", "fraction"])
def test_a_budget_past_range_is_a_value_error(budget, match):
    """Both raised OverflowError ('int too large to convert to float', 'cannot convert float infinity to integer')."""
    with pytest.raises(ValueError, match=match):
        Budget.parse(budget)
    assert Budget.parse("2.0 samples").samples == 2 and Budget.parse(f"{10**18} samples").samples == 10**18


def test_a_network_size_past_int64_is_named_before_torch_sees_it():
    """hidden_size=10**400 reached torch: "Overflow when unpacking long long" with its C++ stack, 40 frames."""
    with pytest.raises(ValueError, match=r"^LSTMEncoder: hidden_size must be a whole number from 1 to 2\*\*63 - 1, "
                                         r"got 1000.*000$"):
        LSTMEncoder(hidden_size=HUGE)


def test_refine_past_a_floats_range_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as exited:
        cli._check_seconds(OmegaConf.create({"refine": HUGE}), "refine")
    assert exited.value.code == 2
    assert "gplace: error: refine must be seconds, a finite number >= 0 (0: none), got 1000" in capsys.readouterr().err


def test_a_device_that_is_no_name_is_named_in_one_line():
    """device=None gave torch's five-line list of the constructor's signatures."""
    with pytest.raises(ValueError, match="^device=None is not a torch device name") as caught:
        network_device(None)
    assert "\n" not in str(caught.value)


def test_a_budget_a_baseline_ignores_and_one_rounded_down_to_whole_updates_are_warned_about(caplog):
    """gplace.place(method='heft', budget=...) ignored it in silence (the CLI warned), and a learned search's 15 samples
    measured 8, silently."""
    graph, cluster = random_dag(20), cpu_gpu_cluster(2)
    with caplog.at_level(logging.WARNING, logger="gplace.experiment"):
        gplace.place(graph, cluster, method="heft", budget="8 samples")
    assert "budget='8 samples' is unused: method heft takes no budget" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gplace.experiment"):
        report = gplace.place(graph, cluster, method="learned", budget="15 samples", seed=0)
    assert report.train.samples == 8
    assert "a budget of 15 samples measures 8: a search measures whole updates of 8 samples" in caplog.text


def test_a_seed_is_any_whole_number_numpy_takes():
    """The int64 cap of sizes refused RandomPlacer(seed=2**64 + 5), which numpy's default_rng takes."""
    from gplace.baselines import RandomPlacer

    graph, cluster = random_dag(10), cpu_gpu_cluster(2)
    RandomPlacer(seed=2**64 + 5).place(graph, cluster)


def test_refine_and_budget_seconds_past_a_floats_range_are_value_errors():
    with pytest.raises(ValueError, match="refine must be seconds, a finite number >= 0 .*got 1000"):
        gplace.place(random_dag(10), cpu_gpu_cluster(2), method="heft", refine=HUGE)
    with pytest.raises(ValueError, match="budget seconds must be a finite number > 0, got 1000"):
        Budget(seconds=HUGE)
    with pytest.raises(ValueError, match=r"budget samples must be a whole number from 0 to 2\*\*63 - 1, got '9999"):
        Budget.parse("9" * 5000 + " samples")  # int() refused 4,300 digits naming no budget
