"""torch-v1 makes each step's copies of the inputs it writes in place before the step's clock starts.

The clocks of ``torch_runtime`` and ``calibration`` are replaced by one that jumps an hour whenever a step copies
its written inputs (``Step.restore``): a step time of an hour or more means the copy was timed. No real time is
compared with a threshold.
"""

from __future__ import annotations

import time
import types

import pytest
import torch
from torch import nn

from gplace.importers.torch_export import from_torch
from gplace.ir import Cluster, Device, Placement
from gplace.runtime import calibration, torch_runtime, torch_step
from gplace.runtime.torch_runtime import TorchRuntime

HOUR = 3600.0
CPU_MAP = {"/CPU:0": "cpu", "/CPU:1": "cpu"}


class Cache(nn.Module):
    """Writes one slot of a buffer in place (a KV cache) and a counter (``add_``)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.register_buffer("cache", torch.zeros(4, 2, 8))
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = self.lin(x)
        self.cache[0].copy_(k)
        self.count.add_(1)
        return self.cache.sum(0) + self.count


@pytest.fixture
def jumpy_clock(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The runtime's and calibration's ``time.perf_counter`` jump an hour at each copy of a written input; the
    events (copies) are returned."""
    events: list[str] = []
    jumps = [0.0]
    clock = types.SimpleNamespace(perf_counter=lambda: time.perf_counter() + jumps[0])
    monkeypatch.setattr(torch_runtime, "time", clock)
    monkeypatch.setattr(calibration, "time", clock)
    restore = torch_step.Step.restore

    def timed_restore(self: torch_step.Step, name: str) -> None:
        events.append(name)
        jumps[0] += HOUR
        restore(self, name)

    monkeypatch.setattr(torch_step.Step, "restore", timed_restore)
    return events


def _setup() -> tuple:
    model, x = Cache(), torch.randn(2, 8)
    graph = from_torch(model, (x,))
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)
    return model, x, graph, cluster


def test_written_inputs_are_copied_before_the_step_clock(jumpy_clock):
    model, _, graph, cluster = _setup()
    runtime = TorchRuntime(steps=3, warmup=1, time_limit=None, device_map=CPU_MAP)
    m = runtime.measure(graph, cluster, Placement.single(graph, 0))
    assert m.ok, m.reason
    assert len(jumpy_clock) == 2 * 4  # cache and count, in each of the 4 steps
    assert m.step_time < HOUR  # an hour or more: the copies were inside the timed region
    assert model.cache.abs().sum() == 0 and model.count == 0  # the user's buffers were never written


def test_each_step_still_starts_from_the_same_values():
    """A run and consecutive steps from ``fresh_step`` give the same output: the counter is 1 in each."""
    model, x, graph, cluster = _setup()
    runtime = TorchRuntime(time_limit=None, device_map=CPU_MAP)
    placement = Placement.single(graph, 0)
    with torch.no_grad():
        want = model.lin(x) + 1
        plan = runtime.plan(graph, cluster, placement, None)
        outs = [torch_step.execute_step(plan, float("inf"), torch_step.fresh_step(plan))[0] for _ in range(3)]
    torch.testing.assert_close(runtime.run(graph, cluster, placement)[0], want)
    for out in outs:
        torch.testing.assert_close(out[0] if isinstance(out, list | tuple) else out, want)


def test_fresh_step_waits_for_its_copies(monkeypatch):
    """On a GPU the copies run asynchronously: ``fresh_step`` synchronises after making them, before it returns
    (the caller's clock starts after it). A CPU plan records the order only."""
    _, _, graph, cluster = _setup()
    plan = TorchRuntime(device_map=CPU_MAP).plan(graph, cluster, Placement.single(graph, 0), None)
    events: list[str] = []
    restore = torch_step.Step.restore
    monkeypatch.setattr(torch_step.Step, "restore", lambda self, name: events.append("copy") or restore(self, name))
    monkeypatch.setattr(torch_step, "synchronize", lambda p: events.append("sync"))
    torch_step.fresh_step(plan)
    assert events == ["copy", "copy", "sync"]


def test_calibration_times_no_copy(jumpy_clock):
    """Calibration's plain step (the anchor of its per-op overhead) and its per-op times exclude the copies."""
    _, _, graph, cluster = _setup()
    samples, plain = calibration._timed_steps(graph, cluster, 0, CPU_MAP, repeats=2, warmup=1)
    assert jumpy_clock  # the copies were made
    assert plain.max() < HOUR and samples.sum(axis=1).max() < HOUR
