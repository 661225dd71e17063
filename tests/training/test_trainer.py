"""The REINFORCE trainer: it finds known optima, keeps the best placement, and resumes exactly."""

import dataclasses
import json
import logging
import re

import numpy as np
import pytest
import torch

from gplace.encoders import GNNEncoder, LSTMEncoder
from gplace.grouping import group_ops
from gplace.ir import InvalidPlacementError
from gplace.loggers import JsonlLogger
from gplace.placer import PolicyPlacer
from gplace.policies import ListSchedulingPolicy, Seq2SeqPolicy
from gplace.runtime import Simulator
from gplace.testing import chain, two_branches, uniform_cluster
from gplace.training import MultiGraphTrainer, PPOTrainer, ReinforceTrainer


def _placer(graph, cluster, **grouping):
    torch.manual_seed(0)
    encoder = LSTMEncoder(hidden_size=32, type_embedding=8)
    policy = Seq2SeqPolicy(cluster.num_devices, hidden_size=32, attention_size=16)
    return PolicyPlacer(graph, cluster, encoder, policy, grouping=group_ops(graph, **grouping))


def test_finds_the_parallel_placement_of_two_branches():
    """Two independent 4-op branches on two equal GPUs: the search finds the ~2x faster split."""
    graph, cluster = two_branches(length=4, cost=1.0, nbytes=1000), uniform_cluster(2, bandwidth=1e6)
    sim = Simulator()
    single = sim.measure(graph, cluster, _placement(graph, [0] * graph.num_ops)).step_time
    assert single == pytest.approx(8.02)
    placer = _placer(graph, cluster, max_groups=None, merge_consumers=False)
    result = ReinforceTrainer(updates=60, samples_per_update=8, lr=1e-2, seed=0).fit(placer, sim, graph, cluster)
    optimum = 0.01 + 4.0 + 0.01 + 2 * 1000 / 1e6  # src, one branch, sink, one transfer in and one out
    assert result.best_step_time == pytest.approx(optimum, rel=0.01)
    assert single / result.best_step_time > 1.95
    assert result.samples == 60 * 8


def test_failed_placements_get_the_penalty_and_stay_out_of_the_baseline():
    """A chain that fits on no device alone: every sample fails and the search says so plainly."""
    graph = chain(nbytes=10**6)
    cluster = uniform_cluster(2, memory=10**5)
    placer = _placer(graph, cluster)
    with pytest.raises(InvalidPlacementError, match="no placement of 'chain' succeeded.*out of memory"):
        trainer = ReinforceTrainer(updates=2, samples_per_update=2, penalty_step_time=7.0)
        trainer.fit(placer, Simulator(), graph, cluster)


def test_failed_samples_are_logged_once_per_rollout_and_each_at_debug(caplog):
    """Every sample out of memory: 3 updates of 8 gave 24 WARNING lines of 64 device numbers each."""
    graph, cluster = chain(nbytes=10**6), uniform_cluster(2, memory=10**5)
    with caplog.at_level(logging.DEBUG, logger="gplace.training"), pytest.raises(InvalidPlacementError):
        ReinforceTrainer(updates=3, samples_per_update=8, seed=0).fit(_placer(graph, cluster), Simulator(), graph,
                                                                      cluster)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and "failed measurement" in
             r.getMessage()]
    assert len(warnings) == 3 and len(debug) == 24
    assert all(line.startswith("failed measurements, 8 of 8 placements: out of memory on /GPU:") for line in warnings)
    assert all(re.search(r"\(\dx; e\.g\. placement \[[01], [01], [01]\]\)", line) for line in warnings)


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    """Train 4 updates, stop, resume to 8: same history and best placement as 8 updates in one go."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    kwargs = dict(samples_per_update=4, lr=1e-2, checkpoint_every=2, seed=1)
    whole = ReinforceTrainer(updates=8, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                      run_dir=tmp_path / "whole")
    ReinforceTrainer(updates=4, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                             run_dir=tmp_path / "split")
    assert torch.load(tmp_path / "split" / "checkpoint.pt", weights_only=False)["update"] == 4
    resumed = ReinforceTrainer(updates=8, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                        run_dir=tmp_path / "split")
    assert resumed.samples == whole.samples == 32
    assert [h["rollout/mean_step_time"] for h in resumed.history] == [h["rollout/mean_step_time"]
                                                                       for h in whole.history]
    assert resumed.best_placement == whole.best_placement
    assert resumed.sample_step_times.tolist() == whole.sample_step_times.tolist()
    lines = (tmp_path / "split" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == list(range(8))


def test_a_resume_writes_back_the_checkpointed_updates_metrics_jsonl_lost(tmp_path, caplog):
    """metrics.jsonl cut to its first line after 4 checkpointed updates (a file truncated or replaced): the resumed
    run's file had a silent gap of updates 1-3; they are written back from the checkpoint's history, with a warning,
    equal to an uninterrupted run's records."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    kwargs = dict(samples_per_update=4, lr=1e-2, checkpoint_every=2, seed=1)
    ReinforceTrainer(updates=8, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                             run_dir=tmp_path / "whole")
    ReinforceTrainer(updates=4, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                             run_dir=tmp_path / "split")
    path = tmp_path / "split" / "metrics.jsonl"
    path.write_text(path.read_text().splitlines(keepends=True)[0] + '{"step": 2, "charts/sampl')  # and a torn line
    with caplog.at_level(logging.WARNING, logger="gplace"):
        ReinforceTrainer(updates=8, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                 run_dir=tmp_path / "split")
    assert any("lacked 3 of the 4 updates checkpointed" in r.getMessage() for r in caplog.records)
    whole = [json.loads(line) for line in (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()]
    assert [json.loads(line) for line in path.read_text().splitlines()] == whole


def test_a_resumed_run_trains_with_its_own_learning_rate_and_baseline_decay(tmp_path):
    """The checkpoint's optimizer state and baseline restored the old run's lr (1e-2) and decay (0.9) over the new
    ones, silently."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    kwargs = dict(samples_per_update=4, checkpoint_every=1, seed=1)
    ReinforceTrainer(updates=2, lr=1e-2, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                       run_dir=tmp_path)
    ReinforceTrainer(updates=4, lr=1e-4, baseline_decay=0.5, **kwargs).fit(_placer(graph, cluster), Simulator(),
                                                                           graph, cluster, run_dir=tmp_path)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert state["update"] == 4 and state["trainer"] == "ReinforceTrainer"
    assert [g["lr"] for g in state["optimizer"]["param_groups"]] == [1e-4]
    assert state["baseline"]["decay"] == 0.5


def test_a_checkpoint_of_another_trainer_is_refused_by_name(tmp_path):
    """PPO went on from a REINFORCE run's optimizer state and baseline without a word."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    ReinforceTrainer(updates=1, samples_per_update=4, seed=1).fit(_placer(graph, cluster), Simulator(), graph,
                                                                  cluster, run_dir=tmp_path)
    with pytest.raises(ValueError, match="written by ReinforceTrainer, this run trains with PPOTrainer.*resume it "
                                         "with trainer ReinforceTrainer"):
        PPOTrainer(updates=2, samples_per_update=4, seed=1).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                                run_dir=tmp_path)


@pytest.mark.parametrize("trainer_class", [ReinforceTrainer, PPOTrainer])
def test_samples_to_reach_counts_each_sample_in_the_order_measured(trainer_class):
    """Every sample's step time is kept, so a target is reached at the sample that first met it, not at the end of
    its update; the search's result alone counts as one sample after the last."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    result = trainer_class(updates=3, samples_per_update=4, seed=1).fit(_placer(graph, cluster), Simulator(),
                                                                         graph, cluster)
    times = result.sample_step_times
    assert times.shape == (result.samples,) == (12,)
    assert times.min() >= result.best_step_time
    for t in times:
        assert result.samples_to_reach(t) == 1 + min(i for i in range(12) if times[i] <= t)
    assert result.samples_to_reach(result.best_step_time * 0.5) is None
    found = times.min() <= result.best_step_time
    assert result.best_sample == (1 + int(times.argmin()) if found else None)
    samples, best = result.best_so_far()  # each point: a sample that beat every earlier one, then the last
    kept = [(k + 1, t) for k, t in enumerate(times) if t < times[:k].min(initial=float("inf"))]
    if kept[-1][0] < 12:
        kept.append((12, kept[-1][1]))
    if not found:
        kept.append((13, result.best_step_time))
    assert list(zip(samples.tolist(), best.tolist(), strict=True)) == kept
    if result.best_step_time < times.min():  # the greedy placement beat every sample
        assert result.samples_to_reach(result.best_step_time) == 13


def test_a_run_resumed_from_a_checkpoint_without_sample_times_marks_them_unknown(tmp_path):
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    kwargs = dict(samples_per_update=4, checkpoint_every=1, seed=1)
    ReinforceTrainer(updates=2, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster, run_dir=tmp_path)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    del state["sample_step_times"]  # as written before the record existed
    torch.save(state, tmp_path / "checkpoint.pt")
    resumed = ReinforceTrainer(updates=3, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                        run_dir=tmp_path)
    times = resumed.sample_step_times
    assert times.shape == (12,) and torch.isnan(torch.from_numpy(times[:8])).all()
    assert (times[8:] > 0).all()
    samples, best = resumed.best_so_far()  # the unknown samples improve nothing
    assert samples[0] == 9 and best[0] == times[8]


@pytest.mark.parametrize("content", [b"", b"\x00garbage", b"PK\x03\x04 half a zip"], ids=["empty", "random", "cut"])
def test_a_damaged_checkpoint_is_refused_naming_the_file(tmp_path, content):
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    (tmp_path / "checkpoint.pt").write_bytes(content)
    with pytest.raises(ValueError, match=r"checkpoint .*checkpoint.pt cannot be read .*use a new run directory"):
        ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                             run_dir=tmp_path)


class _RunsCode:
    def __reduce__(self):
        return (exec, ("import pathlib; pathlib.Path(__import__('os').environ['GPLACE_TEST_MARK']).touch()",))


def test_a_checkpoint_cannot_run_code_when_it_is_read(tmp_path, monkeypatch):
    """A checkpoint was read with weights_only=False: a crafted checkpoint.pt in a run directory (one shared or
    downloaded) ran arbitrary code as the run resumed. It is refused, naming the file, and runs nothing."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    mark = tmp_path / "ran"
    monkeypatch.setenv("GPLACE_TEST_MARK", str(mark))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    torch.save({"fingerprint": _RunsCode()}, run_dir / "checkpoint.pt")
    with pytest.raises(ValueError, match=r"checkpoint .*checkpoint.pt cannot be read"):
        ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                             run_dir=run_dir)
    assert not mark.exists()


@pytest.mark.parametrize("trainer", [ReinforceTrainer, PPOTrainer])
def test_a_checkpoint_with_numpy_arrays_from_before_still_resumes(tmp_path, trainer):
    """Checkpoints before 2026-12-02 held the best placement and the samples' times as numpy arrays; a checkpoint
    is now read with weights_only=True, which allows those arrays (and nothing that runs code)."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    kwargs = dict(samples_per_update=4, checkpoint_every=1, seed=1)
    trainer(updates=2, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster, run_dir=tmp_path)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert isinstance(state["best_devices"], list) and isinstance(state["sample_step_times"], list)
    state["best_devices"] = np.array(state["best_devices"], dtype=np.int64)
    state["sample_step_times"] = np.array(state["sample_step_times"], dtype=np.float64)
    torch.save(state, tmp_path / "checkpoint.pt")
    resumed = trainer(updates=3, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                               run_dir=tmp_path)
    fresh = trainer(updates=3, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster)
    assert resumed.best_step_time == fresh.best_step_time
    np.testing.assert_array_equal(resumed.sample_step_times, fresh.sample_step_times)


def test_a_checkpoint_written_under_numpy_1_still_loads(tmp_path):
    """numpy 1 pickles its arrays as numpy.core.multiarray._reconstruct, numpy 2 as numpy._core...: weights_only
    matches the names as text, so a checkpoint from before an upgrade of numpy was refused as damaged (found by a
    review of this stop's diff)."""
    import zipfile

    from gplace.training.checkpoint import load_checkpoint

    written = tmp_path / "numpy2.pt"
    torch.save({"fingerprint": "fp", "update": 1, "best_devices": np.arange(3), "x": np.float64(2.0)}, written)
    old = tmp_path / "checkpoint.pt"
    with zipfile.ZipFile(written) as zin, zipfile.ZipFile(old, "w", zipfile.ZIP_STORED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith("data.pkl"):
                data = data.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
            zout.writestr(item, data)
    state = load_checkpoint(old, "fp")
    assert state["best_devices"].tolist() == [0, 1, 2] and state["x"] == 2.0


def test_a_run_killed_before_its_first_checkpoint_leaves_no_stale_metrics(tmp_path):
    """metrics.jsonl holds 40 updates of a run killed before it wrote a checkpoint: a fresh run in the directory
    logs each of its own updates once and keeps none of the dead run's."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    dead = [json.dumps({"step": k, "train/reward": -1.0}) + "\n" for k in range(40)]
    (tmp_path / "metrics.jsonl").write_text("".join(dead))
    ReinforceTrainer(updates=3, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                         run_dir=tmp_path)
    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
             if "step" in json.loads(line)]
    assert sorted(set(steps)) == [0, 1, 2] and len(steps) == len(set(steps))


def test_checkpoint_of_another_graph_is_refused(tmp_path):
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                         run_dir=tmp_path)
    other = two_branches(length=2)
    with pytest.raises(ValueError, match=r"belongs to another graph \(.*resume with the graph it ran on"):
        ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(other, cluster), Simulator(), other, cluster,
                                                             run_dir=tmp_path)


def test_checkpoint_of_another_cluster_names_the_cluster(tmp_path):
    """Only the cluster differed, and the refusal said "another graph/cluster ... resume with the graph file it ran
    on"."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                         run_dir=tmp_path)
    other = uniform_cluster(2, bandwidth=1e7)
    with pytest.raises(ValueError, match=r"belongs to another cluster \(.*resume with the cluster it ran on") as err:
        ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(graph, other), Simulator(), graph, other,
                                                             run_dir=tmp_path)
    assert "another graph" not in str(err.value)


def test_checkpoint_measured_by_another_runtime_is_refused(tmp_path):
    """A step-time run resumed under the pipeline objective would mix two kinds of times in one search."""
    from gplace.pipeline import PipelineSimulator

    graph, cluster = two_branches(length=3), uniform_cluster(2)
    ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                         run_dir=tmp_path)
    pipe = PipelineSimulator(microbatches=4, schedule="1f1b")
    with pytest.raises(ValueError, match=r"measured by runtime 'sim-v1', this run measures with 'pipe-v3/1f1b/m4'"
                                         r".*resume it measuring with .sim-v1. \(no placement\.json"):
        ReinforceTrainer(updates=2, samples_per_update=2).fit(_placer(graph, cluster), pipe, graph, cluster,
                                                             run_dir=tmp_path)


def _as_written_before_runtimes_were_recorded(path):
    """Drop what checkpoints before 2026-11-27 did not record (their runtime, seed, grouping, trainer)."""
    state = torch.load(path, weights_only=False)
    for key in ("runtime", "seed", "grouping", "trainer", "param_shapes", "settings"):
        state.pop(key, None)
    torch.save(state, path)


def test_an_old_checkpoint_without_its_runtime_is_refused_by_another_objective_and_warned_about_by_sim_v1(
        tmp_path, caplog):
    """A checkpoint written before gplace recorded its runtime resumed silently under the pipeline objective and
    then carried pipe-v2's id over sim-v1's times; it resumes only a sim-v1 run now, saying what went unchecked."""
    from gplace.pipeline import PipelineSimulator

    graph, cluster = two_branches(length=3), uniform_cluster(2)
    ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                         run_dir=tmp_path)
    _as_written_before_runtimes_were_recorded(tmp_path / "checkpoint.pt")
    pipe = PipelineSimulator(microbatches=4, schedule="1f1b")
    with pytest.raises(ValueError, match=r"does not say which runtime measured it .*this run measures with "
                                         r"'pipe-v3/1f1b/m4'.*resume it with sim-v1"):
        ReinforceTrainer(updates=2, samples_per_update=2).fit(_placer(graph, cluster), pipe, graph, cluster,
                                                             run_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="gplace.training.checkpoint"):
        ReinforceTrainer(updates=2, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                             run_dir=tmp_path)
    assert "does not record its runtime, seed, grouping or trainer" in caplog.text


@pytest.mark.parametrize("unrecorded", [("seed",), ("grouping", "trainer")])
def test_a_checkpoint_that_records_its_runtime_but_not_its_seed_grouping_or_trainer_says_what_went_unchecked(
        tmp_path, caplog, unrecorded):
    """Checkpoints of 2026-11-27 recorded their runtime but not their seed, grouping or trainer: one resumed another
    trainer, grouping or seed without a word (and the run directory then said the new settings)."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                         run_dir=tmp_path)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    for key in unrecorded:
        del state[key]
    torch.save(state, tmp_path / "checkpoint.pt")
    with caplog.at_level(logging.WARNING, logger="gplace.training.checkpoint"):
        ReinforceTrainer(updates=2, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                             run_dir=tmp_path)
    assert f"does not record its {' or '.join(unrecorded)} (written by an older gplace): resumed unchecked" in (
        caplog.text)


def test_a_checkpoint_whose_networks_an_older_gplace_named_otherwise_says_so_and_how_to_go_on(tmp_path):
    """Weights moved under 'embedding.' on 2026-11-22: such a checkpoint was refused as 'a part does not fit this run'
    alone, without the warm-start advice other refusals give."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                         run_dir=tmp_path)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    state["policy"] = {k.replace("encoder.embedding.", "encoder."): v for k, v in state["policy"].items()}
    torch.save(state, tmp_path / "checkpoint.pt")
    (tmp_path / "placement.json").write_text("{}")
    with pytest.raises(ValueError, match=r"a part does not fit this run \(RuntimeError: .*; a checkpoint of an older "
                                         r"gplace, whose networks differ, reads so too\); use a new run directory or "
                                         r"delete this one, or start a new run from its placement with warm_start="):
        ReinforceTrainer(updates=2, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                             run_dir=tmp_path)


def test_a_checkpoint_of_an_older_simulator_version_says_so(tmp_path):
    """pipe-v1 and pipe-v3 with the same schedule and micro-batches: the message blamed the settings."""
    from gplace.pipeline import PipelineSimulator

    graph, cluster = two_branches(length=3), uniform_cluster(2)
    pipe = PipelineSimulator(microbatches=4, schedule="1f1b")
    ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(graph, cluster), pipe, graph, cluster,
                                                         run_dir=tmp_path)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    state["runtime"] = "pipe-v1/1f1b/m4"
    torch.save(state, tmp_path / "checkpoint.pt")
    with pytest.raises(ValueError, match=r"measured by runtime 'pipe-v1/1f1b/m4'.*a newer gplace's simulator: "
                                         r"pipe-v1 became pipe-v3"):
        ReinforceTrainer(updates=2, samples_per_update=2).fit(_placer(graph, cluster), pipe, graph, cluster,
                                                             run_dir=tmp_path)


def test_checkpoint_of_another_grouping_or_seed_is_refused(tmp_path):
    """Another max_groups (the same model on other groups) or another seed is refused by name; both resumed
    silently before, the seed then ignored."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                         run_dir=tmp_path)
    finer = _placer(graph, cluster, max_groups=None, merge_consumers=False)
    with pytest.raises(ValueError, match=r"another grouping of the graph \(2 groups/\w+, not 8 groups/\w+\)"):
        ReinforceTrainer(updates=2, samples_per_update=2).fit(finer, Simulator(), graph, cluster, run_dir=tmp_path)
    with pytest.raises(ValueError, match=r"seed 0, this one has seed 5.*resume with seed=0"):
        ReinforceTrainer(updates=2, samples_per_update=2, seed=5).fit(_placer(graph, cluster), Simulator(), graph,
                                                                     cluster, run_dir=tmp_path)


def _wider_placer(graph, cluster):
    torch.manual_seed(0)
    encoder = LSTMEncoder(hidden_size=48, type_embedding=8)
    policy = Seq2SeqPolicy(cluster.num_devices, hidden_size=48, attention_size=16)
    return PolicyPlacer(graph, cluster, encoder, policy)


def test_checkpoint_of_another_model_is_refused_before_anything_is_loaded(tmp_path):
    """Another encoder size: the error names the model and the first tensor that differs, not torch's loader."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                         run_dir=tmp_path)
    with pytest.raises(ValueError, match=r"written by another model \(it trains \d+ parameter tensors \([\d,]+ "
                                         r"numbers\), this run's model \d+ \([\d,]+\); tensor \d+ is"):
        ReinforceTrainer(updates=2, samples_per_update=2).fit(_wider_placer(graph, cluster), Simulator(), graph,
                                                             cluster, run_dir=tmp_path)


def test_checkpoint_of_a_hierarchical_placer_with_another_grouper_names_the_grouper(tmp_path):
    """Only the grouper's width differs: the refusal blamed "the encoder, the policy or their sizes"."""
    from gplace.hierarchical import HierarchicalPlacer, LearnedGrouper

    graph, cluster = two_branches(length=3), uniform_cluster(2)

    def placer(grouper_width):
        torch.manual_seed(0)
        grouper = LearnedGrouper(4, hidden_size=grouper_width, num_type_buckets=64)
        encoder = LSTMEncoder(hidden_size=16, type_embedding=8, num_type_buckets=64)
        return HierarchicalPlacer(graph, cluster, grouper, encoder, Seq2SeqPolicy(2, hidden_size=16,
                                                                                 attention_size=8))

    ReinforceTrainer(updates=1, samples_per_update=2).fit(placer(8), Simulator(), graph, cluster, run_dir=tmp_path)
    with pytest.raises(ValueError, match=r"written by another model .*: the placer's networks \(grouper, encoder "
                                         r"or policy\) or their sizes differ"):
        ReinforceTrainer(updates=2, samples_per_update=2).fit(placer(16), Simulator(), graph, cluster,
                                                             run_dir=tmp_path)

def test_a_resume_with_other_model_settings_of_the_same_shapes_is_warned_about(tmp_path, caplog):
    """A policy setting that keeps every shape (the list-scheduling prior's weight) resumed silently; it now says
    what changed."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)

    def placer(prior_weight):
        torch.manual_seed(0)
        policy = ListSchedulingPolicy(hidden_size=16, state_size=16, prior_weight=prior_weight)
        return PolicyPlacer(graph, cluster, GNNEncoder(hidden_size=16, num_layers=1, type_embedding=8), policy)

    ReinforceTrainer(updates=1, samples_per_update=2).fit(placer(3.0), Simulator(), graph, cluster, run_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="gplace.training.checkpoint"):
        ReinforceTrainer(updates=2, samples_per_update=2).fit(placer(0.0), Simulator(), graph, cluster,
                                                             run_dir=tmp_path)
    assert "other settings than its run's (policy.prior_weight: 3.0 -> 0.0)" in caplog.text


def test_a_resume_with_other_trainer_settings_is_warned_about(tmp_path, caplog):
    """samples_per_update and entropy_coef changed on resume without a word; lr and updates may change quietly."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                         run_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="gplace.training.checkpoint"):
        ReinforceTrainer(updates=2, samples_per_update=2, lr=1e-2).fit(_placer(graph, cluster), Simulator(), graph,
                                                                      cluster, run_dir=tmp_path)
        assert "other settings" not in caplog.text
        ReinforceTrainer(updates=3, samples_per_update=4, entropy_coef=0.5).fit(
            _placer(graph, cluster), Simulator(), graph, cluster, run_dir=tmp_path)
    assert ("other settings than its run's (trainer.entropy_coef: 0.01 -> 0.5; trainer.samples_per_update: 2 -> 4)"
            in caplog.text)


def test_a_placer_made_for_another_cluster_or_graph_is_refused():
    """The samples of a placer for one cluster were measured on the other cluster given, silently."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    with pytest.raises(ValueError, match="the placer was made for cluster .* not the cluster"):
        ReinforceTrainer(updates=1, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph,
                                                             uniform_cluster(2, bandwidth=1e3))
    with pytest.raises(ValueError, match="the placer was made for graph .* not the graph"):
        PPOTrainer(updates=1, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), chain(), cluster)


def test_older_checkpoint_of_another_model_is_refused_by_its_parameter_count(tmp_path):
    """Checkpoints written before the model's shapes were saved: their optimizer's tensor count is compared."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    kwargs = dict(samples_per_update=2, seed=1)
    ReinforceTrainer(updates=1, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster, run_dir=tmp_path)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    del state["param_shapes"], state["runtime"]  # as written before they were saved
    torch.save(state, tmp_path / "checkpoint.pt")
    resumed = ReinforceTrainer(updates=2, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                        run_dir=tmp_path)
    assert resumed.samples == 4  # the same model resumes
    state["optimizer"]["param_groups"][0]["params"].append(10_000)  # one tensor more than this run's model
    torch.save(state, tmp_path / "checkpoint.pt")
    with pytest.raises(ValueError, match=r"written by another model \(it trains \d+ parameter tensors, this run's"):
        ReinforceTrainer(updates=3, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                  run_dir=tmp_path)


def test_metrics_are_namespaced_and_logged(tmp_path):
    graph, cluster = two_branches(length=2), uniform_cluster(2)
    logger = JsonlLogger(tmp_path / "extra.jsonl")
    result = ReinforceTrainer(updates=3, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph,
                                                                  cluster, logger=logger)
    records = [json.loads(x) for x in (tmp_path / "extra.jsonl").read_text().splitlines()]
    assert len(records) == 3 == len(result.history)
    for key in ("charts/best_step_time", "rollout/mean_step_time", "losses/loss_policy", "losses/entropy"):
        assert key in records[-1]
    assert records[-1]["charts/best_step_time"] >= result.best_step_time


def test_bad_trainer_arguments():
    with pytest.raises(ValueError, match="samples_per_update"):
        ReinforceTrainer(samples_per_update=0)


@pytest.mark.parametrize("trainer_class, kwargs, match", [
    (ReinforceTrainer, {"lr": "abc"}, "lr must be a float, got 'abc'"),
    (ReinforceTrainer, {"entropy_coef": "abc"}, "entropy_coef must be a float, got 'abc'"),
    (ReinforceTrainer, {"normalize_advantage": "abc"}, "normalize_advantage must be a bool, got 'abc'"),
    (ReinforceTrainer, {"max_seconds": "10"}, "max_seconds must be a float or None, got '10'"),
    (ReinforceTrainer, {"seed": 1.5}, "seed must be an int, got 1.5"),
    (PPOTrainer, {"target_kl": "abc"}, "target_kl must be a float or None, got 'abc'"),
    (PPOTrainer, {"target_kl": 0.0}, "target_kl must be > 0 or None"),
    (MultiGraphTrainer, {"penalty_ratio": "abc"}, "penalty_ratio must be a float"),
])
def test_a_setting_of_the_wrong_type_is_named_on_construction(trainer_class, kwargs, match):
    """A number given as a string (as `trainer.lr=abc` on the command line gives) is named when the trainer is
    built; before, a comparison raised TypeError without the name, or training began and failed at its first
    update (entropy_coef, target_kl), or a string was read as true (normalize_advantage)."""
    with pytest.raises(ValueError, match=match):
        trainer_class(**kwargs)


def test_numpy_numbers_are_settings():
    assert ReinforceTrainer(lr=np.float32(0.5), updates=np.int64(3)).updates == 3


def _placement(graph, devices):
    from gplace.ir import Placement

    return Placement.for_graph(graph, devices)


def test_warm_start_is_imitated_and_never_lost():
    """A warm start is projected onto the groups, counted as seen, and imitated until greedy decoding returns it."""
    graph, cluster = two_branches(length=4, cost=1.0, nbytes=1000), uniform_cluster(2, bandwidth=1e6)
    split = _placement(graph, [0] + [0] * 4 + [1] * 4 + [0])  # one branch per device: the optimum
    placer = _placer(graph, cluster, max_groups=None, merge_consumers=False)
    trainer = ReinforceTrainer(updates=0, imitation_steps=60, lr=1e-2)
    result = trainer.fit(placer, Simulator(), graph, cluster, warm_start=split)
    assert result.best_placement == split
    assert placer.greedy() == split
    assert result.best_step_time == pytest.approx(Simulator().measure(graph, cluster, split).step_time)


@pytest.mark.parametrize("trainer", [ReinforceTrainer(updates=1, samples_per_update=2, imitation_steps=2),
                                     PPOTrainer(updates=1, samples_per_update=2, imitation_steps=2, epochs=1)])
def test_a_warm_start_the_groups_cannot_express_is_still_the_result_unless_beaten(trainer):
    """One group for the whole graph: the policy can only emit one-device placements, all slower than the warm
    start's split, so the search must return the warm start itself (measured before its projection)."""
    graph, cluster = two_branches(length=4, cost=1.0, nbytes=1000), uniform_cluster(2, bandwidth=1e6)
    split = _placement(graph, [0] + [0] * 4 + [1] * 4 + [0])
    placer = _placer(graph, cluster, max_groups=1)
    sim = Simulator()
    assert sim.measure(graph, cluster, placer.project(split)).step_time > sim.measure(graph, cluster, split).step_time
    result = trainer.fit(placer, sim, graph, cluster, warm_start=split)
    assert result.best_placement == split
    assert result.best_step_time == pytest.approx(sim.measure(graph, cluster, split).step_time)


def test_imitation_stops_at_half_the_time_budget(tmp_path):
    graph, cluster = two_branches(length=4, cost=1.0, nbytes=1000), uniform_cluster(2, bandwidth=1e6)
    split = _placement(graph, [0] + [0] * 4 + [1] * 4 + [0])
    trainer = ReinforceTrainer(updates=1, samples_per_update=2, imitation_steps=10_000, max_seconds=1e-6)
    result = trainer.fit(_placer(graph, cluster), Simulator(), graph, cluster, warm_start=split, run_dir=tmp_path)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    imitation = [line for line in lines if "losses/imitation" in line]
    assert len(imitation) == 1 and result.best_placement == split


def test_project_takes_each_groups_costliest_device():
    graph, cluster = chain(costs=(1.0, 5.0, 1.0)), uniform_cluster(2)
    placer = _placer(graph, cluster)  # the chain is one group
    projected = placer.project(_placement(graph, [0, 1, 0]))
    assert projected.devices.tolist() == [1, 1, 1]


@pytest.mark.parametrize("trainer_class", [ReinforceTrainer, PPOTrainer])
def test_self_imitation_pulls_the_policy_onto_the_best_placement(trainer_class):
    """With ``self_imitation`` the loss carries minus the log-likelihood of the best placement so far, which
    training lowers: the trained policy gives its best placement far more probability than without the term."""
    graph, cluster = two_branches(length=4, cost=1.0, nbytes=1000), uniform_cluster(2, bandwidth=1e6)
    log_prob_of_best = {}
    for weight in (0.0, 5.0):
        placer = _placer(graph, cluster, max_groups=None, merge_consumers=False)
        trainer = trainer_class(updates=20, samples_per_update=4, lr=1e-2, self_imitation=weight, seed=0)
        result = trainer.fit(placer, Simulator(), graph, cluster)
        with torch.no_grad():
            log_prob_of_best[weight] = float(placer.evaluate(result.best_placement.devices[None])[0][0])
    terms = [h["losses/loss_self_imitation"] for h in result.history]
    assert all(t >= 0 for t in terms) and terms[-1] < terms[0] / 2
    assert log_prob_of_best[5.0] > log_prob_of_best[0.0] + 2.0  # measured: -1.7 vs -5.1 (REINFORCE), 0 vs -10 (PPO)


def test_without_self_imitation_there_is_no_such_term():
    graph, cluster = two_branches(length=2), uniform_cluster(2)
    result = ReinforceTrainer(updates=2, samples_per_update=2).fit(_placer(graph, cluster), Simulator(), graph,
                                                                  cluster)
    assert not any("self_imitation" in key for key in result.history[-1])


@pytest.mark.parametrize("trainer_class", [ReinforceTrainer, PPOTrainer])
def test_a_resumed_run_with_self_imitation_equals_an_uninterrupted_one(trainer_class, tmp_path):
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    kwargs = dict(samples_per_update=4, lr=1e-2, checkpoint_every=2, seed=1, self_imitation=1.0)
    whole = trainer_class(updates=6, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                   run_dir=tmp_path / "whole")
    trainer_class(updates=3, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                          run_dir=tmp_path / "split")
    resumed = trainer_class(updates=6, **kwargs).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                     run_dir=tmp_path / "split")
    assert [h["losses/loss_self_imitation"] for h in resumed.history] == [
        h["losses/loss_self_imitation"] for h in whole.history]
    assert resumed.best_placement == whole.best_placement


@pytest.mark.parametrize("trainer_class", [ReinforceTrainer, PPOTrainer, MultiGraphTrainer])
def test_negative_self_imitation_is_refused(trainer_class):
    with pytest.raises(ValueError, match="self_imitation must be >= 0"):
        trainer_class(self_imitation=-1.0)


@pytest.mark.parametrize("trainer_class", [ReinforceTrainer, PPOTrainer])
def test_risk_seeking_search_finds_the_parallel_placement(trainer_class):
    """Learning only from the best half of each batch still finds the two-branch split; no sample is pushed down
    (every advantage is >= 0, where the EMA baseline gives some updates a negative mean advantage)."""
    graph, cluster = two_branches(length=4, cost=1.0, nbytes=1000), uniform_cluster(2, bandwidth=1e6)
    placer = _placer(graph, cluster, max_groups=None, merge_consumers=False)
    trainer = trainer_class(updates=60, samples_per_update=8, lr=1e-2, seed=0, risk_seeking=0.5)
    result = trainer.fit(placer, Simulator(), graph, cluster)
    assert result.best_step_time == pytest.approx(0.01 + 4.0 + 0.01 + 2 * 1000 / 1e6, rel=0.01)
    assert min(h["losses/advantage_mean"] for h in result.history) >= 0
    plain = trainer_class(updates=60, samples_per_update=8, lr=1e-2, seed=0).fit(
        _placer(graph, cluster, max_groups=None, merge_consumers=False), Simulator(), graph, cluster)
    assert min(h["losses/advantage_mean"] for h in plain.history) < 0


@pytest.mark.parametrize("risk_seeking", [0.0, -0.5, 1.5])
def test_risk_seeking_out_of_range_is_refused(risk_seeking):
    with pytest.raises(ValueError, match=r"risk_seeking must be in \(0, 1\]"):
        ReinforceTrainer(risk_seeking=risk_seeking)


def test_a_finished_time_budgeted_run_resumed_with_the_same_budget_runs_no_more(tmp_path):
    """A run that ended on its seconds budget, run again in its directory, samples nothing more: the seconds
    spent before count (each rerun trained a whole new budget: 80, 160, 240 samples)."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    trainer = ReinforceTrainer(updates=10**6, samples_per_update=2, max_seconds=0.3, checkpoint_every=1)
    first = trainer.fit(_placer(graph, cluster), Simulator(), graph, cluster, run_dir=tmp_path)
    again = trainer.fit(_placer(graph, cluster), Simulator(), graph, cluster, run_dir=tmp_path)
    assert first.samples > 0 and again.samples == first.samples and again.seconds >= 0.3
    more = again.seconds + 2.0  # room for an update whatever the first took (a process's first: 0.5-4 s loaded)
    longer = dataclasses.replace(trainer, max_seconds=more).fit(_placer(graph, cluster), Simulator(), graph, cluster,
                                                                run_dir=tmp_path)
    assert longer.samples > first.samples  # a larger budget goes on


class _KilledAtFirstSample(Simulator):
    """sim-v1, interrupted (as by Ctrl-C) when the search measures its first samples."""

    def measure_many(self, graph, cluster, placements):
        raise KeyboardInterrupt


def test_a_run_killed_after_its_imitation_resumes_without_imitating_again(tmp_path):
    """A warm-started run killed in its first update resumes after the imitation: its imitation is logged once
    (a rerun imitated again and logged every imitation step twice)."""
    graph, cluster = two_branches(length=4, cost=1.0, nbytes=1000), uniform_cluster(2, bandwidth=1e6)
    split = _placement(graph, [0] + [0] * 4 + [1] * 4 + [0])
    trainer = ReinforceTrainer(updates=2, samples_per_update=2, imitation_steps=30)
    with pytest.raises(KeyboardInterrupt):
        trainer.fit(_placer(graph, cluster), _KilledAtFirstSample(), graph, cluster, warm_start=split,
                    run_dir=tmp_path)
    trainer.fit(_placer(graph, cluster), Simulator(), graph, cluster, warm_start=split, run_dir=tmp_path)
    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert steps == [-30, -20, -10, -1, 0, 1]


@pytest.mark.parametrize(("make", "words"), [
    (lambda: ReinforceTrainer(lr=float("inf")), "lr must be a finite number, got inf"),
    (lambda: ReinforceTrainer(entropy_coef=float("nan")), "entropy_coef must be a finite number"),
    (lambda: ReinforceTrainer(entropy_coef=-1.0), "entropy_coef must be >= 0, got -1.0"),
    (lambda: ReinforceTrainer(penalty_step_time=float("inf")), "penalty_step_time must be a finite number"),
    (lambda: ReinforceTrainer(seed=-1), "seed must be an int >= 0, got -1"),
    (lambda: PPOTrainer(clip_eps=float("nan")), "clip_eps must be a finite number"),
    (lambda: MultiGraphTrainer(penalty_ratio=float("inf")), "penalty_ratio must be a finite number"),
])
def test_settings_that_would_make_the_weights_nan_are_refused(make, words):
    """lr=inf, entropy_coef=nan and the like made every parameter NaN, and the search went on sampling."""
    with pytest.raises(ValueError, match=re.escape(words)):
        make()


def test_ppo_stops_its_epochs_when_the_time_is_up(monkeypatch):
    """The time limit was checked after all epochs of an update: 50 epochs ran past a budget spent after one."""
    g, c = two_branches(), uniform_cluster(2)
    placer = PolicyPlacer(g, c, LSTMEncoder(hidden_size=16), Seq2SeqPolicy(2, hidden_size=16))
    calls = []
    evaluate = placer.evaluate
    monkeypatch.setattr(placer, "evaluate", lambda devices: calls.append(1) or evaluate(devices))
    from gplace.training import _loop

    checks = iter([False])  # in time for the first update, out of time from then on
    monkeypatch.setattr(_loop.Loop, "out_of_time", lambda self, limit: next(checks, True))
    PPOTrainer(updates=1, epochs=50, samples_per_update=4, max_seconds=60.0).fit(placer, Simulator(), g, c)
    assert len(calls) == 1


@pytest.mark.parametrize("trainer", [ReinforceTrainer, PPOTrainer])
def test_a_placement_slower_than_the_failure_penalty_is_kept_and_warned_about(trainer, caplog):
    """A failure is charged penalty_step_time (100 s); the best sample of a batch was its least charged one, so a
    placement that ran in 150 s lost to a failure, was never kept, and the search raised NothingFitError."""
    from gplace.ir import Cluster, Device, Op, OpGraph
    from gplace.policies import MLPPolicy

    ops = [Op(n, "MatMul", 150.0, persistent_memory=6 * 10**6, output_bytes=10) for n in "ab"]
    graph = OpGraph.from_ops(ops, [], name="two_big")  # both on one 10 MB GPU run out of memory
    cluster = Cluster.build([Device(f"/GPU:{i}", "gpu", 1.0, 10**7) for i in range(2)], default_bandwidth=1e9)
    torch.manual_seed(0)
    placer = PolicyPlacer(graph, cluster, LSTMEncoder(hidden_size=16, type_embedding=8), MLPPolicy(2, 16),
                          max_groups=None, merge_consumers=False)
    with caplog.at_level(logging.WARNING, logger="gplace.training"):
        result = trainer(updates=2, samples_per_update=8, imitation_steps=0, seed=0).fit(placer, Simulator(), graph,
                                                                                         cluster)
    ran = [t for t in result.sample_step_times if np.isfinite(t)]
    assert ran and len(ran) < len(result.sample_step_times)  # both kinds in the batches
    assert result.best_step_time == 150.0
    assert result.history[0]["rollout/min_step_time"] in (150.0, np.inf)
    warned = [r.getMessage() for r in caplog.records if "penalty_step_time" in r.getMessage()]
    assert len(warned) == 1 and "took 150 s" in warned[0]


class _CountingSimulator(Simulator):
    """sim-v1 counting the samples a search measures, interrupted (as by a kill) at rollout ``killed_at``."""

    def __init__(self, killed_at: int | None = None) -> None:
        super().__init__()
        self.rollouts, self.samples, self.killed_at = 0, 0, killed_at

    def measure_many(self, graph, cluster, placements):
        self.rollouts += 1
        if self.rollouts == self.killed_at:
            raise KeyboardInterrupt
        self.samples += len(placements)
        return super().measure_many(graph, cluster, placements)


def test_a_finished_search_whose_samples_all_failed_samples_nothing_more_when_run_again(tmp_path):
    """Every sample out of memory: the run still checkpoints, so a rerun in its directory measures no sample and
    ends as it did (it wrote no checkpoint: each rerun searched its whole budget again, replacing its metrics)."""
    graph, cluster = chain(nbytes=10**6), uniform_cluster(2, memory=10**5)
    trainer = ReinforceTrainer(updates=3, samples_per_update=2)
    with pytest.raises(InvalidPlacementError) as first:
        trainer.fit(_placer(graph, cluster), Simulator(), graph, cluster, run_dir=tmp_path)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert state["update"] == 3 and state["best_devices"] is None
    again = _CountingSimulator()
    with pytest.raises(InvalidPlacementError) as second:
        trainer.fit(_placer(graph, cluster), again, graph, cluster, run_dir=tmp_path)
    assert again.samples == 0 and second.value.result.samples == first.value.result.samples == 6
    assert np.all(np.isinf(second.value.result.sample_step_times)) and len(second.value.result.history) == 3


def test_a_killed_search_whose_samples_all_failed_resumes_from_its_checkpoint(tmp_path):
    """Every sample out of memory, the run killed in its 4th update: a rerun measures only the 2 updates left and
    ends with the history of an uninterrupted run (it started again from scratch, measuring all 4)."""
    graph, cluster = chain(nbytes=10**6), uniform_cluster(2, memory=10**5)
    trainer = ReinforceTrainer(updates=5, samples_per_update=2, checkpoint_every=1)
    with pytest.raises(InvalidPlacementError) as whole:
        trainer.fit(_placer(graph, cluster), Simulator(), graph, cluster, run_dir=tmp_path / "whole")
    with pytest.raises(KeyboardInterrupt):
        trainer.fit(_placer(graph, cluster), _CountingSimulator(killed_at=4), graph, cluster,
                    run_dir=tmp_path / "killed")
    resumed = _CountingSimulator()
    with pytest.raises(InvalidPlacementError) as again:
        trainer.fit(_placer(graph, cluster), resumed, graph, cluster, run_dir=tmp_path / "killed")
    assert resumed.samples == 4 and again.value.result.samples == 10
    assert again.value.result.history == whole.value.result.history


def test_a_warm_start_given_to_a_resumed_run_is_ignored_with_a_warning(tmp_path, caplog):
    """warm_start= added when rerunning a finished run: its checkpoint wins, and the log says so (it was silent)."""
    graph, cluster = two_branches(length=3), uniform_cluster(2)
    trainer = ReinforceTrainer(updates=2, samples_per_update=2)
    trainer.fit(_placer(graph, cluster), Simulator(), graph, cluster, run_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="gplace.training"):
        trainer.fit(_placer(graph, cluster), Simulator(), graph, cluster, run_dir=tmp_path,
                    warm_start=_placement(graph, [0] * graph.num_ops))
    assert any("warm_start is ignored: the search resumes from its checkpoint" in r.getMessage()
               for r in caplog.records if r.levelno == logging.WARNING)
