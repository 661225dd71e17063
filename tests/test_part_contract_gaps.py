"""More of a stranger's parts, each wrong in one way the conformance probe of 2026-12-06 found, and what gplace now
does with them: a placement of another graph is refused, an index past int64 is named, loose capability values are
refused, a falsy encoder is used, not replaced, a detached encoder is warned about, states on another device are
named, and the conformance checkers report each broken rule as an ``AssertionError`` (a float64 encoder passes)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import gplace
from gplace.conformance import check_encoder, check_placer, check_policy, check_trainer
from gplace.encoders import LSTMEncoder
from gplace.interfaces import Placer, PolicyCapabilities
from gplace.ir import InvalidPlacementError, Placement
from gplace.placer import ContractError, ContractTypeError, PolicyPlacer
from gplace.policies import MLPPolicy
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import ReinforceTrainer

GRAPH, CLUSTER = random_dag(20), cpu_gpu_cluster(2)  # 3 devices


class Returns(Placer):
    """A placer whose ``_place`` returns ``value``."""

    name = "mine"

    def __init__(self, value) -> None:
        self.value = value

    def _place(self, graph, cluster):
        return self.value


def test_a_placement_of_another_graph_is_refused_not_restamped():
    """It was taken and given the placed graph's fingerprint; the runtimes refuse the same placement."""
    other = Placement.for_graph(random_dag(20, seed=5), np.zeros(20, np.int64))
    with pytest.raises(InvalidPlacementError, match="placement was made for graph"):
        Returns(other).place(GRAPH, CLUSTER)
    mine = Returns(Placement.for_graph(GRAPH, np.zeros(20, np.int64))).place(GRAPH, CLUSTER)
    assert mine.graph_fingerprint == GRAPH.fingerprint
    with pytest.raises(AssertionError, match="placer 'mine' returned an invalid placement: placement was made for"):
        check_placer(Returns(other), GRAPH, CLUSTER)


def test_an_index_past_int64_is_named_not_wrapped_to_minus_one():
    """np.uint64(2**64 - 1) was reported as "placed on device -1"."""
    with pytest.raises(InvalidPlacementError, match="device index 18446744073709551615, too large"):
        Returns(np.full(20, 2**64 - 1, np.uint64)).place(GRAPH, CLUSTER)


def test_check_placer_names_the_placer_of_an_out_of_range_device():
    """Placer.place raised InvalidPlacementError first, so check_placer's own message could never be given."""
    with pytest.raises(AssertionError, match=r"^placer 'mine' returned an invalid placement: .*device 9"):
        check_placer(Returns(np.full(20, 9)), GRAPH, CLUSTER)


@pytest.mark.parametrize(("fields", "match"), [
    ({"num_devices": True}, "num_devices must be a positive int or None, got True"),
    ({"uses_schedule": "no"}, "uses_schedule must be True or False, got 'no'"),
    ({"uses_device_features": 1}, "uses_device_features must be True or False, got 1"),
    ({"merge_consumers": 0.0}, "merge_consumers must be True, False or 'if_needed', got 0.0"),
    ({"merge_consumers": 1}, "merge_consumers must be True, False or 'if_needed', got 1"),
])
def test_capability_values_of_another_type_are_refused(fields, match):
    """'no' was read as true, True as one device, 0.0 and 1 as False and True."""
    with pytest.raises(ValueError, match=match):
        PolicyCapabilities(**fields)


class Falsy(nn.Sequential):
    """An encoder with no child modules (its len is 0, so it is falsy) and a parameter of its own."""

    num_type_buckets, max_neighbours = 16, 4

    def __init__(self) -> None:
        super().__init__()
        self.hidden_size, self.calls = 8, 0
        self.weight = nn.Parameter(torch.ones(7, 8))

    def forward(self, features):
        self.calls += 1
        return torch.tanh(features["numeric"] @ self.weight)


def test_a_falsy_encoder_is_used_not_replaced_by_the_default():
    """`encoder or LSTMEncoder()` swapped in the default: its 256-wide states then failed the policy's width."""
    encoder = Falsy()
    assert not encoder
    gplace.place(GRAPH, CLUSTER, encoder=encoder, policy=MLPPolicy(3, hidden_size=8, state_size=8),
                 budget="8 samples", seed=0)
    assert encoder.calls > 0


class Detached(Falsy):
    def forward(self, features):
        return super().forward(features).detach()


def test_an_encoder_whose_states_carry_no_gradient_is_warned_about_once_when_it_would_train():
    """Its parameters never changed, and nothing said so (check_encoder alone caught it)."""
    placer = PolicyPlacer(GRAPH, CLUSTER, Detached(), MLPPolicy(3, hidden_size=8, state_size=8), max_groups=6)
    with torch.no_grad():
        placer.sample(2)  # no gradient wanted: nothing to say
    with pytest.warns(RuntimeWarning, match=r"encoder Detached returned states without a gradient \(detached\?\)"):
        placer.sample(2)
    frozen = Detached().requires_grad_(False)  # frozen on purpose: nothing to learn, nothing to say
    PolicyPlacer(GRAPH, CLUSTER, frozen, MLPPolicy(3, hidden_size=8, state_size=8), max_groups=6).sample(2)


class Meta(Falsy):
    def forward(self, features):
        return torch.empty(features["numeric"].shape[0], 8, device="meta")


def test_states_on_another_device_are_named_before_their_dtype_is_checked():
    """Meta states failed in torch.is_autocast_enabled ("unknown device type for autocast")."""
    placer = PolicyPlacer(GRAPH, CLUSTER, Meta(), MLPPolicy(3, hidden_size=8, state_size=8), max_groups=6)
    with pytest.raises(ContractError, match="encoder Meta must return its states on the placer's device cpu, got "
                                            "states on meta"):
        placer.sample(2)


def test_a_tuple_of_states_is_a_contract_type_error_a_value_error_too():
    class Pair(Falsy):
        def forward(self, features):
            out = super().forward(features)
            return out, out

    placer = PolicyPlacer(GRAPH, CLUSTER, Pair(), MLPPolicy(3, hidden_size=8, state_size=8), max_groups=6)
    with pytest.raises(ContractTypeError, match="encoder Pair must return its states as a") as caught:
        placer.sample(2)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)


def test_check_encoder_passes_a_float64_encoder_the_placer_runs():
    """check_encoder gave its float32 features to a float64 LSTMEncoder: "mat1 and mat2 must have the same dtype"."""
    states = check_encoder(LSTMEncoder(hidden_size=16).double(), GRAPH)
    assert states.dtype == torch.float64


class EvaluateBroken(MLPPolicy):
    """``evaluate`` broken by ``how``."""

    def __init__(self, how: str) -> None:
        super().__init__(3, hidden_size=8, state_size=16)
        self.how = how

    def evaluate(self, *args, **kwargs):
        log_prob, entropy = super().evaluate(*args, **kwargs)
        if self.how == "detached":
            return log_prob.detach(), entropy
        if self.how == "nan":
            return log_prob, entropy * float("nan")
        if self.how == "negative":
            return log_prob, -entropy - 1
        return log_prob.double(), entropy


@pytest.mark.parametrize(("how", "match"), [
    ("detached", "evaluate's log_prob must carry a gradient"),
    ("nan", "evaluate's entropy must be finite and >= 0"),
    ("negative", "evaluate's entropy must be finite and >= 0"),
    ("double", "evaluate must give log_prob in sample's dtype torch.float32, got torch.float64"),
])
def test_check_policy_checks_what_ppo_reads_from_evaluate(how, match):
    """All four passed check_policy; PPO then refused the first, skipped every update of the second, and the dtype
    mismatch raised torch's "Float did not match Double" out of check_policy."""
    with pytest.raises(AssertionError, match=match):
        check_policy(EvaluateBroken(how), GRAPH, CLUSTER, LSTMEncoder(hidden_size=16))


def test_check_policy_reports_capabilities_of_another_type_as_the_broken_rule():
    class Loose(MLPPolicy):
        capabilities = {"num_devices": 3}

    with pytest.raises(AssertionError, match=r"Loose.capabilities is a dict, expected .*PolicyCapabilities"):
        check_policy(Loose(3, hidden_size=8, state_size=16), GRAPH, CLUSTER, LSTMEncoder(hidden_size=16))


def test_check_trainer_names_a_best_placement_that_is_no_placement():
    """An ndarray raised "'numpy.ndarray' object has no attribute 'validate'"."""
    class Arrays(ReinforceTrainer):
        def fit(self, *args, **kwargs):
            result = super().fit(*args, **kwargs)
            object.__setattr__(result, "best_placement", np.asarray(result.best_placement.devices))
            return result

    with pytest.raises(AssertionError, match="Arrays's best_placement must be a Placement, got a ndarray"):
        check_trainer(Arrays(updates=1, samples_per_update=2, progress=False), GRAPH, CLUSTER)


def test_pick_pretrained_names_a_swapped_pair_as_a_type_error():
    """ContractTypeError is a ValueError too, and pick_pretrained's `except ValueError` came first: it re-raised a
    swapped pair as a plain ValueError, where its docstring promises a TypeError."""
    from gplace.pretrained import pick_pretrained

    swapped = (MLPPolicy(3, hidden_size=8, state_size=8), LSTMEncoder(hidden_size=8))
    with pytest.raises(TypeError, match=r"^pretrained\[0\]: policy must be a gplace Policy.*swapped"):
        pick_pretrained([swapped], GRAPH, CLUSTER)


def test_check_placer_lets_a_callers_mistake_through_as_itself():
    """A graph that is no OpGraph was reported as the placer's "invalid placement"."""
    from gplace.baselines import HEFT

    with pytest.raises(TypeError, match="graph must be a gplace OpGraph"):
        check_placer(HEFT(), "model.onnx", CLUSTER)
