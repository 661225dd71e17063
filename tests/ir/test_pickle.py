"""Graphs and clusters after a pickle round trip (a spawn worker, a Ray actor, a saved object) stay frozen."""

import copy
import pickle

import numpy as np
import pytest

import gplace.runtime.simulator as simulator_module
from gplace.ir import Cluster, OpGraph, Placement
from gplace.runtime import CachedRuntime, Simulator
from gplace.testing import cpu_gpu_cluster, layered_dag


def _arrays(g: OpGraph, c: Cluster) -> dict[str, np.ndarray]:
    arrays = {name: getattr(g, name) for name in ("compute_cost", "persistent_memory", "temporary_memory",
                                                  "output_bytes", "edge_index", "edge_bytes", "topological_order")}
    arrays.update({f"kind_cost[{k}]": v for k, v in g.kind_cost.items()})
    arrays.update({f"out_csr[{i}]": a for i, a in enumerate(g.out_csr)})
    arrays["durations"] = g.durations(c)
    arrays.update({name: getattr(c, name) for name in ("bandwidth", "latency", "memory", "speeds")})
    return arrays


@pytest.mark.parametrize("round_trip", [lambda x: pickle.loads(pickle.dumps(x)), copy.deepcopy],
                         ids=["pickle", "deepcopy"])
def test_a_round_trip_keeps_every_array_read_only(round_trip):
    """numpy unpickles arrays writable: an in-place edit was accepted and kept the cached fingerprint."""
    g, c = layered_dag(20, seed=0), cpu_gpu_cluster(2)
    g.fingerprint, c.fingerprint, _arrays(g, c)  # derived values cached before pickling
    g2, c2 = round_trip((g, c))
    writable = [name for name, arr in _arrays(g2, c2).items() if arr.flags.writeable]
    assert writable == []
    with pytest.raises(ValueError, match="read-only"):
        g2.compute_cost[:] *= 10
    assert (g2.fingerprint, c2.fingerprint) == (g.fingerprint, c.fingerprint)


def test_an_unpickled_graph_measures_alike_and_shares_cache_keys():
    g, c = layered_dag(20, seed=0), cpu_gpu_cluster(2)
    p = Placement.for_graph(g, np.arange(g.num_ops) % 3)
    g2, c2 = pickle.loads(pickle.dumps((g, c)))
    assert Simulator().measure(g2, c2, p).step_time == Simulator().measure(g, c, p).step_time
    cache = CachedRuntime(Simulator())
    cache.measure(g, c, p)
    cache.measure(g2, c2, p)
    assert (cache.hits, cache.misses) == (1, 1)


def test_derived_values_do_not_travel_and_stale_ones_are_dropped():
    """A cached fingerprint or durations in the state could disagree with the arrays: they are rebuilt."""
    g, c = layered_dag(20, seed=0), cpu_gpu_cluster(2)
    g.durations(c)
    assert {"fingerprint", "_durations", "topological_order"}.isdisjoint(g.__getstate__())
    assert "fingerprint" not in c.__getstate__()
    stale = OpGraph.__new__(OpGraph)
    stale.__setstate__({**g.__getstate__(), "fingerprint": "stale", "_durations": {c.fingerprint: np.zeros(3)}})
    assert stale.fingerprint == g.fingerprint
    assert np.array_equal(stale.durations(c), g.durations(c))
    old = Cluster.__new__(Cluster)
    old.__setstate__({**c.__getstate__(), "fingerprint": "stale", "memory": np.zeros(3, dtype=np.int64)})
    assert old.fingerprint == c.fingerprint and np.array_equal(old.memory, c.memory)


def test_unpickled_objects_reuse_the_compiled_batch_kernel():
    """A writable ``cluster.memory`` made numba compile a second signature of the batch kernel."""
    g, c = layered_dag(20, seed=0), cpu_gpu_cluster(2)
    devices = np.random.default_rng(0).integers(0, 3, (4, g.num_ops))
    expected = Simulator().step_times(g, c, devices)
    kernel = simulator_module._batch_step_times
    signatures = len(kernel.signatures)
    g2, c2 = pickle.loads(pickle.dumps((g, c)))
    assert np.array_equal(Simulator().step_times(g2, c2, devices), expected)
    assert len(kernel.signatures) == signatures
