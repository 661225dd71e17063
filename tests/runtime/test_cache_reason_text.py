"""A failed measurement whose reason UTF-8 cannot hold (a file name Python decoded with surrogates) is kept by a
file cache with backslash escapes: ``measure`` raised ``UnicodeEncodeError`` out of sqlite, after keeping the
entry in memory, so a second call answered otherwise than the first."""

from gplace.ir import Placement
from gplace.runtime.base import Measurement, Runtime
from gplace.runtime.cache import CachedRuntime
from gplace.testing import diamond, uniform_cluster


class _Failing(Runtime):
    id = "failing-v1"
    deterministic = True

    def _measure(self, graph, cluster, placement):
        return Measurement.failure(self.id, "cannot read '/data/\udcffmodel.onnx'")


def test_a_reason_with_surrogates_is_kept_escaped_in_memory_and_on_disk(tmp_path):
    graph, cluster = diamond(), uniform_cluster(2, kind="cpu")
    placement = Placement.single(graph, 0)
    path = tmp_path / "cache.sqlite"
    with CachedRuntime(_Failing(), path=path) as cache:
        first, again = cache.measure(graph, cluster, placement), cache.measure(graph, cluster, placement)
    with CachedRuntime(_Failing(), path=path) as cache:
        reloaded = cache.measure(graph, cluster, placement)
    want = "cannot read '/data/\\udcffmodel.onnx'"
    assert not first.ok and first.reason == again.reason == reloaded.reason == want


class _NoReason(Runtime):
    id = "no-reason-v1"
    deterministic = True

    def _measure(self, graph, cluster, placement):
        return Measurement(ok=True, step_time=1.0, runtime=self.id, reason=None)


def test_a_reason_of_none_is_kept_as_it_was():
    """The escaping called None.encode: a third-party runtime's ok measurement with reason None raised."""
    graph, cluster = diamond(), uniform_cluster(2, kind="cpu")
    assert CachedRuntime(_NoReason()).measure(graph, cluster, Placement.single(graph, 0)).step_time == 1.0
