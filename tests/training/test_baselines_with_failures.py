"""The REINFORCE and PPO baselines when some samples fail (out of memory): failures are charged the penalty step
time in their rewards but stay out of the batch-mean and EMA baselines."""

from __future__ import annotations

import pytest
import torch

from gplace.encoders import LSTMEncoder
from gplace.grouping import group_ops
from gplace.ir import Cluster, OpGraph, Placement
from gplace.placer import PolicyPlacer
from gplace.policies import Seq2SeqPolicy
from gplace.runtime.base import Measurement, Runtime
from gplace.testing import chain, uniform_cluster
from gplace.training import PPOTrainer, ReinforceTrainer


class _EveryOtherFails(Runtime):
    """Measurement 0, 2, 4, ... runs in 4 s (reward -2); 1, 3, 5, ... runs out of memory (with the penalty of
    100 s, reward -10), whatever the placement: every batch of 4 has two of each."""

    id = "every-other-fails"

    def __init__(self) -> None:
        self.calls = 0

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        self.calls += 1
        if self.calls % 2 == 0:
            return Measurement.failure(self.id, "out of memory on /GPU:0: needs 2 B, has 1 B")
        return Measurement(ok=True, step_time=4.0, runtime=self.id)


def _placer(graph: OpGraph, cluster: Cluster) -> PolicyPlacer:
    torch.manual_seed(0)
    encoder = LSTMEncoder(hidden_size=8, type_embedding=4)
    policy = Seq2SeqPolicy(cluster.num_devices, hidden_size=8, attention_size=4)
    return PolicyPlacer(graph, cluster, encoder, policy, grouping=group_ops(graph))


@pytest.mark.parametrize("trainer", [ReinforceTrainer(updates=2, samples_per_update=4, penalty_step_time=100.0),
                                     PPOTrainer(updates=2, samples_per_update=4, penalty_step_time=100.0, epochs=1)],
                         ids=["reinforce", "ppo"])
def test_the_ema_baseline_leaves_failed_samples_out(trainer) -> None:
    """Update 1: rewards -2, -10, -2, -10; the baseline (no EMA yet) is the mean of those that ran, -2, and the EMA
    starts there. Update 2 reads the EMA: -2 again (-6 had the failures' -10 been folded in)."""
    graph, cluster = chain((1.0, 1.0)), uniform_cluster(2)
    result = trainer.fit(_placer(graph, cluster), _EveryOtherFails(), graph, cluster)
    assert [h["rollout/failures"] for h in result.history] == [2, 2]
    assert [h["charts/baseline"] for h in result.history] == [-2.0, -2.0]


def test_the_ppo_batch_mean_baseline_leaves_failed_samples_out() -> None:
    """``baseline="mean"``: each batch's own mean over the samples that ran, -2 (not -6)."""
    graph, cluster = chain((1.0, 1.0)), uniform_cluster(2)
    trainer = PPOTrainer(updates=2, samples_per_update=4, penalty_step_time=100.0, epochs=1, baseline="mean")
    result = trainer.fit(_placer(graph, cluster), _EveryOtherFails(), graph, cluster)
    assert [h["charts/baseline"] for h in result.history] == [-2.0, -2.0]
