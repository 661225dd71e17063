"""Batches of placements split over threads (gplace.runtime.batch) give the one-thread results, row for row."""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from gplace.ir import Cluster, Device
from gplace.pipeline.simulator import PipelineSimulator
from gplace.runtime import Simulator
from gplace.runtime import batch as batch_module
from gplace.runtime.batch import MIN_CHUNK_OPS, check_threads, run_rows
from gplace.testing import layered_dag


def _cluster(n: int = 3, memory: int = 10**15) -> Cluster:
    return Cluster.build([Device(f"/GPU:{i}", "gpu", 1.0, memory) for i in range(n)], default_bandwidth=1e9,
                         default_latency=1e-5)


def _rows(ops: int, devices: int, rows: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, devices, (rows, ops))


def _noting_kernel(seen: list):
    def kernel(devices: np.ndarray, offset: float) -> np.ndarray:
        seen.append((threading.current_thread().name, devices.shape[0]))
        return devices.sum(axis=1) + offset
    return kernel


def test_a_large_batch_is_split_in_row_order_and_a_small_one_is_not() -> None:
    devices, seen = _rows(256, 4, 3 * MIN_CHUNK_OPS // 256), []
    got = run_rows(_noting_kernel(seen), devices, (0.5,), threads=3)
    assert got.tolist() == (devices.sum(axis=1) + 0.5).tolist()
    assert len(seen) == 3 and sum(k for _, k in seen) == devices.shape[0]
    assert all(name.startswith("gplace-batch") for name, _ in seen)
    seen.clear()
    small = devices[: MIN_CHUNK_OPS // 256]  # one chunk's worth: stays on the calling thread
    run_rows(_noting_kernel(seen), small, (0.0,), threads=3)
    assert seen == [(threading.current_thread().name, small.shape[0])]
    seen.clear()
    run_rows(_noting_kernel(seen), devices, (0.0,), threads=1)
    assert len(seen) == 1


@pytest.mark.parametrize("memory", [10**15, 820 * 10**6])  # ample (one-pass kernel), tight (event kernel too)
def test_simulators_give_the_same_times_on_any_number_of_threads(memory: int) -> None:
    graph, cluster = layered_dag(300, 20, seed=1), _cluster(memory=memory)
    devices = _rows(graph.num_ops, cluster.num_devices, 200, seed=2)
    want = Simulator(threads=1).step_times(graph, cluster, devices)
    assert np.isfinite(want).any() and (memory > 10**12 or np.isinf(want).any())
    for threads in (2, 3, None):
        assert Simulator(threads=threads).step_times(graph, cluster, devices).tolist() == want.tolist()
    train = layered_dag(200, 10, seed=3)
    rows = _rows(train.num_ops, cluster.num_devices, 200, seed=4)
    want = PipelineSimulator(4, "1f1b", threads=1).minibatch_times(train, cluster, rows)
    assert PipelineSimulator(4, "1f1b", threads=3).minibatch_times(train, cluster, rows).tolist() == want.tolist()


def test_calls_from_several_threads_at_once_share_the_pool() -> None:
    graph, cluster = layered_dag(300, 20, seed=1), _cluster()
    batches = [_rows(graph.num_ops, cluster.num_devices, 120, seed=s) for s in range(6)]
    want = [Simulator(threads=1).step_times(graph, cluster, b).tolist() for b in batches]
    sim = Simulator(threads=2)
    with ThreadPoolExecutor(max_workers=6) as callers:
        got = list(callers.map(lambda b: sim.step_times(graph, cluster, b).tolist(), batches))
    assert got == want


def _child_times(queue) -> None:
    graph = layered_dag(300, 20, seed=1)
    queue.put(Simulator(threads=2).step_times(graph, _cluster(), _rows(graph.num_ops, 3, 200)).tolist())


def test_a_forked_process_makes_its_own_pool() -> None:
    graph = layered_dag(300, 20, seed=1)
    want = Simulator(threads=2).step_times(graph, _cluster(), _rows(graph.num_ops, 3, 200)).tolist()
    assert batch_module._pool is not None  # the parent's pool exists when the child is forked
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_times, args=(queue,))
    child.start()
    got = queue.get(timeout=60)
    child.join(timeout=60)
    assert got == want and child.exitcode == 0


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_thread_counts_are_named(bad) -> None:
    with pytest.raises((ValueError, TypeError), match="threads must be"):
        check_threads(bad)
    with pytest.raises((ValueError, TypeError), match="threads must be"):
        Simulator(threads=bad)
    with pytest.raises((ValueError, TypeError), match="threads must be"):
        PipelineSimulator(threads=bad)
