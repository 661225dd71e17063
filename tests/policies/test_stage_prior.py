"""ListSchedulingPolicy's stage prior: balanced contiguous splits untrained, sources placed with their consumers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gplace.encoders import GNNEncoder
from gplace.grouping import identity_grouping
from gplace.ir import Cluster, Device, Edge, Op, OpGraph, Placement
from gplace.pipeline import PipelineSimulator
from gplace.placer import PolicyPlacer
from gplace.policies import ListSchedulingPolicy
from gplace.policies.schedule_context import ScheduleContext
from gplace.testing import chain, uniform_cluster
from tests.pipeline.graphs import training_chain


def _greedy(graph: OpGraph, num_devices: int, prior: str, revisit: float = 0.0) -> np.ndarray:
    """Greedy devices of an untrained policy whose learned residual is zero (the prior alone decides)."""
    torch.manual_seed(0)
    policy = ListSchedulingPolicy(8, state_size=8, stage_features=True, prior=prior, revisit=revisit)
    torch.nn.init.zeros_(policy.residual[-1].weight)
    encoder = GNNEncoder("sage", hidden_size=8, num_layers=1, type_embedding=4, projection=4)
    placer = PolicyPlacer(graph, uniform_cluster(num_devices), encoder, policy, grouping=identity_grouping(graph))
    return placer.greedy().devices


@pytest.mark.parametrize("num_devices", [2, 4])
def test_untrained_stage_prior_splits_an_equal_chain_into_balanced_contiguous_stages(num_devices):
    graph = chain((1.0,) * 8, nbytes=1000)
    devices = _greedy(graph, num_devices, "stage")
    per_stage = 8 // num_devices
    stages = devices.reshape(num_devices, per_stage)
    assert (stages == stages[:, :1]).all(), devices  # contiguous, equal stages
    assert len(set(stages[:, 0].tolist())) == num_devices, devices
    assert len(set(_greedy(graph, num_devices, "eft").tolist())) == 1  # EFT keeps a chain on one device


def test_untrained_stage_prior_pipelines_a_training_chain_faster_than_the_eft_prior():
    graph, cluster = training_chain((1.0,) * 8), uniform_cluster(4)
    sim = PipelineSimulator(8, "1f1b")
    times = {prior: sim.measure(graph, cluster, Placement.for_graph(graph, _greedy(graph, 4, prior))).step_time
             for prior in ("eft", "stage")}
    assert times["eft"] / times["stage"] > 2.0, times


def test_stage_order_places_each_source_just_before_its_first_consumer():
    ops = [Op(f"x{i}", "Layer", 1.0, output_bytes=1000) for i in range(4)] + [Op("w", "Weight", 0.1, output_bytes=10)]
    edges = [Edge(f"x{i}", f"x{i + 1}") for i in range(3)] + [Edge("w", "x3")]
    graph = OpGraph.from_ops(ops, edges, name="weight_late")
    context = ScheduleContext.build(graph, uniform_cluster(2), np.arange(graph.num_ops))
    assert [graph.op_names[g] for g in context.stage_order.tolist()] == ["x0", "x1", "x2", "w", "x3"]
    assert graph.op_names[int(context.order[0])] in ("x0", "w")  # HEFT's order, for contrast, starts with a source
    assert context.out_bytes.tolist() == [1000.0, 1000.0, 1000.0, 0.0, 10.0]


def _branches(num: int = 4, length: int = 3) -> OpGraph:
    """``num`` equal chains ``b{i}_0 -> ... -> b{i}_{length-1}`` whose heads are sources, all read by one sink;
    the chains' edges carry 10 s of transfer at 1 MB/s (under the 12 s of all the work), the sink's inputs 1 ms."""
    ops = [Op(f"b{i}_{j}", "Layer", 1.0, output_bytes=10**7) for i in range(num) for j in range(length)]
    ops.append(Op("sink", "Add", 0.1))
    edges = [Edge(f"b{i}_{j}", f"b{i}_{j + 1}") for i in range(num) for j in range(length - 1)]
    edges += [Edge(f"b{i}_{length - 1}", "sink", 10**3) for i in range(num)]
    return OpGraph.from_ops(ops, edges, name="branches")


def test_stage_order_decodes_a_branch_to_its_end_before_the_next():
    graph = _branches()
    context = ScheduleContext.build(graph, uniform_cluster(2), np.arange(graph.num_ops))
    names = [graph.op_names[g] for g in context.stage_order.tolist()]
    assert [name.split("_")[0] for name in names[:-1]] == [f"b{i}" for i in range(4) for _ in range(3)], names
    assert names[-1] == "sink"
    assert [graph.op_names[int(g)] for g in context.order[:4]] != names[:4]  # HEFT's order interleaves them


def test_untrained_stage_prior_gives_each_branch_its_own_fast_device():
    """Branch heads have no inputs: each goes where the pipeline's share is left (not with the group before it,
    nor on the slow device); the heavy edges stay inside branches."""
    graph = _branches()
    devices = [Device("/CPU:0", "cpu", 0.25, 10**12)] + [Device(f"/GPU:{i}", "gpu", 1.0, 10**12) for i in range(4)]
    cluster = Cluster.build(devices, default_bandwidth=1e6)
    torch.manual_seed(0)
    policy = ListSchedulingPolicy(8, state_size=8, stage_features=True, prior="stage")
    torch.nn.init.zeros_(policy.residual[-1].weight)
    encoder = GNNEncoder("sage", hidden_size=8, num_layers=1, type_embedding=4, projection=4)
    placed = PolicyPlacer(graph, cluster, encoder, policy, grouping=identity_grouping(graph)).greedy().devices
    branch_devices = [set(placed[3 * i:3 * i + 3].tolist()) for i in range(4)]
    assert all(len(d) == 1 for d in branch_devices), placed
    assert set().union(*branch_devices) == {1, 2, 3, 4}, placed


def test_fair_share_gives_each_device_work_in_proportion_to_its_speed():
    cluster = Cluster.build([Device("/GPU:0", "gpu", 1.0, 10**12), Device("/GPU:1", "gpu", 2.0, 10**12)],
                            default_bandwidth=1e9)
    graph = chain((1.0,) * 8)
    context = ScheduleContext.build(graph, cluster, np.arange(graph.num_ops))
    work = context.durations.sum(0)
    assert work[0] == pytest.approx(2 * work[1])
    assert context.fair_share == pytest.approx(1 / (1 / work[0] + 1 / work[1]))  # both finish together


def test_unknown_prior_and_stage_prior_without_stage_features_are_named_errors():
    with pytest.raises(ValueError, match="prior must be one of"):
        ListSchedulingPolicy(8, prior="heft")
    with pytest.raises(ValueError, match="needs stage_features=True"):
        ListSchedulingPolicy(8, prior="stage")


def test_hydra_selects_the_stage_prior():
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate

    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=["encoder=gnn", "policy=list_scheduling",
                                                       "policy.stage_features=true", "policy.prior=stage"])
    policy = instantiate(cfg.policy)(num_devices=3)
    assert isinstance(policy, ListSchedulingPolicy) and policy.prior == "stage" and policy.stage_features


def _join() -> OpGraph:
    """``s -> a0 -> a1 -> a2 -> t`` and ``s -> b0 -> b1 -> b2 -> t``, cost 1 (``s`` 0.1); ``a2 -> t`` carries 3 MB
    (3 s at 1 MB/s), the other edges 1 kB. Decoded depth-first, branch a fills one device's share, branch b the
    other's, and the join ``t`` comes last."""
    ops = [Op("s", "In", 0.1, output_bytes=1000)]
    ops += [Op(f"{b}{i}", "Layer", 1.0, output_bytes=1000) for b in "ab" for i in range(3)] + [Op("t", "Join", 1.0)]
    edges = [Edge("s", "a0"), Edge("s", "b0"), Edge("a0", "a1"), Edge("a1", "a2"), Edge("b0", "b1"), Edge("b1", "b2"),
             Edge("a2", "t", 3 * 10**6), Edge("b2", "t")]
    return OpGraph.from_ops(ops, edges, name="join")


def test_a_revisit_charge_keeps_the_join_on_the_device_the_pipeline_reached():
    """Untrained, the join goes back to branch a's device (its 3 MB input is there, a 3 s cut otherwise); a revisit
    charge of 10 durations keeps it with branch b, the group before it, paying the cut."""
    graph = _join()
    devices = {revisit: dict(zip(graph.op_names, _greedy(graph, 2, "stage", revisit).tolist(), strict=True))
               for revisit in (0.0, 10.0)}
    for got in devices.values():
        assert got["a0"] == got["a2"] != got["b0"] == got["b2"], got
    assert devices[0.0]["t"] == devices[0.0]["a2"]
    assert devices[10.0]["t"] == devices[10.0]["b2"]


@pytest.mark.parametrize("kwargs, match", [
    ({"prior": "stage", "revisit": -1.0}, "revisit must be finite and >= 0"),
    ({"prior": "stage", "revisit": float("inf")}, "revisit must be a finite number, got inf"),
    ({"prior": "eft", "revisit": 1.0}, "needs prior='stage'"),
])
def test_a_bad_revisit_is_refused_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ListSchedulingPolicy(8, stage_features=True, **kwargs)


def _peer_sets(context: ScheduleContext) -> dict[int, list[tuple[int, float]]]:
    start, stop, peers, nbytes = context.source_peers
    return {g: sorted(zip(peers[start[g]:stop[g]].tolist(), nbytes[start[g]:stop[g]].tolist(), strict=True))
            for g in range(context.num_groups)}


def test_source_peers_are_the_first_consumers_inputs_placed_before_the_source():
    """By the definition: for each source, its first consumer in ``stage_order``'s in-edges from groups earlier in
    that order; none for other groups."""
    ops = [Op(f"x{i}", "Layer", 1.0, output_bytes=100 * (i + 1)) for i in range(4)]
    ops += [Op(f"w{i}", "Weight", 0.1, output_bytes=10 + i) for i in range(3)]
    edges = [Edge("x0", "x1"), Edge("w0", "x1"), Edge("x1", "x2"), Edge("w1", "x2"), Edge("w2", "x2"),
             Edge("x0", "x2"), Edge("x2", "x3"), Edge("w2", "x3")]
    graph = OpGraph.from_ops(ops, edges, name="peers")
    context = ScheduleContext.build(graph, uniform_cluster(2), np.arange(graph.num_ops))
    at = {g: i for i, g in enumerate(context.stage_order.tolist())}
    ptr, src, nbytes = context.pred_ptr.tolist(), context.pred_src.tolist(), context.pred_bytes.tolist()
    want = {g: [] for g in range(graph.num_ops)}
    for s in range(graph.num_ops):
        consumers = [c for c in range(graph.num_ops) if s in src[ptr[c]:ptr[c + 1]]]
        if ptr[s] == ptr[s + 1] and consumers:
            c = min(consumers, key=at.__getitem__)
            want[s] = sorted((src[e], nbytes[e]) for e in range(ptr[c], ptr[c + 1]) if at[src[e]] < at[s])
    assert _peer_sets(context) == want
    assert any(want.values())


def test_source_peers_grow_with_the_edges_when_one_op_reads_many_sources():
    """A sum of 3,000 weights: each weight's peers are the weights placed before it (4.5 million pairs), held as
    prefixes of one list of the sum's 3,000 in-edges."""
    n = 3000
    ops = [Op(f"w{i}", "Weight", 0.1, output_bytes=8) for i in range(n)] + [Op("sum", "AddN", 1.0)]
    graph = OpGraph.from_ops(ops, [Edge(f"w{i}", "sum") for i in range(n)], name="addn")
    context = ScheduleContext.build(graph, uniform_cluster(2), np.arange(graph.num_ops))
    start, stop, peers, _ = context.source_peers
    assert peers.numel() == n
    assert sorted((stop - start).tolist()) == [0] + list(range(n))  # the sum has none
