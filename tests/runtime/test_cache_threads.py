"""A ``CachedRuntime`` with a sqlite file shared by threads (a service's worker threads)."""

import sqlite3
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from gplace.ir import Placement
from gplace.runtime import CachedRuntime, Simulator
from gplace.testing import cpu_gpu_cluster, layered_dag

G, C = layered_dag(30, seed=0), cpu_gpu_cluster(2)
PLACEMENTS = [Placement.for_graph(G, np.random.default_rng(i).integers(0, 3, G.num_ops)) for i in range(24)]
EXPECTED = [Simulator().measure(G, C, p).step_time for p in PLACEMENTS]


def test_a_file_cache_opened_in_one_thread_is_used_from_another(tmp_path):
    """sqlite refused a connection from another thread, reported as a damaged file to delete."""
    cache = CachedRuntime(Simulator(), path=tmp_path / "cache.sqlite")
    assert cache.measure(G, C, PLACEMENTS[0]).step_time == EXPECTED[0]
    with ThreadPoolExecutor(1) as ex:
        assert ex.submit(cache.measure, G, C, PLACEMENTS[1]).result().step_time == EXPECTED[1]
        assert ex.submit(cache.measure, G, C, PLACEMENTS[0]).result().step_time == EXPECTED[0]
    assert (cache.hits, cache.misses) == (1, 2)
    cache.close()


def test_threads_share_one_file_cache_and_lose_nothing(tmp_path):
    path = tmp_path / "cache.sqlite"
    cache = CachedRuntime(Simulator(), path=path, max_entries=4)

    def job(i):
        batch = [PLACEMENTS[(i + j) % 24] for j in range(6)]
        return [m.step_time for m in cache.measure_many(G, C, batch)] == [EXPECTED[(i + j) % 24] for j in range(6)]

    with ThreadPoolExecutor(8) as ex:
        assert all(ex.map(job, range(48)))
    assert cache.hits + cache.misses == 48 * 6 and cache.size <= 4
    cache.close()
    again = CachedRuntime(Simulator(), path=path)
    assert [m.step_time for m in again.measure_many(G, C, PLACEMENTS)] == EXPECTED
    assert (again.hits, again.misses) == (24, 0)
    again.close()


def test_a_misused_connection_is_not_reported_as_a_damaged_file(tmp_path):
    """A sqlite ProgrammingError (here a closed connection) said 'not a readable cache ... delete it'."""
    cache = CachedRuntime(Simulator(), path=tmp_path / "cache.sqlite")
    cache.measure(G, C, PLACEMENTS[0])
    cache._db.close()
    with pytest.raises(sqlite3.ProgrammingError):
        cache.measure(G, C, PLACEMENTS[1])


def test_a_file_cache_pickles_without_its_lock_and_connection(tmp_path):
    import pickle

    cache = CachedRuntime(Simulator(), path=tmp_path / "cache.sqlite")
    cache.measure(G, C, PLACEMENTS[0])
    again = pickle.loads(pickle.dumps(cache))
    assert again.measure(G, C, PLACEMENTS[0]).step_time == EXPECTED[0] and again.hits == 1
    with ThreadPoolExecutor(1) as ex:
        assert ex.submit(again.measure, G, C, PLACEMENTS[2]).result().step_time == EXPECTED[2]
    cache.close()
    again.close()
