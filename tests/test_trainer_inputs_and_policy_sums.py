"""From a probe of the learning parts: a warm start that runs out of memory was imitated until the search found
nothing that ran; the conformance checks failed working parts (a graph no device holds, an op the rarest kind
cannot run) and passed policies whose probabilities do not sum to 1; the trainers' fit let a wrong argument fail
deep inside; REINFORCE rounded rewards to a bfloat16 policy's dtype before its advantages."""

from __future__ import annotations

import logging

import pytest
import torch

import gplace
from gplace import Edge, Op, OpGraph, Placement
from gplace.conformance import check_policy, check_trainer
from gplace.encoders import LSTMEncoder
from gplace.policies import MLPPolicy
from gplace.runtime import Simulator
from gplace.testing import cpu_gpu_cluster, random_dag, uniform_cluster
from gplace.training import MultiGraphTrainer, PPOTrainer, ReinforceTrainer
from gplace.training.reinforce import reinforce_loss


def _needs_two_devices() -> tuple[OpGraph, object]:
    """Four ops of 600 B each on devices of 1,500 B: no device holds them all."""
    ops = [Op(f"a{i}", "X", 1e-3, persistent_memory=600, output_bytes=10) for i in range(4)]
    return OpGraph.from_ops(ops, [Edge(f"a{i}", f"a{i + 1}") for i in range(3)], name="split_needed"), \
        uniform_cluster(4, memory=1500)


def test_a_warm_start_that_fails_is_not_imitated(caplog):
    graph, cluster = _needs_two_devices()
    with caplog.at_level(logging.WARNING):
        result = gplace.place(graph, cluster, method="learned", budget="40 samples", seed=0,
                              warm_start=Placement.single(graph, 0))
    assert result.measurement.ok
    assert "warm_start does not run" in caplog.text


def test_check_trainer_passes_a_trainer_on_a_graph_no_device_holds():
    graph, cluster = _needs_two_devices()
    assert check_trainer(ReinforceTrainer(updates=3, samples_per_update=4), *_needs_two_devices()).best_placement \
        .validate(graph, cluster) is None


def test_check_policy_pins_the_first_op_to_a_kind_it_can_run_on():
    ops = [Op("a0", "Conv", None, kind_cost={"gpu": 1e-3}, output_bytes=100)]
    ops += [Op(f"a{i}", "X", 1e-3, output_bytes=100) for i in range(1, 6)]
    graph = OpGraph.from_ops(ops, [Edge(f"a{i}", f"a{i + 1}") for i in range(5)])
    check_policy(MLPPolicy(3, hidden_size=32, state_size=32), graph, cpu_gpu_cluster(2), LSTMEncoder(hidden_size=32))


class _MasksAfterTheSoftmax(MLPPolicy):
    def log_probs(self, states, allowed, **kwargs):
        return torch.log_softmax(self._logits(states, None), -1).masked_fill(~allowed, float("-inf"))


class _Shifted(MLPPolicy):
    def log_probs(self, *args, **kwargs):
        return super().log_probs(*args, **kwargs) - 1.0


@pytest.mark.parametrize("policy_class", [_MasksAfterTheSoftmax, _Shifted])
def test_check_policy_refuses_probabilities_that_do_not_sum_to_one(policy_class):
    with pytest.raises(AssertionError, match="sum to 0.*not 1"):
        check_policy(policy_class(3, hidden_size=32, state_size=32), random_dag(20), cpu_gpu_cluster(2),
                     LSTMEncoder(hidden_size=32))


def test_the_checks_name_a_class_given_for_its_instance_and_a_fit_of_other_arguments():
    with pytest.raises(AssertionError, match="got the class 'MLPPolicy': construct one first"):
        check_policy(MLPPolicy, random_dag(8), cpu_gpu_cluster(2), LSTMEncoder(hidden_size=32))
    with pytest.raises(AssertionError, match="MultiGraphTrainer.fit must take .*warm_start"):
        check_trainer(MultiGraphTrainer(updates=1), random_dag(8), cpu_gpu_cluster(2))


@pytest.mark.parametrize("trainer_class", [ReinforceTrainer, PPOTrainer])
def test_fit_names_a_placer_or_runtime_of_the_wrong_kind(trainer_class):
    graph, cluster = random_dag(8), cpu_gpu_cluster(2)
    trainer = trainer_class(updates=1, samples_per_update=2)
    policy = MLPPolicy(3, hidden_size=32, state_size=32)
    with pytest.raises(TypeError, match=f"{trainer_class.__name__}.fit: placer must be a trainable placer.*got a "
                                        "MLPPolicy"):
        trainer.fit(policy, Simulator(), graph, cluster)
    with pytest.raises(TypeError, match="runtime must be a gplace Runtime.*got 'sim'"):
        trainer.fit(policy, "sim", graph, cluster)


def test_reinforce_advantages_keep_close_rewards_apart_for_a_bfloat16_policy():
    step_time = torch.tensor([0.0910 + 0.0002 * i for i in range(8)], dtype=torch.float64)
    reward = -torch.sqrt(step_time)
    log_prob = torch.zeros(8, dtype=torch.bfloat16, requires_grad=True)
    terms = reinforce_loss(log_prob, reward, float(reward.mean()), torch.zeros(8, dtype=torch.bfloat16),
                           normalize_advantage=True)
    assert terms["loss_policy"].dtype == torch.bfloat16
    terms["loss_policy"].backward()
    assert len(set(log_prob.grad.tolist())) == 8
