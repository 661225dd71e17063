"""Faults during a search against a real ``torch-v1`` runtime, through the process pool and Ray: a measurement
that raises, hangs past the timeout, runs out of memory or kills its worker comes back as a failed measurement
naming the fault; dead or hung workers are replaced; the search goes on and logs each failure with its
placement."""

from __future__ import annotations

import logging
import math
import re

import faults
import pytest
import torch

from gplace.importers.torch_export import from_torch
from gplace.ir import Cluster, Device, OpGraph, Placement
from gplace.runtime.parallel import PoolRuntime

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")]

TIMEOUT = 10.0  # worker start-up and reading the graph are not timed; the steps of a tiny MLP take milliseconds
FAULTS = {1: "raise", 2: "hang", 3: "die"}


@pytest.fixture(scope="module")
def problem() -> tuple[OpGraph, Cluster]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    graph = from_torch(model, (torch.randn(2, 8),))  # ops: input, linear, relu, linear_1
    return graph, Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)


def _first_on_device_1(graph: OpGraph, op: int) -> Placement:
    return Placement.for_graph(graph, [0] * op + [1] * (graph.num_ops - op))


def _check_faults(runtime, graph: OpGraph, cluster: Cluster, words: dict[str, str]) -> None:
    """Good, raise, hang, die, good in one batch; then the runtime still measures, and a real OOM fails."""
    batch = [Placement.single(graph, 0), *(_first_on_device_1(graph, op) for op in FAULTS), Placement.single(graph, 1)]
    got = runtime.measure_many(graph, cluster, batch)
    assert [m.ok for m in got] == [True, False, False, False, True], [m.reason for m in got]
    for m, fault in zip(got[1:4], FAULTS.values(), strict=True):
        assert words[fault] in m.reason and m.step_time == math.inf, (fault, m.reason)
    assert [m.transient for m in got[1:4]] == [False, True, True]  # a hang or a death is no fault of the placement
    assert runtime.measure(graph, cluster, batch[0]).ok  # replaced workers measure again
    huge = from_torch(faults.AllocatesTooMuch(), (torch.randn(2),))
    m = runtime.measure(huge, cluster, Placement.single(huge, 0))
    assert not m.ok and "out of memory on /CPU:0" in m.reason


def test_pool_turns_each_fault_into_a_failed_measurement(problem) -> None:
    words = {"raise": "injected kernel bug", "hang": f"timed out: no result after {TIMEOUT:g} s",
             "die": "worker process died"}
    with PoolRuntime(faults.FaultyTorchRuntime(FAULTS), workers=2, timeout=TIMEOUT) as runtime:
        _check_faults(runtime, *problem, words)


def test_ray_turns_each_fault_into_a_failed_measurement(problem) -> None:
    ray = pytest.importorskip("ray")
    from gplace.runtime.ray_runtime import RayRuntime

    ray.cloudpickle.register_pickle_by_value(faults)  # the actors cannot import the tests
    words = {"raise": "injected kernel bug", "hang": f"timed out: no result after {TIMEOUT:g} s",
             "die": "Ray actor died"}
    try:
        with RayRuntime(faults.FaultyTorchRuntime(FAULTS), num_actors=2, timeout=TIMEOUT) as runtime:
            _check_faults(runtime, *problem, words)
    finally:
        ray.cloudpickle.unregister_pickle_by_value(faults)


def test_the_search_goes_on_and_logs_failed_placements(problem, caplog: pytest.LogCaptureFixture) -> None:
    """REINFORCE through a pool whose runtime raises on half the placements: every update runs, failures are
    counted and logged with their placements, and the best placement is one that succeeded."""
    from gplace.encoders import LSTMEncoder
    from gplace.grouping import identity_grouping
    from gplace.placer import PolicyPlacer
    from gplace.policies import Seq2SeqPolicy
    from gplace.training import ReinforceTrainer

    graph, cluster = problem
    torch.manual_seed(0)
    placer = PolicyPlacer(graph, cluster, LSTMEncoder(hidden_size=16, type_embedding=4),
                          Seq2SeqPolicy(2, hidden_size=16, attention_size=8), grouping=identity_grouping(graph))
    with (PoolRuntime(faults.FaultyTorchRuntime({0: "raise"}), workers=2, timeout=60) as runtime,
          caplog.at_level(logging.WARNING, logger="gplace.training")):
        result = ReinforceTrainer(updates=3, samples_per_update=4, seed=0, progress=False).fit(
            placer, runtime, graph, cluster)
    assert len(result.history) == 3
    failures = sum(h["rollout/failures"] for h in result.history)
    logged = [r.getMessage() for r in caplog.records if "failed measurement" in r.getMessage()]
    counts = [int(re.match(r"failed measurements, (\d+) of 4 placements: ", line)[1]) for line in logged]
    assert failures > 0 and sum(counts) == failures and len(logged) <= 3  # a line per rollout, not per failure
    assert all("injected kernel bug" in line and "e.g. placement [1, " in line for line in logged)
    assert result.best_step_time < math.inf
