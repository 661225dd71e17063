"""Tests for gplace.policies.Seq2SeqPolicy."""

from __future__ import annotations

import itertools
import sys

import pytest
import torch

from gplace.encoders import LSTMEncoder
from gplace.features import featurize
from gplace.grouping import group_ops
from gplace.policies import PolicyOutput, Seq2SeqPolicy
from gplace.testing import random_dag

S, D = 8, 3


@pytest.fixture
def policy() -> Seq2SeqPolicy:
    torch.manual_seed(0)
    return Seq2SeqPolicy(D, hidden_size=12, attention_size=6, state_size=S)


def _inputs(g: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random (g, S) states and a (g, D) mask with device 0 barred on even steps and only device 2 on step 1."""
    states = torch.randn(g, S, generator=torch.Generator().manual_seed(seed))
    allowed = torch.ones(g, D, dtype=torch.bool)
    allowed[::2, 0] = False
    allowed[1] = torch.tensor([False, False, True])
    return states, allowed


def test_sample_shapes_and_finite(policy):
    """sample returns (K, G) int64 devices and finite (K,) log-probabilities and entropies."""
    out = policy.sample(*_inputs(6), num_samples=5)
    assert isinstance(out, PolicyOutput)
    assert out.devices.shape == (5, 6) and out.devices.dtype == torch.int64
    assert out.log_prob.shape == (5,) and out.entropy.shape == (5,)
    assert torch.isfinite(out.log_prob).all() and torch.isfinite(out.entropy).all()
    assert (out.log_prob <= 0).all() and (out.entropy >= 0).all()


def test_masked_devices_are_never_sampled(policy):
    """Over 300 samples no group is put on a device its mask bars."""
    states, allowed = _inputs(7)
    devices = policy.sample(states, allowed, num_samples=300).devices
    assert allowed[torch.arange(7), devices].all()
    assert (devices[:, 1] == 2).all()


def test_log_prob_and_entropy_of_a_sample_match_evaluate(policy):
    """Teacher forcing the sampled devices reproduces their log-probabilities and entropies."""
    states, allowed = _inputs(5)
    policy.temperature = 0.7
    out = policy.sample(states, allowed, num_samples=4)
    log_prob, entropy = policy.evaluate(states, allowed, out.devices)
    torch.testing.assert_close(log_prob, out.log_prob)
    torch.testing.assert_close(entropy, out.entropy)


def test_probabilities_of_all_sequences_sum_to_one(policy):
    """Summing exp(log_prob) over every allowed sequence of 3 groups gives 1."""
    states, allowed = _inputs(3)
    choices = [allowed[t].nonzero().flatten().tolist() for t in range(3)]
    sequences = torch.tensor(list(itertools.product(*choices)))
    log_prob, _ = policy.evaluate(states, allowed, sequences)
    torch.testing.assert_close(log_prob.exp().sum(), torch.tensor(1.0))


def test_single_step_entropy_and_sampling_frequencies(policy):
    """For one group, entropy is -sum p log p and sample frequencies match p."""
    states = torch.randn(1, S, generator=torch.Generator().manual_seed(3))
    allowed = torch.ones(1, D, dtype=torch.bool)
    log_p, entropy = policy.evaluate(states, allowed, torch.arange(D)[:, None])
    p = log_p.exp()
    torch.testing.assert_close(entropy, -(p * log_p).sum().expand(D))
    devices = policy.sample(states, allowed, 6000, generator=torch.Generator().manual_seed(0)).devices
    freq = torch.bincount(devices[:, 0], minlength=D).float() / 6000
    torch.testing.assert_close(freq, p.detach(), atol=0.03, rtol=0)


def test_greedy_is_valid_and_matches_cold_sampling(policy):
    """greedy returns allowed devices and equals sampling at a near-zero temperature."""
    states, allowed = _inputs(6)
    greedy = policy.greedy(states, allowed)
    assert greedy.shape == (6,) and allowed[torch.arange(6), greedy].all()
    policy.temperature = 1e-4
    cold = policy.sample(states, allowed, 3).devices
    assert (cold == greedy).all()


def test_generator_makes_samples_reproducible(policy):
    """Two generators with one seed give identical samples."""
    states, allowed = _inputs(6)
    a = policy.sample(states, allowed, 4, generator=torch.Generator().manual_seed(5)).devices
    b = policy.sample(states, allowed, 4, generator=torch.Generator().manual_seed(5)).devices
    assert torch.equal(a, b)


def test_gradients_reach_the_encoder():
    """The REINFORCE-style loss on sampled log-probs backpropagates into the encoder's parameters."""
    torch.manual_seed(0)
    graph = random_dag(30, seed=4)
    grouping = group_ops(graph, max_groups=6)
    features = featurize(graph, grouping).to_tensors()
    encoder = LSTMEncoder(hidden_size=16, type_embedding=8)
    policy = Seq2SeqPolicy(2, hidden_size=16, attention_size=8)
    out = policy.sample(encoder(features), torch.ones(6, 2, dtype=torch.bool), num_samples=4)
    (-(out.log_prob * torch.randn(4)).mean() - 0.1 * out.entropy.mean()).backward()
    for module in (encoder.lstm, encoder.embedding.types, encoder.embedding.numeric, policy.cell, policy.attn_keys,
                   policy.out):
        for name, p in module.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_invalid_inputs_raise(policy):
    """Wrong shapes, a group with no allowed device, and devices the mask bars are errors."""
    states, allowed = _inputs(4)
    with pytest.raises(ValueError, match="allowed"):
        policy.sample(states, allowed[:, :2], 2)
    with pytest.raises(ValueError, match="no allowed device"):
        policy.sample(states, torch.zeros(4, D, dtype=torch.bool), 2)
    with pytest.raises(ValueError, match="not allowed"):
        policy.evaluate(states, allowed, torch.zeros(1, 4, dtype=torch.int64))
    with pytest.raises(ValueError, match="states"):
        policy.greedy(states[:, :3], allowed)


def _saved_bytes(run) -> tuple[int, object]:
    """Bytes of the distinct tensors autograd keeps for the backward pass while ``run()`` builds the graph, and
    what ``run()`` returned."""
    storages = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run()
    return sum(storages.values()), out


def test_large_attention_is_recomputed_with_the_same_gradients(policy, monkeypatch):
    """Past RECOMPUTE_ABOVE_BYTES the (K, G, A) attention of every step is recomputed in the backward pass: the
    same log-probabilities and gradients, a fraction of the kept activations."""
    import gplace.policies.seq2seq as seq2seq

    states, allowed = _inputs(40)
    devices = policy.sample(states, allowed, 8, generator=torch.Generator().manual_seed(1)).devices
    results = []
    for threshold in (float("inf"), 0):
        monkeypatch.setattr(seq2seq, "RECOMPUTE_ABOVE_BYTES", threshold)
        policy.zero_grad()
        kept, (log_prob, _) = _saved_bytes(lambda: policy.evaluate(states, allowed, devices))
        log_prob.sum().backward()
        results.append((kept, log_prob.detach(), [p.grad.clone() for p in policy.parameters()]))
    (kept_plain, lp_plain, grads_plain), (kept_recomputed, lp_recomputed, grads_recomputed) = results
    assert torch.equal(lp_plain, lp_recomputed)
    assert all(torch.equal(a, b) for a, b in zip(grads_plain, grads_recomputed, strict=True))
    assert kept_recomputed < kept_plain / 2


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's heap")
def test_recomputing_on_the_cpu_warns_once_about_glibcs_heap_unless_the_variable_is_set(policy, monkeypatch, caplog):
    """A 2,000-group CPU search grew to 13.5 GB resident (706 MB with MALLOC_MMAP_THRESHOLD_, a probe measured),
    with nothing said outside a benchmark note."""
    import gplace.policies.seq2seq as seq2seq

    states, allowed = _inputs(12)
    devices = policy.sample(states, allowed, 2, generator=torch.Generator().manual_seed(1)).devices
    monkeypatch.setattr(seq2seq, "RECOMPUTE_ABOVE_BYTES", 0)
    monkeypatch.setattr(seq2seq, "_warned_about_glibcs_heap", False)
    for variable in ("65536", None):
        if variable is None:
            monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
        else:
            monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", variable)
        for _ in range(2):
            policy.evaluate(states, allowed, devices)
    warned = [r.getMessage() for r in caplog.records if "MALLOC_MMAP_THRESHOLD_=65536" in r.getMessage()]
    assert len(warned) == 1 and "(12 groups x 2 samples)" in warned[0]


def test_sampling_draws_its_noise_once_with_the_same_values(monkeypatch):
    """Each decoding step drew its own noise (on a CPU generator, then copied to the policy's device: on a GPU one
    blocking copy, a stream sync, per group); all steps' noise now comes in one draw, and the samples are the same
    as drawing step by step from the same generator."""
    import gplace.policies.seq2seq as seq2seq_module
    from gplace.policies.base import gumbel_argmax

    torch.manual_seed(0)
    policy = Seq2SeqPolicy(3, hidden_size=8, attention_size=4, state_size=6)
    states, allowed = torch.randn(7, 6), torch.ones(7, 3, dtype=torch.bool)
    allowed[2, 0] = False
    calls = []
    real = seq2seq_module.gumbel_noise
    monkeypatch.setattr(seq2seq_module, "gumbel_noise", lambda *a, **k: calls.append(1) or real(*a, **k))
    out = policy.sample(states, allowed, 5, generator=torch.Generator().manual_seed(3))
    assert len(calls) == 1
    gen = torch.Generator().manual_seed(3)
    step_by_step = policy._decode(states, allowed, 5, lambda _, log_p: gumbel_argmax(log_p, 1, gen)[0])
    assert torch.equal(out.devices, step_by_step.devices)
