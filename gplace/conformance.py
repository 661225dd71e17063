"""Conformance checks for the contracts of :mod:`gplace.interfaces`: run them on your own encoder, policy, placer or
trainer, as :mod:`gplace.runtime.conformance` is run on runtimes::

    check_encoder(MyEncoder(), graph)
    check_policy(MyPolicy(num_devices=2), graph, cluster, encoder=LSTMEncoder())
    check_placer(MyPlacer(), graph, cluster)
    check_trainer(MyTrainer(), graph, cluster)

Each raises :class:`AssertionError` naming the rule that was broken (explicit raises: they work under
``python -O``), and returns what it computed for further checks.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from gplace.interfaces import Encoder, Placer, Policy, Trainer, capabilities_of, feature_sizes_of
from gplace.ir import Cluster, InvalidPlacementError, OpGraph, Placement
from gplace.search_result import TrainResult
from gplace.torch_modes import forked_rng, gradients_on

__all__ = ["check_encoder", "check_placer", "check_policy", "check_trainer"]


MAX_ENUMERATED = 4096
"""The most placements :func:`check_policy` scores to check that their probabilities sum to 1."""


def _require(condition: bool, rule: str) -> None:
    if not condition:
        raise AssertionError(rule)


def _require_instance(part: Any, what: str) -> None:
    """A class given where its instance belongs gets its own message (its methods and properties misled the
    checks that follow)."""
    _require(not isinstance(part, type), f"check_{what} takes a {what} object, got the class "
                                         f"{getattr(part, '__name__', part)!r}: construct one first")


def check_encoder(encoder: Any, graph: OpGraph, max_groups: int = 16) -> torch.Tensor:
    """Assert ``encoder`` is an :class:`~gplace.interfaces.Encoder`: declared feature widths, and one finite state
    per group as a torch tensor (``hidden_size`` wide where declared, in the dtype of its floating parameters, which a
    placer's policy shares, else the default dtype), the same for the same input, with a gradient path to its
    parameters (if it has any).

    Shapes: returns the (G, S) states.
    """
    _require_instance(encoder, "encoder")
    with _left_as_given(encoder), gradients_on():  # the gradient path checked whatever the caller's mode
        return _check_encoder(encoder, graph, max_groups)


@contextlib.contextmanager
def _left_as_given(*modules: Any) -> Iterator[None]:
    """Restore the train/eval flag of every submodule and the ``.grad`` of every parameter of the torch
    ``modules`` on the way out (a failed check included), so a checked module is left as the caller gave it."""
    parts = [m for m in modules if isinstance(m, torch.nn.Module)]
    training = {m: m.training for part in parts for m in part.modules()}
    grads = {p: None if p.grad is None else p.grad.detach().clone() for part in parts for p in part.parameters()}
    try:
        yield
    finally:
        for module, flag in training.items():
            module.training = flag
        for param, grad in grads.items():
            param.grad = grad


def _check_encoder(encoder: Any, graph: OpGraph, max_groups: int) -> torch.Tensor:
    """:func:`check_encoder`'s checks, with gradients on."""
    from gplace.features import featurize
    from gplace.grouping import group_ops
    from gplace.placer import declared_size, floating_dtype

    _require(isinstance(encoder, Encoder), f"{type(encoder).__name__} lacks num_type_buckets, max_neighbours or "
                                           "__call__ (gplace.interfaces.Encoder)")
    grouping = group_ops(graph, max_groups)
    features = featurize(graph, grouping, **feature_sizes_of(encoder)).to_tensors()
    dtype = floating_dtype(encoder)  # a placer's policy must share it; its features are in it, as a placer's are
    features = {k: v.to(dtype) if v.is_floating_point() else v for k, v in features.items()}
    states = encoder(features)
    name, g = type(encoder).__name__, grouping.num_groups
    _require(isinstance(states, torch.Tensor), f"encoder {name} must return its states as a torch.Tensor, got a "
             f"{type(states).__module__}.{type(states).__name__}")
    _require(states.ndim == 2 and states.shape[0] == g, f"encoder must return (G={g}, S) states, got {states.shape}")
    size = declared_size(encoder, "hidden_size")
    _require(size is None or states.shape[1] == size,
             f"encoder {name} must return (G={g}, S={size}) states (S its hidden_size), got {tuple(states.shape)}")
    _require(states.is_floating_point(), f"encoder states must be floats, got {states.dtype}")
    _require(states.dtype == dtype or torch.is_autocast_enabled(states.device.type),
             f"encoder {name} must return states of dtype {dtype} (its parameters', the default dtype for an encoder "
             f"without any; a placer's policy shares it), got {states.dtype}")
    _require(bool(torch.isfinite(states).all()), "encoder states must be finite")
    if isinstance(encoder, torch.nn.Module):
        encoder.eval()
        with torch.no_grad():
            _require(torch.equal(encoder(features), encoder(features)), "encoder must be deterministic in eval mode")
        encoder.train()
        params = [p for p in encoder.parameters() if p.requires_grad]
        if params:
            trained = encoder(features)
            _require(trained.requires_grad, "no gradient reaches the encoder's parameters (its states are detached)")
            trained.sum().backward()
            _require(any(p.grad is not None for p in params), "no gradient reaches the encoder's parameters")
    return states.detach()


def check_policy(policy: Any, graph: OpGraph, cluster: Cluster, encoder: Any, num_samples: int = 4,
                 max_groups: int = 16) -> Placement:
    """Assert ``policy`` is a :class:`~gplace.interfaces.Policy` inside a :class:`~gplace.placer.PolicyPlacer`:
    declared :class:`~gplace.interfaces.PolicyCapabilities`; sampled placements allowed, with finite log-probability
    and entropy carrying gradients; ``evaluate`` agreeing with ``sample``'s log-probability (its dtype too), with a
    gradient and a finite entropy >= 0; the probabilities of every allowed placement (of the graph cut into at most
    3 groups) summing to 1; the allowed-device mask kept; the greedy placement valid and, for a policy of independent
    choices (:class:`~gplace.policies.IndependentPolicy`), among the most likely (a sequential decoder's greedy path
    need not be the most likely sequence); a seeded sample repeatable.

    Returns:
        The greedy placement.
    """
    _require_instance(policy, "policy")
    _require(isinstance(policy, Policy), f"{type(policy).__name__} lacks capabilities, sample, greedy or evaluate "
                                         "(gplace.interfaces.Policy)")
    try:
        capabilities_of(policy)  # a PolicyCapabilities, or an error naming what is wrong with it
    except (TypeError, ValueError) as err:
        raise AssertionError(str(err)) from None
    with _left_as_given(policy, encoder), _broken_rules(), gradients_on():  # whatever the caller's mode
        return _check_policy(policy, graph, cluster, encoder, num_samples, max_groups)


@contextlib.contextmanager
def _broken_rules() -> Iterator[None]:
    """A :class:`~gplace.placer.ContractError` the placer raises first (a ``ContractTypeError`` included), as the
    ``AssertionError`` of the rule."""
    from gplace.placer import ContractError

    try:
        yield
    except ContractError as err:
        raise AssertionError(str(err)) from None


def _check_policy(policy: Any, graph: OpGraph, cluster: Cluster, encoder: Any, num_samples: int,
                  max_groups: int) -> Placement:
    """:func:`check_policy`'s checks of the policy at work in a placer."""
    from gplace.placer import PolicyPlacer

    pinned = _pinned_to_rarest_kind(graph, cluster)
    if pinned is not None:
        _check_keeps_the_mask(policy, pinned, cluster, encoder, num_samples, max_groups)
    _check_sums_to_one(policy, graph if pinned is None else pinned, cluster, encoder)
    placer = PolicyPlacer(graph, cluster, encoder, policy, max_groups=max_groups)
    out = placer.sample(num_samples, generator=torch.Generator().manual_seed(0))
    _require(out.devices.shape == (num_samples, graph.num_ops), f"sample must give ({num_samples}, N) devices")
    for row in out.devices:
        _require_valid(Placement.for_graph(graph, row), graph, cluster, "a sampled placement")
    _require(bool(torch.isfinite(out.log_prob).all() and (out.log_prob <= 1e-6).all()),
             "log_prob must be finite and <= 0")
    _require(bool(torch.isfinite(out.entropy).all() and (out.entropy >= -1e-6).all()),
             "entropy must be finite and >= 0")
    _require(tuple(out.log_prob.shape) == (num_samples,), f"sample must give ({num_samples},) log-probabilities, one "
             f"per placement, got {tuple(out.log_prob.shape)}")
    _require(tuple(out.entropy.shape) == (num_samples,), f"sample must give ({num_samples},) entropies")
    _require(out.log_prob.requires_grad, "log_prob must carry a gradient to the policy's parameters")
    _require(out.entropy.requires_grad, "entropy must carry a gradient to the policy's parameters (the entropy "
             "bonus trains nothing otherwise)")
    placer.zero_grad()
    (out.log_prob.sum() + out.entropy.sum()).backward()
    _require(all(bool(torch.isfinite(p.grad).all()) for p in placer.parameters() if p.grad is not None),
             "the gradients of log_prob and entropy must be finite (a masked -inf logit times 0 gives NaN)")
    again = placer.sample(num_samples, generator=torch.Generator().manual_seed(0))
    _require(np.array_equal(out.devices, again.devices), "sampling with the same seeded generator must repeat")
    log_prob, entropy = placer.evaluate(out.devices)
    _require(tuple(log_prob.shape) == (num_samples,), f"evaluate must give ({num_samples},) log-probabilities")
    _require(log_prob.dtype == out.log_prob.dtype, f"evaluate must give log_prob in sample's dtype "
             f"{out.log_prob.dtype}, got {log_prob.dtype}")
    _require(torch.allclose(log_prob, out.log_prob, atol=1e-4), "evaluate's log_prob must equal sample's")
    _require(tuple(entropy.shape) == (num_samples,), "evaluate must give (K,) entropies")
    _require(log_prob.requires_grad, "evaluate's log_prob must carry a gradient to the policy's parameters (PPO "
             "trains on it)")
    _require(bool(torch.isfinite(entropy).all() and (entropy >= -1e-6).all()),
             "evaluate's entropy must be finite and >= 0")
    greedy = placer.greedy()
    greedy.validate(graph, cluster)
    best, _ = placer.evaluate(greedy.devices[None])
    _require(bool(best[0] >= log_prob.max() - 1e-4) or not _independent(policy),
             "the greedy placement must be at least as likely as any sample")
    return greedy


def _pinned_to_rarest_kind(graph: OpGraph, cluster: Cluster) -> OpGraph | None:
    """``graph`` with its first op pinned to the rarest device kind of the cluster it can run on (a policy ignoring
    the allowed-device mask passed on a graph without pins); ``None`` where the cluster has one kind."""
    import dataclasses

    if len(set(cluster.kinds)) < 2:
        return None
    ops = graph.ops()
    kinds = sorted({cluster.kinds[d] for d in np.flatnonzero(graph.allowed_devices(cluster)[0])})
    rarest = min(kinds, key=list(cluster.kinds).count)
    ops[0] = dataclasses.replace(ops[0], pinned=rarest, colocation=None)
    return OpGraph.from_ops(ops, graph.edges(), name=graph.name)


def _check_keeps_the_mask(policy: Any, pinned: OpGraph, cluster: Cluster, encoder: Any, num_samples: int,
                          max_groups: int) -> None:
    """Samples and the greedy placement of the ``pinned`` graph keep the allowed-device mask."""
    from gplace.placer import PolicyPlacer

    placer = PolicyPlacer(pinned, cluster, encoder, policy, max_groups=max_groups)
    for row in placer.sample(num_samples, generator=torch.Generator().manual_seed(1)).devices:
        _require_valid(Placement.for_graph(pinned, row), pinned, cluster, "a sampled placement (the allowed-device "
                       "mask ignored?)")
    _require_valid(placer.greedy(), pinned, cluster, "the greedy placement (the allowed-device mask ignored?)")


def _check_sums_to_one(policy: Any, graph: OpGraph, cluster: Cluster, encoder: Any) -> None:
    """The probabilities ``evaluate`` gives every allowed placement of ``graph`` cut into at most 3 groups sum to 1
    (skipped past :data:`MAX_ENUMERATED` placements): a policy that normalises over all devices and masks after, or
    reports another distribution than it samples, biases every gradient of REINFORCE and PPO."""
    from gplace.placer import PolicyPlacer

    placer = PolicyPlacer(graph, cluster, encoder, policy, max_groups=3)
    choices = [np.flatnonzero(row) for row in placer.allowed.cpu().numpy()]  # (G,) allowed devices, feature order
    if math.prod(len(c) for c in choices) > MAX_ENUMERATED:
        return
    actions = torch.tensor(list(itertools.product(*choices)), dtype=torch.int64)
    with torch.no_grad():
        log_prob, _ = placer.evaluate(placer.op_devices(actions))
    total = float(torch.logsumexp(log_prob.double(), 0).exp())
    tolerance = 1e-3 if torch.finfo(log_prob.dtype).bits >= 32 else 3e-2
    _require(abs(total - 1.0) <= tolerance,
             f"the probabilities evaluate gives all {len(actions)} allowed placements of {placer.num_groups} groups "
             f"sum to {total:.4f}, not 1: log_prob must be of a distribution over the allowed devices only (a "
             "softmax over every device, masked after, gives less)")


def _check_fit_signature(trainer: Any) -> None:
    """``trainer.fit`` takes what :class:`~gplace.interfaces.Trainer` passes (a multi-graph trainer's does not)."""
    try:
        signature = inspect.signature(trainer.fit)
    except (TypeError, ValueError):  # a callable without a signature to read: fit itself will tell
        return
    try:
        signature.bind(None, None, None, None, run_dir=None, logger=None, warm_start=None)
    except TypeError as err:
        raise AssertionError(f"{type(trainer).__name__}.fit must take (placer, runtime, graph, cluster, *, run_dir, "
                             f"logger, warm_start), as gplace.interfaces.Trainer's: {err}") from None


def _require_valid(placement: Placement, graph: OpGraph, cluster: Cluster, what: str) -> None:
    try:
        placement.validate(graph, cluster)
    except InvalidPlacementError as err:
        raise AssertionError(f"{what} is invalid: {err}") from None


def _independent(policy: Any) -> bool:
    """Whether greedy decoding is the exact argmax (an independent policy); a sequential decoder's greedy path
    need not be the most likely sequence."""
    from gplace.policies import IndependentPolicy

    return isinstance(policy, IndependentPolicy)


def check_placer(placer: Placer, graph: OpGraph, cluster: Cluster) -> Placement:
    """Assert ``placer`` follows the :class:`~gplace.interfaces.Placer` contract: a valid placement of every op,
    honouring pins and colocation (:meth:`~gplace.ir.Placement.validate`), with a ``name``."""
    _require_instance(placer, "placer")
    _require(isinstance(getattr(placer, "name", None), str) and placer.name, "a placer has a non-empty name")
    try:  # Placer.place validates what _place returns
        placement = placer.place(graph, cluster)
    except InvalidPlacementError as err:
        raise AssertionError(f"placer {placer.name!r} returned an invalid placement: {err}") from None
    _require(isinstance(placement, Placement), f"place must return a Placement, got {type(placement).__name__}")
    _require(placement.devices.shape == (graph.num_ops,), "place must give one device per op")
    try:
        placement.validate(graph, cluster)
    except InvalidPlacementError as err:
        raise AssertionError(f"placer {placer.name!r} returned an invalid placement: {err}") from None
    return placement


def check_trainer(trainer: Trainer, graph: OpGraph, cluster: Cluster, encoder: Any = None, policy: Any = None,
                  run_dir: Any = None) -> TrainResult:
    """Assert ``trainer`` is a :class:`~gplace.interfaces.Trainer`: ``fit`` on the simulator returns a result whose
    best placement is valid and measured at its reported step time, never slower than the warm start (every op on
    the fastest device, pins kept; none where that fails, out of memory) nor than any sample it reports; ``fit``
    takes the arguments the interface passes.

    Use a small budget (few updates) for ``trainer``. Returns the result of ``fit``.
    """
    from gplace.baselines import SingleDevice
    from gplace.encoders import LSTMEncoder
    from gplace.placer import PolicyPlacer
    from gplace.policies import MLPPolicy
    from gplace.runtime import Simulator

    _require_instance(trainer, "trainer")
    _require(isinstance(trainer, Trainer), f"{type(trainer).__name__} lacks fit (gplace.interfaces.Trainer)")
    _check_fit_signature(trainer)
    with forked_rng(0):  # default networks drawn from a seed of their own: the caller's generator is left alone
        encoder = LSTMEncoder(hidden_size=32) if encoder is None else encoder
        policy = MLPPolicy(cluster.num_devices, hidden_size=32, state_size=32) if policy is None else policy
    placer = PolicyPlacer(graph, cluster, encoder, policy, max_groups=16)
    runtime = Simulator()
    start = SingleDevice().place(graph, cluster)
    start_time = runtime.measure(graph, cluster, start).step_time
    if not math.isfinite(start_time):  # no device holds the graph: no warm start to keep
        start = None
    result = trainer.fit(placer, runtime, graph, cluster, run_dir=run_dir, warm_start=start)
    name = type(trainer).__name__
    _require(all(hasattr(result, a) for a in ("best_placement", "best_step_time", "sample_step_times")),
             f"{name}.fit must return a TrainResult, got {type(result).__name__}")
    _require(isinstance(result.best_placement, Placement), f"{name}'s best_placement must be a Placement, got a "
             f"{type(result.best_placement).__name__}")
    try:
        result.best_placement.validate(graph, cluster)
    except InvalidPlacementError as err:
        raise AssertionError(f"{name} returned an invalid placement: {err}") from None
    samples = np.asarray(result.sample_step_times, dtype=np.float64)
    fastest = float(np.nanmin(samples)) if samples.size else math.inf  # a result of no samples (the warm start)
    _require(not result.best_step_time > fastest + 1e-12,
             f"{name}'s result ({result.best_step_time} s) is slower than a placement it measured "
             f"({fastest} s): a trainer returns the best placement measured")
    measured = runtime.measure(graph, cluster, result.best_placement).step_time
    _require(abs(measured - result.best_step_time) <= 1e-9 * max(1.0, measured),
             f"best_step_time {result.best_step_time} is not the best placement's step time {measured}")
    _require(result.best_step_time <= start_time + 1e-12, "the result is slower than the warm start")
    return result
