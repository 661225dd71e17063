"""Every built-in encoder, policy, placer and trainer passes the conformance checks of gplace.conformance."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from small_networks import ENCODERS, POLICIES
from torch import nn

from gplace.baselines import HEFT, METF, METIS, MSCT, MTopo, RandomPlacer, RoundRobin, SingleDevice
from gplace.conformance import check_encoder, check_placer, check_policy, check_trainer
from gplace.encoders import LSTMEncoder
from gplace.interfaces import Placer, PolicyCapabilities, capabilities_of
from gplace.policies import MLPPolicy
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import PPOTrainer, ReinforceTrainer

GRAPH, CLUSTER = random_dag(24, seed=3), cpu_gpu_cluster(num_gpus=2)


@pytest.mark.parametrize("name", ENCODERS)
def test_encoders_conform(name):
    assert check_encoder(ENCODERS[name](), GRAPH).shape[1] == 32


@pytest.mark.parametrize("name", POLICIES)
def test_policies_conform(name):
    torch.manual_seed(0)
    check_policy(POLICIES[name](), GRAPH, CLUSTER, encoder=LSTMEncoder(hidden_size=32))


@pytest.mark.parametrize("placer", [SingleDevice(1), RoundRobin(), RandomPlacer(seed=0), HEFT(), MTopo(), METF(),
                                    MSCT(), METIS()], ids=lambda p: p.name)
def test_placers_conform(placer):
    check_placer(placer, GRAPH, CLUSTER)


@pytest.mark.parametrize("trainer", [ReinforceTrainer(updates=3, samples_per_update=4),
                                     PPOTrainer(updates=2, samples_per_update=4)], ids=["reinforce", "ppo"])
def test_trainers_conform(trainer, tmp_path):
    torch.manual_seed(5)
    state = torch.get_rng_state()
    check_trainer(trainer, GRAPH, CLUSTER, run_dir=tmp_path)
    assert torch.equal(torch.get_rng_state(), state)  # its default networks drew from the caller's generator


def test_a_broken_placer_is_named():
    class Overlapping(Placer):
        name = "broken"

        def _place(self, graph, cluster):
            return [0] * (graph.num_ops - 1)

    with pytest.raises(Exception, match="length|ops"):
        check_placer(Overlapping(), GRAPH, CLUSTER)


def test_a_policy_that_lies_about_its_log_prob_fails():
    class Lying(MLPPolicy):
        def evaluate(self, states, allowed, devices, **inputs):
            log_prob, entropy = super().evaluate(states, allowed, devices, **inputs)
            return log_prob - 1.0, entropy

    with pytest.raises(AssertionError, match="evaluate"):
        check_policy(Lying(3, hidden_size=32, state_size=32), GRAPH, CLUSTER, encoder=LSTMEncoder(hidden_size=32))


def test_a_policy_written_before_the_protocol_still_places_with_a_future_warning():
    class Legacy(nn.Module):
        num_devices = 3

        def __init__(self):
            super().__init__()
            self.inner = MLPPolicy(3, hidden_size=32, state_size=32)

        def sample(self, *args, **kwargs):
            return self.inner.sample(*args, **kwargs)

        def greedy(self, *args, **kwargs):
            return self.inner.greedy(*args, **kwargs)

        def evaluate(self, *args, **kwargs):
            return self.inner.evaluate(*args, **kwargs)

    with pytest.warns(FutureWarning, match="capabilities") as caught:
        assert capabilities_of(Legacy()) == PolicyCapabilities(num_devices=3)
    assert caught[0].filename == __file__  # shown by default, at the user's line (not gplace's)


def test_a_legacy_encoder_warning_names_the_users_line():
    """A part written before the protocol is deprecated with a FutureWarning (shown by default, unlike a
    DeprecationWarning from a library's code) at the line of the user's code that led gplace to it."""
    from gplace.encoders import GNNEncoder
    from gplace.placer import PolicyPlacer
    from gplace.testing import cpu_gpu_cluster, random_dag

    class LegacyEncoder(GNNEncoder):
        def __getattribute__(self, name):
            if name == "max_neighbours":
                raise AttributeError(name)
            return super().__getattribute__(name)

    encoder = LegacyEncoder()
    with pytest.warns(FutureWarning, match="LegacyEncoder lacks max_neighbours") as caught:
        PolicyPlacer(random_dag(6, seed=0), cpu_gpu_cluster(1), encoder, MLPPolicy(2, state_size=encoder.hidden_size))
    assert caught[0].filename == __file__


def test_a_warning_from_a_sibling_package_named_like_gplace_names_its_line():
    """Frames of a sibling package such as ``gplace_contrib`` (its path begins with gplace's folder) were skipped
    as gplace's own, so its warning named its caller's line. Its file is only named: a real one would have to be
    written beside gplace's folder."""
    import gplace.interfaces as interfaces

    class Legacy:
        num_devices = 3

    def check() -> PolicyCapabilities:
        return capabilities_of(Legacy())

    contrib = str(Path(interfaces.__file__).parent.with_name("gplace_contrib") / "__init__.py")
    check.__code__ = check.__code__.replace(co_filename=contrib)  # as if gplace_contrib/__init__.py defined it
    with pytest.warns(FutureWarning, match="Legacy declares no `capabilities`") as caught:
        check()
    assert caught[0].filename == contrib


def test_capabilities_are_validated():
    with pytest.raises(ValueError, match="merge_consumers"):
        PolicyCapabilities(merge_consumers="sometimes")
    with pytest.raises(ValueError, match="num_devices"):
        PolicyCapabilities(num_devices=0)


def test_a_runtime_whose_measure_many_reorders_or_drops_results_fails():
    """Both passed check_runtime, and a search through the first reported another placement's step time."""
    import numpy as np

    from gplace.ir import Placement
    from gplace.runtime import Simulator
    from gplace.runtime.conformance import check_runtime

    class Reversed(Simulator):
        def measure_many(self, graph, cluster, placements):
            return [self.measure(graph, cluster, p) for p in placements][::-1]

    class First(Simulator):
        def measure_many(self, graph, cluster, placements):
            return [self.measure(graph, cluster, placements[0])]

    ps = [Placement.single(GRAPH, 0), Placement.for_graph(GRAPH, np.arange(GRAPH.num_ops) % 2 + 1)]
    with pytest.raises(AssertionError, match="in the order of the placements"):
        check_runtime(Reversed(), GRAPH, CLUSTER, ps)
    with pytest.raises(AssertionError, match="one measurement per placement"):
        check_runtime(First(), GRAPH, CLUSTER, ps)


def test_a_trainer_returning_worse_than_it_measured_fails_and_pins_are_kept():
    import dataclasses

    import numpy as np

    from gplace.ir import OpGraph, Placement
    from gplace.training import TrainResult

    class KeepsWarmStart:
        def fit(self, placer, runtime, graph, cluster, *, run_dir=None, logger=None, warm_start=None):
            out = placer.sample(8)
            measured = runtime.measure_many(graph, cluster, [Placement.for_graph(graph, d) for d in out.devices])
            return TrainResult(warm_start, runtime.measure(graph, cluster, warm_start), 8, 0.0,
                               sample_step_times=np.array([m.step_time - 1.0 for m in measured]))

    with pytest.raises(AssertionError, match="slower than a placement it measured"):
        check_trainer(KeepsWarmStart(), GRAPH, CLUSTER)
    ops = GRAPH.ops()
    ops[0] = dataclasses.replace(ops[0], pinned="gpu")
    pinned = OpGraph.from_ops(ops, GRAPH.edges(), name="pinned")
    check_trainer(ReinforceTrainer(updates=1, samples_per_update=4), pinned, CLUSTER)  # the warm start broke the pin


def test_policies_and_encoders_that_break_their_shapes_are_named():
    """Float devices were truncated; devices (G, K) an IndexError deep inside; a detached encoder a torch error."""
    from gplace.placer import PolicyPlacer
    from gplace.policies import PolicyOutput

    class FloatDevices(MLPPolicy):
        def sample(self, *args, **kwargs):
            out = super().sample(*args, **kwargs)
            return PolicyOutput(out.devices + 0.9, out.log_prob, out.entropy)

    class Transposed(MLPPolicy):
        def sample(self, *args, **kwargs):
            out = super().sample(*args, **kwargs)
            return PolicyOutput(out.devices.T, out.log_prob, out.entropy)

    for policy in (FloatDevices(3, hidden_size=32, state_size=32), Transposed(3, hidden_size=32, state_size=32)):
        placer = PolicyPlacer(GRAPH, CLUSTER, LSTMEncoder(hidden_size=32), policy, max_groups=16)
        with pytest.raises(ValueError, match=f"policy {type(policy).__name__} must give \\(K, G=\\d+\\) integer"):
            placer.sample(3)

    class Detached(LSTMEncoder):
        def forward(self, features):
            return super().forward(features).detach()

    with pytest.raises(AssertionError, match="its states are detached"):
        check_encoder(Detached(hidden_size=32), GRAPH)


def test_a_placer_returning_fractions_is_named():
    class Fractions(Placer):
        name = "fractions"

        def _place(self, graph, cluster):
            import numpy as np

            return np.linspace(0, 1.99, graph.num_ops)

    with pytest.raises(TypeError, match="Fractions._place must return integer device indices, got dtype float64"):
        Fractions().place(GRAPH, CLUSTER)


def test_a_policy_with_a_detached_entropy_or_per_group_log_probabilities_is_named():
    """Both passed check_policy: the entropy bonus then trained nothing, and (K, G) log-probabilities failed later
    with "Boolean value of Tensor with more than one value is ambiguous"."""
    from gplace.policies import PolicyOutput

    class DetachedEntropy(MLPPolicy):
        def sample(self, *args, **kwargs):
            out = super().sample(*args, **kwargs)
            return PolicyOutput(out.devices, out.log_prob, out.entropy.detach())

    class PerGroup(MLPPolicy):
        def sample(self, *args, **kwargs):
            out = super().sample(*args, **kwargs)
            return PolicyOutput(out.devices, out.log_prob[:, None].expand(-1, 5), out.entropy)

    for policy, message in ((DetachedEntropy(3, hidden_size=32, state_size=32), "entropy must carry a gradient"),
                            (PerGroup(3, hidden_size=32, state_size=32), r"sample must give \(4,\) log-probabilities")):
        with pytest.raises(AssertionError, match=message):
            check_policy(policy, GRAPH, CLUSTER, LSTMEncoder(hidden_size=32))


def test_an_encoder_that_is_no_module_places():
    """The Encoder protocol needs no inheritance, yet PolicyPlacer asked it for parameters() (AttributeError)."""

    class Plain:
        order_sensitive = True

        def __init__(self) -> None:
            self.inner = LSTMEncoder(hidden_size=32)

        def __call__(self, features):
            return self.inner(features)

    check_policy(MLPPolicy(3, hidden_size=32, state_size=32), GRAPH, CLUSTER, Plain())


def test_a_configurable_with_keyword_arguments_rebuilds_from_its_config():
    """**kwargs were recorded under a key 'kwargs', so a policy file of such a module saved and failed to load."""
    from gplace.encoders import GNNEncoder

    class Wider(GNNEncoder):
        def __init__(self, extra: float = 0.0, **kwargs) -> None:
            super().__init__(**kwargs)
            self.extra = extra

    made = Wider(extra=1.0, conv="sage", hidden_size=16)
    assert made.config()["kwargs"] == {**made.config()["kwargs"], "extra": 1.0, "conv": "sage", "hidden_size": 16}
    assert "kwargs" not in made.config()["kwargs"]
    again = Wider(**made.config()["kwargs"])
    assert again.config() == made.config()


def test_a_policy_that_ignores_the_allowed_devices_is_named_on_a_graph_without_pins():
    """check_policy found it only where the caller's graph had pins (and then raised InvalidPlacementError)."""

    class IgnoresMask(MLPPolicy):
        def sample(self, states, allowed, num_samples, generator=None, **inputs):
            return super().sample(states, torch.ones_like(allowed), num_samples, generator=generator, **inputs)

    assert not any(GRAPH.pinned)
    with pytest.raises(AssertionError, match=r"the allowed-device mask ignored\?"):
        check_policy(IgnoresMask(3, hidden_size=32, state_size=32), GRAPH, CLUSTER, LSTMEncoder(hidden_size=32))


def test_a_trainer_returning_its_measured_warm_start_with_no_samples_conforms():
    """A result of no samples (the warm start, measured) is a valid TrainResult: the check crashed building its
    message (np.nanmin of an empty array). Found by a probe of type-checked host code."""
    from gplace.training import TrainResult

    class KeepsWarmStart:
        def fit(self, placer, runtime, graph, cluster, *, run_dir=None, logger=None, warm_start=None):
            return TrainResult(warm_start, runtime.measure(graph, cluster, warm_start), 0, 0.0)

    assert check_trainer(KeepsWarmStart(), GRAPH, CLUSTER).samples == 0


def test_a_policy_scoring_as_a_list_gives_the_placer_a_tuple():
    """PolicyPlacer.evaluate is annotated tuple[Tensor, Tensor]; a policy returning a list passed it on as a list."""
    from gplace.placer import PolicyPlacer

    class Listing(MLPPolicy):
        def evaluate(self, states, allowed, devices, **inputs):
            return list(super().evaluate(states, allowed, devices, **inputs))

    placer = PolicyPlacer(GRAPH, CLUSTER, LSTMEncoder(hidden_size=32), Listing(3, hidden_size=32, state_size=32))
    out = placer.evaluate(placer.sample(2).devices)
    assert type(out) is tuple and len(out) == 2
