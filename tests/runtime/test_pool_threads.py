"""A PoolRuntime shared by threads: one pool, one limit of placements in flight, no thread failing another's."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

import gplace.runtime.parallel as parallel
from gplace.ir import Cluster, OpGraph, Placement
from gplace.runtime import Measurement, Simulator
from gplace.runtime.parallel import PoolRuntime
from gplace.testing import diamond, uniform_cluster

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")


class _Hangs(Simulator):
    """Hangs (30 s) on a placement with every op on device 1; takes 0.6 s on any other, whose step time is the sum
    of its device ids (no simulation: a fresh worker's first one compiles for about as long as the timeout)."""

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        time.sleep(30 if (placement.devices == 1).all() else 0.6)
        return Measurement(ok=True, step_time=float(placement.devices.sum()), runtime=self.id)


class _ReportsGpus(Simulator):
    """A failed measurement whose reason is the worker's pid and ``CUDA_VISIBLE_DEVICES`` (touches no GPU)."""

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        time.sleep(0.2)
        return Measurement.failure(self.id, f"{os.getpid()}|{os.environ.get('CUDA_VISIBLE_DEVICES')}")


def _mixed(graph: OpGraph, count: int) -> list[Placement]:
    rng = np.random.default_rng(0)
    return [Placement.for_graph(graph, np.r_[0, rng.integers(0, 2, graph.num_ops - 1)]) for _ in range(count)]


def test_a_hung_placement_in_one_thread_fails_no_placement_of_another() -> None:
    """Placements are timed from when one of the pool's ``workers`` slots takes them, not from submission behind
    another thread's hung call, and those the workers' replacement interrupted are measured again."""
    g, c = diamond(), uniform_cluster(2)
    good = _mixed(g, 4)
    with PoolRuntime(_Hangs(), workers=2, timeout=1.0) as pool, ThreadPoolExecutor(2) as threads:
        pool.measure(g, c, good[0])  # start the workers and read the graph before the clocks run

        def later() -> list[Measurement]:
            time.sleep(0.3)  # while the hung placement runs
            return pool.measure_many(g, c, good)

        hung = threads.submit(pool.measure_many, g, c, [Placement.single(g, 1)])
        others = threads.submit(later)
        assert [m.reason.split(":")[0] for m in hung.result()] == ["timed out"]
        assert [(m.ok, m.reason) for m in others.result()] == [(True, "")] * 4
        assert [m.step_time for m in others.result()] == [p.devices.sum() for p in good]


def test_threads_making_the_first_measurement_start_one_pool(monkeypatch) -> None:
    """Two threads meeting a pool not yet started started two (four workers for two GPUs), and then crashed."""
    started, both = [], threading.Barrier(2, timeout=1.0)

    class Counting(ProcessPoolExecutor):
        def __init__(self, *args, **kwargs) -> None:
            started.append(self)
            with contextlib.suppress(threading.BrokenBarrierError):
                both.wait()  # holds the first thread until a second also starts one (or 1 s)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(parallel, "ProcessPoolExecutor", Counting)
    g, c = diamond(), uniform_cluster(2)
    placements = [Placement.single(g, 0)] * 4
    with PoolRuntime(_ReportsGpus(), gpus_per_worker=1, gpus=["0", "1"]) as pool, ThreadPoolExecutor(2) as threads:
        reasons = [m.reason for ms in threads.map(lambda _: pool.measure_many(g, c, placements), range(2)) for m in ms]
    assert len(started) == 1
    gpus = {gpu: {pid for pid, g in (r.split("|") for r in reasons) if g == gpu} for gpu in ("0", "1")}
    assert all(len(pids) <= 1 for pids in gpus.values()), gpus


def test_a_pool_shut_down_before_a_submission_is_measured_again() -> None:
    """Another thread's shutdown between getting the pool and submitting to it raised 'cannot schedule new futures
    after shutdown' into the search."""
    g, c = diamond(), uniform_cluster(2)
    placements = _mixed(g, 2)
    with PoolRuntime(Simulator(), workers=1) as pool:
        pool.measure(g, c, placements[0])
        pool._pool.shutdown()  # as if another thread had stopped it after this one got it
        got = pool.measure_many(g, c, placements)
    assert [m.step_time for m in got] == [m.step_time for m in Simulator().measure_many(g, c, placements)]
