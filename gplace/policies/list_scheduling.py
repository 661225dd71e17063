"""A placement-aware policy: places groups one at a time, seeing the partial schedule (a learned, stochastic HEFT).

Independent policies choose each group's device from its state alone, so spreading a graph over devices must be
written into per-group states, which does not transfer between graphs. This policy instead decodes the groups in
HEFT's rank order and, for each, describes every device by where the schedule so far leaves it: when the group
would start and finish there, how much of its input is already there, how full and how busy the device is
(:class:`~gplace.policies.schedule_context.ScheduleContext`). Those descriptions are relative (gaps over the
group's duration or over the makespan so far), so one policy serves graphs and clusters of any size and scale.

The logit of device d for group g is ``r(node(s_g) + device(f_d) + dynamic(x_gd)) - w * log1p(gap_gd)``,
where ``gap_gd`` is how much later than the earliest possible the group would finish on d, in units of its own
duration, ``w`` (:attr:`ListSchedulingPolicy.prior_weight`) is learned, and ``r`` is an MLP whose output is
bounded to ``(-b, b)`` (``b * tanh(. / b)``, ``b`` the ``residual_bound``), so training cannot make two devices of
equal finish time infinitely unequal: a trained policy keeps exploring near-ties, which fine-tuning needs. The
residual's last layer starts near zero, so an untrained policy is a soft earliest-finish-time list scheduler and
training learns where to depart from it. For the pipeline objective, ``prior="stage"`` replaces the gap by how far
the group would take the device past a fair share of the graph's work plus the transfer it cuts (and the time it
loses to a slower device), decoding depth-first, so an untrained policy samples balanced, mostly contiguous stages
that keep a branch together instead (see :mod:`gplace.policies.schedule_rollout`). A device without room
for the group (by the memory placed on it so far) loses ``MEMORY_PENALTY`` from its logit while any allowed device
has room.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from gplace.configurable import Configurable
from gplace.features import DEVICE_FEATURES
from gplace.interfaces import PolicyCapabilities
from gplace.ir.errors import check_finite, check_flags, check_sizes
from gplace.policies.base import (
    PolicyOutput,
    Tempered,
    check_devices,
    check_inputs,
    check_num_samples,
    gumbel_noise,
    temper,
)
from gplace.policies.device_aware import relative_device_features, two_layer_mlp
from gplace.policies.schedule_context import ScheduleContext
from gplace.policies.schedule_rollout import (
    DYNAMIC_FEATURES,
    STAGE_FEATURES,
    STAGE_GAP,
    ScheduleRollout,
)

PRIORS = ("eft", "stage")
"""The prior a :class:`ListSchedulingPolicy` starts from: earliest finish time (column 0) or balanced stages
(column 10, :data:`STAGE_GAP`, which needs ``stage_features``)."""

MEMORY_PENALTY = 20.0
"""Logit subtracted from a device without room for the group while another allowed device has room."""


class ListSchedulingPolicy(Tempered, Configurable, nn.Module):
    """Places groups in rank order, scoring devices by features of the partial schedule (see the module docstring).

    Args:
        hidden_size: width of the node, device and schedule embeddings (default: 128).
        state_size: size S of the encoder states (default: ``hidden_size``).
        device_feature_size: width F of the static device features (default: ``DEVICE_FEATURES``, 6).
        prior_weight: initial weight ``w`` of the prior, a finite number (default: 3.0).
        residual_bound: the learned residual lies in ``(-b, b)``, ``b`` finite and > 0; ``None`` leaves it unbounded
            (default: 4.0).
        num_devices: accepted so ``policy(num_devices=D)`` works, otherwise unused (default: ``None``).
        stage_features: also describe each device by what a pipeline stage needs, its load so far, the
            bytes the group would cut and what it adds past the device's fair share (``STAGE_FEATURES`` more
            columns; default: ``False``, the shipped pretrained policy's width).
        prior: ``"eft"``, the earliest-finish-time prior of the step-time objective, or ``"stage"``, a prior for
            the pipeline objective: ``-w * log1p((overload + cut + ...) / duration)``, where overload is how far
            the device's load would pass its fair share of the graph's work and cut the transfer time of the
            group's inputs made elsewhere (all terms: :mod:`gplace.policies.schedule_rollout`, column 10);
            untrained, the policy then samples balanced, mostly contiguous splits (needs ``stage_features``; default:
            ``"eft"``).
        revisit: with the stage prior, what going back to a device that already has work (other than the
            previous group's device) costs, in units of the group's duration, added to the prior's gap: larger
            values keep each device to one run of the decoding order (default: 0.0; see the notes of
            ``benchmarks/PIPELINE.md``: under 1F1B it helps some graphs and hurts others).

    Shapes:
        states (G, S) float, allowed (G, D) bool, device_features (D, F); devices (K, G) int64;
        log_prob and entropy (K,).
    """

    uses_device_features = True
    """The placer passes the cluster's ``device_features``."""
    uses_schedule = True
    """The placer passes a :class:`ScheduleContext` as ``schedule``."""
    merge_consumers = "if_needed"
    """The placer's default grouping merges an op into its only consumer only when the graph has more ops than
    ``max_groups``: on a small graph every op stays its own group, so no parallelism is hidden from the scheduler;
    on a large one, merging chains loses less of it than merging neighbours in topological order (measured on the
    default LSTM LM, the README's ``policy=list_scheduling`` example: 49.8 ms against 65.2 ms after training)."""

    capabilities = PolicyCapabilities(uses_device_features=True, uses_schedule=True, merge_consumers="if_needed")
    """Any cluster; reads device features and the partial schedule; merges chains only when needed."""

    def __init__(self, hidden_size: int = 128, *, state_size: int | None = None,
                 device_feature_size: int = DEVICE_FEATURES, prior_weight: float = 3.0,
                 residual_bound: float | None = 4.0, num_devices: int | None = None,
                 stage_features: bool = False, prior: str = "eft", revisit: float = 0.0) -> None:
        super().__init__()
        check_sizes("ListSchedulingPolicy", hidden_size=hidden_size, device_feature_size=device_feature_size,
                    **({} if state_size is None else {"state_size": state_size}))
        check_flags("ListSchedulingPolicy", stage_features=stage_features)
        check_finite("ListSchedulingPolicy", prior_weight=prior_weight, revisit=revisit,
                     **({} if residual_bound is None else {"residual_bound": residual_bound}))
        if prior not in PRIORS:
            raise ValueError(f"prior must be one of {PRIORS}, got {prior!r}")
        if prior == "stage" and not stage_features:
            raise ValueError("prior='stage' needs stage_features=True (its column is a stage feature)")
        if not 0.0 <= revisit < float("inf"):
            raise ValueError(f"revisit must be finite and >= 0, got {revisit!r}")
        if revisit and prior != "stage":
            raise ValueError(f"revisit={revisit!r} needs prior='stage' (it is a term of the stage prior)")
        self.stage_features, self.prior, self.revisit = stage_features, prior, float(revisit)
        self.state_size = hidden_size if state_size is None else state_size
        self.device_feature_size = device_feature_size
        self.node = two_layer_mlp(self.state_size, hidden_size)
        self.device = two_layer_mlp(2 * device_feature_size, hidden_size)
        self.dynamic = two_layer_mlp(DYNAMIC_FEATURES + (STAGE_FEATURES if stage_features else 0), hidden_size)
        self.residual = nn.Sequential(nn.ReLU(), nn.Linear(hidden_size, hidden_size), nn.ReLU(),
                                      nn.Linear(hidden_size, 1, bias=False))
        nn.init.normal_(self.residual[-1].weight, std=1e-3)
        self.prior_weight = nn.Parameter(torch.tensor(float(prior_weight)))
        if residual_bound is not None and not residual_bound > 0:
            raise ValueError(f"ListSchedulingPolicy: residual_bound must be > 0 or None, got {residual_bound}")
        self.residual_bound = residual_bound

    # ------------------------------------------------------------------ public entry points
    def sample(self, states: torch.Tensor, allowed: torch.Tensor, num_samples: int,
               generator: torch.Generator | None = None, *, device_features: torch.Tensor,
               schedule: ScheduleContext) -> PolicyOutput:
        """Sample ``num_samples`` placements, each decoded group by group.

        Shapes:
            states (G, S), allowed (G, D) bool, device_features (D, F); returns devices (K, G), log_prob (K,),
            entropy (K,).
        """
        check_num_samples(num_samples)

        def draw(logits: torch.Tensor, g: int) -> torch.Tensor:
            return (logits + gumbel_noise(logits.shape, logits, generator)).argmax(-1)

        return self._decode(states, allowed, device_features, schedule, num_samples, draw)

    def greedy(self, states: torch.Tensor, allowed: torch.Tensor, *, device_features: torch.Tensor,
               schedule: ScheduleContext) -> torch.Tensor:
        """The most likely device of each group, decoding greedily. Shapes: returns (G,) int64."""
        with torch.no_grad():
            out = self._decode(states, allowed, device_features, schedule, 1, lambda logits, g: logits.argmax(-1))
        return out.devices[0]

    def evaluate(self, states: torch.Tensor, allowed: torch.Tensor, devices: torch.Tensor, *,
                 device_features: torch.Tensor, schedule: ScheduleContext) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probability and entropy of given placements (decoded with those choices).

        Raises:
            ValueError: a placement has the wrong length, or uses a device out of range or not allowed.

        Shapes:
            devices (K, G) int; returns log_prob (K,), entropy (K,).
        """
        given = check_devices(devices, allowed).cpu()
        out = self._decode(states, allowed, device_features, schedule, given.shape[0], given=given)
        return out.log_prob, out.entropy

    # ------------------------------------------------------------------ decoding
    def _decode(self, states: torch.Tensor, allowed: torch.Tensor, device_features: torch.Tensor,
                schedule: ScheduleContext, k: int, choose: Callable[[torch.Tensor, int], torch.Tensor] | None = None,
                given: torch.Tensor | None = None) -> PolicyOutput:
        """Roll the schedule forward choosing with ``choose(logits (K, D), position) -> (K,)``, or taking the
        devices ``given`` (K, G) (then no logits are computed along the way), then score it."""
        self._check(states, allowed, device_features, schedule)
        base = self.node(states).unsqueeze(1) + self.device(relative_device_features(device_features.to(states.dtype)))
        if given is None:
            def pick(x: torch.Tensor, g: int) -> torch.Tensor:  # the schedule rolls on the CPU, the networks anywhere
                return choose(self._logits(base[g].detach(), x, allowed[g]).cpu(), g)
        else:
            def pick(x: torch.Tensor, g: int) -> torch.Tensor:
                return given[:, g]
        with torch.no_grad():
            devices, features = _rollout(schedule, allowed.cpu(), k, pick, stage=self.stage_features,
                                         stage_prior=self.prior == "stage", revisit=self.revisit)
        logits = self._logits(base, features.to(states.device, states.dtype), allowed)  # (K, G, D)
        log_p = torch.log_softmax(logits, -1)
        devices = devices.to(states.device)
        log_prob = log_p.gather(-1, devices.unsqueeze(-1)).squeeze(-1).sum(1)
        safe = log_p.masked_fill(~allowed, 0.0)
        entropy = -(safe.exp() * safe).sum((1, 2))
        return PolicyOutput(devices, log_prob, entropy)

    def _logits(self, base: torch.Tensor, features: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """Masked, tempered logits. Shapes: base (..., D, H), features (K, ..., D, DYNAMIC_FEATURES),
        allowed (..., D); returns (K, ..., D)."""
        features = features.to(base.device)
        learned = self.residual(base + self.dynamic(features.to(base.dtype))).squeeze(-1)
        if self.residual_bound is not None:
            learned = self.residual_bound * torch.tanh(learned / self.residual_bound)
        gap = features[..., STAGE_GAP if self.prior == "stage" else 0]
        prior = -self.prior_weight * gap - MEMORY_PENALTY * features[..., 7]
        return temper(learned + prior, allowed, self.temperature).masked_fill(~allowed, float("-inf"))

    def _check(self, states: torch.Tensor, allowed: torch.Tensor, device_features: torch.Tensor,
               schedule: ScheduleContext) -> None:
        if not isinstance(schedule, ScheduleContext):
            raise ValueError(f"{type(self).__name__} needs schedule= a ScheduleContext (PolicyPlacer passes it)")
        if device_features is None or device_features.ndim != 2 or device_features.shape[1] != self.device_feature_size:
            shape = None if device_features is None else tuple(device_features.shape)
            raise ValueError(f"device_features has shape {shape}, policy expects (D, {self.device_feature_size})")
        check_inputs(states, allowed, device_features.shape[0], self.state_size, self)
        if (schedule.num_groups, schedule.num_devices) != tuple(allowed.shape):
            raise ValueError(f"schedule describes {schedule.num_groups} groups on {schedule.num_devices} devices, "
                             f"allowed is {tuple(allowed.shape)}")


def _rollout(schedule: ScheduleContext, allowed: torch.Tensor, k: int,
             choose: Callable[[torch.Tensor, int], torch.Tensor], stage: bool = False, stage_prior: bool = False,
             revisit: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Place the groups in ``schedule.order`` (``schedule.stage_order`` with ``stage_prior``), K schedules at
    once; ``choose(features (K, D, F), g) -> (K,)``; the features and charges: :mod:`gplace.policies.schedule_rollout`.

    Shapes:
        allowed (G, D) bool; returns devices (K, G) int64 and features (K, G, D, F) float32.
    """
    rollout = ScheduleRollout(schedule, k, stage=stage, stage_prior=stage_prior, revisit=revisit)
    allowed = allowed.numpy()
    for g in rollout.order:
        rollout.place(g, choose(rollout.features_of(g, allowed[g]), g).to(torch.int64).numpy())
    return torch.from_numpy(rollout.devices), torch.from_numpy(rollout.features)
