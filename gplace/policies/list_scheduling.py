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
that keep a branch together instead (see :func:`schedule_features`). A device without room
for the group (by the memory placed on it so far) loses ``MEMORY_PENALTY`` from its logit while any allowed device
has room.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from gplace.configurable import Configurable
from gplace.features import DEVICE_FEATURES
from gplace.interfaces import PolicyCapabilities
from gplace.policies.base import PolicyOutput, check_devices, check_inputs
from gplace.policies.device_aware import relative_device_features, two_layer_mlp
from gplace.policies.schedule_context import ScheduleContext

DYNAMIC_FEATURES = 8
"""Width of the per-(group, device) schedule features (see :func:`schedule_features`)."""

STAGE_FEATURES = 3
"""Extra per-(group, device) columns with ``stage_features`` (see :func:`schedule_features`)."""

PRIORS = ("eft", "stage")
"""The prior a :class:`ListSchedulingPolicy` starts from: earliest finish time (column 0) or balanced stages
(column 10, :data:`STAGE_GAP`, which needs ``stage_features``)."""

STAGE_GAP = DYNAMIC_FEATURES + 2
"""Column of the stage prior's gap (overload past the fair share plus the cut; see :func:`schedule_features`)."""

STAGE_SWITCH = 0.1
"""What the stage prior charges a change of device, in units of the group's duration: a tie-break that keeps
stages contiguous (1, 0.3 and 0 measured no better: the notes of benchmarks/PIPELINE.md)."""

MEMORY_PENALTY = 20.0
"""Logit subtracted from a device without room for the group while another allowed device has room."""

_GAP_CLIP = 1e6


class ListSchedulingPolicy(Configurable, nn.Module):
    """Places groups in rank order, scoring devices by features of the partial schedule (see the module docstring).

    Args:
        hidden_size: width of the node, device and schedule embeddings (default: 128).
        state_size: size S of the encoder states (default: ``hidden_size``).
        device_feature_size: width F of the static device features (default: ``DEVICE_FEATURES``, 6).
        prior_weight: initial weight ``w`` of the prior (default: 3.0).
        residual_bound: the learned residual lies in ``(-b, b)``; ``None`` leaves it unbounded (default: 4.0).
        num_devices: accepted so ``policy(num_devices=D)`` works, otherwise unused (default: ``None``).
        stage_features: also describe each device by what a pipeline stage needs, its load so far, the
            bytes the group would cut and what it adds past the device's fair share (``STAGE_FEATURES`` more
            columns; default: ``False``, the shipped pretrained policy's width).
        prior: ``"eft"``, the earliest-finish-time prior of the step-time objective, or ``"stage"``, a prior for
            the pipeline objective: ``-w * log1p((overload + cut + ...) / duration)``, where overload is how far
            the device's load would pass its fair share of the graph's work and cut the transfer time of the
            group's inputs made elsewhere (all terms: :func:`schedule_features`, column 10); untrained, the
            policy then samples balanced, mostly contiguous splits (needs ``stage_features``; default:
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
    default LSTM LM: 47.6 ms against 64.3 ms after training)."""

    capabilities = PolicyCapabilities(uses_device_features=True, uses_schedule=True, merge_consumers="if_needed")
    """Any cluster; reads device features and the partial schedule; merges chains only when needed."""

    def __init__(self, hidden_size: int = 128, *, state_size: int | None = None,
                 device_feature_size: int = DEVICE_FEATURES, prior_weight: float = 3.0,
                 residual_bound: float | None = 4.0, num_devices: int | None = None,
                 stage_features: bool = False, prior: str = "eft", revisit: float = 0.0) -> None:
        super().__init__()
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
            raise ValueError(f"residual_bound must be > 0 or None, got {residual_bound}")
        self.residual_bound = residual_bound
        self.temperature = 1.0
        """Logits are divided by this before the softmax (default: 1.0)."""

    # ------------------------------------------------------------------ public entry points
    def sample(self, states: torch.Tensor, allowed: torch.Tensor, num_samples: int,
               generator: torch.Generator | None = None, *, device_features: torch.Tensor,
               schedule: ScheduleContext) -> PolicyOutput:
        """Sample ``num_samples`` placements, each decoded group by group.

        Shapes:
            states (G, S), allowed (G, D) bool, device_features (D, F); returns devices (K, G), log_prob (K,),
            entropy (K,).
        """
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")

        def draw(logits: torch.Tensor, g: int) -> torch.Tensor:
            u = torch.rand(logits.shape, generator=generator, dtype=logits.dtype).clamp_min(1e-20)
            return (logits - torch.log(-torch.log(u))).argmax(-1)

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
        out = self._decode(states, allowed, device_features, schedule, given.shape[0], lambda logits, g: given[:, g])
        return out.log_prob, out.entropy

    # ------------------------------------------------------------------ decoding
    def _decode(self, states: torch.Tensor, allowed: torch.Tensor, device_features: torch.Tensor,
                schedule: ScheduleContext, k: int, choose: Callable[[torch.Tensor, int], torch.Tensor]
                ) -> PolicyOutput:
        """Roll the schedule forward choosing with ``choose(logits (K, D), position) -> (K,)``, then score it."""
        self._check(states, allowed, device_features, schedule)
        base = self.node(states).unsqueeze(1) + self.device(relative_device_features(device_features.to(states.dtype)))
        with torch.no_grad():
            devices, features = _rollout(schedule, allowed.cpu(), k, lambda x, g: choose(
                self._logits(base[g].detach().cpu(), x, allowed[g].cpu()), g), stage=self.stage_features,
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
        learned = self.residual(base + self.dynamic(features.to(base.dtype))).squeeze(-1)
        if self.residual_bound is not None:
            learned = self.residual_bound * torch.tanh(learned / self.residual_bound)
        gap = features[..., STAGE_GAP if self.prior == "stage" else 0]
        prior = -self.prior_weight * gap - MEMORY_PENALTY * features[..., 7]
        return ((learned + prior) / self.temperature).masked_fill(~allowed, float("-inf"))

    def _check(self, states: torch.Tensor, allowed: torch.Tensor, device_features: torch.Tensor,
               schedule: ScheduleContext) -> None:
        if not isinstance(schedule, ScheduleContext):
            raise ValueError(f"{type(self).__name__} needs schedule= a ScheduleContext (PolicyPlacer passes it)")
        if device_features is None or device_features.ndim != 2 or device_features.shape[1] != self.device_feature_size:
            shape = None if device_features is None else tuple(device_features.shape)
            raise ValueError(f"device_features has shape {shape}, policy expects (D, {self.device_feature_size})")
        check_inputs(states, allowed, device_features.shape[0], self.state_size)
        if (schedule.num_groups, schedule.num_devices) != tuple(allowed.shape):
            raise ValueError(f"schedule describes {schedule.num_groups} groups on {schedule.num_devices} devices, "
                             f"allowed is {tuple(allowed.shape)}")


def schedule_features(schedule: ScheduleContext, g: int, allowed: torch.Tensor, finish: torch.Tensor,
                      on: torch.Tensor, free_at: torch.Tensor, used: torch.Tensor, load: torch.Tensor | None = None,
                      previous: torch.Tensor | None = None, revisit: float = 0.0
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each device as seen by group position ``g`` given the partial schedules, and when ``g`` would finish there.

    Columns: 0 ``log1p(gap)``, gap the finish time on the device minus the earliest over devices, over the group's
    duration (at least 1e-3 of the makespan so far); 1 ``log1p`` of that gap over the makespan so far; 2 ``log`` of
    the duration over the fastest device's; 3 the fraction of the group's input bytes already on the device;
    4 ``log1p`` of the wait for inputs after the device is free, over the duration; 5 the device's busy time over
    the makespan so far; 6 the device's memory use after placing the group, over its capacity (at most 2);
    7 whether the group does not fit there while it fits on some allowed device. With ``load`` (stage features):
    8 the device's compute placed so far plus the group's, over the largest such sum over allowed devices; 9
    ``log1p`` of the transfer time of the group's input bytes made on other devices (the cut it adds, at
    the mean link speed into the device) over the duration; 10 ``log1p`` of how far the device's load would pass
    its fair share (the time T at which every device, given a share of the work in proportion to its speed, would
    finish: ``1 / T = sum_d 1 / W_d``, ``W_d`` all groups' durations on ``d``) plus that transfer time plus how
    much longer the group runs there than on the fastest allowed device, over the duration. Given ``previous``
    (K,), the device of the group placed before (-1 for none; the stage prior's decoding), a group without
    inputs is charged the transfer time of its output bytes times the share of its
    :attr:`~ScheduleContext.source_peers`' bytes made elsewhere (0 without peers), and column 10 adds
    :data:`STAGE_SWITCH` on every device but the previous one (ties keep stages contiguous) and ``revisit`` on
    every device but the previous one that already has work (load above zero).

    Shapes:
        allowed (D,) bool devices the group may use; finish (K, G) float64 finish times and on (K, G) int64
        devices of the placed groups; free_at, used and load (K, D) float64; returns features
        (K, D, DYNAMIC_FEATURES [+ STAGE_FEATURES]) float32 and finish times (K, D) float64.
    """
    dur = schedule.durations[g]
    ready, local = _inputs(schedule, g, finish, on)
    start = torch.maximum(free_at, ready)
    end = start + dur
    earliest = end.masked_fill(~allowed, math.inf).min(1, keepdim=True).values
    makespan = torch.maximum(finish.max(1, keepdim=True).values, earliest).clamp_min(1e-30)
    positive = dur[allowed & (dur > 0)]
    fastest = positive.min() if positive.numel() else dur.new_tensor(0.0)
    scale = torch.maximum(fastest.expand_as(earliest), 1e-3 * makespan)
    fill = (used + schedule.memory[g]) / schedule.capacity
    room = fill <= 1.0
    columns = [
        torch.log1p(((end - earliest) / scale).clamp(0, _GAP_CLIP)),
        torch.log1p(((end - earliest) / makespan).clamp_min(0)),
        torch.log(((dur + 1e-30) / (fastest + 1e-30)).clamp(1e-6, 1e6)).expand_as(end),
        local,
        torch.log1p(((start - free_at) / scale).clamp(0, _GAP_CLIP)),
        (free_at / makespan).clamp(0, 2),
        fill.clamp(0, 2),
        (~room & (room & allowed).any(1, keepdim=True)).to(end.dtype),
    ]
    if load is not None:
        columns += _stage_columns(schedule, g, allowed, load, dur, local, scale, on, previous, revisit)
    return torch.stack(columns, -1).float(), end


def _stage_columns(schedule: ScheduleContext, g: int, allowed: torch.Tensor, load: torch.Tensor, dur: torch.Tensor,
                   local: torch.Tensor, scale: torch.Tensor, on: torch.Tensor, previous: torch.Tensor | None,
                   revisit: float = 0.0) -> list[torch.Tensor]:
    """Columns 8 to 10 of :func:`schedule_features`. Shapes: load and local (K, D), dur (D,), scale (K, 1), on
    (K, G), previous (K,) or ``None``."""
    after = load + dur
    top = after.masked_fill(~allowed, 0.0).max(1, keepdim=True).values.clamp_min(1e-30)
    a, b = int(schedule.pred_ptr[g]), int(schedule.pred_ptr[g + 1])
    in_bytes = schedule.pred_bytes[a:b].sum()
    d = schedule.num_devices
    mean_inv_bw = schedule.inv_bandwidth.sum(0) / max(d - 1, 1)  # (D,) into each device
    cut = (1.0 - local) * in_bytes * mean_inv_bw
    if a == b and previous is not None:  # no inputs: its outputs leave unless it joins its consumer's other inputs
        cut = (1.0 - _peer_share(schedule, g, on)) * schedule.out_bytes[g] * mean_inv_bw
    overload = (after - schedule.fair_share).clamp_min(0)
    slower = dur - dur[allowed].min() if allowed.any() else torch.zeros_like(dur)
    gap = (overload + cut + slower) / scale
    if previous is not None:
        switch = previous.unsqueeze(1) != torch.arange(d)
        gap = gap + STAGE_SWITCH * switch + revisit * (switch & (load > 0))
    return [(after / top).clamp(0, 1), torch.log1p((cut / scale).clamp(0, _GAP_CLIP)),
            torch.log1p(gap.clamp(0, _GAP_CLIP))]


def _peer_share(schedule: ScheduleContext, g: int, on: torch.Tensor) -> torch.Tensor:
    """The fraction of source ``g``'s peers' bytes (:attr:`ScheduleContext.source_peers`) on each device, 1 where it
    has none (it may go anywhere). Shapes: on (K, G); returns (K, D) float64."""
    offsets, peers, nbytes = schedule.source_peers
    a, b = int(offsets[g]), int(offsets[g + 1])
    if a == b:
        return torch.ones(on.shape[0], schedule.num_devices, dtype=torch.float64)
    same = on[:, peers[a:b]].unsqueeze(-1) == torch.arange(schedule.num_devices)  # (K, P, D)
    return (same * nbytes[a:b, None]).sum(1) / nbytes[a:b].sum().clamp_min(1.0)


def _inputs(schedule: ScheduleContext, g: int, finish: torch.Tensor, on: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """When group ``g``'s inputs are all on each device, and the fraction of their bytes made there.

    Shapes: finish and on (K, G); returns two (K, D) float64.
    """
    k, d = finish.shape[0], schedule.num_devices
    a, b = int(schedule.pred_ptr[g]), int(schedule.pred_ptr[g + 1])
    if a == b:
        return finish.new_zeros(k, d), finish.new_zeros(k, d)
    src, nbytes = schedule.pred_src[a:b], schedule.pred_bytes[a:b]
    made_on = on[:, src]  # (K, P)
    same = made_on.unsqueeze(-1) == torch.arange(d)  # (K, P, D)
    transfer = schedule.latency[made_on] + nbytes[:, None] * schedule.inv_bandwidth[made_on]
    arrive = finish[:, src].unsqueeze(-1) + transfer.masked_fill(same, 0.0)
    local = (same * nbytes[:, None]).sum(1) / nbytes.sum().clamp_min(1.0)
    return arrive.max(1).values, local


def _rollout(schedule: ScheduleContext, allowed: torch.Tensor, k: int,
             choose: Callable[[torch.Tensor, int], torch.Tensor], stage: bool = False, stage_prior: bool = False,
             revisit: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Place the groups in ``schedule.order``, K schedules at once; ``choose(features (K, D, F), g) -> (K,)``;
    ``stage`` adds the stage features; ``stage_prior`` decodes in ``schedule.stage_order`` instead, charges each
    group without inputs by where its first consumer's other inputs are, a change of device ``STAGE_SWITCH``
    durations and a return to a device that already has work ``revisit`` more.

    Shapes:
        allowed (G, D) bool; returns devices (K, G) int64 and features (K, G, D, DYNAMIC_FEATURES) float32.
    """
    g_count, d = allowed.shape
    finish = torch.zeros(k, g_count, dtype=torch.float64)
    on = torch.zeros(k, g_count, dtype=torch.int64)
    free_at = torch.zeros(k, d, dtype=torch.float64)
    used = torch.zeros(k, d, dtype=torch.float64)
    load = torch.zeros(k, d, dtype=torch.float64) if stage else None
    features = torch.zeros(k, g_count, d, DYNAMIC_FEATURES + (STAGE_FEATURES if stage else 0))
    rows, previous = torch.arange(k), torch.full((k,), -1) if stage_prior else None
    for g in (schedule.stage_order if stage_prior else schedule.order).tolist():
        x, end = schedule_features(schedule, g, allowed[g], finish, on, free_at, used, load, previous, revisit)
        features[:, g] = x
        chosen = choose(x, g).to(torch.int64)
        finish[:, g], on[:, g] = end[rows, chosen], chosen
        free_at[rows, chosen] = end[rows, chosen]
        used[rows, chosen] += schedule.memory[g]
        previous = chosen if stage_prior else None
        if load is not None:
            load[rows, chosen] += schedule.durations[g][chosen]
    return on, features
