"""From a probe of pre-training and transfer: a task whose op no device can run was not named; fine-tuning counted
its pretrained start as found after the last sample; a pretraining's run directory or checkpoint, given as a
policy, pointed at a policy.pt it never writes; fine-tuning into it spoke of "another list of tasks"; a run
directory's bare name got no directory hint."""

from __future__ import annotations

import math

import pytest
import torch

import gplace
from gplace.encoders import GNNEncoder
from gplace.ir import Edge, GraphError, Op, OpGraph
from gplace.policies import DeviceAwarePolicy
from gplace.pretrained import build
from gplace.run_dir import RunDirConflictError
from gplace.runtime import Simulator
from gplace.runtime.base import Measurement
from gplace.search_result import TrainResult
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import MultiGraphTrainer, ReinforceTrainer, finetune


def _networks():
    torch.manual_seed(0)
    return build(GNNEncoder, hidden_size=8, num_layers=1), build(DeviceAwarePolicy, hidden_size=8)


def test_a_task_no_device_can_run_is_named_by_index_and_graph():
    cluster = cpu_gpu_cluster(2)
    bad = OpGraph.from_ops([Op("n0", "T", 1.0, pinned="tpu"), Op("n1", "T", 1.0)], [Edge("n0", "n1")], name="bad")
    tasks = [(random_dag(6, seed=s), cluster) for s in range(2)] + [(bad, cluster)]
    with pytest.raises(GraphError, match=r"^tasks\[2\]: graph 'bad': op 'n0'"):
        MultiGraphTrainer(updates=1, samples_per_update=2).fit(*_networks(), tasks, Simulator())


def test_the_pretrained_start_is_reached_after_no_sample():
    result = TrainResult(None, Measurement(True, 3.3, "sim-v1"), 2, 0.0, sample_step_times=[4.2, 3.6],
                         start_step_time=3.3)
    assert result.samples_to_reach(3.3) == 0 and result.samples_to_reach(4.0) == 0
    samples, best = result.best_so_far()
    assert samples.tolist() == [0, 2] and best.tolist() == [3.3, 3.3]
    unstarted = TrainResult(None, Measurement(True, 3.6, "sim-v1"), 2, 0.0, sample_step_times=[4.2, 3.6])
    assert unstarted.best_so_far()[0].tolist() == [1, 2] and unstarted.samples_to_reach(4.0) == 2


def test_failed_samples_are_no_point_of_the_curve():
    """``nan_to_num`` made a failed sample's ``inf`` 1.8e308, which passed as a finite best."""
    result = TrainResult(None, Measurement(True, 1.0, "sim-v1"), 2, 0.0, sample_step_times=[math.inf, math.nan])
    samples, best = result.best_so_far()
    assert samples.tolist() == [3] and best.tolist() == [1.0]


def test_finetune_records_its_start():
    encoder, policy = _networks()
    cluster, runtime = cpu_gpu_cluster(2), Simulator()
    graph = random_dag(6, seed=304)
    start = runtime.measure(graph, cluster, gplace.pretrained.place_zero_shot(encoder, policy, graph, cluster))
    result = finetune(encoder, policy, graph, cluster, runtime,
                      trainer=ReinforceTrainer(updates=1, samples_per_update=2, seed=0))
    assert result.start_step_time == start.step_time
    assert result.samples_to_reach(start.step_time) == 0


def test_a_pretraining_run_directory_is_named_as_such(tmp_path):
    encoder, policy = _networks()
    cluster, runtime = cpu_gpu_cluster(2), Simulator()
    run_dir = tmp_path / "pretrain"
    MultiGraphTrainer(updates=1, samples_per_update=2).fit(encoder, policy, [(random_dag(6, seed=1), cluster)],
                                                            runtime, run_dir=run_dir)
    graph = random_dag(6, seed=9)
    with pytest.raises(FileNotFoundError, match="holds a training checkpoint.*save_policy"):
        gplace.place(graph, cluster, method=str(run_dir))
    with pytest.raises(ValueError, match="multi-graph pretraining's checkpoint.*save_policy"):
        gplace.place(graph, cluster, method=str(run_dir / "checkpoint.pt"))
    with pytest.raises(RunDirConflictError, match="belongs to a multi-graph pretraining .* this run is a search of "
                                                  "one graph"):
        finetune(encoder, policy, graph, cluster, runtime, trainer=ReinforceTrainer(updates=1, samples_per_update=2),
                 run_dir=run_dir)


def test_a_run_directorys_bare_name_gets_the_directory_hint(tmp_path, monkeypatch):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "policy.pt").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="it is a directory; give its policy file, 'run/policy.pt'"):
        gplace.place(random_dag(5), cpu_gpu_cluster(2), method="run")
    (tmp_path / "heft").mkdir()  # a method's name is the method, whatever folder is called so
    assert gplace.place(random_dag(5), cpu_gpu_cluster(2), method="heft").method == "heft"
