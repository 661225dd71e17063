"""A runtime's impossible step time (NaN, inf, negative, reported as a success) is a failure, never the best
placement or a reward; an update whose gradient is not finite leaves the weights as they were."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch

import gplace
from gplace.runtime import Simulator
from gplace.runtime.base import Measurement, Runtime, measure_each
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import PPOTrainer, ReinforceTrainer
from gplace.training._loop import optimizer_step


class _Broken(Runtime):
    """sim-v1, but a placement with more than 8 ops on the last GPU 'succeeds' in ``bad`` seconds."""

    id = "broken-v1"
    deterministic = True

    def __init__(self, bad: float) -> None:
        self.bad, self.sim = bad, Simulator()

    def _measure(self, graph, cluster, placement):
        if (placement.devices == cluster.num_devices - 1).sum() > 8:
            return Measurement(ok=True, step_time=self.bad, runtime=self.id)
        return self.sim.measure(graph, cluster, placement)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
@pytest.mark.parametrize("trainer", [ReinforceTrainer, PPOTrainer])
def test_an_impossible_step_time_is_a_failure_not_the_best(bad, trainer, tmp_path, caplog):
    """A NaN became the best (every later time compared False against it) and made every weight NaN; -1 s was
    reported as the best."""
    graph, cluster = random_dag(20), cpu_gpu_cluster(2)
    runtime = _Broken(bad)
    with caplog.at_level(logging.WARNING, logger="gplace.runtime.base"):
        report = gplace.place(graph, cluster, runtime=runtime, run_dir=tmp_path, seed=0,
                              trainer=trainer(updates=10, samples_per_update=8, progress=False))
    assert report.measurement.ok and report.measurement.step_time > 0
    assert report.measurement.step_time == Simulator().measure(graph, cluster, report.placement).step_time
    times = report.train.sample_step_times
    assert np.isinf(times[~np.isfinite(times)]).all()  # the broken ones count as failed (inf), none NaN
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    weights = [v for v in state["policy"].values() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    assert weights and all(torch.isfinite(w).all() for w in weights)


def test_measure_and_measure_each_turn_an_impossible_success_into_a_named_failure(caplog):
    graph, cluster = random_dag(20), cpu_gpu_cluster(2)
    on_gpu = gplace.Placement.single(graph, cluster.num_devices - 1)
    with caplog.at_level(logging.WARNING, logger="gplace.runtime.base"):
        direct = _Unwarned(math.nan).measure(graph, cluster, on_gpu)
        [batched] = measure_each(_Batched(), graph, cluster, [on_gpu])
    for m in (direct, batched):
        assert not m.ok and m.step_time == math.inf and "a step time is a finite number of seconds >= 0" in m.reason
    assert "unwarned-v1" in caplog.text and "batched-v1" in caplog.text


class _Unwarned(_Broken):
    """A runtime id no other test warned about (the warning is once per id and process)."""

    id = "unwarned-v1"


class _Batched(Runtime):
    """Its own ``measure_many`` (as a pool's), reporting a success in NaN seconds."""

    id = "batched-v1"

    def _measure(self, graph, cluster, placement):
        raise AssertionError("not called")

    def measure_many(self, graph, cluster, placements):
        return [Measurement(ok=True, step_time=math.nan, runtime=self.id) for _ in placements]


def test_a_step_with_a_non_finite_gradient_leaves_the_weights(caplog):
    layer = torch.nn.Linear(3, 2)
    before = [p.detach().clone() for p in layer.parameters()]
    optimizer = torch.optim.Adam(layer.parameters(), lr=0.1)
    (layer(torch.ones(1, 3)).sum() * math.nan).backward()
    with caplog.at_level(logging.WARNING, logger="gplace.training._loop"):
        norm = optimizer_step(optimizer, layer.parameters(), 1.0)
    assert math.isnan(float(norm)) and "this update is skipped" in caplog.text
    assert all(torch.equal(p, b) for p, b in zip(layer.parameters(), before, strict=True))
    layer(torch.ones(1, 3)).sum().backward()
    optimizer_step(optimizer, layer.parameters(), 1.0)
    assert not torch.equal(next(layer.parameters()), before[0])


def test_the_runtime_conformance_check_names_an_impossible_step_time():
    """``measure`` turns it into a failure, which the check accepted: a runtime in NaN seconds passed it."""
    from gplace.runtime.conformance import check_runtime

    graph, cluster = random_dag(20), cpu_gpu_cluster(2)
    with pytest.raises(AssertionError, match=r"broken-v1: runtime 'broken-v1' \(_Broken\) reported success with "
                                             r"step time nan"):
        check_runtime(_Broken(math.nan), graph, cluster, [gplace.Placement.single(graph, cluster.num_devices - 1)])


class _Reasonless(Runtime):
    """Every placement fails, with an empty reason."""

    id = "reasonless-v1"
    deterministic = True

    def _measure(self, graph, cluster, placement):
        return Measurement(ok=False, step_time=math.inf, runtime=self.id)


def test_a_failure_without_a_reason_is_named_and_still_fails_the_runtime_check(caplog):
    """gplace's errors quote a failure's reason: "HEFT's placement ... failed:  " and "the last failure: ; every
    single-device placement failed too (e.g. )" named nothing."""
    from gplace.runtime.conformance import check_runtime

    graph, cluster = random_dag(12), cpu_gpu_cluster(2)
    with caplog.at_level(logging.WARNING, logger="gplace"):
        m = _Reasonless().measure(graph, cluster, gplace.Placement.single(graph, 0))
    assert not m.ok and m.reason.startswith("runtime 'reasonless-v1' (_Reasonless) reported a failure without a reason")
    assert "without a reason" in caplog.text
    with pytest.raises(ValueError, match=r"failed: runtime 'reasonless-v1' \(_Reasonless\) reported a failure"):
        gplace.place(graph, cluster, method="heft", runtime=_Reasonless())
    with pytest.raises(AssertionError, match="reasonless-v1: runtime 'reasonless-v1' .* without a reason"):
        check_runtime(_Reasonless(), graph, cluster, [gplace.Placement.single(graph, 0)])
