"""K partial list schedules advanced group by group, with the features a placement-aware policy scores devices by.

A :class:`ScheduleRollout` holds, for K placements decoded at once, when each placed group finishes and where,
and when each device is free, how much memory and work it holds; :meth:`ScheduleRollout.features` describes
every device as a candidate for the next group, :meth:`ScheduleRollout.place` commits the chosen devices. Both
are compiled (numba): one call per group, in place of some sixty small tensor operations.

Feature columns, per (placement, device), for group ``g`` (all from :class:`ScheduleContext`'s HEFT model):

0. ``log1p(gap)``: the finish time on the device minus the earliest over allowed devices, over the group's
   duration (at least 1e-3 of the makespan so far);
1. ``log1p`` of that gap over the makespan so far;
2. ``log`` of the duration over the fastest allowed device's;
3. the fraction of the group's input bytes already on the device;
4. ``log1p`` of the wait for inputs after the device is free, over the duration;
5. the device's busy time (when it is next free) over the makespan so far (at most 2);
6. the device's memory use after placing the group, over its capacity (at most 2);
7. 1 if the group does not fit there while it fits on some allowed device.

With stage features (``stage=True``):

8. the device's compute placed so far plus the group's, over the largest such sum over allowed devices;
9. ``log1p`` of the transfer time of the group's input bytes made on other devices (the cut it adds, at the
   mean link speed into the device) over the duration;
10. ``log1p`` of the stage prior's gap: how far the device's load would pass its fair share
    (:attr:`ScheduleContext.fair_share`) plus that transfer time plus how much longer the group runs there than
    on the fastest allowed device, over the duration. Decoding in stage order (``stage_prior=True``), a group
    without inputs is charged the transfer time of its output bytes times the share of its
    :attr:`~ScheduleContext.source_peers`' bytes made elsewhere (0 without peers), and the gap adds
    :data:`STAGE_SWITCH` on every device but the previous group's (ties keep stages contiguous) and ``revisit``
    on every such device that already has work.

Every quantity is a ratio of times, bytes or memory, so the features do not change when all times scale.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from gplace.policies.schedule_context import ScheduleContext
from gplace.runtime.jit import cached_njit

__all__ = ["DYNAMIC_FEATURES", "STAGE_FEATURES", "STAGE_GAP", "STAGE_SWITCH", "ScheduleRollout"]

DYNAMIC_FEATURES = 8
"""Width of the per-(group, device) schedule features without stage features (columns 0-7)."""

STAGE_FEATURES = 3
"""Extra per-(group, device) columns with stage features (columns 8-10)."""

STAGE_GAP = DYNAMIC_FEATURES + 2
"""Column of the stage prior's gap (column 10)."""

STAGE_SWITCH = 0.1
"""What the stage prior charges a change of device, in units of the group's duration: a tie-break that keeps
stages contiguous (1, 0.3 and 0 measured no better: the notes of benchmarks/PIPELINE.md)."""

_GAP_CLIP = 1e6


class ScheduleRollout:
    """K partial schedules of one :class:`ScheduleContext`, advanced one group at a time.

    Args:
        schedule: the groups' costs and edges.
        num_samples: K, the placements decoded at once.
        stage: also compute the stage features (columns 8-10).
        stage_prior: decode in :attr:`ScheduleContext.stage_order` with the stage prior's charges (source
            groups by their peers, a change of device, ``revisit``); needs ``stage``.
        revisit: with ``stage_prior``, the charge for going back to a device that already has work.

    Shapes:
        :attr:`features` (K, G, D, F) float32 (F = 8, or 11 with ``stage``), filled as groups are decoded;
        :attr:`devices` (K, G) int64; both by feature position.
    """

    def __init__(self, schedule: ScheduleContext, num_samples: int, *, stage: bool = False,
                 stage_prior: bool = False, revisit: float = 0.0) -> None:
        if stage_prior and not stage:
            raise ValueError("stage_prior needs stage=True (its gap is a stage feature)")
        k, g, d = num_samples, schedule.num_groups, schedule.num_devices
        self.order = (schedule.stage_order if stage_prior else schedule.order).tolist()
        self.features = np.zeros((k, g, d, DYNAMIC_FEATURES + (STAGE_FEATURES if stage else 0)), np.float32)
        self.devices = np.zeros((k, g), np.int64)
        self._finish = np.zeros((k, g))
        self._span = np.zeros(k)  # the makespan so far: the latest finish of a placed group
        self._free_at, self._used, self._load = np.zeros((k, d)), np.zeros((k, d)), np.zeros((k, d))
        self._end = np.zeros((k, d))
        self._previous = np.full(k, -1, np.int64)
        self._stage, self._stage_prior = stage, stage_prior
        self._switch = float(np.float32(STAGE_SWITCH))  # the charges are added as float32 constants
        self._revisit = float(np.float32(revisit))
        self._context = _arrays(schedule)

    def features_of(self, g: int, allowed: np.ndarray) -> torch.Tensor:
        """Compute group ``g``'s features given the groups placed so far (``allowed``: (D,) bool, the devices it
        may use). Shapes: returns (K, D, F) float32, a view of :attr:`features`."""
        _features(g, allowed, *self._context, self._finish, self.devices, self._span, self._free_at, self._used,
                  self._load, self._previous, self._stage, self._stage_prior, self._switch, self._revisit,
                  self.features, self._end)
        return torch.from_numpy(self.features[:, g])

    def place(self, g: int, chosen: np.ndarray) -> None:
        """Put group ``g`` on ``chosen`` (K,) devices, after :meth:`features_of` ``(g, ...)``."""
        _place(g, np.asarray(chosen, np.int64), self._context[0], self._context[1], self._end, self._finish,
               self.devices, self._span, self._free_at, self._used, self._load, self._previous)


def _arrays(s: ScheduleContext) -> tuple:
    """The context as the kernels' arguments (float64 and int64 numpy views)."""
    d = s.num_devices
    start, stop, peers, peer_bytes = s.source_peers
    mean_inv_bw = s.inv_bandwidth.sum(0) / max(d - 1, 1)  # (D,) into each device, as torch sums it
    return (s.durations.numpy(), s.memory.numpy(), s.capacity.numpy(), s.pred_ptr.numpy(), s.pred_src.numpy(),
            s.pred_bytes.numpy(), s.latency.numpy(), s.inv_bandwidth.numpy(), mean_inv_bw.numpy(),
            float(s.fair_share), s.out_bytes.numpy(), start.numpy(), stop.numpy(), peers.numpy(),
            peer_bytes.to(torch.float64).numpy())


@cached_njit()
def _clip(x, lo, hi):
    """``x`` within ``[lo, hi]``; NaN stays NaN (as ``torch.clamp``)."""
    if x != x:
        return x
    return min(max(x, lo), hi)


@cached_njit()
def _features(g, allowed, durations, memory, capacity, pred_ptr, pred_src, pred_bytes, latency, inv_bw,
              mean_inv_bw, fair_share, out_bytes, peer_start, peer_stop, peers, peer_bytes, finish, on, span, free_at,
              used, load, previous, stage, stage_prior, switch, revisit, out, end):
    """Write group ``g``'s features into ``out[:, g]`` and its finish time on each device into ``end`` (K, D)."""
    k_count, d_count = free_at.shape
    dur = durations[g]
    fastest, least, any_allowed = math.inf, math.inf, False
    for d in range(d_count):
        if allowed[d]:
            any_allowed = True
            least = min(least, dur[d])
            if dur[d] > 0:
                fastest = min(fastest, dur[d])
    if fastest == math.inf:
        fastest = 0.0
    a, b = pred_ptr[g], pred_ptr[g + 1]
    in_bytes = 0.0
    for e in range(a, b):
        in_bytes += pred_bytes[e]
    total = max(in_bytes, 1.0)
    pa, pb = peer_start[g], peer_stop[g]
    peer_total = 0.0
    for p in range(pa, pb):
        peer_total += peer_bytes[p]
    peer_total = max(peer_total, 1.0)
    ready, local = np.zeros(d_count), np.zeros(d_count)
    for k in range(k_count):
        # when the inputs are on each device, and the share of their bytes made there
        for d in range(d_count):
            ready[d], local[d] = 0.0, 0.0
        if b > a:
            for d in range(d_count):
                ready[d] = -math.inf
            for e in range(a, b):
                s, nbytes = pred_src[e], pred_bytes[e]
                m = on[k, s]
                for d in range(d_count):
                    arrive = finish[k, s] + (0.0 if m == d else latency[m, d] + nbytes * inv_bw[m, d])
                    ready[d] = max(ready[d], arrive)
                local[m] += nbytes
            for d in range(d_count):
                local[d] = local[d] / total
        earliest = math.inf
        for d in range(d_count):
            end[k, d] = max(free_at[k, d], ready[d]) + dur[d]
            if allowed[d]:
                earliest = min(earliest, end[k, d])
        makespan = max(max(span[k], earliest), 1e-30)
        scale = max(fastest, 1e-3 * makespan)
        fits_somewhere = False
        for d in range(d_count):
            if allowed[d] and (used[k, d] + memory[g]) / capacity[d] <= 1.0:
                fits_somewhere = True
        top = 0.0
        for d in range(d_count):
            if allowed[d]:
                top = max(top, load[k, d] + dur[d])
        top = max(top, 1e-30)
        for d in range(d_count):
            start = max(free_at[k, d], ready[d])
            fill = (used[k, d] + memory[g]) / capacity[d]
            x = out[k, g, d]
            x[0] = math.log1p(_clip((end[k, d] - earliest) / scale, 0.0, _GAP_CLIP))
            x[1] = math.log1p(_clip((end[k, d] - earliest) / makespan, 0.0, math.inf))
            x[2] = math.log(_clip((dur[d] + 1e-30) / (fastest + 1e-30), 1e-6, 1e6))
            x[3] = local[d]
            x[4] = math.log1p(_clip((start - free_at[k, d]) / scale, 0.0, _GAP_CLIP))
            x[5] = _clip(free_at[k, d] / makespan, 0.0, 2.0)
            x[6] = _clip(fill, 0.0, 2.0)
            x[7] = 1.0 if (not fill <= 1.0 and fits_somewhere) else 0.0
            if not stage:
                continue
            after = load[k, d] + dur[d]
            if b == a and stage_prior:  # a source: its outputs leave unless it joins its consumer's other inputs
                share = 1.0
                if pb > pa:
                    share = 0.0
                    for p in range(pa, pb):
                        if on[k, peers[p]] == d:
                            share += peer_bytes[p]
                    share = share / peer_total
                cut = (1.0 - share) * out_bytes[g] * mean_inv_bw[d]
            else:
                cut = (1.0 - local[d]) * in_bytes * mean_inv_bw[d]
            overload = max(after - fair_share, 0.0)
            slower = dur[d] - least if any_allowed else 0.0
            gap = (overload + cut + slower) / scale
            if stage_prior and previous[k] != d:
                gap = gap + switch + (revisit if load[k, d] > 0 else 0.0)
            x[8] = _clip(after / top, 0.0, 1.0)
            x[9] = math.log1p(_clip(cut / scale, 0.0, _GAP_CLIP))
            x[10] = math.log1p(_clip(gap, 0.0, _GAP_CLIP))


@cached_njit()
def _place(g, chosen, durations, memory, end, finish, on, span, free_at, used, load, previous):
    """Commit group ``g`` to ``chosen[k]`` in each schedule ``k``."""
    for k in range(chosen.shape[0]):
        d = chosen[k]
        t = end[k, d]
        finish[k, g], on[k, g], free_at[k, d] = t, d, t
        span[k] = max(span[k], t)
        used[k, d] += memory[g]
        load[k, d] += durations[g, d]
        previous[k] = d
