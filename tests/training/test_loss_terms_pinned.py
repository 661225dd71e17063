"""PPO's loss terms and the per-batch baseline at hand-computed values: ``approx_kl`` is ``(r - 1) - log r`` (never
negative), the ratio is clipped from above too, and a batch's mean reward leaves failed samples out."""

from __future__ import annotations

import math

import pytest
import torch

from gplace.training._loop import Rollout
from gplace.training.ppo import ppo_loss


def _terms(ratio: float, advantage: float) -> dict[str, torch.Tensor]:
    new = torch.tensor([math.log(ratio)], dtype=torch.float64)
    zero = torch.zeros(1, dtype=torch.float64)
    return ppo_loss(new, zero, torch.tensor([advantage], dtype=torch.float64), zero, clip_eps=0.2)


def test_approx_kl_is_ratio_minus_one_minus_log_ratio() -> None:
    """ratio 2: (2 - 1) - log 2 = 0.3069, positive (KL(old || new) >= 0)."""
    assert float(_terms(2.0, 1.0)["approx_kl"]) == pytest.approx(1.0 - math.log(2.0))


def test_a_ratio_above_the_clip_range_is_clipped_for_a_positive_advantage() -> None:
    """ratio 2, advantage 1, eps 0.2: min(2 * 1, 1.2 * 1) = 1.2, so loss_policy = -1.2 (not -2)."""
    assert float(_terms(2.0, 1.0)["loss_policy"]) == pytest.approx(-1.2)


def test_batch_mean_leaves_failed_samples_out() -> None:
    """Rewards -1 (ran) and -3 (failed, charged the penalty): the baseline is -1; with none ran, the mean -2."""
    reward = torch.tensor([-1.0, -3.0], dtype=torch.float64)
    ran = Rollout([], [], torch.tensor([True, False]), reward.square(), reward)
    none_ran = Rollout([], [], torch.tensor([False, False]), reward.square(), reward)
    assert (ran.batch_mean(), none_ran.batch_mean()) == (-1.0, -2.0)
