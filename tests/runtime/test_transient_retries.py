"""A transient failure (the measuring machinery's, not the placement's) is measured once more."""

from __future__ import annotations

from collections import Counter

import gplace
from gplace.ir import Placement
from gplace.runtime import Measurement, Simulator
from gplace.runtime.base import measure_each
from gplace.testing import diamond, uniform_cluster


class _FirstTryFails(Simulator):
    """Each placement's first measurement is a transient failure (a pool's timeout), later ones measure."""

    id = "first-try-fails-v1"

    def __init__(self, always: bool = False) -> None:
        super().__init__()
        self.tries: Counter = Counter()
        self.always = always

    def _measure(self, graph, cluster, placement):
        key = tuple(placement.devices.tolist())
        self.tries[key] += 1
        if self.always or self.tries[key] == 1:
            return Measurement.failure(self.id, "timed out: no result after 1 s in a worker", transient=True)
        return super()._measure(graph, cluster, placement)


class _BatchFirstTryFails(_FirstTryFails):
    """Measures a batch at once (as a pool does), so :meth:`Runtime.measure` is not on the way."""

    id = "batch-first-try-fails-v1"

    def measure_many(self, graph, cluster, placements):
        return [self._measure(graph, cluster, p) for p in placements]


def test_measure_tries_a_transient_failure_once_more_and_no_more() -> None:
    g, c = diamond(), uniform_cluster(2)
    runtime = _FirstTryFails()
    assert runtime.measure(g, c, Placement.single(g, 0)).ok and sum(runtime.tries.values()) == 2
    stuck = _FirstTryFails(always=True)
    failed = stuck.measure(g, c, Placement.single(g, 0))
    assert failed.transient and not failed.ok and sum(stuck.tries.values()) == 2


def test_measure_each_measures_a_batchs_transient_failures_once_more() -> None:
    """A search's rollout: each transient failure was charged a failed placement's penalty."""
    g, c = diamond(), uniform_cluster(2)
    placements = [Placement.for_graph(g, d) for d in ([0, 0, 0, 0], [0, 1, 1, 0], [1, 0, 1, 1])]
    for runtime in (_FirstTryFails(), _BatchFirstTryFails()):
        measured = measure_each(runtime, g, c, placements)
        assert all(m.ok for m in measured), type(runtime).__name__
        assert list(runtime.tries.values()) == [2, 2, 2]
        assert [m.step_time for m in measured] == [Simulator().measure(g, c, p).step_time for p in placements]


def test_one_transient_failure_does_not_make_a_baseline_infeasible() -> None:
    """place(method='heft') measured HEFT's placement once and raised PlacementInfeasibleError on a pool's timeout."""
    g, c = diamond(), uniform_cluster(2)
    report = gplace.place(g, c, method="heft", runtime=_FirstTryFails())
    assert report.measurement.ok


class _Locked(_FirstTryFails):
    """A measure_many of one's own over the default one (a lock, a log line)."""

    id = "locked-v1"

    def measure_many(self, graph, cluster, placements):
        return super().measure_many(graph, cluster, placements)


def test_wrapped_and_layered_runtimes_still_try_twice_in_all():
    """A wrapper measuring through its inner runtime retried at both layers: 4 tries of a placement that always
    failed transiently (4 timeouts of a hung one)."""
    from gplace.runtime import CachedRuntime

    g, c = diamond(), uniform_cluster(2)
    p = Placement.single(g, 0)
    for make in (lambda r: CachedRuntime(r), lambda r: r):
        for measure in (lambda rt: rt.measure(g, c, p), lambda rt: measure_each(rt, g, c, [p])[0]):
            inner = _Locked(always=True)
            assert measure(make(inner)).transient
            assert sum(inner.tries.values()) == 2
