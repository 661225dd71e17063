"""The hierarchical planner: a learned grouper trained jointly with the placer, keeping colocation and pins."""

import dataclasses

import numpy as np
import pytest
import torch

from gplace.encoders import LSTMEncoder
from gplace.hierarchical import HierarchicalPlacer, LearnedGrouper, group_slots, op_features
from gplace.ir import OpGraph
from gplace.placer import ContractError
from gplace.policies import MLPPolicy, Seq2SeqPolicy
from gplace.runtime import Simulator
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import PPOTrainer, ReinforceTrainer

NUM_GROUPS = 8


def _constrained_dag() -> OpGraph:
    """random_dag(30) with CPU and GPU pins and three colocation sets, one of them pinned to the CPU."""
    base = random_dag(30)
    changes = {0: dict(pinned="cpu"), 1: dict(pinned="cpu"), 2: dict(pinned="gpu"), 3: dict(pinned="gpu"),
               5: dict(colocation="v"), 6: dict(colocation="v"), 10: dict(colocation="w", pinned="cpu"),
               20: dict(colocation="w"), 25: dict(colocation="w"), 12: dict(colocation="x"),
               17: dict(colocation="x")}
    ops = [dataclasses.replace(op, **changes.get(i, {})) for i, op in enumerate(base.ops())]
    return OpGraph.from_ops(ops, base.edges(), name="constrained_dag")


def _placer(graph, cluster, policy="seq2seq"):
    torch.manual_seed(0)
    grouper = LearnedGrouper(NUM_GROUPS, hidden_size=16, num_type_buckets=64)
    encoder = LSTMEncoder(hidden_size=16, type_embedding=8, num_type_buckets=64)
    if policy == "seq2seq":
        pol = Seq2SeqPolicy(cluster.num_devices, hidden_size=16, attention_size=8)
    else:
        pol = MLPPolicy(cluster.num_devices, hidden_size=16)
    return HierarchicalPlacer(graph, cluster, grouper, encoder, pol)


def _assert_constraints(graph, cluster, devices):
    allowed = graph.allowed_devices(cluster)
    for d in devices:
        assert allowed[np.arange(graph.num_ops), d].all(), "an op is on a device its pin forbids"
        for name in {c for c in graph.colocation if c is not None}:
            members = [i for i, c in enumerate(graph.colocation) if c == name]
            assert len(set(d[members].tolist())) == 1, f"colocation set {name!r} is split"


@pytest.fixture(scope="module")
def graph():
    return _constrained_dag()


@pytest.fixture(scope="module")
def cluster():
    return cpu_gpu_cluster(2)


def test_grouper_gives_a_distribution_over_groups_per_op(graph):
    grouper = LearnedGrouper(NUM_GROUPS, hidden_size=16, num_type_buckets=64)
    features = op_features(graph, 64)
    assert features["type_ids"].shape == (30,)
    assert features["numeric"].shape == (30, 7) and features["position"].shape == (30, 3)
    logits = grouper(features)
    assert logits.shape == (30, NUM_GROUPS) and torch.isfinite(logits).all()


def test_slots_keep_kinds_of_restriction_apart():
    """Free units may pick any slot; CPU-only and GPU-only units each get reserved slots nobody else restricted
    shares."""
    unit_allowed = np.array([[1, 1, 1], [1, 0, 0], [1, 0, 0], [0, 1, 1], [1, 1, 1]], dtype=bool)
    slots = group_slots(unit_allowed, 4)
    assert slots[0].all() and slots[4].all()
    assert (slots[1] == slots[2]).all() and slots[1].any() and slots[3].any()
    assert not (slots[1] & slots[3]).any()
    assert group_slots(unit_allowed[1:4], 4).any(0).all(), "with no free unit, every slot serves some class"
    with pytest.raises(ValueError, match="2 kinds of pinned"):
        group_slots(unit_allowed, 1)


def test_every_sample_keeps_colocation_and_pins(graph, cluster):
    """64 sampled groupings: colocated ops share a group, no group mixes CPU and GPU pins, every placement is valid."""
    placer = _placer(graph, cluster)
    gen = torch.Generator().manual_seed(0)
    groups = placer.sample_groups(64, gen)
    allowed = graph.allowed_devices(cluster)
    for op_group in groups.op_group:
        for name in ("v", "w", "x"):
            members = [i for i, c in enumerate(graph.colocation) if c == name]
            assert len(set(op_group[members].tolist())) == 1
        for g in np.unique(op_group):
            assert allowed[op_group == g].all(0).any(), f"group {g} has no device all its ops may use"
    sample = placer.sample(16, gen)
    assert sample.devices.shape == (16, 30) and sample.log_prob.shape == sample.entropy.shape == (16,)
    _assert_constraints(graph, cluster, sample.devices)


def test_pins_stay_satisfiable_when_the_grouper_wants_one_group(graph, cluster):
    """A grouper that puts every op in slot 0 with overwhelming odds still never mixes CPU and GPU pins."""
    placer = _placer(graph, cluster)
    with torch.no_grad():
        placer.grouper.net[-1].bias[0] = 1e4
    groups = placer.sample_groups(4, torch.Generator().manual_seed(0))
    assert 2 < len(np.unique(groups.op_group[0])) <= 3  # free ops together, CPU-only and GPU-only apart
    _assert_constraints(graph, cluster, [placer.greedy().devices])


def test_log_prob_is_grouper_plus_placer_and_gradients_reach_the_grouper(graph, cluster):
    placer = _placer(graph, cluster, policy="mlp")
    sample = placer.sample(3, torch.Generator().manual_seed(0))
    sample.log_prob.sum().backward()
    for name, module in (("grouper", placer.grouper), ("encoder", placer.encoder), ("policy", placer.policy)):
        grads = [p.grad for p in module.parameters() if p.grad is not None]
        assert grads and any(g.abs().sum() > 0 for g in grads), f"no gradient reaches the {name}"


def test_reinforce_trains_grouper_and_placer_jointly(graph, cluster, tmp_path):
    """Three REINFORCE updates on random_dag(30): valid placements, and the grouper's weights move."""
    placer = _placer(graph, cluster)
    before = {k: v.clone() for k, v in placer.grouper.state_dict().items()}
    result = ReinforceTrainer(updates=3, samples_per_update=4, lr=1e-2).fit(placer, Simulator(), graph, cluster,
                                                                             run_dir=tmp_path)
    assert result.samples == 12 and np.isfinite(result.best_step_time)
    result.best_placement.validate(graph, cluster)
    _assert_constraints(graph, cluster, [result.best_placement.devices])
    moved = [k for k, v in placer.grouper.state_dict().items() if not torch.equal(v, before[k])]
    assert moved, "the grouper's weights did not change"
    saved = torch.load(tmp_path / "checkpoint.pt", weights_only=False)["policy"]
    assert any(k.startswith("grouper.") for k in saved) and not any(k.startswith("op_") for k in saved)


class _CountingSimulator(Simulator):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def measure_many(self, graph, cluster, placements):
        self.calls += 1
        return super().measure_many(graph, cluster, placements)


def test_ppo_warm_start_and_self_imitation_are_refused_before_the_first_sample(graph, cluster):
    """self_imitation raised from project after the first update's samples were measured; PPO after its first."""
    placer = _placer(graph, cluster)
    runtime = _CountingSimulator()
    for trainer, warm_start, needs in ((PPOTrainer(updates=1, samples_per_update=2), None, "PPOTrainer"),
                                       (ReinforceTrainer(updates=1), placer.greedy(), "a warm start"),
                                       (ReinforceTrainer(updates=1, self_imitation=0.1), None, "self_imitation")):
        with pytest.raises(NotImplementedError, match=f"HierarchicalPlacer cannot re-score .* which {needs} need"):
            trainer.fit(placer, runtime, graph, cluster, warm_start=warm_start)
    assert runtime.calls == 0
    with pytest.raises(NotImplementedError, match="no fixed groups"):
        placer.project(placer.greedy())


def test_a_cluster_and_graph_given_the_other_way_round_are_named():
    graph, cluster = random_dag(8, seed=1), cpu_gpu_cluster(1)
    with pytest.raises(TypeError, match="graph must be a gplace OpGraph, got Cluster"):
        HierarchicalPlacer(cluster, graph, LearnedGrouper(4), LSTMEncoder(hidden_size=8), MLPPolicy(2))


def test_float64_networks_sample_and_train(graph, cluster):
    """The grouper's op features stayed float32 under float64 networks: "mat1 and mat2 must have the same dtype"
    (PolicyPlacer casts its features to the encoder's precision)."""
    torch.manual_seed(0)
    grouper = LearnedGrouper(NUM_GROUPS, hidden_size=16, num_type_buckets=64).double()
    encoder = LSTMEncoder(hidden_size=16, type_embedding=8, num_type_buckets=64).double()
    placer = HierarchicalPlacer(graph, cluster, grouper, encoder, MLPPolicy(cluster.num_devices, 16).double())
    sample = placer.sample(3, generator=torch.Generator().manual_seed(0))
    assert sample.log_prob.dtype == torch.float64
    _assert_constraints(graph, cluster, np.asarray(sample.devices))
    result = ReinforceTrainer(updates=1, samples_per_update=2).fit(placer, Simulator(), graph, cluster)
    assert result.best_measurement.ok


@pytest.mark.parametrize("num_samples", [0, -1, 2.5, True])
def test_a_num_samples_that_is_not_a_whole_number_of_at_least_one_is_refused(graph, cluster, num_samples):
    """sample and sample_groups refuse it as PolicyPlacer.sample does (it failed in numpy's or torch's words)."""
    placer = _placer(graph, cluster, policy="mlp")
    for sample in (placer.sample, placer.sample_groups):
        with pytest.raises(ValueError, match=rf"num_samples must be a whole number >= 1, got {num_samples!r}"):
            sample(num_samples)


def test_device_features_of_the_wrong_shape_are_refused_at_construction(graph, cluster):
    """A (2, 5) array for a 3-device cluster was stored and failed only at the first sample."""
    torch.manual_seed(0)
    grouper = LearnedGrouper(NUM_GROUPS, hidden_size=16, num_type_buckets=64)
    encoder = LSTMEncoder(hidden_size=16, type_embedding=8, num_type_buckets=64)
    with pytest.raises(ValueError, match=r"device_features has shape \(2, 5\), expected \(3, F\)"):
        HierarchicalPlacer(graph, cluster, grouper, encoder, MLPPolicy(3, hidden_size=16),
                           device_features=np.zeros((2, 5)))


class _OneSlotShort(LearnedGrouper):
    def forward(self, features):
        return super().forward(features)[:, :-1]


class _Flat(LearnedGrouper):
    def forward(self, features):
        return super().forward(features).sum(-1)


@pytest.mark.parametrize(("grouper", "shape"), [(_OneSlotShort, r"\(30, 7\)"), (_Flat, r"\(30,\)")])
def test_a_grouper_returning_the_wrong_shape_is_named(graph, cluster, grouper, shape):
    """A custom grouper's (N, G-1) or (N,) logits failed with a bare torch broadcast error."""
    torch.manual_seed(0)
    encoder = LSTMEncoder(hidden_size=16, type_embedding=8, num_type_buckets=64)
    placer = HierarchicalPlacer(graph, cluster, grouper(NUM_GROUPS, hidden_size=16, num_type_buckets=64), encoder,
                                MLPPolicy(3, hidden_size=16))
    with pytest.raises(ContractError, match=rf"grouper {grouper.__name__} must return \(N=30, G=8\) floating "
                                            rf"logits.* got logits of dtype float32 and shape {shape}"):
        placer.sample(2)
