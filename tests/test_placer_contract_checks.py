"""PolicyPlacer checks what a third-party encoder and policy return against gplace.interfaces, and names the part.

Each broken part below breaks one rule. Before these checks, each failed deep in torch or in a trainer (shapes that
cannot be multiplied, REINFORCE's size mismatch, PPO's IndexError), was blamed on another part (the encoder's short
states as gplace's "allowed must be a (15, 3) bool tensor"; a policy's barred devices as the runtime's
InvalidPlacementError), or passed silently (fewer samples than asked, a numpy evaluate, NaN states).
"""

from __future__ import annotations

import dataclasses
import re
import warnings

import pytest
import torch
from torch import nn

import gplace
from gplace.ir import OpGraph
from gplace.placer import PolicyPlacer
from gplace.policies import MLPPolicy, PolicyOutput
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import PPOTrainer, ReinforceTrainer

GRAPH, CLUSTER = random_dag(20, seed=3), cpu_gpu_cluster(2)  # cpu, gpu, gpu
SIZE = 12  # not the number of groups (at most 8), so transposed states are caught by their shape


class TinyEncoder(nn.Module):
    """A working third-party encoder: (G, SIZE) float32 states from the numeric group features."""

    num_type_buckets, max_neighbours = 16, 4

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(7, SIZE)

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.tanh(self.linear(features["numeric"]))


def _policy(cls: type[MLPPolicy] = MLPPolicy, state_size: int = SIZE) -> MLPPolicy:
    torch.manual_seed(0)
    return cls(CLUSTER.num_devices, hidden_size=SIZE, num_layers=1, state_size=state_size)


def _placer(encoder: nn.Module | None = None, policy: nn.Module | None = None, graph: OpGraph = GRAPH) -> PolicyPlacer:
    return PolicyPlacer(graph, CLUSTER, encoder or TinyEncoder(), policy or _policy(), max_groups=8)


def _place(encoder: nn.Module | None = None, policy: nn.Module | None = None, trainer=None, graph: OpGraph = GRAPH):
    return gplace.place(graph, CLUSTER, encoder=encoder or TinyEncoder(), policy=policy or _policy(),
                        trainer=trainer or ReinforceTrainer(updates=1, samples_per_update=4), max_groups=8)


def _names(*words: str) -> str:
    """A regex matching a message that contains each of ``words`` (in any order)."""
    return "".join(f"(?=.*{re.escape(word)})" for word in words)


# --- encoders ----------------------------------------------------------------------------------------------------


class Transposed(TinyEncoder):
    def forward(self, features):
        return super().forward(features).T


class OneRowShort(TinyEncoder):
    def forward(self, features):
        return super().forward(features)[:-1]


class Narrow(TinyEncoder):
    def forward(self, features):
        return super().forward(features)[:, :SIZE // 2]


@pytest.mark.parametrize("encoder", [Transposed(), OneRowShort(), Narrow()], ids=lambda e: type(e).__name__)
def test_states_of_the_wrong_shape_name_the_encoder(encoder):
    """Transposed: torch's "mat1 and mat2 shapes cannot be multiplied"; one row short: "allowed must be a (7, 3) bool
    tensor" (gplace's mask blamed); too narrow: the policy's "states has shape (G, 4)", no encoder named."""
    g = _placer().num_groups
    with pytest.raises(ValueError, match=_names(f"encoder {type(encoder).__name__}", f"(G={g}, S={SIZE}) states",
                                                "state_size of MLPPolicy", "got states of shape")):
        _place(encoder)


def test_numpy_states_name_the_encoder():
    """Were torch's "linear(): argument 'input' must be Tensor, not numpy.ndarray"."""

    class NumpyStates(TinyEncoder):
        def forward(self, features):
            return super().forward(features).detach().numpy()

    with pytest.raises(TypeError, match=_names("encoder NumpyStates", "torch.Tensor", "got a numpy.ndarray")):
        _place(NumpyStates())


def test_float64_states_for_a_float32_policy_name_the_encoder_and_both_dtypes():
    """Were torch's "mat1 and mat2 must have the same dtype, but got Double and Float"."""

    class Float64States(TinyEncoder):
        def forward(self, features):
            return super().forward(features).double()

    with pytest.raises(ValueError, match=_names("encoder Float64States", "states of dtype torch.float32",
                                                "MLPPolicy's parameters", "got states of dtype torch.float64")):
        _placer(Float64States()).sample(2)


def test_non_finite_states_warn_once_naming_the_encoder():
    """All-NaN states ran silently to the end; they still place (no error), with one warning per placer."""

    class NaNStates(TinyEncoder):
        def forward(self, features):
            return super().forward(features) * float("nan")

    placer = _placer(NaNStates())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert placer.sample(3).devices.shape == (3, GRAPH.num_ops)
        placer.sample(3)
        placer.greedy()
    found = [w for w in caught if issubclass(w.category, RuntimeWarning) and "NaNStates" in str(w.message)]
    assert len(found) == 1, [str(w.message) for w in caught]
    assert "not finite" in str(found[0].message)


# --- policies: sample --------------------------------------------------------------------------------------------


class PerGroupLogProb(MLPPolicy):
    def sample(self, *args, **kwargs):
        out = super().sample(*args, **kwargs)
        return PolicyOutput(out.devices, out.log_prob[:, None].expand(-1, out.devices.shape[1]), out.entropy)


class ScalarEntropy(MLPPolicy):
    def sample(self, *args, **kwargs):
        out = super().sample(*args, **kwargs)
        return PolicyOutput(out.devices, out.log_prob, out.entropy.sum())


@pytest.mark.parametrize(("cls", "trainer", "field", "got"), [
    (PerGroupLogProb, ReinforceTrainer(updates=1, samples_per_update=4), "log_prob", "shape (4, "),
    (ScalarEntropy, ReinforceTrainer(updates=1, samples_per_update=4), "entropy", "shape ()"),
], ids=["log_prob_per_group", "scalar_entropy"])
def test_scores_of_the_wrong_shape_name_the_policy_and_the_field(cls, trainer, field, got):
    """(K, G) log_prob was REINFORCE's "size of tensor a (4) must match ..." in reinforce.py; a scalar entropy was
    broadcast in the loss and passed silently (and from evaluate, PPO's "slice() cannot be applied to a 0-dim
    tensor")."""
    with pytest.raises(ValueError, match=_names(f"policy {cls.__name__}", "sample must give (4,)",
                                                f"got {field} as a torch.Tensor", got)) as err:
        _place(policy=_policy(cls), trainer=trainer)
    from gplace.conformance import check_policy

    with pytest.raises(AssertionError, match=re.escape(str(err.value).split(",")[0])):  # the rule, as the check says
        check_policy(_policy(cls), random_dag(12), cpu_gpu_cluster(2), TinyEncoder())


def test_fewer_samples_than_asked_name_the_policy():
    """One sample fewer than asked was accepted silently."""

    class OneShort(MLPPolicy):
        def sample(self, states, allowed, num_samples, generator=None, **inputs):
            out = super().sample(states, allowed, num_samples, generator=generator, **inputs)
            return PolicyOutput(out.devices[:-1], out.log_prob[:-1], out.entropy[:-1])

    with pytest.raises(ValueError, match=_names("policy OneShort", "(K=4 asked)", "PolicyOutput.devices",
                                                "shape (3, ")):
        _place(policy=_policy(OneShort))


def test_devices_out_of_range_name_the_policy():
    """Were the runtime's InvalidPlacementError "op 'n0' placed on device 4", 12 frames deep, no policy named."""

    class OutOfRange(MLPPolicy):
        def sample(self, *args, **kwargs):
            out = super().sample(*args, **kwargs)
            return PolicyOutput(out.devices + CLUSTER.num_devices, out.log_prob, out.entropy)

    with pytest.raises(ValueError, match=_names("policy OutOfRange", "devices in [0, 3)", "from sample",
                                                "PolicyOutput.devices[0, 0] = ")):
        _place(policy=_policy(OutOfRange))


def test_a_policy_ignoring_the_mask_on_a_pinned_graph_is_named():
    """Was the runtime's InvalidPlacementError "op ... is pinned to kind 'cpu'", no policy named."""

    class IgnoresMask(MLPPolicy):
        def sample(self, states, allowed, num_samples, generator=None, **inputs):
            return super().sample(states, torch.ones_like(allowed), num_samples, generator=generator, **inputs)

    ops = GRAPH.ops()
    ops[:4] = [dataclasses.replace(op, pinned="cpu", colocation=None) for op in ops[:4]]
    pinned = OpGraph.from_ops(ops, GRAPH.edges(), name="pinned")
    with pytest.raises(ValueError, match=_names("policy IgnoresMask", "allowed-device mask", "from sample",
                                                "PolicyOutput.devices[", "allowed: [0]")):
        _place(policy=_policy(IgnoresMask), graph=pinned)


def test_numpy_devices_name_the_field_and_its_type():
    """Was "must return a PolicyOutput of tensors (devices, log_prob, entropy), got PolicyOutput"."""

    class NumpyDevices(MLPPolicy):
        def sample(self, *args, **kwargs):
            out = super().sample(*args, **kwargs)
            return PolicyOutput(out.devices.numpy(), out.log_prob, out.entropy)

    with pytest.raises(TypeError, match=_names("policy NumpyDevices", "as a torch.Tensor from sample",
                                               "got PolicyOutput.devices as a numpy.ndarray of dtype int64")):
        _placer(policy=_policy(NumpyDevices)).sample(4)


# --- policies: greedy and evaluate -------------------------------------------------------------------------------


def test_numpy_greedy_devices_are_a_type_error_not_a_shape_one():
    """Was ValueError "must return a (G=16,) tensor of devices, got (16,)": the shape right, the type unnamed."""

    class NumpyGreedy(MLPPolicy):
        def greedy(self, *args, **kwargs):
            return super().greedy(*args, **kwargs).numpy()

    with pytest.raises(TypeError, match=_names("policy NumpyGreedy", "from greedy", "got devices as a numpy.ndarray")):
        _placer(policy=_policy(NumpyGreedy)).greedy()


def test_float_greedy_devices_name_the_dtype_and_greedy():
    """Was "must give (K, G=...) integer devices, got torch.float32 of shape (1, G)": a shape it never returned."""

    class FloatGreedy(MLPPolicy):
        def greedy(self, *args, **kwargs):
            return super().greedy(*args, **kwargs).float()

    placer = _placer(policy=_policy(FloatGreedy))
    g = placer.num_groups
    with pytest.raises(ValueError, match=_names("policy FloatGreedy", f"(G={g},) integer devices from greedy",
                                                f"dtype float32 and shape ({g},)")):
        placer.place(GRAPH, CLUSTER)


def test_greedy_devices_the_mask_bars_name_the_policy():
    """A greedy decoder ignoring the mask failed in Placement.validate, not naming the policy."""

    class GreedyIgnoresMask(MLPPolicy):
        def greedy(self, states, allowed, **inputs):
            return super().greedy(states, torch.ones_like(allowed), **inputs)

        def _logits(self, states, device_features):
            logits = super()._logits(states, device_features)
            return logits + torch.tensor([0.0, 1e3, 1e3], dtype=logits.dtype)  # prefers the GPUs

    ops = GRAPH.ops()
    ops[:4] = [dataclasses.replace(op, pinned="cpu", colocation=None) for op in ops[:4]]
    pinned = OpGraph.from_ops(ops, GRAPH.edges(), name="pinned")
    with pytest.raises(ValueError, match=_names("policy GreedyIgnoresMask", "allowed-device mask", "from greedy")):
        _placer(policy=_policy(GreedyIgnoresMask), graph=pinned).greedy()


def test_evaluate_returning_numpy_or_the_wrong_shape_names_the_policy():
    """A numpy evaluate passed REINFORCE and failed in PPO's arithmetic ("unsupported operand type(s) for -")."""

    class NumpyEvaluate(MLPPolicy):
        def evaluate(self, *args, **kwargs):
            log_prob, entropy = super().evaluate(*args, **kwargs)
            return log_prob.detach().numpy(), entropy.detach().numpy()

    class ScalarEvaluate(MLPPolicy):
        def evaluate(self, *args, **kwargs):
            log_prob, entropy = super().evaluate(*args, **kwargs)
            return log_prob.sum(), entropy

    placer = _placer(policy=_policy(NumpyEvaluate))
    devices = placer.sample(3).devices
    with pytest.raises(TypeError, match=_names("policy NumpyEvaluate", "from evaluate",
                                               "got log_prob as a numpy.ndarray")):
        placer.evaluate(devices)
    placer = _placer(policy=_policy(ScalarEvaluate))
    with pytest.raises(ValueError, match=_names("policy ScalarEvaluate", "evaluate must give (3,)",
                                                "got log_prob as a torch.Tensor", "shape ()")):
        placer.evaluate(devices)


def test_a_scalar_entropy_from_evaluate_names_the_policy_under_ppo():
    """Was PPO's IndexError "slice() cannot be applied to a 0-dim tensor" in ppo.py."""

    class ScalarEntropyEvaluate(MLPPolicy):
        def evaluate(self, *args, **kwargs):
            log_prob, entropy = super().evaluate(*args, **kwargs)
            return log_prob, entropy.sum()

    with pytest.raises(ValueError, match=_names("policy ScalarEntropyEvaluate", "evaluate must give (4,) entropies",
                                                "got entropy as a torch.Tensor", "shape ()")):
        _place(policy=_policy(ScalarEntropyEvaluate), trainer=PPOTrainer(updates=1, samples_per_update=4))



@pytest.mark.parametrize("dtype", [torch.int16, torch.uint8, torch.int32])
def test_devices_of_any_integer_dtype_place_a_pinned_graph(dtype):
    """The mask check gathered with the policy's own dtype: int16 and uint8 devices failed in torch's gather
    ("Expected dtype int32/int64 for index") where they had placed before the checks."""

    class Narrow(MLPPolicy):
        def sample(self, *args, **kwargs):
            out = super().sample(*args, **kwargs)
            return PolicyOutput(out.devices.to(dtype), out.log_prob, out.entropy)

    ops = GRAPH.ops()
    ops[0] = dataclasses.replace(ops[0], pinned="cpu", colocation=None)
    pinned = OpGraph.from_ops(ops, GRAPH.edges(), name="pinned")
    out = _placer(policy=_policy(Narrow), graph=pinned).sample(4)
    assert out.devices.shape == (4, pinned.num_ops) and (out.devices[:, 0] == 0).all()
