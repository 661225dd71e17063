"""Threads sharing one graph or one simulator: the per-graph durations cache and the simulators' LRU caches."""

import sys
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from gplace.ir import Placement
from gplace.pipeline import PipelineSimulator
from gplace.runtime import Simulator
from gplace.testing import layered_dag, uniform_cluster

CLUSTERS = [uniform_cluster(3, bandwidth=1e9 * (k + 1)) for k in range(12)]


class _Meddling:
    """Mixin: the first time ``hook`` fires, another thread runs ``work`` while this one waits (at most 1 s) for it:
    the interleaving in which an unlocked cache breaks, and a locked one makes the other thread wait."""

    def arm(self, work):
        self.work, self.helper = work, None

    def hook(self):
        if getattr(self, "work", None) is not None:
            work, self.work = self.work, None
            self.helper = threading.Thread(target=work)
            self.helper.start()
            self.helper.join(timeout=1.0)


class _MeddlingDict(_Meddling, dict):
    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.hook()


class _MeddlingLRU(_Meddling, OrderedDict):
    def get(self, key, default=None):
        found = super().get(key, default)
        self.hook()
        return found


def test_durations_survive_another_thread_filling_the_cache_between_insert_and_return():
    """Another thread evicted a graph's just-inserted durations before ``durations`` read them back: KeyError."""
    g = layered_dag(30, seed=0)
    expected = layered_dag(30, seed=0).durations(CLUSTERS[0])
    cache = g.__dict__["_durations"] = _MeddlingDict()
    cache.arm(lambda: [g.durations(c) for c in CLUSTERS[1:10]])
    got = g.durations(CLUSTERS[0])
    cache.helper.join()
    assert np.array_equal(got, expected)
    assert len(cache) <= 8



def _all_in_threads(job, jobs: int) -> bool:
    """Whether ``job(i)`` is true for every ``i < jobs``, run on 8 threads that switch as often as Python lets them."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(8) as ex:
            return all(ex.map(job, range(jobs)))
    finally:
        sys.setswitchinterval(interval)

def test_one_graph_measured_on_many_clusters_from_threads():
    """8 threads, 40 clusters, one graph (the probe's 'dictionary changed size during iteration')."""
    clusters = [uniform_cluster(3, bandwidth=1e9 * (k + 1)) for k in range(40)]
    g = layered_dag(40, seed=3)
    expected = [layered_dag(40, seed=3).durations(c) for c in clusters]

    def job(i):
        return all(np.array_equal(g.durations(clusters[k := (i * 7 + j) % 40]), expected[k]) for j in range(100))

    assert _all_in_threads(job, 32)


SMALL_CACHES = pytest.mark.parametrize(
    "make", [lambda: Simulator(cache_size=2), lambda: PipelineSimulator(2, "gpipe", cache_size=2)], ids=["sim", "pipe"])
"""A step and a pipeline simulator, each caching fewer (graph, cluster) pairs than the three clusters measured."""


def _three_cluster_case(make):
    """A graph, a placement, its step time on each of three clusters (by a simulator of its own), and a simulator."""
    g = layered_dag(30, seed=0)
    p = Placement.for_graph(g, np.arange(g.num_ops) % 3)
    return g, p, [make().measure(g, c, p).step_time for c in CLUSTERS[:3]], make()


@SMALL_CACHES
def test_simulator_cache_survives_an_eviction_between_lookup_and_reuse(make):
    """Another thread evicted the entry a lookup had just found: ``move_to_end`` raised KeyError."""
    g, p, expected, sim = _three_cluster_case(make)
    sim.measure(g, CLUSTERS[0], p)
    sim._cache = _MeddlingLRU(sim._cache)
    sim._cache.arm(lambda: [sim.measure(g, c, p) for c in CLUSTERS[1:3]])
    assert sim.measure(g, CLUSTERS[0], p).step_time == expected[0]
    sim._cache.helper.join()
    assert [sim.measure(g, c, p).step_time for c in CLUSTERS[:3]] == expected
    assert len(sim._cache) <= 2


@SMALL_CACHES
def test_one_simulator_shared_by_threads_over_more_pairs_than_its_cache(make):
    """8 threads, 3 clusters, ``cache_size=2`` (the probe's KeyError), results equal one thread's to the bit."""
    g, p, expected, sim = _three_cluster_case(make)

    def job(i):
        return all(sim.measure(g, CLUSTERS[(i + j) % 3], p).step_time == expected[(i + j) % 3] for j in range(150))

    assert _all_in_threads(job, 16)


@pytest.mark.parametrize("make", [lambda: Simulator(cache_size=3), lambda: PipelineSimulator(2, "gpipe", cache_size=3)],
                         ids=["sim", "pipe"])
def test_a_simulator_with_its_lock_pickles_and_measures_alike(make):
    import pickle

    g = layered_dag(20, seed=1)
    p = Placement.for_graph(g, np.arange(g.num_ops) % 3)
    sim = make()
    before = sim.measure(g, CLUSTERS[0], p).step_time
    again = pickle.loads(pickle.dumps(sim))
    assert again._cache_size == 3 and len(again._cache) == 0
    assert again.measure(g, CLUSTERS[0], p).step_time == before


class BareSimulator(Simulator):
    """A subclass that never calls Simulator.__init__ (keeping its own settings)."""

    def __init__(self) -> None:
        self.threads = 1


def test_a_simulator_subclass_that_skips_its_init_still_pickles():
    """Such a subclass pickled before the cache got its lock; its unpickling then asked for the missing cache size
    (KeyError)."""
    import pickle

    Bare = BareSimulator
    g = layered_dag(20, seed=1)
    p = Placement.for_graph(g, np.arange(g.num_ops) % 3)
    again = pickle.loads(pickle.dumps(Bare()))
    assert again.measure(g, CLUSTERS[0], p).step_time == Simulator().measure(g, CLUSTERS[0], p).step_time
