"""Fine-tuning a pretrained policy starts from its greedy placement and never ends behind it."""

from __future__ import annotations

import dataclasses

import torch

from gplace.encoders import GNNEncoder
from gplace.policies import DeviceAwarePolicy
from gplace.pretrained import build, place_zero_shot
from gplace.runtime import Runtime, Simulator
from gplace.testing import chain, uniform_cluster
from gplace.training import ReinforceTrainer
from gplace.training.multigraph import finetune

GRAPH, CLUSTER = chain((1.0,) * 8, nbytes=1000), uniform_cluster(2)


def _modules():
    torch.manual_seed(0)
    encoder = build(GNNEncoder, conv="sage", hidden_size=16, num_layers=2, type_embedding=8, projection=8)
    return encoder, build(DeviceAwarePolicy, hidden_size=16)


class _FastOnce(Runtime):
    """sim-v1's step time, but the first placement measured runs in 1 ms (a noisy machine's lucky step)."""

    id = "fast-once-v1"

    def __init__(self) -> None:
        self.simulator, self.calls = Simulator(), 0

    def _measure(self, graph, cluster, placement):
        self.calls += 1
        measured = self.simulator.measure(graph, cluster, placement)
        return dataclasses.replace(measured, step_time=1e-3, runtime=self.id) if self.calls == 1 else \
            dataclasses.replace(measured, runtime=self.id)


def test_finetuning_never_ends_behind_the_pretrained_greedy_placement() -> None:
    """It returned the best of its samples and its final greedy placement, never having measured where it
    started: on a noisy machine or a drifting search, slower than the free zero-shot answer."""
    encoder, policy = _modules()
    start = place_zero_shot(encoder, policy, GRAPH, CLUSTER)
    result = finetune(encoder, policy, GRAPH, CLUSTER, _FastOnce(),
                      trainer=ReinforceTrainer(updates=1, samples_per_update=4, seed=0))
    assert result.best_step_time == 1e-3 and result.best_placement == start
