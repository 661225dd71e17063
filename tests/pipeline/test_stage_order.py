"""stage_orders: each device's stage passes in pipe-v2's order at stage level; every order can run without
deadlock, respects the schedule's gates, and is torch's GPipe or 1F1B order when every device holds one stage."""

from __future__ import annotations

import random

import pytest

from gplace.pipeline.stage_order import StagePass, device_ranks, stage_orders


def _random_devices(rng: random.Random) -> list[int]:
    """A sequence of 1-8 stages on 1-4 devices, consecutive stages on different devices, numbered by first stage."""
    count = rng.randint(1, 4)
    raw = [rng.randrange(count)]
    for _ in range(rng.randint(0, 7)):
        raw.append(rng.choice([d for d in range(count) if d != raw[-1]] or [raw[-1]]))
    return device_ranks([d for k, d in enumerate(raw) if k == 0 or d != raw[k - 1]])


def _blocking_replay(orders: list[list[StagePass]], stages: int) -> list[tuple[int, StagePass]]:
    """Run the orders as a runtime would (each device its next pass once its inputs are done); the passes in
    the order they ran, or an AssertionError if every device waits (a deadlock)."""
    done: set[StagePass] = set()
    pos, ran = [0] * len(orders), []
    while any(p < len(o) for p, o in zip(pos, orders, strict=True)):
        progressed = False
        for r, order in enumerate(orders):
            if pos[r] < len(order):
                p = order[pos[r]]
                needs = [StagePass(p.stage - 1, p.microbatch, False)] if not p.backward and p.stage else []
                if p.backward:
                    needs.append(StagePass(p.stage, p.microbatch, False))
                    if p.stage < stages - 1:
                        needs.append(StagePass(p.stage + 1, p.microbatch, True))
                if all(q in done for q in needs):
                    done.add(p)
                    ran.append((r, p))
                    pos[r] += 1
                    progressed = True
        assert progressed, f"deadlock at {pos}"
    return ran


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_every_order_runs_each_pass_once_without_deadlock_and_within_the_gates(schedule) -> None:
    rng = random.Random(0)
    for _ in range(300):
        devices, m = _random_devices(rng), rng.randint(1, 6)
        orders = stage_orders(devices, m, schedule)
        count = max(devices) + 1
        assert list(orders) == list(range(count))  # devices in the order of their first stage
        for r, order in orders.items():
            mine = [k for k, d in enumerate(devices) if d == r]
            assert sorted((p.stage, p.microbatch, p.backward) for p in order) == sorted(
                (k, b, f) for k in mine for b in range(m) for f in (False, True))
            if schedule == "gpipe":  # every forward on the device before its first backward
                kinds = [p.backward for p in order]
                assert kinds == sorted(kinds), (devices, m, r)
            else:  # at most min(M, R - r) micro-batches in flight on device r
                in_flight, ended, most = set(), {}, 0
                for p in order:
                    in_flight.add(p.microbatch)
                    most = max(most, len(in_flight))
                    ended[p.microbatch] = ended.get(p.microbatch, 0) + 1
                    if ended[p.microbatch] == 2 * len(mine):
                        in_flight.discard(p.microbatch)
                assert most <= min(m, count - r), (devices, m, r)
        _blocking_replay(list(orders.values()), len(devices))


def test_one_stage_per_device_gives_gpipe_and_1f1b() -> None:
    """GPipe: all forwards, then all backwards, by micro-batch. 1F1B (torch's Schedule1F1B): device r runs
    min(M, S - r) forwards, then alternates one backward and one forward, then the remaining backwards."""
    stages, m = 4, 6
    for r, order in stage_orders(list(range(stages)), m, "gpipe").items():
        assert [str(p) for p in order] == [f"F{r},{b}" for b in range(m)] + [f"B{r},{b}" for b in range(m)]
    for r, order in stage_orders(list(range(stages)), m, "1f1b").items():
        warmup = min(m, stages - r)
        expected = [f"F{r},{b}" for b in range(warmup)]
        for b in range(m):
            expected.append(f"B{r},{b}")
            if warmup + b < m:
                expected.append(f"F{r},{warmup + b}")
        assert [str(p) for p in order] == expected


def test_devices_may_have_any_labels_and_come_in_the_order_of_their_first_stage() -> None:
    by_index = stage_orders([0, 1, 2, 1, 0], 4, "1f1b")
    by_name = stage_orders(["/GPU:3", "/GPU:0", "/GPU:1", "/GPU:0", "/GPU:3"], 4, "1f1b")
    assert list(by_name) == ["/GPU:3", "/GPU:0", "/GPU:1"]
    assert list(by_name.values()) == list(by_index.values())


@pytest.mark.parametrize(("devices", "microbatches", "schedule", "words"), [
    ([0, 0, 1], 2, "1f1b", "stages 0 and 1 are consecutive on device 0"),
    ([], 2, "1f1b", "empty"),
    ([0, 1], 0, "1f1b", "microbatches"),
    ([0, 1], 2.5, "1f1b", "microbatches"),
    ([0, 1], 2, "interleaved", "schedule"),
])
def test_bad_input_is_refused_naming_it(devices, microbatches, schedule, words) -> None:
    with pytest.raises(ValueError, match=words):
        stage_orders(devices, microbatches, schedule)
