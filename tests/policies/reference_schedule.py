"""The list-scheduling policy's schedule features as they were first written, in torch, one op per column: the
reference :class:`gplace.policies.schedule_rollout.ScheduleRollout` (compiled) is checked against."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from gplace.policies.schedule_context import ScheduleContext
from gplace.policies.schedule_rollout import DYNAMIC_FEATURES, STAGE_FEATURES, STAGE_SWITCH

_GAP_CLIP = 1e6


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
    start, stop, peers, nbytes = schedule.source_peers
    a, b = int(start[g]), int(stop[g])
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
