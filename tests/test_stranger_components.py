"""A stranger's encoder and policy, each subtly wrong in one way a probe found, is refused early with a message
naming the part and what is wrong; a correct but unusual one (a lazy encoder) trains.

Before these checks: a states width other than the encoder's ``hidden_size`` passed ``check_encoder`` and failed in
torch ("mat1 and mat2 shapes cannot be multiplied"); a fresh ``nn.LazyLinear`` encoder failed in ``autograd_on``
with torch's LazyModule text; a policy whose log_prob carries no gradient failed REINFORCE and PPO with "element 0
of tensors does not require grad"; an ``IndependentPolicy._logits`` of shape (G, 1) or (D,) was broadcast into a
policy that never learns, and one of (G, D+1) or (D, G) failed with a bare broadcasting error; probabilities given
as log-probabilities trained silently; ``check_encoder`` called numpy states of the right shape the wrong shape, and
passed float64 states the placer refuses; an encoder class instead of an instance failed in ``Module.parameters()``.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gplace.conformance import check_encoder, check_policy
from gplace.placer import ContractError, PolicyPlacer
from gplace.policies import IndependentPolicy, MLPPolicy
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import PPOTrainer, ReinforceTrainer

GRAPH, CLUSTER = random_dag(12), cpu_gpu_cluster(2)  # 3 devices
D = CLUSTER.num_devices


class Encoder(nn.Module):
    """A working encoder: (G, hidden_size) float states from the numeric group features."""

    num_type_buckets, max_neighbours = 16, 4

    def __init__(self, hidden_size: int = 8) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.linear = nn.Linear(7, hidden_size)

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.tanh(self.linear(features["numeric"]))


class NarrowEncoder(Encoder):
    """Declares hidden_size 8, returns 4 wide."""

    def forward(self, features):
        return super().forward(features)[:, :4]


class NumpyEncoder(Encoder):
    def forward(self, features):
        return super().forward(features).detach().numpy()


class DoubleEncoder(Encoder):
    """float32 parameters, float64 states."""

    def forward(self, features):
        return super().forward(features).double()


class DoubleNetwork(Encoder):
    """Reads the features in its parameters' dtype (a placer gives it float64 features when it is float64)."""

    def forward(self, features):
        return super().forward({"numeric": features["numeric"].to(self.linear.weight.dtype)})


class LazyEncoder(Encoder):
    """A lazy first layer: its input width is found at the first forward."""

    def __init__(self, hidden_size: int = 8) -> None:
        super().__init__(hidden_size)
        self.linear = nn.LazyLinear(hidden_size)


class Logits(IndependentPolicy):
    """An IndependentPolicy whose ``_logits`` are ``head(states)`` reshaped by ``shape`` (a stranger's slip)."""

    def __init__(self, width: int = D, reshape=lambda x: x) -> None:
        super().__init__(8, D)
        self.head, self.reshape = nn.Linear(8, width), reshape

    def _logits(self, states, device_features):
        return self.reshape(self.head(states))


class Detached(MLPPolicy):
    """log_prob and entropy cut from the graph."""

    def sample(self, *args, **kwargs):
        out = super().sample(*args, **kwargs)
        return out._replace(log_prob=out.log_prob.detach(), entropy=out.entropy.detach())

    def evaluate(self, *args, **kwargs):
        return tuple(t.detach() for t in super().evaluate(*args, **kwargs))


class Probabilities(MLPPolicy):
    """Probabilities given as log-probabilities."""

    def sample(self, *args, **kwargs):
        out = super().sample(*args, **kwargs)
        return out._replace(log_prob=out.log_prob.exp())


def _policy(cls=MLPPolicy):
    torch.manual_seed(0)
    return cls(D, hidden_size=8, num_layers=1, state_size=8)


def _placer(encoder=None, policy=None) -> PolicyPlacer:
    return PolicyPlacer(GRAPH, CLUSTER, encoder or Encoder(), policy or _policy(), max_groups=6)


def _fit(trainer_cls, encoder=None, policy=None):
    placer = _placer(encoder, policy)
    return placer, trainer_cls(updates=1, samples_per_update=4, progress=False).fit(placer, _runtime(), GRAPH, CLUSTER)


def _runtime():
    from gplace.runtime import Simulator

    return Simulator()


# ---------------------------------------------------------------- 1: states width against the encoder's hidden_size
def test_states_narrower_than_the_encoders_hidden_size_are_refused_naming_it():
    with pytest.raises(ContractError, match=r"encoder NarrowEncoder must return \(G=\d+, S=8\) states \(S its "
                                            r"hidden_size\), got states of shape \(\d+, 4\)"):
        _placer(NarrowEncoder()).sample(2)
    with pytest.raises(AssertionError, match=r"NarrowEncoder must return \(G=\d+, S=8\) states \(S its hidden_size\)"):
        check_encoder(NarrowEncoder(), GRAPH)


def test_a_policy_without_state_size_still_gets_states_of_the_encoders_width():
    class NoStateSize(nn.Module):  # declares no state_size: the placer knows the width from the encoder alone
        def __init__(self):
            super().__init__()
            self.inner = _policy()

        capabilities = property(lambda self: self.inner.capabilities)

        def sample(self, *args, **kwargs):
            return self.inner.sample(*args, **kwargs)

    with pytest.raises(ContractError, match=r"encoder NarrowEncoder must return .*hidden_size"):
        _placer(NarrowEncoder(), NoStateSize()).sample(2)


# ---------------------------------------------------------------- 2: a lazy encoder
def test_a_fresh_lazy_encoder_trains_its_lazy_parameters():
    torch.manual_seed(0)
    encoder = LazyEncoder()
    first = {}

    def made(module, inputs, output) -> None:  # the weight as made at the first forward
        first.setdefault("weight", module.linear.weight.detach().clone())

    encoder.register_forward_hook(made)
    placer, result = _fit(ReinforceTrainer, encoder)
    assert result.best_placement is not None
    assert not isinstance(encoder.linear.weight, nn.parameter.UninitializedParameter)
    assert not torch.equal(first["weight"], encoder.linear.weight.detach())  # the optimiser stepped it


# ---------------------------------------------------------------- 3: log_prob without a gradient
@pytest.mark.parametrize(("trainer", "method"), [(ReinforceTrainer, "sample"), (PPOTrainer, "evaluate")])
def test_a_policy_whose_log_prob_carries_no_gradient_is_refused_before_backward(trainer, method):
    with pytest.raises(ContractError, match=rf"policy Detached's {method} must give log_prob carrying a gradient.*"
                                            rf"{trainer.__name__}"):
        _fit(trainer, policy=_policy(Detached))
    with torch.no_grad():  # evaluation without gradients is legitimate: not refused
        _placer(policy=_policy(Detached)).sample(2)


def test_multigraph_training_and_a_warm_starts_imitation_refuse_it_too():
    """Both ran their own backward on such a log_prob: torch's "element 0 of tensors does not require grad"."""
    from gplace.ir import Placement
    from gplace.training.multigraph import MultiGraphTrainer

    with pytest.raises(ContractError, match=r"policy Detached's sample must give log_prob carrying a gradient.*"
                                            r"MultiGraphTrainer"):
        MultiGraphTrainer(updates=1, samples_per_update=2).fit(Encoder(), _policy(Detached), [(GRAPH, CLUSTER)],
                                                               _runtime())
    with pytest.raises(ContractError, match=r"policy Detached's evaluate must give log_prob carrying a gradient.*"
                                            r"the warm start's imitation"):
        ReinforceTrainer(updates=1, samples_per_update=4, progress=False).fit(
            _placer(policy=_policy(Detached)), _runtime(), GRAPH, CLUSTER, warm_start=Placement.single(GRAPH, 0))


# ---------------------------------------------------------------- 4, 5: IndependentPolicy._logits of the wrong shape
@pytest.mark.parametrize(("width", "reshape", "got"), [
    (1, lambda x: x, r"\(\d+, 1\)"),  # broadcast into a uniform policy before
    (D, lambda x: x.mean(0), rf"\({D},\)"),  # broadcast: every group the same distribution
    (D + 1, lambda x: x, rf"\(\d+, {D + 1}\)"),  # a bare broadcasting error before
    (D, lambda x: x.T, rf"\({D}, \d+\)"),
])
def test_logits_not_g_by_d_are_refused_naming_the_policy(width, reshape, got):
    placer = _placer(policy=Logits(width, reshape))
    with pytest.raises(ContractError, match=rf"policy Logits's _logits must return \(G={placer.num_groups}, D={D}\) "
                                            rf"logits, one row per group, got shape {got}"):
        placer.sample(2)
    with pytest.raises(AssertionError, match=r"Logits's _logits must return"):
        check_policy(Logits(width, reshape), GRAPH, CLUSTER, Encoder())


# ---------------------------------------------------------------- 6: probabilities as log-probabilities
def test_probabilities_given_as_log_probabilities_are_refused():
    with pytest.raises(ContractError, match=r"policy Probabilities's sample must give log-probabilities \(<= 0\), "
                                            r"got log_prob up to"):
        _placer(policy=_policy(Probabilities)).sample(4)


# ---------------------------------------------------------------- 8: check_encoder's type and dtype
def test_check_encoder_says_numpy_states_are_not_a_tensor():
    with pytest.raises(AssertionError, match=r"encoder NumpyEncoder must return its states as a torch.Tensor, got a "
                                             r"numpy.ndarray"):
        check_encoder(NumpyEncoder(), GRAPH)


def test_check_encoder_refuses_states_the_placer_refuses_and_keeps_a_double_encoder():
    with pytest.raises(AssertionError, match=r"encoder DoubleEncoder must return states of dtype torch.float32 \(its "
                                             r"parameters'.*got torch.float64"):
        check_encoder(DoubleEncoder(), GRAPH)
    assert check_encoder(DoubleNetwork().double(), GRAPH).dtype == torch.float64  # a double pair is fine


# ---------------------------------------------------------------- 10: a class instead of an instance
def test_an_encoder_class_is_refused_asking_for_an_instance():
    with pytest.raises(TypeError, match=r"encoder must be an instance, got the class Encoder: call it"):
        PolicyPlacer(GRAPH, CLUSTER, Encoder, _policy(), max_groups=6)
