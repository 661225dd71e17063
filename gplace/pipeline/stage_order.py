"""The order in which each device runs its stages' passes: a pipeline simulator's rules applied to whole stages.

A pipeline of ``S`` stages (runs of consecutive modules) with stage ``k`` on device ``stage_devices[k]`` runs,
for each micro-batch ``m``, a forward pass ``F(k, m)`` after ``F(k - 1, m)`` and a backward pass ``B(k, m)``
after ``F(k, m)`` and ``B(k + 1, m)``. A device may hold several stages (a non-contiguous placement), which
torch's single-stage schedules cannot run; :func:`stage_orders` gives each device a list of passes to run in
turn instead, found by running ``pipe-v2``'s compute rules (``pipe-v3``'s under ``gpipe``; see
:mod:`gplace.pipeline.simulator`) with every pass taking one time unit:

- devices are numbered by their first stage; device ``r`` of ``R`` admits ``L_r = min(M, R - r)`` micro-batches
  under ``1f1b`` and ``M`` under ``gpipe``;
- an idle device takes its ready pass of highest priority, unless a gate holds it (then it waits): under
  ``gpipe`` forward before backward, under ``1f1b`` backward before forward; then the lower micro-batch; then
  the pass that comes first in topological order (forward passes by stage, then backward passes from the last
  stage to the first);
- gates: under ``gpipe`` a backward pass waits until every forward pass on its device has ended; under ``1f1b``
  a forward pass of micro-batch ``m >= L_r`` waits until micro-batch ``m - L_r`` has ended all its passes there.

Every device's list is its share of one global order that respects the dependencies, so a runtime that sends
asynchronously and receives before each pass cannot deadlock running them.

A pass whose input comes from another device is ready here at the next time unit; in ``pipe-v3`` it arrives a
round after the device has picked, however fast the link. So on a non-contiguous placement a device's order can
differ from the one ``pipe-v3`` simulates for the same placement (``pipe-v2``'s differed in 270 of 720 small
cases checked, none of them contiguous); the lists are what ``torch-pipeline-v1`` runs. With one stage per device
these lists are torch's GPipe and 1F1B orders (at one time unit a pass, ``pipe-v2``'s backward-first rule and
torch's order agree), and so is ``pipe-v3``'s while the stages' passes take equal times; under ``1f1b`` with
unequal ones ``pipe-v3``'s can differ where a later pass is ready before the next (see
``gplace.pipeline.simulator``).

Example:
    >>> orders = stage_orders(["/GPU:1", "/GPU:0", "/GPU:1"], microbatches=2, schedule="1f1b")
    >>> {device: " ".join(map(str, passes)) for device, passes in orders.items()}
    {'/GPU:1': 'F0,0 F0,1 F2,0 B2,0 B0,0 F2,1 B2,1 B0,1', '/GPU:0': 'F1,0 B1,0 F1,1 B1,1'}
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from gplace.pipeline.simulator import SCHEDULES, check_microbatches

K = TypeVar("K", bound=Hashable)
"""A stage's device label."""

__all__ = ["StagePass", "device_ranks", "stage_orders"]


@dataclass(frozen=True)
class StagePass:
    """One stage's forward or backward pass of one micro-batch."""

    stage: int
    microbatch: int
    backward: bool

    def __str__(self) -> str:
        return f"{'B' if self.backward else 'F'}{self.stage},{self.microbatch}"


def stage_orders(stage_devices: Sequence[K], microbatches: int, schedule: str) -> dict[K, list[StagePass]]:
    """Each device's passes in the order it runs them (see the module docstring).

    Args:
        stage_devices: the device of each stage (any labels: indices, names such as ``"/GPU:1"``); consecutive
            stages are on different devices.
        microbatches: micro-batches ``M >= 1``.
        schedule: ``"gpipe"`` or ``"1f1b"``.

    Returns:
        Device -> the ``2 M`` passes of each of its stages, in order; devices in the order of their first stage.

    Raises:
        ValueError: two consecutive stages on one device (they are one stage), no stage, a bad ``schedule`` or
            ``microbatches``.
    """
    stage_devices = list(stage_devices)
    _check(stage_devices, schedule)
    microbatches = check_microbatches(microbatches)
    labels = list(dict.fromkeys(stage_devices))
    devices = device_ranks(stage_devices)
    stages, count = len(devices), len(labels)
    limit = [microbatches if schedule == "gpipe" else min(microbatches, count - r) for r in range(count)]
    left = [[2 * devices.count(r)] * microbatches for r in range(count)]  # passes of micro-batch m left on r
    forwards_left = [devices.count(r) * microbatches for r in range(count)]
    waiting = {StagePass(k, m, b): int(b) + int(k > 0 if not b else k < stages - 1)  # unmet inputs
               for k in range(stages) for m in range(microbatches) for b in (False, True)}
    ready: list[list[tuple[tuple[int, int, int], StagePass]]] = [[] for _ in range(count)]
    for p in (p for p, n in waiting.items() if n == 0):
        heapq.heappush(ready[devices[p.stage]], (_priority(p, stages, schedule), p))
    orders: list[list[StagePass]] = [[] for _ in range(count)]
    remaining = len(waiting)
    while remaining:
        ran = [_next_pass(ready[r], left[r], forwards_left[r], limit[r], schedule) for r in range(count)]
        if not any(ran):
            raise RuntimeError(f"stage order stalled with {remaining} passes left")  # cannot happen
        for r, p in enumerate(ran):
            if p is None:
                continue
            orders[r].append(p)
            remaining -= 1
            left[r][p.microbatch] -= 1
            forwards_left[r] -= not p.backward
            for q in _consumers(p, stages):
                waiting[q] -= 1
                if waiting[q] == 0:
                    heapq.heappush(ready[devices[q.stage]], (_priority(q, stages, schedule), q))
    return dict(zip(labels, orders, strict=True))


def device_ranks(stage_devices: Sequence[Hashable]) -> list[int]:
    """The rank of each stage's device, devices numbered by their first stage (``torch-pipeline-v1``'s processes).

    Example:
        >>> device_ranks(["/GPU:1", "/GPU:0", "/GPU:1"])
        [0, 1, 0]
    """
    first = list(dict.fromkeys(stage_devices))
    return [first.index(d) for d in stage_devices]


def _next_pass(ready: list, left: list[int], forwards_left: int, limit: int, schedule: str) -> StagePass | None:
    """The pass a device starts now: its ready pass of highest priority (popped from ``ready``), or ``None`` when
    it has none or a gate holds it (``left``: the device's passes left per micro-batch)."""
    if not ready:
        return None
    p = ready[0][1]
    if schedule == "gpipe":
        held = p.backward and forwards_left > 0
    else:
        held = not p.backward and p.microbatch >= limit and left[p.microbatch - limit] > 0
    return None if held else heapq.heappop(ready)[1]


def _consumers(p: StagePass, stages: int) -> list[StagePass]:
    """The passes that take ``p``'s output: the next stage's forward and this stage's backward, or the previous
    stage's backward."""
    if not p.backward:
        nxt = [StagePass(p.stage + 1, p.microbatch, False)] if p.stage < stages - 1 else []
        return [*nxt, StagePass(p.stage, p.microbatch, True)]
    return [StagePass(p.stage - 1, p.microbatch, True)] if p.stage > 0 else []


def _priority(p: StagePass, stages: int, schedule: str) -> tuple[int, int, int]:
    first = p.backward if schedule == "gpipe" else not p.backward
    topological = 2 * stages - 1 - p.stage if p.backward else p.stage
    return int(first), p.microbatch, topological


def _check(devices: list[Hashable], schedule: str) -> None:
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if not devices:
        raise ValueError("stage_devices is empty: a pipeline needs at least one stage")
    same = [k for k in range(1, len(devices)) if devices[k] == devices[k - 1]]
    if same:
        raise ValueError(f"stages {same[0] - 1} and {same[0]} are consecutive on device {devices[same[0]]}: "
                         "they are one stage")
