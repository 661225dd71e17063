"""Every encoder works with every policy: one suite over all (encoder, policy) pairs, directly and through Hydra."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch import nn

from gplace.encoders import GNNEncoder, LSTMEncoder
from gplace.ir import OpGraph, Placement
from gplace.placer import PolicyPlacer
from gplace.policies import (
    DeviceAwarePolicy,
    GDPPolicy,
    ListSchedulingPolicy,
    MLPPolicy,
    PolicyOutput,
    Seq2SeqPolicy,
)
from gplace.testing import cpu_gpu_cluster, random_dag

ENCODERS = ["lstm", "sage", "gat", "gin"]
POLICIES = ["seq2seq", "mlp", "gdp", "device_aware", "list_scheduling"]
PAIRS = [(e, p) for e in ENCODERS for p in POLICIES]
H = 16
PINNED = 5
"""Index of the op pinned to the CPU (device 0 of cpu_gpu_cluster)."""


def _graph() -> OpGraph:
    """random_dag(40) with output shapes on every op and op 5 pinned to the CPU."""
    base = random_dag(40, seed=7)
    ops = [replace(op, output_shapes=((8, i + 1),), pinned="cpu" if i == PINNED else None)
           for i, op in enumerate(base.ops())]
    return OpGraph.from_ops(ops, base.edges(), name="pinned_random_dag40")


def _encoder(name: str) -> nn.Module:
    if name == "lstm":
        return LSTMEncoder(hidden_size=H, type_embedding=8, projection=8)
    return GNNEncoder(name, hidden_size=H, num_layers=2, heads=2, type_embedding=8, projection=8)


def _policy(name: str, num_devices: int) -> nn.Module:
    if name == "seq2seq":
        return Seq2SeqPolicy(num_devices, hidden_size=12, attention_size=6, state_size=H)
    if name == "mlp":
        return MLPPolicy(num_devices, hidden_size=12, state_size=H)
    if name == "gdp":  # segments of 4 groups, so the memory is used
        return GDPPolicy(num_devices, hidden_size=12, num_heads=2, segment_size=4, state_size=H)
    if name == "list_scheduling":
        return ListSchedulingPolicy(hidden_size=12, state_size=H)
    return DeviceAwarePolicy(hidden_size=12, state_size=H)


def _kwargs(placer: PolicyPlacer) -> dict:
    """The extra inputs the policy reads (device features, schedule context)."""
    return placer.policy_inputs()


def _pinned_position(placer: PolicyPlacer) -> int:
    """Feature position of the pinned op's group."""
    order = placer.features()["order"].tolist()
    return order.index(int(placer.grouping.op_group[PINNED]))


@pytest.fixture(scope="module")
def graph() -> OpGraph:
    return _graph()


@pytest.fixture(params=PAIRS, ids=[f"{e}-{p}" for e, p in PAIRS])
def placer(request, graph) -> PolicyPlacer:
    torch.manual_seed(0)
    encoder, policy = request.param
    cluster = cpu_gpu_cluster(2)
    return PolicyPlacer(graph, cluster, _encoder(encoder), _policy(policy, cluster.num_devices), max_groups=10)


def test_sample_shapes_finite_and_respects_the_mask(placer):
    """K samples are (K, G) int64 allowed devices with finite (K,) log-probs <= 0 and entropies >= 0."""
    states = placer.encoder(placer.features())
    g = placer.num_groups
    assert 3 < g <= 10 and states.shape == (g, H) and torch.isfinite(states).all()
    out = placer.policy.sample(states, placer.allowed, 200, generator=torch.Generator().manual_seed(0),
                               **_kwargs(placer))
    assert isinstance(out, PolicyOutput)
    assert out.devices.shape == (200, g) and out.devices.dtype == torch.int64
    assert out.log_prob.shape == (200,) and out.entropy.shape == (200,)
    assert torch.isfinite(out.log_prob).all() and torch.isfinite(out.entropy).all()
    assert (out.log_prob <= 0).all() and (out.entropy >= 0).all()
    assert placer.allowed[torch.arange(g), out.devices].all()
    assert (out.devices[:, _pinned_position(placer)] == 0).all()
    free = placer.allowed.sum(1) > 1
    assert any(len(col.unique()) > 1 for col in out.devices[:, free].T), "unpinned groups never vary"


def test_placer_samples_and_greedy_are_valid_placements(placer):
    """Per-op samples and the greedy placement validate against the graph and cluster (pins respected)."""
    for row in placer.sample(8).devices:
        Placement.for_graph(placer.graph, row).validate(placer.graph, placer.cluster)
    greedy = placer.greedy()
    greedy.validate(placer.graph, placer.cluster)
    assert greedy.devices[PINNED] == 0
    assert placer.policy.greedy(placer.encoder(placer.features()), placer.allowed, **_kwargs(placer)).shape \
        == (placer.num_groups,)


def test_evaluate_of_a_sample_matches_its_log_prob(placer):
    """Scoring sampled placements (at temperature 0.7) reproduces their log-probabilities and entropies."""
    placer.policy.temperature = 0.7
    sample = placer.sample(5, generator=torch.Generator().manual_seed(1))
    log_prob, entropy = placer.evaluate(sample.devices)
    torch.testing.assert_close(log_prob, sample.log_prob)
    torch.testing.assert_close(entropy, sample.entropy)


def test_gradients_reach_every_parameter(placer):
    """A REINFORCE-style loss with an entropy bonus gives every encoder and policy parameter a nonzero gradient."""
    out = placer.sample(4, generator=torch.Generator().manual_seed(2))
    advantage = torch.tensor([1.0, -0.5, 0.25, -2.0])
    (-(out.log_prob * advantage).mean() - 0.1 * out.entropy.mean()).backward()
    for name, p in placer.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
        assert torch.isfinite(p.grad).all(), name


@pytest.mark.parametrize("name", POLICIES)
def test_states_of_another_dtype_than_the_weights_are_refused_naming_both(graph, name):
    """float64 states given to a float32 policy failed inside torch ("mat1 and mat2 must have the same dtype")."""
    cluster = cpu_gpu_cluster(2)
    placer = PolicyPlacer(graph, cluster, _encoder("lstm"), _policy(name, cluster.num_devices), max_groups=10)
    states = placer.encoder(placer.features()).detach().double()
    match = rf"states are torch.float64, {type(placer.policy).__name__}'s weights torch.float32: convert"
    with pytest.raises(ValueError, match=match):
        placer.policy.sample(states, placer.allowed, 2, **_kwargs(placer))
    with pytest.raises(ValueError, match=match):
        placer.policy.greedy(states, placer.allowed, **_kwargs(placer))
    assert placer.policy.double().greedy(states, placer.allowed, **_kwargs(placer)).shape == (placer.num_groups,)


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("temperature", [0, -1.0, float("nan"), float("inf"), "0.5", True])
def test_a_temperature_that_is_not_a_finite_positive_number_is_refused(name, temperature):
    """A temperature of 0 gave NaN log-probabilities and put groups on barred devices; a negative one inverted the
    preferences, silently."""
    policy = _policy(name, 3)
    with pytest.raises(ValueError, match=f"temperature must be a finite number > 0, got {temperature!r}"):
        policy.temperature = temperature
    assert policy.temperature == 1.0
    policy.temperature = 0.25
    assert policy.temperature == 0.25


@pytest.mark.parametrize(("build", "match"), [
    (lambda: Seq2SeqPolicy(2, hidden_size=-3), "Seq2SeqPolicy: hidden_size must be a whole number >= 1, got -3"),
    (lambda: Seq2SeqPolicy(2, attention_size=0), "Seq2SeqPolicy: attention_size must be a whole number >= 1, got 0"),
    (lambda: MLPPolicy(2, hidden_size=0), "MLPPolicy: hidden_size must be"),
    (lambda: DeviceAwarePolicy(device_feature_size=-1), "DeviceAwarePolicy: device_feature_size must be"),
    (lambda: ListSchedulingPolicy(hidden_size=0), "ListSchedulingPolicy: hidden_size must be"),
    (lambda: GDPPolicy(2, hidden_size=8, num_heads=2, feedforward_size=0), "GDPPolicy: feedforward_size must be"),
    (lambda: LSTMEncoder(hidden_size=8, type_embedding=0), "the group embedding: type_embedding must be"),
    (lambda: GNNEncoder("sage", hidden_size=8, max_neighbours=-1), "the group embedding: max_neighbours must be"),
])
def test_a_size_below_one_is_named(build, match):
    """A negative size raised torch's 'Trying to create tensor with negative dimension' from inside; a zero trained
    a network of zero width, silently."""
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.parametrize("encoder", ENCODERS)
def test_device_aware_policy_serves_3_and_5_devices_with_one_set_of_weights(graph, encoder):
    """One DeviceAwarePolicy places on a 3- and a 5-device cluster; samples are valid and evaluate matches."""
    torch.manual_seed(0)
    enc, policy = _encoder(encoder), DeviceAwarePolicy(hidden_size=12, state_size=H)
    for num_gpus in (2, 4):
        placer = PolicyPlacer(graph, cpu_gpu_cluster(num_gpus), enc, policy, max_groups=10)
        sample = placer.sample(64, generator=torch.Generator().manual_seed(3))
        assert sample.devices.shape == (64, graph.num_ops) and sample.devices.max() <= num_gpus
        assert (sample.devices[:, PINNED] == 0).all() and len(set(sample.devices[:, 1 - PINNED].tolist())) > 1
        torch.testing.assert_close(placer.evaluate(sample.devices)[0], sample.log_prob)
        placer.place(graph, placer.cluster)


# ---------------------------------------------------------------------- through Hydra
@pytest.fixture(scope="module")
def hydra_ctx():
    hydra = pytest.importorskip("hydra")
    with hydra.initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        yield


@pytest.mark.parametrize(("encoder", "policy"), PAIRS, ids=[f"{e}-{p}" for e, p in PAIRS])
def test_every_pair_composes_and_samples_through_hydra(hydra_ctx, graph, encoder, policy):
    """``encoder=E policy=P`` composes; the instantiated pair (policy built with num_devices=3) samples."""
    from hydra import compose
    from hydra.utils import instantiate

    torch.manual_seed(0)
    cfg = compose(config_name="config", overrides=[f"encoder={'gnn' if encoder == 'sage' else encoder}",
                                                   f"policy={policy}", "logger=none"])
    enc, pol = instantiate(cfg.encoder), instantiate(cfg.policy)(num_devices=3)
    assert getattr(enc, "conv", "lstm") == encoder
    placer = PolicyPlacer(graph, cpu_gpu_cluster(2), enc, pol, max_groups=10)
    out = placer.sample(2)
    assert out.devices.shape == (2, graph.num_ops) and torch.isfinite(out.log_prob).all()
    assert (out.devices[:, PINNED] == 0).all()

