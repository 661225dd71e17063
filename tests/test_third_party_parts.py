"""Parts of one's own (a trainer, a runtime) that break their contract are named at once, never trusted."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

import gplace
from gplace.ir import InvalidPlacementError, Placement
from gplace.runtime import CachedRuntime, Simulator
from gplace.runtime.base import Measurement, Runtime
from gplace.runtime.conformance import check_runtime
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import TrainResult

GRAPH, CLUSTER = random_dag(20), cpu_gpu_cluster(2)


@dataclasses.dataclass
class _Trainer:
    """Measures one placement and returns what ``answer`` makes of it."""

    answer: str

    def fit(self, placer, runtime, graph, cluster, *, run_dir=None, logger=None, warm_start=None):
        placement = Placement.single(graph, 1)
        measured = runtime.measure(graph, cluster, placement)
        result = TrainResult(placement, measured, 1, 0.0)
        if self.answer == "short":
            return dataclasses.replace(result, best_placement=Placement(placement.devices[:-1]))
        if self.answer == "array":
            return dataclasses.replace(result, best_placement=placement.devices)
        if self.answer == "tuple":
            return placement, measured
        if self.answer == "lies":
            return dataclasses.replace(result, best_measurement=dataclasses.replace(measured, step_time=1e-9))
        return result


@pytest.mark.parametrize(("answer", "error", "match"), [
    ("short", InvalidPlacementError, "trainer _Trainer's best placement: "),
    ("array", TypeError, "trainer _Trainer's result: best_placement is a ndarray, not a Placement"),
    ("tuple", TypeError, "trainer _Trainer's fit returned a tuple, not a gplace.training.TrainResult"),
])
def test_a_trainers_broken_result_is_refused_naming_it(answer, error, match, tmp_path):
    """They were reported as the result (an IndexError or AttributeError deep in writing placement.json)."""
    with pytest.raises(error, match=match):
        gplace.place(GRAPH, CLUSTER, trainer=_Trainer(answer), run_dir=tmp_path)


def test_a_trainers_claimed_step_time_is_measured_again(caplog):
    """A claimed 1e-9 s was reported (speed-up 2.7e10), labelled sim-v1."""
    with caplog.at_level(logging.WARNING, logger="gplace.experiment"):
        report = gplace.place(GRAPH, CLUSTER, trainer=_Trainer("lies"))
    measured = Simulator().measure(GRAPH, CLUSTER, report.placement).step_time
    assert report.measurement.step_time == measured and measured > 1e-6
    assert "trainer _Trainer reported 1e-09 s for its best placement" in caplog.text


class _NoId(Runtime):
    """A runtime of one's own that forgot its id (it inherits Runtime's)."""

    deterministic = True

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale

    def _measure(self, graph, cluster, placement):
        return Measurement(ok=True, step_time=self.scale * float(placement.devices.sum() + 1), runtime=self.id)


def test_a_runtime_without_an_id_of_its_own_is_refused_by_a_cache_file_and_the_check(tmp_path):
    """Two runtimes that both kept the default id read each other's results from one file (27.3 for 273.1)."""
    with pytest.raises(ValueError, match="_NoId keeps Runtime's default id 'runtime-v0'"):
        CachedRuntime(_NoId(), path=tmp_path / "cache.sqlite")
    with pytest.raises(AssertionError, match="_NoId: id is Runtime's default 'runtime-v0'"):
        check_runtime(_NoId(), GRAPH, CLUSTER, [Placement.single(GRAPH, 0)])
    assert CachedRuntime(_NoId()).measure(GRAPH, CLUSTER, Placement.single(GRAPH, 0)).ok  # memory alone is its own


class _Float(Runtime):
    id = "float-v1"

    def _measure(self, graph, cluster, placement):
        return 1.5


def test_a_runtime_returning_a_number_is_named():
    """It failed with "'float' object has no attribute 'step_time'" inside gplace."""
    with pytest.raises(TypeError, match=r"runtime 'float-v1' \(_Float\) returned a float, not a Measurement"):
        _Float().measure(GRAPH, CLUSTER, Placement.for_graph(GRAPH, np.zeros(GRAPH.num_ops, np.int64)))


class _Last(gplace.interfaces.Placer):
    """A placer of one's own: every op on the last device."""

    name = "last"

    def _place(self, graph, cluster):
        return np.full(graph.num_ops, cluster.num_devices - 1)


def test_a_placer_of_ones_own_is_a_method_and_a_warm_start(tmp_path):
    """Both were refused ("method must be a name or a policy file's path"; warm_start a TypeError)."""
    report = gplace.place(GRAPH, CLUSTER, method=_Last())
    assert report.placement == Placement.single(GRAPH, CLUSTER.num_devices - 1)
    assert report.measurement.step_time == Simulator().measure(GRAPH, CLUSTER, report.placement).step_time
    warm = gplace.place(GRAPH, CLUSTER, warm_start=_Last(), budget="8 samples", run_dir=tmp_path)
    assert warm.measurement.step_time <= report.measurement.step_time


class _Answers(gplace.interfaces.Placer):
    """A placer of one's own whose ``_place`` returns ``answer(graph, cluster)``."""

    def __init__(self, answer) -> None:
        self.answer = answer

    def _place(self, graph, cluster):
        return self.answer(graph, cluster)


def test_a_placer_returning_a_placement_is_taken_and_one_returning_nothing_is_named():
    """A Placement was refused as "_place must return integer device indices, got dtype object", and a forgotten
    ``return`` said the same."""
    last = Placement.single(GRAPH, CLUSTER.num_devices - 1)
    assert _Answers(lambda graph, cluster: last).place(GRAPH, CLUSTER) == last
    with pytest.raises(InvalidPlacementError):  # still validated for the graph it places
        _Answers(lambda graph, cluster: Placement.single(random_dag(5), 0)).place(GRAPH, CLUSTER)
    with pytest.raises(TypeError, match=r"_Answers._place returned None \(no return\?\)"):
        _Answers(lambda graph, cluster: None).place(GRAPH, CLUSTER)


def test_a_placer_returning_a_ragged_list_is_named():
    """numpy's "setting an array element with a sequence ... inhomogeneous shape", naming no placer."""
    with pytest.raises(TypeError, match=r"_Answers._place must return the \(N,\) device index of every op, got a "
                                        r"ragged sequence \[\[0\], \[0, 1\]\]"):
        _Answers(lambda graph, cluster: [[0], [0, 1]]).place(GRAPH, CLUSTER)


class _Crashing(Runtime):
    """A runtime of one's own whose backend raises instead of returning a failed measurement."""

    id = "crashing-v1"
    deterministic = True

    def _measure(self, graph, cluster, placement):
        raise RuntimeError("my backend crashed")


def test_the_runtime_check_names_the_rule_a_raising_runtime_breaks():
    """check_runtime let the runtime's RuntimeError through, where its contract says failures are measurements."""
    match = r"crashing-v1: measuring a valid placement raised RuntimeError: my backend crashed; a step that cannot run"
    with pytest.raises(AssertionError, match=match) as refused:
        check_runtime(_Crashing(), GRAPH, CLUSTER, [Placement.single(GRAPH, 0)])
    assert isinstance(refused.value.__cause__, RuntimeError)
