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


def test_a_ray_session_replaced_under_a_runtime_gets_it_new_actors() -> None:
    """The user shut Ray down and started it again: the runtime's actor handles were void and every measurement
    raised; it now starts new actors there (and leaves the user's Ray up when it closes)."""
    ray.init(num_cpus=1, include_dashboard=False)
    with RayRuntime(Simulator(), num_actors=1) as runtime:
        assert runtime.measure(GRAPH, CLUSTER, PLACEMENT).ok
        ray.shutdown()
        ray.init(num_cpus=1, include_dashboard=False)
        assert runtime.measure(GRAPH, CLUSTER, PLACEMENT).ok
    assert ray.is_initialized()


def test_a_runtime_that_started_ray_leaves_up_the_ray_its_user_started_since() -> None:
    """A runtime started Ray, its user shut it down and started their own: closing the runtime shut down the
    user's Ray (a flag said a RayRuntime had started "Ray", whichever session it was)."""
    with RayRuntime(Simulator(), num_actors=1) as runtime:
        assert runtime.measure(GRAPH, CLUSTER, PLACEMENT).ok
        ray.shutdown()
        ray.init(num_cpus=1, include_dashboard=False)
        assert runtime.measure(GRAPH, CLUSTER, PLACEMENT).ok
    assert ray.is_initialized()
