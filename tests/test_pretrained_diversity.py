"""Zero-shot placement measures distinct placements: a sharp pretrained policy drew the same few again and again."""

from __future__ import annotations

import pytest
import torch

import gplace
from gplace.encoders import GNNEncoder
from gplace.interfaces import PolicyCapabilities
from gplace.ir import Cluster, Device, Edge, Op, OpGraph
from gplace.methods import pretrained_path
from gplace.policies.base import PolicyOutput
from gplace.pretrained import build, load_policy, place_zero_shot, zero_shot_search
from gplace.runtime import Simulator
from gplace.testing import chain

MB = 1_000_000


class RecordingSimulator(Simulator):
    """A simulator that keeps every placement it measured."""

    def __init__(self) -> None:
        super().__init__()
        self.measured: list[tuple[int, ...]] = []

    def measure_many(self, graph, cluster, placements):
        self.measured += [tuple(p.devices.tolist()) for p in placements]
        return super().measure_many(graph, cluster, placements)


@pytest.fixture(scope="module")
def shipped():
    return load_policy(pretrained_path())[:2]


def _memory_case() -> tuple[OpGraph, Cluster]:
    """Six ops (n1 and n5 colocated) on two 5 MB GPUs: 16 of the 32 placements fit, the fastest takes 7.0 s."""
    costs, nbytes = (2.0, 3.0, 3.0, 3.0, 1.0, 1.0), (2, 1, 2, 0, 1, 1)
    ops = [Op(f"n{i}", "T", cost, output_bytes=b * MB, colocation="g" if i in (1, 5) else None)
           for i, (cost, b) in enumerate(zip(costs, nbytes, strict=True))]
    graph = OpGraph.from_ops(ops, [Edge("n0", "n2"), Edge("n3", "n4")], name="coloc_mem")
    cluster = Cluster.build([Device(f"/GPU:{i}", "gpu", 1.0, 5 * MB) for i in range(2)], default_bandwidth=1e6)
    return graph, cluster


def test_a_sharp_policy_still_finds_a_placement_that_fits(shipped):
    """65 candidates were 2 mirror-image placements, both out of memory: PlacementInfeasibleError although half
    the placements fit."""
    graph, cluster = _memory_case()
    sim = Simulator()
    placement = place_zero_shot(*shipped, graph, cluster, samples=16, runtime=sim)
    measurement = sim.measure(graph, cluster, placement)
    assert measurement.ok and measurement.step_time == pytest.approx(7.0)
    report = gplace.place(graph, cluster, method="pretrained", budget="16 samples", seed=0)
    assert report.measurement.ok


def test_the_measured_samples_are_distinct_and_counted(shipped):
    """chain5 on two GPUs: greedy + 16 samples were 2 distinct placements; now 16 distinct samples besides the
    greedy one, each counted once in the result."""
    graph = chain((3.0, 1.0, 1.0, 2.0, 3.0), nbytes=MB // 2)
    cluster = Cluster.build([Device(f"/GPU:{i}", "gpu", 1.0, 10**12) for i in range(2)], default_bandwidth=1e6)
    sim = RecordingSimulator()
    result = zero_shot_search(*shipped, graph, cluster, samples=16, runtime=sim)
    assert len(set(sim.measured)) == len(sim.measured) == 17
    assert result.samples == len(result.sample_step_times) == 16


def test_a_graph_with_fewer_placements_than_samples_measures_each_once(shipped):
    """Two ops on two devices have four placements: the greedy one and at most three samples, none repeated."""
    graph = chain((1.0, 2.0))
    cluster = Cluster.build([Device(f"/GPU:{i}", "gpu", 1.0, 10**12) for i in range(2)], default_bandwidth=1e6)
    sim = RecordingSimulator()
    result = zero_shot_search(*shipped, graph, cluster, samples=16, runtime=sim)
    assert len(set(sim.measured)) == len(sim.measured) <= 4
    assert result.samples == len(result.sample_step_times) == len(sim.measured) - 1


def test_the_same_seed_gives_the_same_candidates_and_the_temperature_is_restored(shipped):
    """The redraws are seeded like the first draw; the policy's temperature is back as it was afterwards."""
    encoder, policy = shipped
    graph, cluster = _memory_case()
    before = policy.temperature
    runs = [RecordingSimulator() for _ in range(2)]
    results = [zero_shot_search(encoder, policy, graph, cluster, samples=16, runtime=sim, seed=3) for sim in runs]
    assert runs[0].measured == runs[1].measured
    assert results[0].best_placement.devices.tolist() == results[1].best_placement.devices.tolist()
    assert policy.temperature == before


class FirstDevicePolicy(torch.nn.Module):
    """A policy of one's own that always picks device 0, with a read-only ``temperature`` of its own meaning."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    @property
    def temperature(self) -> float:
        return 1.0

    @property
    def capabilities(self) -> PolicyCapabilities:
        return PolicyCapabilities(num_devices=2)

    def sample(self, states, allowed, num_samples, generator=None, **inputs) -> PolicyOutput:
        zeros = torch.zeros(num_samples, dtype=states.dtype) + 0 * self.weight.sum()
        return PolicyOutput(torch.zeros(num_samples, states.shape[0], dtype=torch.int64), zeros, zeros)

    def greedy(self, states, allowed, **inputs) -> torch.Tensor:
        return torch.zeros(states.shape[0], dtype=torch.int64)

    def evaluate(self, states, allowed, devices, **inputs) -> tuple[torch.Tensor, torch.Tensor]:
        zeros = torch.zeros(devices.shape[0], dtype=states.dtype) + 0 * self.weight.sum()
        return zeros, zeros


def test_a_policy_of_ones_own_is_redrawn_at_its_own_temperature():
    """Only gplace's policies are tempered: setting a read-only ``temperature`` raised AttributeError."""
    encoder = build(GNNEncoder, conv="sage", hidden_size=8, num_layers=1)
    graph = chain((1.0, 1.0, 1.0))
    cluster = Cluster.build([Device(f"/GPU:{i}", "gpu", 1.0, 10**12) for i in range(2)], default_bandwidth=1e6)
    result = zero_shot_search(encoder, FirstDevicePolicy(), graph, cluster, samples=4, runtime=Simulator())
    assert result.samples == 0 and list(result.best_placement.devices) == [0, 0, 0]
