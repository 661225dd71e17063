"""The REINFORCE loss on hand-computed examples (plain and risk-seeking), and the EMA baseline."""

import math

import pytest
import torch

from gplace.training import EMABaseline, reinforce_loss, step_time_reward
from gplace.training.reinforce import batch_advantage, risk_seeking_baseline


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


def test_risk_seeking_keeps_the_best_fraction_measured_from_its_quantile():
    # rewards -1 .. -8; eps = 0.25 -> the 0.75 quantile is -2.75: only -1 and -2 count, by 1.75 and 0.75
    reward = -torch.arange(1.0, 9.0, dtype=torch.float64)
    threshold = risk_seeking_baseline(reward, 0.25)
    assert threshold == pytest.approx(-2.75)
    adv = batch_advantage(reward, threshold, best_only=True)
    assert adv.tolist() == pytest.approx([1.75, 0.75, 0, 0, 0, 0, 0, 0])
    # normalised by the standard deviation of all K rewards, not of the two kept
    assert batch_advantage(reward, threshold, normalize=True, best_only=True).tolist() == pytest.approx(
        (adv / reward.std()).tolist())
    # eps = 1: the quantile is the worst reward, so every sample but the worst counts
    assert batch_advantage(reward, risk_seeking_baseline(reward, 1.0), best_only=True).tolist() == pytest.approx(
        [7, 6, 5, 4, 3, 2, 1, 0])


def test_risk_seeking_loss_moves_only_the_kept_samples():
    log_prob = torch.zeros(4, requires_grad=True)
    reward = torch.tensor([-1.0, -2.0, -3.0, -4.0])
    assert risk_seeking_baseline(reward, 0.5) == pytest.approx(-2.5)
    terms = reinforce_loss(log_prob, reward, risk_seeking_baseline(reward, 0.5), torch.zeros(4), best_only=True)
    terms["loss_policy"].backward()
    # the 0.5 quantile is -2.5: advantages 1.5 and 0.5 on the two best, zero on the others; d/dlogp = -adv / K
    assert log_prob.grad.tolist() == pytest.approx([-0.375, -0.125, 0.0, 0.0])


def test_normalised_advantages_of_equal_rewards_stay_unscaled():
    """Rewards equal to a millionth (a collapsed policy's batch) were divided by their ~0 spread: +1e6 advantages
    from a baseline 0.01 away, and 2e5 from one reward off by 1e-7. A batch with a real spread is still scaled."""
    for reward in (torch.full((8,), -1.0, dtype=torch.float64),
                   torch.tensor([-1.0] * 7 + [-1.0 - 1e-7], dtype=torch.float64)):
        assert batch_advantage(reward, -1.01, normalize=True).tolist() == pytest.approx([0.01] * 8, abs=2e-7)
    spread = torch.tensor([-1.0, -1.001], dtype=torch.float64)
    assert batch_advantage(spread, -1.0005, normalize=True).tolist() == pytest.approx([0.7071, -0.7071], abs=1e-3)


def test_a_failure_does_not_shrink_the_risk_seeking_advantages():
    """The spread is of the samples that ran: one out-of-memory sample (penalty reward -10) had divided the kept
    samples' advantages by its size (28x smaller), though it gets none itself."""
    times = torch.tensor([1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0], dtype=torch.float64)
    failed = times.clone()
    failed[-1] = 100.0  # the penalty step time
    ran = torch.tensor([True] * 7 + [False])
    advantages = []
    for step_time, ok in ((times, None), (failed, ran)):
        reward = step_time_reward(step_time)
        kept = batch_advantage(reward, risk_seeking_baseline(reward, 0.25), normalize=True, best_only=True, ran=ok)
        advantages.append(kept[:2])
    spread_clean = (step_time_reward(times) - 0).std()
    spread_ran = step_time_reward(times[:7]).std()
    torch.testing.assert_close(advantages[1], advantages[0] * spread_clean / spread_ran)
    assert float(advantages[1][0]) > 0.5 * float(advantages[0][0])


def test_without_best_only_a_failure_keeps_its_full_weight():
    reward = step_time_reward(torch.tensor([1.0, 2.0, 100.0], dtype=torch.float64))
    ran = torch.tensor([True, True, False])
    torch.testing.assert_close(batch_advantage(reward, -2.0, normalize=True, ran=ran),
                               batch_advantage(reward, -2.0, normalize=True))


def test_risk_seeking_with_fewer_samples_ran_than_kept_keeps_the_penalty_scale():
    """Two of eight ran (the baseline is the penalty's quantile): their spread, 0.0005 s apart, had scaled
    advantages on the penalty's scale to 5,000."""
    step_time = torch.tensor([0.198, 0.1985] + [10.0] * 6, dtype=torch.float64)
    ran = torch.tensor([True, True] + [False] * 6)
    reward = step_time_reward(step_time)
    baseline = risk_seeking_baseline(reward, 0.25)
    kept = batch_advantage(reward, baseline, normalize=True, best_only=True, ran=ran)
    torch.testing.assert_close(kept, batch_advantage(reward, baseline, normalize=True, best_only=True))
    assert float(kept.max()) < 10
