"""Every built-in encoder, policy, placer and trainer passes the conformance checks of gplace.conformance."""

from __future__ import annotations

import pytest
import torch
from small_networks import ENCODERS, POLICIES
from torch import nn

from gplace.baselines import HEFT, METF, METIS, MSCT, MTopo, RandomPlacer, RoundRobin, SingleDevice
from gplace.conformance import check_encoder, check_placer, check_policy, check_trainer
from gplace.encoders import LSTMEncoder
from gplace.interfaces import Placer, PolicyCapabilities, capabilities_of
from gplace.policies import MLPPolicy
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import PPOTrainer, ReinforceTrainer

GRAPH, CLUSTER = random_dag(24, seed=3), cpu_gpu_cluster(num_gpus=2)


@pytest.mark.parametrize("name", ENCODERS)
def test_encoders_conform(name):
    assert check_encoder(ENCODERS[name](), GRAPH).shape[1] == 32


@pytest.mark.parametrize("name", POLICIES)
def test_policies_conform(name):
    torch.manual_seed(0)
    check_policy(POLICIES[name](), GRAPH, CLUSTER, encoder=LSTMEncoder(hidden_size=32))


@pytest.mark.parametrize("placer", [SingleDevice(1), RoundRobin(), RandomPlacer(seed=0), HEFT(), MTopo(), METF(),
                                    MSCT(), METIS()], ids=lambda p: p.name)
def test_placers_conform(placer):
    check_placer(placer, GRAPH, CLUSTER)


@pytest.mark.parametrize("trainer", [ReinforceTrainer(updates=3, samples_per_update=4),
                                     PPOTrainer(updates=2, samples_per_update=4)], ids=["reinforce", "ppo"])
def test_trainers_conform(trainer, tmp_path):
    check_trainer(trainer, GRAPH, CLUSTER, run_dir=tmp_path)


def test_a_broken_placer_is_named():
    class Overlapping(Placer):
        name = "broken"

        def _place(self, graph, cluster):
            return [0] * (graph.num_ops - 1)

    with pytest.raises(Exception, match="length|ops"):
        check_placer(Overlapping(), GRAPH, CLUSTER)


def test_a_policy_that_lies_about_its_log_prob_fails():
    class Lying(MLPPolicy):
        def evaluate(self, states, allowed, devices, **inputs):
            log_prob, entropy = super().evaluate(states, allowed, devices, **inputs)
            return log_prob - 1.0, entropy

    with pytest.raises(AssertionError, match="evaluate"):
        check_policy(Lying(3, hidden_size=32, state_size=32), GRAPH, CLUSTER, encoder=LSTMEncoder(hidden_size=32))


def test_a_policy_written_before_the_protocol_still_places_with_a_deprecation_warning():
    class Legacy(nn.Module):
        num_devices = 3

        def __init__(self):
            super().__init__()
            self.inner = MLPPolicy(3, hidden_size=32, state_size=32)

        def sample(self, *args, **kwargs):
            return self.inner.sample(*args, **kwargs)

        def greedy(self, *args, **kwargs):
            return self.inner.greedy(*args, **kwargs)

        def evaluate(self, *args, **kwargs):
            return self.inner.evaluate(*args, **kwargs)

    with pytest.warns(DeprecationWarning, match="capabilities"):
        assert capabilities_of(Legacy()) == PolicyCapabilities(num_devices=3)


def test_capabilities_are_validated():
    with pytest.raises(ValueError, match="merge_consumers"):
        PolicyCapabilities(merge_consumers="sometimes")
    with pytest.raises(ValueError, match="num_devices"):
        PolicyCapabilities(num_devices=0)
