"""Tests for gplace.policies.GDPPolicy: segments, detached memory, one-pass placement."""

from __future__ import annotations

import pytest
import torch

from gplace.policies import GDPPolicy

S, D = 8, 3


def _policy(segment_size: int = 4, num_layers: int = 2) -> GDPPolicy:
    torch.manual_seed(0)
    return GDPPolicy(D, hidden_size=12, num_heads=2, num_layers=num_layers, segment_size=segment_size, state_size=S)


def _logits(policy: GDPPolicy, states: torch.Tensor) -> torch.Tensor:
    return policy.log_probs(states, torch.ones(states.shape[0], D, dtype=torch.bool))


def test_a_segment_sees_the_previous_one_and_never_a_later_one():
    """With segments of 4, changing segment 2 leaves segments 0-1 alone; changing segment 0 changes segment 1."""
    policy, states = _policy(), torch.randn(11, S, generator=torch.Generator().manual_seed(0))
    base = _logits(policy, states)
    later, earlier = states.clone(), states.clone()
    later[8:] += 1.0
    earlier[:4] += 1.0
    torch.testing.assert_close(_logits(policy, later)[:8], base[:8])
    assert not torch.allclose(_logits(policy, earlier)[4:8], base[4:8])


def test_memory_is_detached():
    """A loss on segment 1 sends no gradient into segment 0's states (Transformer-XL stop-gradient)."""
    policy = _policy()
    states = torch.randn(12, S, generator=torch.Generator().manual_seed(1), requires_grad=True)
    _logits(policy, states)[4:8].sum().backward()
    assert states.grad[:4].abs().sum() == 0 and states.grad[4:8].abs().sum() > 0


def test_segment_size_beyond_g_and_padding_do_not_change_the_logits():
    """One segment of 16 and one of 64 give the same logits for 10 groups (padding is masked out)."""
    states = torch.randn(10, S, generator=torch.Generator().manual_seed(2))
    a, b = _policy(segment_size=16), _policy(segment_size=64)
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(_logits(a, states), _logits(b, states))


def test_a_segment_size_far_beyond_g_costs_what_g_does():
    """The groups were padded to one whole segment: 10 groups cost 17 s at segment_size=16384, and 10**12 tried to
    allocate 8 TB."""
    states = torch.randn(10, S, generator=torch.Generator().manual_seed(2))
    a, b = _policy(segment_size=16), _policy(segment_size=10**12)
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(_logits(a, states), _logits(b, states))


def test_every_group_is_placed_in_one_pass_and_groups_are_independent():
    """Sampling K=500 of 9 groups: shapes, finite values, and the entropy is the same for every sample."""
    policy = _policy()
    out = policy.sample(torch.randn(9, S), torch.ones(9, D, dtype=torch.bool), 500,
                        generator=torch.Generator().manual_seed(0))
    assert out.devices.shape == (500, 9) and torch.isfinite(out.log_prob).all()
    torch.testing.assert_close(out.entropy, out.entropy[:1].expand(500))


def test_rejects_bad_configuration():
    """Heads must divide the width; layers and segment size must be positive."""
    with pytest.raises(ValueError, match="num_heads"):
        GDPPolicy(2, hidden_size=10, num_heads=4)
    with pytest.raises(ValueError, match="segment_size"):
        GDPPolicy(2, segment_size=0)
    with pytest.raises(ValueError, match="num_devices"):
        GDPPolicy(0)
