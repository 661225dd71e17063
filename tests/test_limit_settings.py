"""Limit settings (time limits, evaluation and sample budgets) are checked on construction, and a policy file's
``samples`` counts what a learned search's does."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gplace
from gplace.baselines.pipeline import PipelineLocalSearch
from gplace.runtime import TorchRuntime
from gplace.runtime.tf_runtime import TensorFlowRuntime
from gplace.runtime.torch_pipeline import TorchPipelineRuntime
from gplace.testing import random_dag, uniform_cluster

NAN = float("nan")


@pytest.mark.parametrize("kwargs", [{"time_limit": NAN}, {"time_limit": "5"}, {"time_limit": True},
                                    {"max_evaluations": NAN}, {"max_evaluations": 2.5}, {"batch_size": 2.5}])
def test_local_search_refuses_a_bad_limit_by_name(kwargs):
    """NaN, a string, True or a fraction is refused naming the class and setting (NaN ran with no limit, the
    others failed inside place() with a raw TypeError)."""
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=f"PipelineLocalSearch: {name}"):
        PipelineLocalSearch(kind=None, **kwargs)


def test_local_search_keeps_the_meaning_of_valid_limits():
    """0 s searches nothing past the start; None and inf are no limit."""
    assert PipelineLocalSearch(time_limit=0).time_limit == 0
    assert PipelineLocalSearch(time_limit=math.inf, max_evaluations=math.inf).time_limit is None
    search = PipelineLocalSearch(microbatches=2, kind=None, time_limit=0, max_evaluations=0)
    search.place(random_dag(8, seed=0), uniform_cluster(2))
    assert search.evaluations == 0
    timed = PipelineLocalSearch(microbatches=2, kind=None, time_limit=0)  # 0 s alone: only the start
    timed.place(random_dag(8, seed=0), uniform_cluster(2))
    assert timed.evaluations == 1


@pytest.mark.parametrize("time_limit", [NAN, "5", True, 0, -1.0])
def test_torch_runtime_refuses_a_bad_time_limit_by_name(time_limit):
    """True was taken as 1 s and '5' failed with a raw TypeError."""
    with pytest.raises(ValueError, match="TorchRuntime: time_limit"):
        TorchRuntime(time_limit=time_limit)


def test_torch_runtime_time_limit_none_or_inf_is_no_limit():
    assert TorchRuntime(time_limit=None).time_limit == math.inf == TorchRuntime(time_limit=math.inf).time_limit
    assert TorchRuntime(time_limit=2).time_limit == 2.0


@pytest.mark.parametrize("kwargs", [{"time_limit": NAN}, {"time_limit": "5"}, {"time_limit": True},
                                    {"steps": 2.5}])
def test_torch_pipeline_runtime_refuses_a_bad_setting_by_name(kwargs):
    x, y = torch.zeros(4, 3), torch.zeros(4, 2)
    with pytest.raises(ValueError, match=f"TorchPipelineRuntime: {next(iter(kwargs))}"):
        TorchPipelineRuntime(nn.Linear(3, 2), x, y, F.mse_loss, microbatches=2, **kwargs)


@pytest.mark.parametrize(("value", "message"), [("nonsense", "is not a torch device"), ("meta", "holds no data")])
def test_torch_pipeline_runtime_checks_its_device_map_as_torch_runtime_does(value, message):
    """TorchRuntime refused a device_map value that is no torch device, or meta, when built; the pipelined runtime
    took it and failed only at its cluster check."""
    x, y = torch.zeros(4, 3), torch.zeros(4, 2)
    for runtime in (TorchRuntime, lambda **kw: TorchPipelineRuntime(nn.Linear(3, 2), x, y, F.mse_loss, **kw)):
        with pytest.raises(ValueError, match=rf"device_map\['/CPU:0'\] = '{value}' {message}"):
            runtime(device_map={"/CPU:0": value})
    assert TorchPipelineRuntime(nn.Linear(3, 2), x, y, F.mse_loss, device_map={"/GPU:0": "cuda"}).device_map == {
        "/GPU:0": "cuda:0"}


@pytest.mark.tf
@pytest.mark.parametrize("time_limit", [NAN, "5", True])
def test_tf_runtime_refuses_a_bad_time_limit_by_name(time_limit):
    with pytest.raises(ValueError, match="TensorFlowRuntime: time_limit"):
        TensorFlowRuntime(time_limit=time_limit)


@pytest.mark.parametrize("samples", [16, 0])
def test_a_policy_file_counts_its_samples_as_a_learned_search_does(samples):
    """budget='16 samples' reports 16 samples (17: its greedy placement was counted), '0 samples' 0; a result
    only the greedy placement reaches is reached one after the last sample."""
    report = gplace.place(random_dag(12, seed=1), uniform_cluster(2), method="pretrained",
                          budget=f"{samples} samples", seed=0)
    train = report.train
    assert train.samples == samples == len(train.sample_step_times)
    reached = train.samples_to_reach(train.best_step_time)
    assert reached == (samples + 1 if train.best_sample is None else train.best_sample)
