"""Tests for gplace.policies.base and the one-pass policies built on it (MLP, GDP, device-aware)."""

from __future__ import annotations

import itertools

import pytest
import torch

from gplace.features import DEVICE_FEATURES, device_features
from gplace.ir import Cluster, Device
from gplace.policies import DeviceAwarePolicy, GDPPolicy, IndependentPolicy, MLPPolicy
from gplace.policies.base import masked_log_softmax, score

S, D = 8, 3
DEVICES = torch.from_numpy(device_features(Cluster.build(
    [Device("/CPU:0", "cpu", 1.0, 10**11), Device("/GPU:0", "gpu", 1.0, 16 * 10**9),
     Device("/GPU:1", "gpu", 2.0, 32 * 10**9)], default_bandwidth=1e9)))
"""Three distinguishable devices (equal ones would tie under the device-aware policy)."""


def _make(name: str) -> IndependentPolicy:
    torch.manual_seed(0)
    if name == "mlp":
        return MLPPolicy(D, hidden_size=12, state_size=S)
    if name == "gdp":
        return GDPPolicy(D, hidden_size=12, num_heads=2, segment_size=2, state_size=S)
    return DeviceAwarePolicy(hidden_size=12, state_size=S)


def _inputs(g: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random (g, S) states and a mask barring device 0 on even groups and allowing only device 2 on group 1."""
    states = torch.randn(g, S, generator=torch.Generator().manual_seed(seed))
    allowed = torch.ones(g, D, dtype=torch.bool)
    allowed[::2, 0] = False
    allowed[1] = torch.tensor([False, False, True])
    return states, allowed


@pytest.fixture(params=["mlp", "gdp", "device_aware"])
def policy(request) -> IndependentPolicy:
    return _make(request.param)


def _kw(policy: IndependentPolicy) -> dict[str, torch.Tensor]:
    return {"device_features": DEVICES} if policy.uses_device_features else {}


def test_probabilities_of_all_placements_sum_to_one(policy):
    """Summing exp(log_prob) over every allowed placement of 3 groups gives 1."""
    states, allowed = _inputs(3)
    choices = [allowed[t].nonzero().flatten().tolist() for t in range(3)]
    placements = torch.tensor(list(itertools.product(*choices)))
    log_prob, _ = policy.evaluate(states, allowed, placements, **_kw(policy))
    torch.testing.assert_close(log_prob.exp().sum(), torch.tensor(1.0))


def test_sampling_frequencies_and_entropy_match_the_distribution(policy):
    """For one group, sample frequencies match p and the entropy is -sum p log p."""
    states, allowed = torch.randn(1, S, generator=torch.Generator().manual_seed(3)), torch.ones(1, D, dtype=bool)
    log_p = policy.log_probs(states, allowed, **_kw(policy))[0]
    out = policy.sample(states, allowed, 6000, generator=torch.Generator().manual_seed(0), **_kw(policy))
    freq = torch.bincount(out.devices[:, 0], minlength=D).float() / 6000
    torch.testing.assert_close(freq, log_p.exp().detach(), atol=0.03, rtol=0)
    torch.testing.assert_close(out.entropy, -(log_p.exp() * log_p).sum().expand(6000))


def test_masked_devices_are_never_sampled_and_greedy_is_cold_sampling(policy):
    """Barred devices are never drawn; greedy equals sampling at temperature 1e-4 and is allowed."""
    states, allowed = _inputs(7)
    devices = policy.sample(states, allowed, 300, **_kw(policy)).devices
    assert allowed[torch.arange(7), devices].all() and (devices[:, 1] == 2).all()
    greedy = policy.greedy(states, allowed, **_kw(policy))
    policy.temperature = 1e-4
    assert (policy.sample(states, allowed, 3, **_kw(policy)).devices == greedy).all()


def test_invalid_inputs_raise(policy):
    """Wrong shapes, a group with no allowed device, and barred devices are errors."""
    states, allowed = _inputs(4)
    with pytest.raises(ValueError, match="allowed"):
        policy.sample(states, allowed[:, :2], 2, **_kw(policy))
    with pytest.raises(ValueError, match="no allowed device"):
        policy.sample(states, torch.zeros(4, D, dtype=torch.bool), 2, **_kw(policy))
    with pytest.raises(ValueError, match="not allowed"):
        policy.evaluate(states, allowed, torch.zeros(1, 4, dtype=torch.int64), **_kw(policy))
    with pytest.raises(ValueError, match="states"):
        policy.greedy(states[:, :3], allowed, **_kw(policy))
    with pytest.raises(ValueError, match="num_samples"):
        policy.sample(states, allowed, 0, **_kw(policy))


def test_device_aware_policy_is_equivariant_to_device_order():
    """Permuting the devices' features permutes the logits' columns the same way."""
    policy, states = _make("device_aware"), torch.randn(5, S)
    perm = torch.tensor([2, 0, 1])
    every = torch.ones(5, D, dtype=torch.bool)
    before = policy.log_probs(states, every, device_features=DEVICES)
    after = policy.log_probs(states, every, device_features=DEVICES[perm])
    torch.testing.assert_close(after, before[:, perm])


def test_device_aware_policy_learns_to_split_groups_over_equal_devices():
    """Equal devices (two GPUs of one kind) had equal features, so equal logits for every group whatever the
    weights: 200 likelihood steps towards a split over them left it at 1/16, and the policy never learned to use
    more than one of them. Their rank among equal devices tells them apart."""
    policy, states = _make("device_aware"), torch.randn(4, S, generator=torch.Generator().manual_seed(3))
    equal = DEVICES[[0, 0, 1]]
    every, split = torch.ones(4, D, dtype=torch.bool), torch.tensor([0, 1, 0, 1])
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for _ in range(200):
        optimizer.zero_grad()
        loss = -policy.log_probs(states, every, device_features=equal)[torch.arange(4), split].sum()
        loss.backward()
        optimizer.step()
    assert float(torch.exp(-loss)) > 0.9


def test_devices_equal_but_for_measurement_noise_are_told_apart():
    """Speeds measured 1e-6 apart gave every device rank 0 (exact equality), so nearly equal logits again."""
    from gplace.policies.device_aware import twin_rank

    noisy = DEVICES[[0, 0, 1]].clone()
    noisy[1] += 1e-6
    assert twin_rank(noisy).tolist() == [0.0, 1.0, 0.0]


def test_device_aware_policy_needs_device_features_of_its_width():
    """Without device features, or with the wrong width, the device-aware policy raises."""
    policy, (states, allowed) = _make("device_aware"), _inputs(4)
    assert DEVICES.shape == (D, DEVICE_FEATURES)
    with pytest.raises(ValueError, match="device_features"):
        policy.sample(states, allowed, 2)
    with pytest.raises(ValueError, match="width"):
        policy.sample(states, allowed, 2, device_features=DEVICES[:, :4])
    with pytest.raises(ValueError, match="allowed"):
        policy.sample(states, allowed, 2, device_features=torch.cat([DEVICES, DEVICES]))


def test_score_shares_one_distribution_across_samples():
    """score() with a (G, D) log_p gives each sample the sum of its chosen log-probs and the summed entropy."""
    allowed = torch.tensor([[True, True], [False, True]])
    log_p = masked_log_softmax(torch.tensor([[0.0, torch.log(torch.tensor(3.0))], [5.0, 1.0]]), allowed)
    out = score(log_p, torch.tensor([[0, 1], [1, 1]]), allowed)
    torch.testing.assert_close(out.log_prob, torch.log(torch.tensor([0.25, 0.75])))
    h = -(0.25 * torch.log(torch.tensor(0.25)) + 0.75 * torch.log(torch.tensor(0.75)))
    torch.testing.assert_close(out.entropy, h.expand(2))
