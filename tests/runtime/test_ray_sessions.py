"""RayRuntimes that share one Ray session: closing one leaves the others working; a session replaced under a
runtime gets it new actors (its own file: these tests start and stop Ray themselves)."""

from __future__ import annotations

import pytest

from gplace.ir import Placement
from gplace.runtime import Simulator
from gplace.testing import diamond, uniform_cluster

ray = pytest.importorskip("ray")

from gplace.runtime.ray_runtime import RayRuntime  # noqa: E402

GRAPH, CLUSTER = diamond(), uniform_cluster(2)
PLACEMENT = Placement.for_graph(GRAPH, [0, 1, 0, 1])


@pytest.fixture(autouse=True)
def no_ray_before_or_after():
    if ray.is_initialized():
        ray.shutdown()
    yield
    if ray.is_initialized():
        ray.shutdown()


def test_runtimes_sharing_the_ray_one_started_close_in_any_order() -> None:
    """Closing the runtime that started Ray shut it down under the others: each later measurement raised."""
    first, second = RayRuntime(Simulator(), num_actors=1), RayRuntime(Simulator(), num_actors=1)
    with first, second:
        assert first.measure(GRAPH, CLUSTER, PLACEMENT).ok and second.measure(GRAPH, CLUSTER, PLACEMENT).ok
        first.close()
        assert ray.is_initialized()  # the second still uses it
        assert second.measure(GRAPH, CLUSTER, PLACEMENT).ok
        second.close()
        assert not ray.is_initialized()  # the last one out shuts down the Ray a RayRuntime started


@pytest.mark.parametrize("first", ["user", "runtime"])
def test_a_ray_session_replaced_under_a_runtime_gets_it_new_actors(first) -> None:
    """The user shut Ray down (theirs, or the one the runtime started) and started their own: the runtime's actor
    handles were void and every measurement raised; it now starts new actors there. Closing it leaves the user's
    Ray up (a flag said a RayRuntime had started "Ray", whichever session it was, so it shut the user's down)."""
    if first == "user":
        ray.init(num_cpus=1, include_dashboard=False)
    with RayRuntime(Simulator(), num_actors=1) as runtime:
        assert runtime.measure(GRAPH, CLUSTER, PLACEMENT).ok
        ray.shutdown()
        ray.init(num_cpus=1, include_dashboard=False)
        assert runtime.measure(GRAPH, CLUSTER, PLACEMENT).ok
    assert ray.is_initialized()
