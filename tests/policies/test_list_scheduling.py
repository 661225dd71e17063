"""ListSchedulingPolicy: its schedule model is HEFT's, its features are scale-free, it respects memory."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from gplace.baselines import HEFT
from gplace.encoders import GNNEncoder
from gplace.grouping import identity_grouping
from gplace.ir import Cluster, Device, OpGraph
from gplace.placer import PolicyPlacer
from gplace.policies import ListSchedulingPolicy
from gplace.policies.schedule_rollout import ScheduleRollout
from gplace.runtime import Simulator
from gplace.testing import MB, cpu_gpu_cluster, fork_join, random_dag, two_branches, uniform_cluster


def _placer(graph: OpGraph, cluster: Cluster, zero_residual: bool = True) -> PolicyPlacer:
    torch.manual_seed(0)
    policy = ListSchedulingPolicy(hidden_size=8, state_size=8)
    if zero_residual:
        torch.nn.init.zeros_(policy.residual[-1].weight)
    encoder = GNNEncoder("sage", hidden_size=8, num_layers=1, type_embedding=4, projection=4)
    return PolicyPlacer(graph, cluster, encoder, policy, grouping=identity_grouping(graph))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_untrained_greedy_is_heft_on_single_ops(seed):
    """With a zero residual, greedy decoding over one-op groups is HEFT's placement, op for op."""
    graph, cluster = random_dag(60, seed=seed), cpu_gpu_cluster(3)
    greedy = _placer(graph, cluster).greedy()
    np.testing.assert_array_equal(greedy.devices, HEFT().place(graph, cluster).devices)
    assert len(set(greedy.devices.tolist())) > 1


def test_greedy_spreads_two_branches_and_halves_the_step_time():
    """Two independent chains on two equal devices: one per device, about 2x faster than one device."""
    graph, cluster = two_branches(6), uniform_cluster(2)
    placement = _placer(graph, cluster).greedy()
    sim = Simulator()
    single = sim.measure(graph, cluster, replace(placement, devices=np.zeros_like(placement.devices))).step_time
    assert single / sim.measure(graph, cluster, placement).step_time > 1.9


def test_groups_go_where_they_fit_while_some_device_has_room():
    """Each branch needs 6 MB, a GPU holds 10 MB: greedy and every sample keep each GPU within its memory."""
    base = fork_join(6, nbytes=MB)
    ops = [replace(op, persistent_memory=5 * MB) if op.name.startswith("b") else op for op in base.ops()]
    graph = OpGraph.from_ops(ops, base.edges(), name="heavy_fork_join")
    devices = [Device(f"/GPU:{i}", "gpu", 1.0, 10 * MB) for i in range(3)] + [Device("/CPU:0", "cpu", 0.2, 10**12)]
    cluster = Cluster.build(devices, default_bandwidth=1e9, name="small_gpus")
    placer = _placer(graph, cluster, zero_residual=False)
    memory = graph.persistent_memory + graph.output_bytes
    rows = [placer.greedy().devices, *placer.sample(32, generator=torch.Generator().manual_seed(0)).devices]
    for devices in rows:
        used = np.bincount(devices, weights=memory, minlength=4)
        assert (used[:3] <= 10 * MB).all(), used


def test_schedule_features_do_not_change_when_every_time_scales():
    """Costs x10 with links 10x slower: the same features at every step (so graphs of any time scale transfer)."""
    graph = random_dag(30, seed=4)
    slow = OpGraph.from_ops([replace(op, cost=op.cost * 10) for op in graph.ops()], graph.edges(),
                            name="slow")
    fast_cluster = uniform_cluster(3, bandwidth=1e7, latency=1e-3)
    slow_cluster = uniform_cluster(3, bandwidth=1e6, latency=1e-2)
    devices = np.random.default_rng(0).integers(0, 3, graph.num_ops)
    a = _features_along(graph, fast_cluster, devices)
    b = _features_along(slow, slow_cluster, devices)
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert a[..., 0].abs().sum() > 0


def _features_along(graph: OpGraph, cluster: Cluster, devices: np.ndarray) -> torch.Tensor:
    """Schedule features of every step while placing op i on ``devices[i]``. Shapes: returns (G, D, F)."""
    placer = _placer(graph, cluster)
    chosen = devices[placer.features()["order"].numpy()]  # by feature position
    rollout, allowed = ScheduleRollout(placer.schedule, 1), placer.allowed.numpy()
    out = []
    for g in rollout.order:
        out.append(rollout.features_of(g, allowed[g])[0].clone())
        rollout.place(g, chosen[[g]])
    return torch.stack(out)


def test_missing_schedule_is_a_clear_error():
    placer = _placer(random_dag(10), cpu_gpu_cluster(2))
    states = placer.encoder(placer.features())
    with pytest.raises(ValueError, match="needs schedule= a ScheduleContext"):
        placer.policy.sample(states, placer.allowed, 2, device_features=placer.device_features, schedule=None)


def test_default_grouping_merges_chains_only_when_the_graph_is_over_max_groups():
    """A 40-op graph keeps every op its own group; with max_groups 20 the paper's chain merging is used first."""
    from gplace.grouping import group_ops
    from gplace.policies import MLPPolicy

    graph, cluster = random_dag(40, edge_prob=0.08, seed=3), cpu_gpu_cluster(2)
    encoder = GNNEncoder("sage", hidden_size=8, num_layers=1, type_embedding=4, projection=4)
    assert PolicyPlacer(graph, cluster, encoder, ListSchedulingPolicy(8, state_size=8)).num_groups == 40
    merged = group_ops(graph, 256).num_groups
    assert merged < 40 and PolicyPlacer(graph, cluster, encoder, MLPPolicy(3, 8, state_size=8)).num_groups == merged
    small = PolicyPlacer(graph, cluster, encoder, ListSchedulingPolicy(8, state_size=8), max_groups=20)
    np.testing.assert_array_equal(small.grouping.op_group, group_ops(graph, 20).op_group)


def test_bounded_residual_keeps_every_allowed_device_possible():
    """Huge residual weights and no prior: each allowed device keeps probability >= exp(-2 b) / D."""
    graph, cluster = random_dag(30, seed=5), cpu_gpu_cluster(3)
    placer = _placer(graph, cluster, zero_residual=False)
    policy = placer.policy
    with torch.no_grad():
        policy.prior_weight.zero_()
        for layer in policy.residual:
            if isinstance(layer, torch.nn.Linear):
                layer.weight.mul_(1e4)
    sample = placer.sample(8, generator=torch.Generator().manual_seed(0))
    floor = np.exp(-2 * policy.residual_bound) / cluster.num_devices
    assert (sample.entropy > 0).all()
    other = (sample.devices + 1) % cluster.num_devices  # every op moved off the device the policy chose
    log_prob, _ = placer.evaluate(other)
    assert (log_prob >= placer.num_groups * np.log(floor)).all()
    with torch.no_grad():
        policy.residual_bound = None  # the same weights unbounded make those placements all but impossible
        assert (placer.evaluate(other)[0] < placer.num_groups * np.log(floor)).all()
    unbounded = ListSchedulingPolicy(hidden_size=8, state_size=8, residual_bound=None)
    assert unbounded.residual_bound is None
    with pytest.raises(ValueError, match="residual_bound"):
        ListSchedulingPolicy(hidden_size=8, state_size=8, residual_bound=0.0)
