"""The conformance checks leave a checked module as given: every submodule's train/eval flag and every
parameter's ``.grad`` (None, or the caller's values), also when a check fails."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gplace.conformance import check_encoder, check_policy
from gplace.encoders import LSTMEncoder
from gplace.policies import MLPPolicy
from gplace.testing import cpu_gpu_cluster, random_dag

GRAPH, CLUSTER = random_dag(12, seed=0), cpu_gpu_cluster(num_gpus=2)


def _state(module: nn.Module) -> tuple[list[bool], list[torch.Tensor | None]]:
    return ([m.training for m in module.modules()],
            [None if p.grad is None else p.grad.clone() for p in module.parameters()])


def _assert_same(module: nn.Module, state: tuple[list[bool], list[torch.Tensor | None]]) -> None:
    flags, grads = _state(module)
    assert flags == state[0]
    assert [g is None for g in grads] == [g is None for g in state[1]]
    assert all(torch.equal(a, b) for a, b in zip(grads, state[1], strict=True) if a is not None)


def _mixed(module: nn.Module) -> nn.Module:
    """``module`` in eval mode but for its first child, with a ``.grad`` of ones on its first parameter."""
    module.eval()
    next(iter(module.children())).train()
    first = next(iter(module.parameters()))
    first.grad = torch.ones_like(first)
    return module


def test_check_encoder_leaves_flags_and_grads() -> None:
    """check_encoder switches to eval and train and runs backward; the encoder is left as given."""
    encoder = _mixed(LSTMEncoder(hidden_size=16))
    state = _state(encoder)
    check_encoder(encoder, GRAPH)
    _assert_same(encoder, state)


def test_check_policy_leaves_policy_and_encoder_as_given() -> None:
    """check_policy backpropagates through the policy and the encoder; neither keeps a gradient or a mode."""
    torch.manual_seed(0)
    encoder = _mixed(LSTMEncoder(hidden_size=16))
    policy = MLPPolicy(CLUSTER.num_devices, hidden_size=16, state_size=16).eval()
    states = _state(encoder), _state(policy)
    check_policy(policy, GRAPH, CLUSTER, encoder)
    _assert_same(encoder, states[0])
    _assert_same(policy, states[1])


class _Noisy(LSTMEncoder):
    """An encoder that is not deterministic in eval mode, so the check fails after switching to eval."""

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        states = super().forward(features)
        return states if self.training else states + torch.rand(())


def test_a_failing_check_leaves_the_module_too() -> None:
    """A check that raises half-way (after eval()) still restores the flags and grads."""
    encoder = _mixed(_Noisy(hidden_size=16))
    state = _state(encoder)
    with pytest.raises(AssertionError, match="deterministic in eval mode"):
        check_encoder(encoder, GRAPH)
    _assert_same(encoder, state)
