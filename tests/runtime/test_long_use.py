"""Runtimes held for a long time in one process (a compiler measuring model after model) stay bounded."""

from __future__ import annotations

import pickle
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gplace.ir import Placement
from gplace.runtime import CachedRuntime, Simulator
from gplace.runtime.parallel import PAYLOADS, PoolRuntime
from gplace.testing import cpu_gpu_cluster, layered_dag, random_dag


def test_a_pool_keeps_the_files_of_its_last_problems_only():
    """One pickled (graph, cluster) file per problem ever measured stayed in the temporary directory until
    ``close()`` (500 graphs: 500 files)."""
    cluster = cpu_gpu_cluster(2)
    graphs = [random_dag(12, seed=s) for s in range(PAYLOADS + 4)]
    with PoolRuntime(Simulator(), workers=1) as pool:
        for graph in graphs:
            pool.measure_many(graph, cluster, [Placement.single(graph, 1)])
            files = list(pool._tempdir().iterdir())
            assert len(files) <= PAYLOADS
        first = graphs[0]  # dropped long ago: written again, measured as before
        again = pool.measure_many(first, cluster, [Placement.single(first, 2)])[0]
        assert again.step_time == Simulator().measure(first, cluster, Placement.single(first, 2)).step_time
        assert len(list(pool._tempdir().iterdir())) == PAYLOADS
        assert not pool._in_flight  # no count left behind per problem measured


def test_a_memory_cache_holds_a_digest_of_each_placement_not_the_placement():
    """Each entry kept the placement's bytes, 8 per op: 16 kB on a 2,000-op graph, 1.6 GB at the default
    100,000 entries."""
    graph, cluster = layered_dag(2000, seed=0), cpu_gpu_cluster(2)
    rng = np.random.default_rng(0)
    placements = [Placement.for_graph(graph, rng.integers(0, 3, graph.num_ops)) for _ in range(100)]
    cache = CachedRuntime(Simulator())
    first = cache.measure_many(graph, cluster, placements)
    assert cache.size == 100 and len(pickle.dumps(cache)) < 100 * 2000  # the placements alone: 1.6 MB
    assert cache.measure_many(graph, cluster, placements) == first and cache.hits == 100


class _Slow(Simulator):
    """sim-v1, 20 ms a placement: a batch that is still running while other threads measure."""

    id = "slow-sim-v1"

    def _measure(self, graph, cluster, placement):
        time.sleep(0.02)
        return super()._measure(graph, cluster, placement)


def test_a_problem_whose_batch_runs_keeps_its_file_while_threads_measure_others():
    """Another thread's new problems deleted the file of a batch still running: its later placements failed with
    FileNotFoundError in the worker (not transient: a cache around the pool kept them)."""
    cluster = cpu_gpu_cluster(2)
    long, others = random_dag(12, seed=100), [random_dag(12, seed=s) for s in range(PAYLOADS + 8)]
    placements = [Placement.for_graph(long, np.random.default_rng(i).integers(0, 3, long.num_ops)) for i in range(40)]
    with PoolRuntime(_Slow(), workers=1) as pool, ThreadPoolExecutor(9) as threads:
        pool.measure_many(others[0], cluster, [Placement.single(others[0], 0)])  # the workers are up
        batch = threads.submit(pool.measure_many, long, cluster, placements)
        time.sleep(0.1)
        list(threads.map(lambda graph: pool.measure_many(graph, cluster, [Placement.single(graph, 1)]), others))
        measured = batch.result()
    assert all(m.ok for m in measured), next(m.reason for m in measured if not m.ok)


def test_an_unpickled_pool_measures_one_problem_twice():
    """Its payloads came back as a plain dict, which the least-recently-used order cannot move."""
    graph, cluster = random_dag(12), cpu_gpu_cluster(2)
    with PoolRuntime(Simulator(), workers=1) as pool:
        pool.measure_many(graph, cluster, [Placement.single(graph, 0)])
        copy = pickle.loads(pickle.dumps(pool))
    with copy:
        for _ in range(2):
            assert copy.measure_many(graph, cluster, [Placement.single(graph, 1)])[0].ok
