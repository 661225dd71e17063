"""Temperatures too small for the policy's dtype: finite log-probabilities, the greedy placement, no barred device."""

from __future__ import annotations

import pytest
import torch

from gplace.features import DEVICE_FEATURES
from gplace.policies import DeviceAwarePolicy, GDPPolicy, MLPPolicy, Seq2SeqPolicy
from gplace.policies.base import masked_log_softmax

S, D, G = 8, 3, 6


def _policy(name: str, dtype: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "mlp":
        policy = MLPPolicy(D, hidden_size=12, state_size=S)
    elif name == "gdp":
        policy = GDPPolicy(D, hidden_size=12, num_heads=2, segment_size=2, state_size=S)
    elif name == "device_aware":
        policy = DeviceAwarePolicy(hidden_size=12, state_size=S)
    else:
        policy = Seq2SeqPolicy(D, hidden_size=12, attention_size=6, state_size=S)
    return policy.to(dtype)


def _inputs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """(G, S) states (large, so tiny temperatures overflow), a mask barring device 0 everywhere, device features."""
    gen = torch.Generator().manual_seed(1)
    states = 10 * torch.randn(G, S, generator=gen, dtype=dtype)
    allowed = torch.ones(G, D, dtype=torch.bool)
    allowed[:, 0] = False
    return states, allowed, {"device_features": torch.rand(D, DEVICE_FEATURES, generator=gen, dtype=dtype)}


@pytest.mark.parametrize("dtype, temperature", [(torch.float32, 1e-39), (torch.float32, 1e-45),
                                                (torch.float32, 1e-300), (torch.float64, 1e-320)])
@pytest.mark.parametrize("name", ["mlp", "gdp", "device_aware", "seq2seq"])
def test_a_tiny_temperature_decodes_greedily_with_finite_log_probs_and_no_barred_device(name, dtype, temperature):
    """T=1e-39 in float32 gave NaN log-probs, drew barred device 0 150 times in 250 and greedy chose it."""
    policy = _policy(name, dtype)
    states, allowed, extra = _inputs(dtype)
    kw = extra if getattr(policy, "uses_device_features", False) else {}
    warm = policy.greedy(states, allowed, **kw)
    policy.temperature = temperature
    out = policy.sample(states, allowed, 50, generator=torch.Generator().manual_seed(0), **kw)
    assert torch.isfinite(out.log_prob).all() and torch.isfinite(out.entropy).all()
    assert (out.devices != 0).all() and (out.devices == warm).all()
    assert torch.equal(policy.greedy(states, allowed, **kw), warm)
    log_prob, entropy = policy.evaluate(states, allowed, warm[None], **kw)
    assert log_prob.abs().max() < 1e-6 and entropy.abs().max() < 1e-6  # one-hot on the greedy placement


def test_nan_logits_never_put_a_barred_device_first():
    """A NaN logit made the whole row NaN, barred entries included, and argmax takes NaN for the maximum."""
    logits = torch.tensor([[0.0, float("nan"), 1.0], [float("inf"), float("nan"), float("-inf")]])
    allowed = torch.tensor([[False, True, True], [False, True, True]])
    log_p = masked_log_softmax(logits, allowed)
    assert log_p[:, 0].eq(float("-inf")).all()
    assert allowed[torch.arange(2), log_p.argmax(-1)].all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("temperature", [1.0, 0.37, 1e-4, 1e-30, 25.0])
def test_ordinary_temperatures_give_the_same_bits_and_gradients_as_plain_division(dtype, temperature):
    """The safe path must not touch ordinary inputs: log-probs and gradients equal the unguarded formula's exactly."""
    gen = torch.Generator().manual_seed(2)
    logits = (3 * torch.randn(4, 5, 7, generator=gen, dtype=dtype)).requires_grad_()
    allowed = torch.rand(5, 7, generator=gen) < 0.6
    allowed[:, 3] = True
    weights = torch.randn(4, 5, 7, generator=gen, dtype=dtype).masked_fill(~allowed, 0.0)
    new = masked_log_softmax(logits, allowed, temperature)
    (grad_new,) = torch.autograd.grad((new.masked_fill(~allowed, 0.0) * weights).sum(), logits)
    old = torch.log_softmax((logits / temperature).masked_fill(~allowed, float("-inf")), -1)
    (grad_old,) = torch.autograd.grad((old.masked_fill(~allowed, 0.0) * weights).sum(), logits)
    assert torch.equal(new, old) and torch.equal(grad_new, grad_old)


def test_a_tiny_temperature_in_the_list_scheduling_policy_gives_finite_log_probs():
    """It divided by the temperature itself: T=1e-39 gave NaN entropies, 1e-46 NaN log-probabilities (its devices
    tie on a uniform cluster, so a sample may take any of the tied ones)."""
    from gplace.encoders import GNNEncoder
    from gplace.placer import PolicyPlacer
    from gplace.policies import ListSchedulingPolicy
    from gplace.testing import random_dag, uniform_cluster

    torch.manual_seed(0)
    graph = random_dag(20, seed=3)
    placer = PolicyPlacer(graph, uniform_cluster(3), GNNEncoder("sage", hidden_size=8, num_layers=1),
                          ListSchedulingPolicy(8, state_size=8))
    for temperature in (1e-39, 1e-46):
        placer.policy.temperature = temperature
        out = placer.sample(8)
        assert torch.isfinite(out.log_prob).all() and torch.isfinite(out.entropy).all(), temperature


def test_a_half_precision_policy_divides_by_a_small_temperature_exactly():
    """Temperatures were floored at float16's smallest normal number (6.1e-5), though torch divides halves in float32:
    T = 1e-5 gave [0.007, 0.036, 0.0003, 0.956] where the division gives one-hot on the last device."""
    logits = torch.tensor([[0.0, 1e-4, -2e-4, 3e-4]], dtype=torch.float16)
    allowed = torch.ones(1, 4, dtype=torch.bool)
    want = torch.log_softmax(logits / 1e-5, -1)
    assert torch.equal(masked_log_softmax(logits, allowed, 1e-5), want)
