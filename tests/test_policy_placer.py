"""Tests for gplace.placer.PolicyPlacer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gplace.encoders import GNNEncoder, LSTMEncoder
from gplace.ir import Edge, InvalidPlacementError, Op, OpGraph, Placement
from gplace.placer import PolicyPlacer
from gplace.policies import ListSchedulingPolicy, Seq2SeqPolicy
from gplace.testing import chain, cpu_gpu_cluster, heavy_edge_diamond, random_dag, uniform_cluster


def _graph() -> OpGraph:
    """30 ops with two colocated ops, a cpu-pinned op and a gpu-pinned op."""
    base = random_dag(30, edge_prob=0.1, seed=5)
    pins, coloc = {3: "cpu", 20: "gpu"}, {7: "c", 12: "c"}
    ops = [Op(op.name, op.type, op.cost, output_bytes=op.output_bytes, pinned=pins.get(i), colocation=coloc.get(i))
           for i, op in enumerate(base.ops())]
    return OpGraph.from_ops(ops, base.edges(), name="pinned_dag")


def _placer(graph: OpGraph | None = None, max_groups: int = 8) -> PolicyPlacer:
    torch.manual_seed(0)
    cluster = cpu_gpu_cluster(2)
    return PolicyPlacer(graph or _graph(), cluster, LSTMEncoder(hidden_size=16, type_embedding=8),
                        Seq2SeqPolicy(cluster.num_devices, hidden_size=16, attention_size=8), max_groups=max_groups)


def test_samples_are_valid_placements():
    """sample(K) gives K per-op placements that respect pins and colocation, with (K,) log-probs."""
    placer = _placer()
    devices, log_prob, entropy = placer.sample(16)
    assert devices.shape == (16, 30) and devices.dtype == np.int64
    assert log_prob.shape == (16,) and entropy.shape == (16,)
    for row in devices:
        Placement.for_graph(placer.graph, row).validate(placer.graph, placer.cluster)
    assert 1 < placer.num_groups <= 8


def test_evaluate_matches_sample_and_rejects_split_groups():
    """evaluate of sampled placements reproduces their log-probs; splitting a group is an error."""
    placer = _placer()
    sample = placer.sample(4)
    log_prob, entropy = placer.evaluate(sample.devices)
    torch.testing.assert_close(log_prob, sample.log_prob)
    torch.testing.assert_close(entropy, sample.entropy)
    split = sample.devices.copy()
    group = placer.grouping.op_group
    ops = np.flatnonzero(group == np.bincount(group).argmax())
    split[0, ops[0]] = 1 - split[0, ops[1]] if split[0, ops[1]] < 2 else 0
    with pytest.raises(ValueError, match="group"):
        placer.evaluate(split)


def test_greedy_and_place():
    """greedy and place return the same valid placement; another graph is refused."""
    placer = _placer()
    placement = placer.place(placer.graph, placer.cluster)
    assert placement == placer.greedy()
    placement.validate(placer.graph, placer.cluster)
    with pytest.raises(ValueError, match="places graph"):
        placer.place(chain(), placer.cluster)


def test_project_and_evaluate_refuse_a_placement_of_another_graph_naming_it():
    """A placement of another graph, or of the wrong length, failed with a raw IndexError (shape mismatch)."""
    placer = _placer()
    other = random_dag(10, seed=1)
    with pytest.raises(InvalidPlacementError, match="10 entries but graph 'pinned_dag' has 30 ops"):
        placer.project(Placement.single(other, 0))
    with pytest.raises(InvalidPlacementError, match="made for graph .*, not 'pinned_dag'"):
        placer.project(Placement(np.zeros(30, dtype=np.int64), other.fingerprint))
    for shape in [(2, 10), (2, 40), (30,)]:
        with pytest.raises(InvalidPlacementError,
                           match=rf"devices has shape \({shape[0]},( {shape[-1]})?\), expected \(K, 30\): .* "
                                 "graph 'pinned_dag', which has 30 ops"):
            placer.evaluate(np.zeros(shape, dtype=np.int64))


def test_training_on_a_target_moves_greedy_to_it():
    """Maximising the log-probability of one placement for 60 Adam steps makes it the greedy decode."""
    placer = _placer()
    target = placer.sample(1, generator=torch.Generator().manual_seed(1)).devices
    optimizer = torch.optim.Adam(placer.parameters(), lr=0.02)
    for _ in range(60):
        optimizer.zero_grad()
        (-placer.evaluate(target)[0].sum()).backward()
        optimizer.step()
    assert placer.greedy().devices.tolist() == target[0].tolist()


def test_state_dict_holds_only_weights_and_device_count_is_checked():
    """Features and mask are not checkpointed; a policy for another device count is refused."""
    placer = _placer()
    assert not any(k.startswith(("feature_", "allowed")) for k in placer.state_dict())
    with pytest.raises(ValueError, match="devices"):
        PolicyPlacer(chain(), cpu_gpu_cluster(2), LSTMEncoder(hidden_size=8), Seq2SeqPolicy(2, hidden_size=8))


def test_single_group_graph():
    """A chain groups into one group; sampling still works and puts every op on one device."""
    graph = OpGraph.from_ops([Op(f"a{i}", "T", 1.0) for i in range(4)], [Edge(f"a{i}", f"a{i + 1}") for i in range(3)])
    placer = _placer(graph)
    devices = placer.sample(3).devices
    assert placer.num_groups == 1 and (devices == devices[:, :1]).all()


def test_a_placer_that_expresses_a_placement_projects_onto_it_exactly():
    """Warm starting: with ``express``, the groups split so the projection is the placement itself; without,
    the projection onto the default groups loses the ops a group's majority outvotes."""
    from gplace.baselines import HEFT

    graph, cluster = random_dag(60, seed=4), cpu_gpu_cluster(num_gpus=2)
    heft = HEFT().place(graph, cluster)

    def make(**kw) -> PolicyPlacer:
        return PolicyPlacer(graph, cluster, LSTMEncoder(hidden_size=8), Seq2SeqPolicy(3, hidden_size=8), max_groups=6,
                            **kw)

    coarse, exact = make(), make(express=heft)
    assert not np.array_equal(coarse.project(heft).devices, heft.devices)
    assert np.array_equal(exact.project(heft).devices, heft.devices)
    assert exact.num_groups > coarse.num_groups


def test_the_default_grouping_keeps_uncuttable_edges_inside_groups():
    """A list-scheduling policy keeps small graphs op by op, except an edge whose transfer (5 s at 1 MB/s) outlasts
    the whole graph on one device (4 s)."""
    graph = heavy_edge_diamond()
    encoder = GNNEncoder("sage", hidden_size=8, num_layers=1, type_embedding=4, projection=4)
    for bandwidth, groups in ((1e6, [0, 0, 1, 2]), (1e7, [0, 1, 2, 3])):
        placer = PolicyPlacer(graph, uniform_cluster(2, bandwidth=bandwidth), encoder, ListSchedulingPolicy(8))
        assert placer.grouping.op_group.tolist() == groups, bandwidth


def test_the_placer_puts_its_features_where_its_networks_are() -> None:
    """Built from networks on another device (``meta`` stands for a GPU here), the features, mask and device
    features go there too; networks split over two devices are refused, naming each."""
    cluster = cpu_gpu_cluster(2)
    encoder = LSTMEncoder(hidden_size=16, type_embedding=8).to("meta")
    placer = PolicyPlacer(_graph(), cluster, encoder, Seq2SeqPolicy(3, hidden_size=16, attention_size=8).to("meta"))
    assert {t.device.type for t in placer.buffers()} == {"meta"} and placer.allowed.is_meta
    with pytest.raises(ValueError, match=r"one device: encoder on meta, policy on cpu; move them together"):
        PolicyPlacer(_graph(), cluster, encoder, Seq2SeqPolicy(3, hidden_size=16, attention_size=8))


@pytest.mark.parametrize("encoder_dtype, policy_dtype", [(torch.float32, torch.float64),
                                                         (torch.float64, torch.float32)])
def test_networks_of_two_floating_dtypes_are_refused_naming_each(encoder_dtype, policy_dtype) -> None:
    """They failed at the first forward with torch's "mat1 and mat2 must have the same dtype"; a hierarchical
    placer's grouper (fed only its own features) may still differ from the encoder and policy."""
    from gplace.hierarchical import HierarchicalPlacer, LearnedGrouper

    cluster, graph = cpu_gpu_cluster(2), random_dag(12, seed=3)
    encoder = LSTMEncoder(hidden_size=16, type_embedding=8, num_type_buckets=64).to(encoder_dtype)
    policy = Seq2SeqPolicy(3, hidden_size=16, attention_size=8).to(policy_dtype)
    names = [str(d).removeprefix("torch.") for d in (encoder_dtype, policy_dtype)]
    match = rf"one floating dtype: encoder {names[0]}, policy {names[1]}; .* e\.g\. policy\.to\(torch\.{names[0]}\)"
    with pytest.raises(ValueError, match=match):
        PolicyPlacer(graph, cluster, encoder, policy)
    grouper = LearnedGrouper(4, 8, 64).to(policy_dtype)
    with pytest.raises(ValueError, match=match):
        HierarchicalPlacer(graph, cluster, grouper, encoder, policy)
    policy.to(encoder_dtype)
    assert PolicyPlacer(graph, cluster, encoder, policy).sample(2).log_prob.dtype == encoder_dtype
    hierarchical = HierarchicalPlacer(graph, cluster, grouper, encoder, policy)
    assert hierarchical.sample(2).log_prob.dtype == torch.float64


def test_a_cluster_and_graph_given_the_other_way_round_are_named():
    """It failed deep inside: 'OpGraph' object has no attribute 'num_devices'."""
    graph, cluster = random_dag(8, seed=1), uniform_cluster(2)
    with pytest.raises(TypeError, match="graph must be a gplace OpGraph, got Cluster"):
        PolicyPlacer(cluster, graph, LSTMEncoder(hidden_size=8), Seq2SeqPolicy(2, hidden_size=8))


def test_a_given_grouping_must_be_of_this_graph_and_keep_colocation_sets_whole() -> None:
    """Both were accepted: samples then split set 'x' (the runtime raised), or put the CPU-pinned op on GPUs."""
    from gplace.encoders import GNNEncoder
    from gplace.grouping import identity_grouping
    from gplace.policies import MLPPolicy

    cluster = cpu_gpu_cluster(2)
    colocated = OpGraph.from_ops([Op("a", "T", 1.0, colocation="x"), Op("b", "T", 1.0, colocation="x"),
                                  Op("c", "T", 1.0)], [Edge("a", "b"), Edge("b", "c")])
    with pytest.raises(ValueError, match="colocation set 'x' spans groups: op 'a' is in group 0, op 'b' in group 1"):
        PolicyPlacer(colocated, cluster, GNNEncoder("sage", 16, 1), MLPPolicy(3, 16, state_size=16),
                     grouping=identity_grouping(colocated))
    pinned = OpGraph.from_ops([Op("a", "T", 1.0, pinned="cpu"), Op("b", "T", 1.0)], [Edge("a", "b")], name="pinned")
    other = OpGraph.from_ops([Op("a", "T", 1.0), Op("b", "T", 1.0)], [Edge("a", "b")], name="other")
    with pytest.raises(ValueError, match="the grouping is of graph 'other'.*not of graph 'pinned'"):
        PolicyPlacer(pinned, cluster, GNNEncoder("sage", 16, 1), MLPPolicy(3, 16, state_size=16),
                     grouping=identity_grouping(other))


def test_sample_counts_and_evaluated_devices_must_be_whole_numbers() -> None:
    placer = _placer()
    with pytest.raises(ValueError, match="num_samples must be a whole number >= 1, got 1.5"):
        placer.sample(1.5)  # torch's "rand() received an invalid combination of arguments" before
    devices = placer.greedy().devices.astype(np.float64)[None]
    with pytest.raises(InvalidPlacementError, match="integer device indices, got dtype float64"):
        placer.evaluate(devices + 0.7)  # truncated to the greedy placement and scored before
