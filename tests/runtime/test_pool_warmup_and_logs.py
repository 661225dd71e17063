"""A PoolRuntime does not time a worker's first-call set-up, and its workers' log records reach this process."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import gplace.runtime.parallel as parallel
from gplace.ir import Cluster, OpGraph, Placement
from gplace.runtime import Measurement, Simulator
from gplace.runtime.parallel import PoolRuntime
from gplace.testing import diamond, uniform_cluster

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")

_set_up = False
"""Whether this process's :class:`_SlowFirstCall` has set itself up."""


class _SlowFirstCall(Simulator):
    """Sets itself up on its first call in a process (2 s, as sim-v1 loads numba's kernels), then answers at once
    with the sum of the device ids as step time."""

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        global _set_up
        if not _set_up:
            time.sleep(2.0)
            _set_up = True
        return Measurement(ok=True, step_time=float(placement.devices.sum()), runtime=self.id)


class _HangsOnDevice0(Simulator):
    """Hangs (300 s) on a placement with every op on device 0 (the warm-up's); answers any other at once."""

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        if (placement.devices == 0).all():
            time.sleep(300)
        return Measurement(ok=True, step_time=float(placement.devices.sum()), runtime=self.id)


class _Unusable(Simulator):
    """Fails every measurement, logging a WARNING of its own, and then reports itself unusable."""

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        logging.getLogger("gplace.tests.unusable").warning("lost the device")
        return Measurement.failure(self.id, "sticky device error")

    def usable(self) -> bool:
        return False


class _Raises(Simulator):
    """Raises on every measurement."""

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        raise ValueError("kaboom")


def _placements(graph: OpGraph, count: int) -> list[Placement]:
    """Placements with the first op on device 1 (never the warm-up's all-on-device-0)."""
    rng = np.random.default_rng(0)
    return [Placement.for_graph(graph, np.r_[1, rng.integers(0, 2, graph.num_ops - 1)]) for _ in range(count)]


def test_a_runtimes_first_call_set_up_is_not_timed() -> None:
    """Each worker warms up on a graph untimed before its measurements: a set-up longer than the timeout no longer
    times out every placement (and every fresh worker's again)."""
    g, c = diamond(), uniform_cluster(2)
    placements = _placements(g, 4)
    with PoolRuntime(_SlowFirstCall(), workers=2, timeout=1.0) as pool:
        ms = pool.measure_many(g, c, placements)
    assert [(m.ok, m.reason) for m in ms] == [(True, "")] * 4
    assert [m.step_time for m in ms] == [float(p.devices.sum()) for p in placements]


def test_a_hung_warm_up_replaces_the_workers_and_measures_without_one(monkeypatch, caplog) -> None:
    """The warm-up is bounded too: workers still warming up ``WARM_UP`` seconds past the timeout are replaced, and
    the graph is then measured without a warm-up (not after the 300 s hang: the bound is loose for slow machines)."""
    monkeypatch.setattr(parallel, "WARM_UP", 1.0)
    g, c = diamond(), uniform_cluster(2)
    start = time.monotonic()
    with caplog.at_level(logging.WARNING), PoolRuntime(_HangsOnDevice0(), workers=2, timeout=1.0) as pool:
        ms = pool.measure_many(g, c, _placements(g, 3))
    assert [(m.ok, m.reason) for m in ms] == [(True, "")] * 3
    assert "took over 2 s to read a graph and warm up on it; replacing them" in caplog.text
    assert time.monotonic() - start < 120


class _PoisonedOnDevice0(Simulator):
    """A placement with every op on device 0 (the warm-up's) leaves the runtime unusable for good, as a sticky CUDA
    error would; any other measures at once."""

    dead = False

    def usable(self) -> bool:
        return not self.dead

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        if not placement.devices.any():
            self.dead = True
            return Measurement.failure(self.id, "illegal address (sticky)")
        return Measurement(ok=True, step_time=float(placement.devices.sum()), runtime=self.id)


def test_a_warm_up_that_breaks_the_runtime_does_not_fail_every_placement(caplog) -> None:
    """A warm-up leaving the runtime unusable retired each worker, which then died on its first real placement, and
    every fresh pool warmed up the same way: all placements failed ("worker process died"). The worker now exits on
    its warm-up and the pool measures that graph without one."""
    g, c = diamond(), uniform_cluster(2)
    placements = [Placement.for_graph(g, np.array(d)) for d in ([1, 1, 1, 1], [1, 0, 1, 1], [0, 1, 1, 0])]
    with caplog.at_level(logging.WARNING), PoolRuntime(_PoisonedOnDevice0(), workers=2, timeout=30) as pool:
        ms = pool.measure_many(g, c, placements)
    assert [(m.ok, m.reason) for m in ms] == [(True, "")] * 3
    assert "measuring that graph without a warm-up" in caplog.text


def test_a_workers_warning_reaches_this_processs_loggers(caplog) -> None:
    """Records logged in a worker are handled here, by the logger of their name: the runtime's own WARNING and the
    worker's 'exits: its runtime became unusable' (sent before it exits)."""
    g, c = diamond(), uniform_cluster(2)
    with caplog.at_level(logging.WARNING), PoolRuntime(_Unusable(), workers=1) as pool:
        ms = pool.measure_many(g, c, _placements(g, 2))
    assert not any(m.ok for m in ms)
    names = {(r.name, r.levelno) for r in caplog.records}
    assert ("gplace.tests.unusable", logging.WARNING) in names
    assert any(r.name == "gplace.runtime.parallel" and "its runtime became unusable" in r.getMessage()
               for r in caplog.records)


def test_a_workers_debug_traceback_is_sent_when_gplace_logs_debug(caplog) -> None:
    """With the gplace logger at DEBUG, a worker's DEBUG record of an exception arrives with its traceback."""
    g, c = diamond(), uniform_cluster(2)
    with caplog.at_level(logging.DEBUG, logger="gplace"), PoolRuntime(_Raises(), workers=1) as pool:
        [m] = pool.measure_many(g, c, _placements(g, 1))
    assert "kaboom" in m.reason
    [record] = [r for r in caplog.records if "measurement raised in worker" in r.getMessage()]
    assert record.name == "gplace.runtime.parallel" and record.levelno == logging.DEBUG
    assert "Traceback" in record.getMessage() and "ValueError: kaboom" in record.getMessage()


def test_a_pool_left_open_does_not_hang_its_process_at_exit(tmp_path) -> None:
    """A pool collected while the interpreter exits stops its log listener without starting a thread (stopping it
    with a sentinel started the queue's feeder thread, which never starts then: the process hung)."""
    script = tmp_path / "left_open.py"
    script.write_text(textwrap.dedent("""
        from gplace.ir import Placement
        from gplace.runtime import PoolRuntime, Simulator
        from gplace.testing import diamond, uniform_cluster

        if __name__ == "__main__":
            g = diamond()
            pool = PoolRuntime(Simulator(), workers=1)
            print("measured:", pool.measure(g, uniform_cluster(2), Placement.single(g, 1)).ok)
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "measured: True" in proc.stdout, proc.stderr
