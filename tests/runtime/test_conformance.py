"""Every runtime passes one conformance suite (gplace.runtime.conformance), and the suite catches breakage."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from gplace.ir import Cluster, Device, InvalidPlacementError, OpGraph, Placement
from gplace.runtime import Measurement, Runtime, Simulator
from gplace.runtime.conformance import check_failure, check_runtime
from gplace.testing import diamond, fork_join, uniform_cluster

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

CPU_MAP = {"/CPU:0": "cpu", "/CPU:1": "cpu"}


@dataclass(frozen=True)
class Case:
    """A runtime with a graph, placements it can run, and one placement that must fail."""

    runtime: Runtime
    graph: OpGraph
    cluster: Cluster
    placements: list[Placement]
    failing_cluster: Cluster
    failing: Placement


def _spread_placements(graph: OpGraph) -> list[Placement]:
    n = graph.num_ops
    return [Placement.single(graph, 0), Placement.single(graph, 1),
            Placement.for_graph(graph, [i % 2 for i in range(n)]),
            Placement.for_graph(graph, [int(i >= n // 2) for i in range(n)])]


def _simulator_case() -> Case:
    g = diamond()
    tiny = uniform_cluster(2, memory=1000)  # every output is 1 MB: out of memory
    return Case(Simulator(), g, uniform_cluster(2), _spread_placements(g), tiny, Placement.single(g, 0))


def _torch_case() -> Case:
    torch = pytest.importorskip("torch")
    from gplace.importers.torch_export import from_torch
    from gplace.runtime.torch_runtime import TorchRuntime

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    g = from_torch(model, (torch.randn(2, 8),))
    cpus = [Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")]
    cluster = Cluster.build(cpus, default_bandwidth=1e9, name="2xcpu")
    # a GPU index no machine has: unavailable on a CPU machine and on a GPU machine alike
    with_gpu = Cluster.build([*cpus, Device("/GPU:99", "gpu")], default_bandwidth=1e9, name="2xcpu+gpu")
    runtime = TorchRuntime(steps=3, warmup=1, device_map=CPU_MAP)
    return Case(runtime, g, cluster, _spread_placements(g), with_gpu, Placement.single(g, 2))


def _tf_case() -> Case:
    tf = pytest.importorskip("tensorflow")
    from gplace.importers.tensorflow import from_tensorflow
    from gplace.runtime.tf_runtime import TensorFlowRuntime

    rng = np.random.default_rng(0)
    w1, w2 = tf.constant(rng.random((8, 16), np.float32)), tf.constant(rng.random((16, 4), np.float32))

    @tf.function(input_signature=[tf.TensorSpec([2, 8], tf.float32, name="x")])
    def mlp(x):  # constants, not variables: no colocation groups, so any op may go anywhere
        return tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2)

    g = from_tensorflow(mlp, name="mlp")
    cpus = [Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")]
    cluster = Cluster.build(cpus, default_bandwidth=1e9, name="2xcpu")
    with_gpu = Cluster.build([*cpus, Device("/GPU:99", "gpu")], default_bandwidth=1e9, name="2xcpu+gpu")
    return Case(TensorFlowRuntime(steps=3, warmup=1), g, cluster, _spread_placements(g), with_gpu,
                Placement.single(g, 2))


CASES = {"simulator": _simulator_case, "tensorflow": _tf_case, "torch": _torch_case}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> Case:
    return CASES[request.param]()


def test_runtime_conforms(case: Case) -> None:
    """Invalid placements raise, measurements carry the runtime's id and a finite step time when ok."""
    measurements = check_runtime(case.runtime, case.graph, case.cluster, case.placements)
    assert len(measurements) == len(case.placements)
    assert all(m.ok for m in measurements)


def test_failure_is_a_measurement(case: Case) -> None:
    """A step that cannot run (out of memory, missing device) is ok=False with a reason, not an exception."""
    m = check_failure(case.runtime, case.graph, case.failing_cluster, case.failing)
    assert m.reason


def test_determinism_is_declared(case: Case) -> None:
    """The simulator is deterministic; real runtimes are not."""
    assert case.runtime.deterministic is isinstance(case.runtime, Simulator)


def test_split_moves_bytes(case: Case) -> None:
    """A placement that splits producer and consumer moves bytes; a single-device one moves none."""
    single = case.runtime.measure(case.graph, case.cluster, case.placements[0])
    split = case.runtime.measure(case.graph, case.cluster, case.placements[2])
    assert single.bytes_moved == 0 < split.bytes_moved


# ---------------------------------------------------------------------- the suite can fail
class _Unvalidated(Runtime):
    """Skips validation: measures anything."""

    id = "unvalidated-v0"

    def measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        return self._measure(graph, cluster, placement)

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        return Measurement(ok=True, step_time=1.0, runtime=self.id)


class _Noisy(Simulator):
    """Declares determinism but adds noise."""

    def __init__(self) -> None:
        super().__init__()
        self._rng = np.random.default_rng(0)

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        m = super()._measure(graph, cluster, placement)
        return Measurement(ok=True, step_time=m.step_time + self._rng.random(), runtime=self.id)


class _Raising(Simulator):
    """Raises instead of reporting a failure."""

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        raise MemoryError("out of memory")


class _WrongId(Simulator):
    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        return Measurement(ok=True, step_time=1.0, runtime="other-v0")


class _ReversesTheList(Simulator):
    """Measures in order but reverses the caller's list in place (a search then paired step times wrongly)."""

    def measure_many(self, graph: OpGraph, cluster: Cluster, placements: list[Placement]) -> list[Measurement]:
        out = [self.measure(graph, cluster, p) for p in placements]
        placements.reverse()
        return out


class _FloatsFromMany(Simulator):
    """measure_many gives bare step times (gplace.place failed: 'float' object has no attribute 'ok')."""

    deterministic = False

    def measure_many(self, graph: OpGraph, cluster: Cluster, placements: list[Placement]) -> list[Measurement]:
        return [self.measure(graph, cluster, p).step_time for p in placements]


class _OtherIdFromMany(Simulator):
    """measure gives its own id, measure_many another runtime's."""

    def measure_many(self, graph: OpGraph, cluster: Cluster, placements: list[Placement]) -> list[Measurement]:
        return [Simulator().measure(graph, cluster, p) for p in placements]

    id = "mine-v0"


class _IgnoresColocation(Simulator):
    """Validates placements but lets a split colocation group through (docs/runtimes.md: it must raise)."""

    def measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        try:
            placement.validate(graph, cluster)
        except InvalidPlacementError as err:
            if "colocation" not in str(err):
                raise
        return self._measure(graph, cluster, placement)


@pytest.mark.parametrize(("runtime", "rule"), [
    (_Unvalidated(), "InvalidPlacementError"),
    (_IgnoresColocation(), "colocated, on two devices"),  # passed check_runtime
    (_Noisy(), "deterministic"),
    (_WrongId(), "says runtime"),
    (_ReversesTheList(), "changed the caller's list"),  # these three passed check_runtime
    (_FloatsFromMany(), "result 0 is a float, not a Measurement"),
    (_OtherIdFromMany(), "says runtime 'sim-v1'"),
])
def test_check_runtime_catches_broken_runtimes(runtime: Runtime, rule: str) -> None:
    """check_runtime raises AssertionError naming the broken rule."""
    g = fork_join(3)
    with pytest.raises(AssertionError, match=rule):
        check_runtime(runtime, g, uniform_cluster(2), [Placement.single(g, 0), Placement.single(g, 1)])


def test_a_runtime_that_reorders_the_callers_list_cannot_mislead_a_search() -> None:
    """The trainer pairs results with its own list: reversed under it, a search reported 6.49 s for a placement
    that ran in 9.66 s."""
    from gplace.runtime.base import measure_each

    g = fork_join(3)
    placements = [Placement.single(g, 0), Placement.for_graph(g, [0, 1] * (g.num_ops // 2) + [0] * (g.num_ops % 2))]
    cluster = uniform_cluster(2, bandwidth=1e3)
    got = measure_each(_ReversesTheList(), g, cluster, placements)
    assert [m.step_time for m in got] == [Simulator().measure(g, cluster, p).step_time for p in placements]


def test_check_failure_catches_exceptions_and_successes() -> None:
    """check_failure rejects a runtime that raises, and a placement that runs fine."""
    g = diamond()
    with pytest.raises(AssertionError, match="raised MemoryError"):
        check_failure(_Raising(), g, uniform_cluster(2), Placement.single(g, 0))
    with pytest.raises(AssertionError, match="measured ok"):
        check_failure(Simulator(), g, uniform_cluster(2), Placement.single(g, 0))


def test_a_graph_with_no_work_conforms() -> None:
    """The contract allows an ok step time of 0 (metadata-only ops cost 0 s); the check required > 0, so sim-v1
    failed its own conformance check on such a graph."""
    from gplace.ir import Edge, Op

    g = OpGraph.from_ops([Op("a", "Const", 0.0), Op("b", "Identity", 0.0)], [Edge("a", "b", 0)], name="no_work")
    [m] = check_runtime(Simulator(), g, uniform_cluster(2), [Placement.single(g, 0)])
    assert m.ok and m.step_time == 0.0


def test_an_impossible_step_time_is_warned_again_after_forget_warnings(caplog) -> None:
    """The warning came once per runtime id per process: a sweep's later jobs, run in the same process, had none of
    it in their logs (the CLI forgets at each job's start)."""
    import math

    from gplace.runtime.base import Measurement, checked, forget_warnings

    bad = Measurement(runtime="nan-probe-v1", step_time=math.nan, ok=True)
    with caplog.at_level("WARNING", logger="gplace.runtime.base"):
        for _ in range(2):
            forget_warnings()
            assert not checked(bad, object()).ok
            checked(bad, object())
    assert sum("nan-probe-v1" in r.getMessage() for r in caplog.records) == 2
