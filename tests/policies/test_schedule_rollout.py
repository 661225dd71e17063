"""ScheduleRollout (compiled) gives the list-scheduling features of the torch reference to the bit."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from gplace.encoders import GNNEncoder
from gplace.ir import Cluster, Device, Link, OpGraph
from gplace.placer import PolicyPlacer
from gplace.policies import ListSchedulingPolicy
from gplace.policies.list_scheduling import _rollout
from gplace.policies.schedule_context import ScheduleContext
from gplace.policies.schedule_rollout import ScheduleRollout
from gplace.testing import MB, cpu_gpu_cluster, random_dag
from tests.policies.reference_schedule import _rollout as reference_rollout

OPTIONS = [  # stage, stage_prior, revisit
    (False, False, 0.0), (True, False, 0.0), (True, True, 0.0), (True, True, 10.0), (True, True, 0.3)]


def _graph(seed: int) -> OpGraph:
    """Random DAGs; every other with every fifth op pinned to the CPU."""
    graph = random_dag(30 + 7 * seed, seed=seed)
    ops = [replace(op, pinned="cpu") if seed % 2 and i % 5 == 0 else op for i, op in enumerate(graph.ops())]
    return OpGraph.from_ops(ops, graph.edges(), name=f"g{seed}")


def _cluster(seed: int) -> Cluster:
    """A slow CPU and 1-4 GPUs of unequal speeds and links; every third cluster's GPUs fill up (20 MB each)."""
    gpus = 1 + seed % 4
    memory = 20 * MB if seed % 3 == 0 else 10**12
    devices = [Device("/CPU:0", "cpu", 0.3, 10**12)]
    devices += [Device(f"/GPU:{i}", "gpu", 1.0 + i / 2, memory) for i in range(gpus)]
    links = [Link(a.name, b.name, 1e6 * (1 + i + j), 1e-3 * j) for i, a in enumerate(devices)
             for j, b in enumerate(devices) if i < j]
    return Cluster.build(devices, links, name=f"c{seed}")


def _random_choice(seed: int, allowed: torch.Tensor):
    """A ``choose`` that ignores the features: a seeded uniform draw among the allowed devices."""
    generator = torch.Generator().manual_seed(seed)

    def choose(features: torch.Tensor, g: int) -> torch.Tensor:
        noise = torch.rand(features.shape[:2], generator=generator)
        return noise.masked_fill(~allowed[g], -1.0).argmax(-1)

    return choose


@pytest.mark.parametrize("seed", range(8))
def test_features_and_devices_equal_the_torch_reference_to_the_bit(seed):
    graph, cluster = _graph(seed), _cluster(seed)
    torch.manual_seed(0)
    placer = PolicyPlacer(graph, cluster, GNNEncoder("sage", hidden_size=8, num_layers=1),
                          ListSchedulingPolicy(8, state_size=8))
    allowed = placer.allowed
    for stage, stage_prior, revisit in OPTIONS:
        got = _rollout(placer.schedule, allowed, 6, _random_choice(seed, allowed), stage, stage_prior, revisit)
        want = reference_rollout(placer.schedule, allowed, 6, _random_choice(seed, allowed), stage, stage_prior,
                                 revisit)
        torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
        torch.testing.assert_close(got[1], want[1], rtol=0, atol=0)


def test_memory_and_stage_columns_are_exercised():
    """The cases above reach the memory column and a source's peer charge (else the equality says little)."""
    graph, cluster = _graph(3), _cluster(3)
    placer = PolicyPlacer(graph, cluster, GNNEncoder("sage", hidden_size=8, num_layers=1),
                          ListSchedulingPolicy(8, state_size=8))
    _, features = _rollout(placer.schedule, placer.allowed, 6, _random_choice(0, placer.allowed), True, True, 10.0)
    assert features[..., 7].sum() > 0  # some device full while another has room
    assert (features[..., 9] > 0).any() and (features[..., 10] > 0).any()


def test_stage_prior_needs_stage_features():
    schedule = ScheduleContext.build(random_dag(5), cpu_gpu_cluster(1), list(range(5)))
    with pytest.raises(ValueError, match="stage_prior needs stage=True"):
        ScheduleRollout(schedule, 2, stage_prior=True)
