"""Runtimes held for a long time in one process (a compiler measuring model after model) stay bounded."""

from __future__ import annotations

import pickle

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
