"""Seeded searches give the results they gave before the trainers were rebuilt on shared settings and helpers.

The pins were measured on commit d6f0332 (before gplace.interfaces, SearchSettings and the MultiGraphTrainer and
policy refactors) and are unchanged since: a refactor that changes a seeded result fails here.
"""

from __future__ import annotations

import pytest
import torch

from gplace.encoders import GNNEncoder, LSTMEncoder
from gplace.placer import PolicyPlacer
from gplace.policies import ListSchedulingPolicy, MLPPolicy, Seq2SeqPolicy
from gplace.runtime import Simulator
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import PPOTrainer, ReinforceTrainer
from gplace.training.multigraph import MultiGraphTrainer

GRAPH, CLUSTER = random_dag(30, seed=5), cpu_gpu_cluster(num_gpus=2)

PINNED = {  # name -> [best step time (s), best placement's devices as a string]
    "reinforce_seq2seq": [28.385745894260236, "111222111110000001101111101011"],
    "ppo_mlp": [35.11067059378563, "122002222220111102210222211021"],
    "reinforce_ls": [25.119612281446194, "111222000001002010020000120101"],
    "multigraph": [[21.753187528809192, 26.51175178992665], [11.951498646488135, 12.61796941536577]],
}

SEARCHES = {
    "reinforce_seq2seq": (lambda: LSTMEncoder(hidden_size=32), lambda: Seq2SeqPolicy(3, hidden_size=32, state_size=32),
                          lambda: ReinforceTrainer(updates=5, samples_per_update=4)),
    "ppo_mlp": (lambda: GNNEncoder("sage", hidden_size=32), lambda: MLPPolicy(3, hidden_size=32, state_size=32),
                lambda: PPOTrainer(updates=4, samples_per_update=4)),
    "reinforce_ls": (lambda: GNNEncoder("sage", hidden_size=32), lambda: ListSchedulingPolicy(32, state_size=32),
                     lambda: ReinforceTrainer(updates=4, samples_per_update=4)),
}


@pytest.mark.parametrize("name", SEARCHES)
def test_seeded_search_is_pinned(name):
    encoder, policy, trainer = SEARCHES[name]
    torch.manual_seed(0)
    placer = PolicyPlacer(GRAPH, CLUSTER, encoder(), policy(), max_groups=16)
    result = trainer().fit(placer, Simulator(), GRAPH, CLUSTER)
    step_time, devices = PINNED[name]
    assert "".join(map(str, result.best_placement.devices.tolist())) == devices
    assert result.best_step_time == pytest.approx(step_time, rel=1e-9)


def test_seeded_multigraph_training_is_pinned():
    torch.manual_seed(0)
    tasks = [(GRAPH, CLUSTER), (random_dag(20, seed=6), CLUSTER)]
    result = MultiGraphTrainer(updates=4, samples_per_update=4, max_groups=16).fit(
        GNNEncoder("sage", hidden_size=32), ListSchedulingPolicy(32, state_size=32), tasks, Simulator())
    got = [time for t in result.tasks for time in (t.best_step_time, t.greedy_step_time)]
    assert got == pytest.approx(sum(PINNED["multigraph"], []), rel=1e-9)
