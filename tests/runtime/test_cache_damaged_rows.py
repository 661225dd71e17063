"""A measurement cache file whose row holds arrays of the wrong size is a ``ValueError`` naming the file, as a
damaged file is: a 7-byte ``busy_time`` gave numpy's "buffer size must be a multiple of element size" naming
nothing, and an 8-byte ``peak_memory`` on 3 devices was served as a one-device peak."""

import sqlite3

import pytest

from gplace.ir import Cluster, Device, Edge, Op, OpGraph, Placement
from gplace.runtime import Simulator
from gplace.runtime.cache import CachedRuntime


def _case():
    graph = OpGraph.from_ops([Op("a", "X", 1e-3, output_bytes=100), Op("b", "X", 1e-3)], [Edge("a", "b")], name="g")
    cluster = Cluster.build([Device(f"/GPU:{i}", "gpu", 1.0, 10**9) for i in range(3)], default_bandwidth=1e9,
                            default_latency=1e-5, name="c")
    return graph, cluster, Placement.for_graph(graph, [0, 1])


@pytest.mark.parametrize(("column", "blob"), [("busy_time", b"\x01" * 7), ("peak_memory", b"\x01" + b"\x00" * 7)])
def test_a_row_with_arrays_of_the_wrong_size_is_refused_naming_the_file(tmp_path, column, blob):
    graph, cluster, placement = _case()
    path = tmp_path / "cache.sqlite"
    with CachedRuntime(Simulator(), path) as cache:
        want = cache.measure(graph, cluster, placement)
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE measurements SET {column} = ?", (blob,))
    db.close()
    with CachedRuntime(Simulator(), path) as cache, pytest.raises(ValueError, match=f"cache {path} is damaged.*"
                                                                   f"{column} holds {len(blob)} bytes, not 8 x 3"):
        cache.measure(graph, cluster, placement)
    assert want.ok


def test_a_sound_row_is_read_back(tmp_path):
    graph, cluster, placement = _case()
    path = tmp_path / "cache.sqlite"
    with CachedRuntime(Simulator(), path) as cache:
        want = cache.measure(graph, cluster, placement)
    with CachedRuntime(Simulator(), path) as cache:
        got = cache.measure(graph, cluster, placement)
        assert cache.hits == 1 and got.step_time == want.step_time and list(got.peak_memory) == list(want.peak_memory)
