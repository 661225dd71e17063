"""A policy reused, fine-tuned or pretrained on the pipeline objective groups the graph as a pipeline search
does (chains unmerged: a chain merged into its consumer is one group, which no search can split into stages).
Reuse and fine-tuning grouped by the policy's default, so on a chain every candidate put all ops on one device."""

from __future__ import annotations

import torch

from gplace.encoders import GNNEncoder
from gplace.ir import Placement
from gplace.pipeline import PipelineSimulator
from gplace.policies import DeviceAwarePolicy
from gplace.pretrained import build, zero_shot_search
from gplace.testing import chain, uniform_cluster
from gplace.training import ReinforceTrainer
from gplace.training.multigraph import MultiGraphTrainer, finetune

GRAPH, CLUSTER = chain((1.0,) * 8, nbytes=1000), uniform_cluster(2)


def _modules():
    torch.manual_seed(0)
    encoder = build(GNNEncoder, conv="sage", hidden_size=16, num_layers=2, type_embedding=8, projection=8)
    return encoder, build(DeviceAwarePolicy, hidden_size=16)


def _one_device_time() -> float:
    return PipelineSimulator(4).measure(GRAPH, CLUSTER, Placement.for_graph(GRAPH, [0] * GRAPH.num_ops)).step_time


def test_zero_shot_candidates_split_the_chain() -> None:
    result = zero_shot_search(*_modules(), GRAPH, CLUSTER, samples=16, runtime=PipelineSimulator(4))
    assert len(set(result.sample_step_times.tolist())) > 1  # one group: every sample one device, one time
    assert result.best_measurement.step_time < _one_device_time()


def test_finetuning_splits_the_chain() -> None:
    result = finetune(*_modules(), GRAPH, CLUSTER, PipelineSimulator(4),
                      trainer=ReinforceTrainer(updates=1, samples_per_update=8, seed=0))
    assert result.best_measurement.step_time < _one_device_time()


def test_pretraining_splits_the_chain() -> None:
    encoder, policy = _modules()
    result = MultiGraphTrainer(updates=1, samples_per_update=8, seed=0).fit(encoder, policy, [(GRAPH, CLUSTER)],
                                                                            PipelineSimulator(4))
    assert result.tasks[0].best_step_time < _one_device_time()
