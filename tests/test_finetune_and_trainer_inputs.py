"""Fine-tuning returns its start where nothing sampled runs; the trainers refuse a logger or module of the wrong
kind before training; a policy refuses a number of samples that is no whole number (probe of 2026-12-06)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gplace.encoders import GNNEncoder
from gplace.placer import PolicyPlacer
from gplace.policies import GDPPolicy, SuperpositionPolicy
from gplace.pretrained import build
from gplace.runtime import Simulator
from gplace.runtime.base import Measurement
from gplace.testing import random_dag, uniform_cluster
from gplace.training import ReinforceTrainer
from gplace.training.multigraph import MultiGraphTrainer, finetune

torch.set_num_threads(1)
GRAPH, CLUSTER = random_dag(16, seed=100), uniform_cluster(3)


def _pair():
    torch.manual_seed(0)
    return (build(GNNEncoder, conv="sage", hidden_size=16, num_layers=2),
            build(SuperpositionPolicy, num_devices=3, hidden_size=16, num_heads=2, num_layers=1))


class OnlyFits(Simulator):
    """Every placement but ``fits`` fails (out of memory), deterministically."""

    def __init__(self, fits):
        super().__init__()
        self.fits = fits

    def _measure(self, graph, cluster, placement):
        if np.array_equal(placement.devices, self.fits.devices):
            return super()._measure(graph, cluster, placement)
        return Measurement.failure(self.id, "out of memory")


def test_finetune_returns_its_start_where_no_sample_runs():
    """NothingFitError 'no placement ... succeeded', though the pretrained greedy start had run."""
    encoder, policy = _pair()
    start = PolicyPlacer(GRAPH, CLUSTER, encoder, policy).greedy()
    runtime = OnlyFits(start)
    result = finetune(encoder, policy, GRAPH, CLUSTER, runtime,
                      trainer=ReinforceTrainer(updates=2, samples_per_update=4, checkpoint_every=10**9))
    assert np.array_equal(result.best_placement.devices, start.devices)
    assert result.best_measurement.ok and result.samples == 8


@pytest.mark.parametrize("call", ["multigraph", "finetune"])
def test_a_logger_of_the_wrong_kind_is_refused_before_any_update(call):
    """AttributeError 'str' object has no attribute 'log_scalars', after one update of the caller's weights."""
    encoder, policy = _pair()
    before = [p.detach().clone() for p in policy.parameters()]
    with pytest.raises(TypeError, match="logger must be a gplace Logger"):
        if call == "multigraph":
            MultiGraphTrainer(updates=3, samples_per_update=2).fit(encoder, policy, [(GRAPH, CLUSTER)], Simulator(),
                                                                   logger="wandb")
        else:
            finetune(encoder, policy, GRAPH, CLUSTER, Simulator(), logger="wandb", copy_modules=False,
                     trainer=ReinforceTrainer(updates=2, samples_per_update=2))
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters(), strict=True))


def test_a_module_that_is_none_is_named():
    """AttributeError 'NoneType' object has no attribute 'parameters' from autograd_on."""
    encoder, _ = _pair()
    with pytest.raises(TypeError, match="MultiGraphTrainer.fit: policy must be a torch nn.Module, got NoneType"):
        MultiGraphTrainer(updates=1).fit(encoder, None, [(GRAPH, CLUSTER)], Simulator())
    with pytest.raises(TypeError, match="finetune: encoder must be a torch nn.Module, got NoneType"):
        finetune(None, _pair()[1], GRAPH, CLUSTER, Simulator())


def test_a_policy_refuses_a_number_of_samples_that_is_no_whole_number():
    """sample(states, allowed, 2.0) failed inside torch.rand ('invalid combination of arguments')."""
    policy = build(GDPPolicy, num_devices=3, hidden_size=16, num_heads=2, num_layers=1)
    states, allowed = torch.zeros(4, 16), torch.ones(4, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="num_samples must be a whole number >= 1, got 2.0"):
        policy.sample(states, allowed, 2.0)
    assert policy.sample(states, allowed, np.int64(2)).devices.shape == (2, 4)
