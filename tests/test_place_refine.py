"""``gplace.place(..., refine=S)``: the pipeline local search's descent from the placement found."""

from __future__ import annotations

import math

import numpy as np
import pytest
from layer_nets import layer_net

import gplace
from gplace.pipeline import PipelineSimulator
from gplace.runtime import Simulator
from gplace.testing import uniform_cluster


@pytest.fixture(scope="module")
def problem():
    """The exact DP's split of these 10 layers measures 16.60 s under GPipe, a descent from it 14.87 s."""
    return layer_net(10, 1), uniform_cluster(3, bandwidth=1e9)


def test_a_placers_split_is_refined_and_no_sample_found_it(problem):
    graph, cluster = problem
    runtime = PipelineSimulator(8, "gpipe")
    plain = gplace.place(graph, cluster, method="ideal_dp", runtime=runtime)
    refined = gplace.place(graph, cluster, method="ideal_dp", runtime=runtime, refine=30)
    assert refined.measurement.step_time < 0.95 * plain.measurement.step_time
    assert refined.measurement.step_time == runtime.measure(graph, cluster, refined.placement).step_time
    assert refined.train.best_sample is None and refined.train.refined_from == plain.measurement.step_time
    assert plain.train.refined_from is None


def test_placement_json_says_where_the_descent_started(problem, tmp_path):
    import json

    graph, cluster = problem
    runtime = PipelineSimulator(8, "gpipe")
    plain = gplace.place(graph, cluster, method="ideal_dp", runtime=runtime)
    gplace.place(graph, cluster, method="ideal_dp", runtime=runtime, refine=30, run_dir=tmp_path / "r")
    gplace.place(graph, cluster, method="ideal_dp", runtime=runtime, run_dir=tmp_path / "p")
    refined, unrefined = (json.loads((tmp_path / d / "placement.json").read_text()) for d in ("r", "p"))
    assert refined["refined_from"] == plain.measurement.step_time and refined["best_sample"] is None
    assert unrefined["refined_from"] is None


def test_a_learned_search_is_refined_and_its_samples_are_its_own(problem):
    graph, cluster = problem
    runtime = PipelineSimulator(8, "gpipe")
    kwargs = dict(method="learned", budget="8 samples", seed=0, runtime=runtime, max_groups=8)
    plain = gplace.place(graph, cluster, **kwargs)
    refined = gplace.place(graph, cluster, **kwargs, refine=30)
    assert refined.train.refined_from == plain.measurement.step_time > refined.measurement.step_time
    assert refined.train.samples == plain.train.samples
    np.testing.assert_array_equal(refined.train.sample_step_times, plain.train.sample_step_times)


@pytest.mark.parametrize("refine, error, match", [
    (-1, ValueError, "refine must be seconds, a finite number >= 0 .*got -1"),
    (math.nan, ValueError, "refine must be seconds, a finite number >= 0 .*got nan"),
    (math.inf, ValueError, "got inf"),
    ("5", TypeError, "refine must be seconds .*got '5'"),
    (True, TypeError, "got True"),
])
def test_a_bad_refine_is_refused_naming_it(problem, refine, error, match):
    graph, cluster = problem
    with pytest.raises(error, match=match):
        gplace.place(graph, cluster, method="heft", runtime=PipelineSimulator(8), refine=refine)


def test_refine_without_a_pipeline_simulator_says_what_to_pass(problem):
    """The descent measures pipe-v3: under another objective (the steady-state score) it optimised the wrong one,
    and a real pipelined runtime refused its placements or measured them slower than it said."""
    from gplace.pipeline import SteadyStateScore
    from gplace.runtime import CachedRuntime

    graph, cluster = problem
    for runtime, named in ((Simulator(), "'sim-v1'"), (CachedRuntime(Simulator()), "'sim-v1'"),
                           (SteadyStateScore(8), "'pipe-steady-v1"), (None, "sim-v1 \\(the default\\)")):
        with pytest.raises(ValueError, match=f"refine=2 descends on pipe-v3's mini-batch time.*runtime {named}.* "
                                             "pass .*objective=pipeline.*or refine=0"):
            gplace.place(graph, cluster, method="heft", runtime=runtime, refine=2)
    assert gplace.place(graph, cluster, method="heft", runtime=Simulator(), refine=0).measurement.ok
    cached = gplace.place(graph, cluster, method="ideal_dp", runtime=CachedRuntime(PipelineSimulator(8, "gpipe")),
                          refine=30)
    assert cached.train.refined_from is not None


def test_the_descent_counts_in_the_seconds_of_search():
    """placement.json's search_seconds left the descent out (0.0 s of search after a 0.5 s descent)."""
    from gplace.testing import random_dag

    graph, cluster = random_dag(300, seed=0), uniform_cluster(3, bandwidth=1e9)
    runtime = PipelineSimulator(8, "gpipe")
    plain = gplace.place(graph, cluster, method="heft", runtime=runtime)
    refined = gplace.place(graph, cluster, method="heft", runtime=runtime, refine=0.3)
    assert refined.train.seconds >= plain.train.seconds + 0.25


def test_a_refused_refine_leaves_no_run_directory(problem, tmp_path):
    graph, cluster = problem
    for runtime in (None, Simulator()):
        with pytest.raises(ValueError, match="refine=1 descends on pipe-v3's mini-batch time"):
            gplace.place(graph, cluster, method="heft", runtime=runtime, refine=1, run_dir=tmp_path / "run")
        assert not (tmp_path / "run").exists()
