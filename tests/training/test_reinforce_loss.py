"""The REINFORCE loss on a hand-computed two-sample example, and the EMA baseline."""

import math

import pytest
import torch

from gplace.training import EMABaseline, reinforce_loss, step_time_reward


def test_two_sample_example_by_hand():
    # step times 4 s and 9 s -> rewards -2 and -3; baseline -2.5 -> advantages +0.5 and -0.5.
    log_prob = torch.tensor([-1.0, -2.0], requires_grad=True)
    entropy = torch.tensor([0.5, 1.5], requires_grad=True)
    reward = step_time_reward(torch.tensor([4.0, 9.0]))
    assert reward.tolist() == [-2.0, -3.0]
    terms = reinforce_loss(log_prob, reward, -2.5, entropy, entropy_coef=0.1)
    # loss_policy = -mean(0.5 * -1, -0.5 * -2) = -mean(-0.5, 1.0) = -0.25
    assert terms["loss_policy"].item() == pytest.approx(-0.25)
    assert terms["loss_entropy"].item() == pytest.approx(-0.1)
    assert terms["advantage_mean"].item() == pytest.approx(0.0)
    (terms["loss_policy"] + terms["loss_entropy"]).backward()
    # d/dlogp = -adv / K: the faster sample's log-prob gets pushed up
    assert log_prob.grad.tolist() == pytest.approx([-0.25, 0.25])
    assert entropy.grad.tolist() == pytest.approx([-0.05, -0.05])


def test_advantage_carries_no_gradient_into_reward():
    reward = torch.tensor([-1.0, -2.0], requires_grad=True)
    terms = reinforce_loss(torch.zeros(2, requires_grad=True), reward, 0.0, torch.zeros(2))
    terms["loss_policy"].backward()
    assert reward.grad is None


def test_ema_baseline():
    b = EMABaseline(decay=0.9)
    assert b(fallback=-7.0) == -7.0
    b.update([])
    assert b.value is None
    b.update([-2.0, -4.0])
    assert b.value == -3.0
    b.update([-1.0])
    assert b.value == pytest.approx(0.9 * -3.0 + 0.1 * -1.0)
    restored = EMABaseline()
    restored.load_state_dict(b.state_dict())
    assert restored.value == b.value and restored.decay == 0.9
    with pytest.raises(ValueError, match="decay"):
        EMABaseline(decay=1.0)
    assert math.isclose(b(fallback=0.0), b.value)
