"""Multi-graph training: one shared policy improves over several tasks, resumes exactly, and fine-tunes."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
import torch

from gplace.baselines import HEFT
from gplace.encoders import GNNEncoder
from gplace.ir import Cluster, Device
from gplace.placer import PolicyPlacer
from gplace.policies import DeviceAwarePolicy, GDPPolicy, ListSchedulingPolicy
from gplace.pretrained import build, place_zero_shot
from gplace.runtime import Simulator
from gplace.testing import random_dag, uniform_cluster
from gplace.training import ReinforceTrainer
from gplace.training.multigraph import MultiGraphTrainer, finetune, reference_step_time


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread: tiny graphs gain nothing from two, and OpenMP threads spin on a busy 2-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _cluster(*speeds: float) -> Cluster:
    """Devices of the given speeds on 1 MB/s links (the device-aware policy tells devices apart by features,
    so on equal devices its choice is uniform whatever its weights)."""
    devices = [Device(f"/GPU:{i}", "gpu", s) for i, s in enumerate(speeds)]
    return Cluster.build(devices, default_bandwidth=1e6, name="x".join(map(str, speeds)))


def _modules():
    torch.manual_seed(0)
    encoder = build(GNNEncoder, conv="sage", hidden_size=16, num_layers=2, type_embedding=8, projection=8)
    return encoder, build(DeviceAwarePolicy, hidden_size=16)


def _tasks():
    """Three random DAGs on clusters of 2 and 3 devices of different speeds."""
    return [(random_dag(12, seed=1), _cluster(1, 4)), (random_dag(12, seed=2), _cluster(1, 2, 4)),
            (random_dag(12, seed=3), _cluster(4, 1, 1))]


def _trainer(updates: int, **kw) -> MultiGraphTrainer:
    return MultiGraphTrainer(updates=updates, samples_per_update=8, lr=1e-2, entropy_coef=1e-3, seed=0, **kw)


def test_training_over_three_graphs_improves_the_mean_normalized_reward():
    """The mean -sqrt(step time / best single device) of the last updates beats that of the first ones."""
    encoder, policy = _modules()
    result = _trainer(30).fit(encoder, policy, _tasks(), Simulator())
    rewards = [h["rollout/mean_reward"] for h in result.history]
    assert np.mean(rewards[-6:]) > np.mean(rewards[:6]) + 0.1
    assert result.updates == 30 and result.samples == 30 * 8
    assert sum(t.samples for t in result.tasks) == result.samples
    for task in result.tasks:
        assert task.best_step_time >= task.reference_step_time * 0.0 and math.isfinite(task.best_step_time)
        assert math.isfinite(task.greedy_step_time)


def test_rewards_are_normalized_by_the_best_single_device_step_time():
    """The reference of a task on equal devices is the all-on-one-device step time (the sum of op costs)."""
    graph, cluster = random_dag(12, seed=1), uniform_cluster(2)
    assert reference_step_time(graph, cluster, Simulator()) == pytest.approx(float(graph.compute_cost.sum()))


def test_resumed_training_equals_uninterrupted_training(tmp_path):
    """3 updates, then a resume to 6, end with the same weights, history and best placements as 6 in one go."""
    straight_encoder, straight_policy = _modules()
    straight = _trainer(6, tasks_per_update=2).fit(straight_encoder, straight_policy, _tasks(), Simulator())

    encoder, policy = _modules()
    _trainer(3, tasks_per_update=2, checkpoint_every=2).fit(encoder, policy, _tasks(), Simulator(), run_dir=tmp_path)
    encoder, policy = _modules()  # a fresh process: the weights come from the checkpoint
    resumed = _trainer(6, tasks_per_update=2).fit(encoder, policy, _tasks(), Simulator(), run_dir=tmp_path)

    assert resumed.history == straight.history
    for a, b in zip(straight_policy.state_dict().values(), policy.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(straight.tasks, resumed.tasks, strict=True):
        assert a.best_step_time == b.best_step_time and a.samples == b.samples
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines if '"step"' in line][-3:] == [3, 4, 5]


def test_self_imitation_pulls_the_shared_policy_onto_each_tasks_best_placement():
    """With ``self_imitation`` each drawn task adds minus the log-likelihood of its best placement so far: after
    training, the policy gives every task's best placement more probability than without the term."""
    log_prob_of_best = {}
    for weight in (0.0, 3.0):
        encoder, policy = _modules()
        trainer = _trainer(30, self_imitation=weight)
        tasks = _tasks()
        result = trainer.fit(encoder, policy, tasks, Simulator())
        placers = [PolicyPlacer(g, c, encoder, policy, max_groups=trainer.max_groups) for g, c in tasks]
        with torch.no_grad():
            log_prob_of_best[weight] = [float(p.evaluate(t.best_placement.devices[None])[0][0])
                                        for p, t in zip(placers, result.tasks, strict=True)]
    assert all(h["losses/loss_self_imitation"] >= 0 for h in result.history)
    # measured: -3.0, -4.7, -6.2 with the term against -5.5, -11.1, -21.2 without
    gains = [with_term - without for with_term, without in zip(log_prob_of_best[3.0], log_prob_of_best[0.0],
                                                                strict=True)]
    assert min(gains) > 1.0 and sum(gains) > 15.0


def test_a_resumed_multigraph_run_with_self_imitation_equals_an_uninterrupted_one(tmp_path):
    kwargs = dict(tasks_per_update=2, self_imitation=1.0)
    encoder, policy = _modules()
    straight = _trainer(6, **kwargs).fit(encoder, policy, _tasks(), Simulator())
    encoder, policy = _modules()
    _trainer(3, checkpoint_every=2, **kwargs).fit(encoder, policy, _tasks(), Simulator(), run_dir=tmp_path)
    encoder, policy = _modules()
    resumed = _trainer(6, **kwargs).fit(encoder, policy, _tasks(), Simulator(), run_dir=tmp_path)
    assert resumed.history == straight.history
    assert [h["losses/loss_self_imitation"] for h in resumed.history][-1] > 0


def test_starts_are_each_tasks_best_placement_from_the_first_update():
    """``starts`` (here HEFT's placements) are each task's best before any sample: after one update of one task
    the two tasks not drawn report their start, and the drawn one's self-imitation term is the start's
    log-likelihood under the initial weights (no sample beat it; measured 2.69 against 3.06)."""
    tasks = _tasks()
    starts = [HEFT().place(g, c) for g, c in tasks]
    start_times = [Simulator().measure(g, c, p).step_time for (g, c), p in zip(tasks, starts, strict=True)]
    encoder, policy = _modules()
    with torch.no_grad():
        drawn = PolicyPlacer(*tasks[2], encoder, policy, max_groups=_trainer(1).max_groups)
        expected = -3.0 * float(drawn.evaluate(drawn.project(starts[2]).devices[None])[0][0])

    result = _trainer(1, self_imitation=3.0).fit(encoder, policy, tasks, Simulator(), starts=starts)
    assert [t.samples for t in result.tasks] == [0, 0, 8]
    assert [t.best_step_time for t in result.tasks] == start_times
    assert all(t.best_placement is s for t, s in zip(result.tasks, starts, strict=True))
    assert result.history[0]["losses/loss_self_imitation"] == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="2 starts for 3 tasks"):
        _trainer(1).fit(encoder, policy, tasks, Simulator(), starts=starts[:2])


def test_a_resumed_run_with_starts_equals_an_uninterrupted_one(tmp_path):
    """The checkpoint keeps each task's best, the starts' included, so a resume does not measure them again."""
    tasks, kwargs = _tasks(), dict(tasks_per_update=1, self_imitation=1.0)
    starts = [HEFT().place(g, c) for g, c in tasks]
    encoder, policy = _modules()
    straight = _trainer(6, **kwargs).fit(encoder, policy, tasks, Simulator(), starts=starts)
    encoder, policy = _modules()
    _trainer(3, checkpoint_every=2, **kwargs).fit(encoder, policy, tasks, Simulator(), run_dir=tmp_path, starts=starts)
    encoder, policy = _modules()
    resumed = _trainer(6, **kwargs).fit(encoder, policy, tasks, Simulator(), run_dir=tmp_path, starts=starts)
    assert resumed.history == straight.history
    assert [t.best_step_time for t in resumed.tasks] == [t.best_step_time for t in straight.tasks]


def test_a_checkpoint_of_other_tasks_is_not_resumed(tmp_path):
    """Resuming on another task list would mix runs, so it is refused."""
    encoder, policy = _modules()
    _trainer(1).fit(encoder, policy, _tasks(), Simulator(), run_dir=tmp_path)
    with pytest.raises(ValueError, match=r"belongs to another list of tasks .*resume with the tasks it ran on"):
        _trainer(2).fit(encoder, policy, _tasks()[:2], Simulator(), run_dir=tmp_path)
    with pytest.raises(ValueError, match="at least one"):
        _trainer(2).fit(encoder, policy, [], Simulator())


def test_a_task_the_policy_cannot_place_is_refused_before_any_training(tmp_path):
    """A fixed-size policy (3 devices) and one 2-device task: refused when that task was first drawn, after
    checkpointed updates, or only when the results were built after all of them."""
    torch.manual_seed(0)
    encoder = build(GNNEncoder, conv="sage", hidden_size=16, num_layers=1)
    policy = build(GDPPolicy, num_devices=3, hidden_size=16, num_heads=2, num_layers=1)
    tasks = [(random_dag(10, seed=s), uniform_cluster(3)) for s in range(5)] + [(random_dag(10, seed=9),
                                                                                uniform_cluster(2))]
    trainer = MultiGraphTrainer(updates=5, samples_per_update=2, seed=3, checkpoint_every=1)  # never draws task 5
    with pytest.raises(ValueError, match="GDPPolicy has 3 devices, cluster '2xgpu' has 2"):
        trainer.fit(encoder, policy, tasks, Simulator(), run_dir=tmp_path)
    assert not (tmp_path / "checkpoint.pt").exists()


@pytest.mark.parametrize(("tasks", "match"), [
    (lambda g, c: [(c, g)], r"tasks\[0\]: graph must be a gplace OpGraph, got Cluster"),
    (lambda g, c: [g], r"tasks\[0\] must be a \(graph, cluster\) pair, got OpGraph"),
    (lambda g, c: ((g, c) for _ in range(2)), "tasks must be a list of .* got generator"),
])
def test_tasks_that_are_not_graph_cluster_pairs_are_named(tasks, match):
    encoder, policy = _modules()
    with pytest.raises(TypeError, match=match):
        _trainer(1).fit(encoder, policy, tasks(random_dag(8, seed=1), _cluster(1, 2)), Simulator())


def test_a_multigraph_resume_on_another_grouping_is_refused_and_other_settings_are_named(tmp_path, caplog):
    """It resumed with another max_groups and other policy settings silently (a single-graph run refuses the one
    and warns about the other)."""
    def modules(prior_weight):
        torch.manual_seed(0)
        return _modules()[0], build(ListSchedulingPolicy, hidden_size=16, state_size=16, prior_weight=prior_weight)

    _trainer(1, max_groups=8).fit(*modules(3.0), _tasks(), Simulator(), run_dir=tmp_path)
    with pytest.raises(ValueError, match="written for another grouping"):
        _trainer(2, max_groups=4).fit(*modules(3.0), _tasks(), Simulator(), run_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="gplace.training.checkpoint"):
        _trainer(2, max_groups=8).fit(*modules(0.0), _tasks(), Simulator(), run_dir=tmp_path)
    assert "other settings than its run's (policy.prior_weight: 3.0 -> 0.0)" in caplog.text


def test_a_multigraph_resume_with_other_trainer_settings_names_them(tmp_path, caplog):
    """Only the encoder's and policy's settings were recorded: a resume with another entropy weight or penalty
    went on silently (a single-graph run warns)."""
    _trainer(1).fit(*_modules(), _tasks(), Simulator(), run_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="gplace.training.checkpoint"):
        _trainer(2, penalty_ratio=3.0).fit(*_modules(), _tasks(), Simulator(), run_dir=tmp_path)
    assert "penalty_ratio: 10.0 -> 3.0" in caplog.text, caplog.text


def test_finetune_arguments_of_the_wrong_kind_are_named():
    encoder, policy = _modules()
    graph, cluster = random_dag(8, seed=1), _cluster(1, 2)
    with pytest.raises(TypeError, match="trainer must be a ReinforceTrainer or PPOTrainer instance"):
        finetune(encoder, policy, graph, cluster, Simulator(), trainer=MultiGraphTrainer(updates=1))
    with pytest.raises(TypeError, match="runtime must be a gplace Runtime"):
        finetune(encoder, policy, graph, cluster, None)
    with pytest.raises(TypeError, match="graph must be a gplace OpGraph"):
        finetune(encoder, policy, cluster, graph, Simulator())


def test_zero_shot_and_finetune_on_an_unseen_graph_and_cluster_size():
    """After training on 2- and 3-device tasks, the policy places a new graph on 4 devices, and fine-tunes it."""
    encoder, policy = _modules()
    _trainer(10).fit(encoder, policy, _tasks(), Simulator())
    graph, cluster = random_dag(16, seed=7), _cluster(1, 2, 1, 4)
    placement = place_zero_shot(encoder, policy, graph, cluster, samples=4)
    placement.validate(graph, cluster)
    assert placement.devices.max() < 4

    before = {k: v.clone() for k, v in policy.state_dict().items()}
    result = finetune(encoder, policy, graph, cluster, Simulator(),
                      trainer=ReinforceTrainer(updates=3, samples_per_update=4, lr=1e-2))
    assert result.samples == 12 and math.isfinite(result.best_step_time)
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())  # the pretrained copy is kept


class _DropsLast(Simulator):
    """sim-v1 that loses the last measurement of every batch (a wrapper of one's own with a bug)."""

    def measure_many(self, graph, cluster, placements):
        return super().measure_many(graph, cluster, placements)[:-1]


def test_a_runtime_returning_too_few_measurements_is_named():
    """measure_many's results were paired with the placements as they came: one missing shifted every step time
    onto another placement (and the task's best could be a placement never measured)."""
    encoder, policy = _modules()
    with pytest.raises(ValueError, match=r"returned 7 measurements for 8 placements"):
        _trainer(1).fit(encoder, policy, _tasks()[:1], _DropsLast())


def test_a_placement_slower_than_the_failure_ratio_is_warned_about(caplog):
    """A failure is charged penalty_ratio times the reference; a placement that ran slower than that was rewarded
    below a failure with nothing said (the single-graph trainers warn about their penalty_step_time)."""
    graph, cluster = random_dag(12, seed=1), _cluster(1, 4)
    encoder, policy = _modules()
    with caplog.at_level(logging.WARNING, logger="gplace.training"):
        _trainer(2, penalty_ratio=1.01).fit(encoder, policy, [(graph, cluster)], Simulator())
    warned = [r.getMessage() for r in caplog.records if "penalty_ratio" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith(f"task {graph.name} on {cluster.name}")


@pytest.mark.parametrize(("edit", "named"), [
    (lambda state: state["tasks"][0].pop("baseline"), "KeyError: 'baseline'"),
    (lambda state: state.__setitem__("draws", None), "TypeError"),
])
def test_an_edited_multigraph_checkpoint_is_refused_naming_the_file(tmp_path, edit, named):
    """A task's part missing or the draws replaced raised KeyError or TypeError from deep inside."""
    from gplace.run_dir import RunDirConflictError

    encoder, policy = _modules()
    _trainer(2, checkpoint_every=1).fit(encoder, policy, _tasks(), Simulator(), run_dir=tmp_path)
    path = tmp_path / "checkpoint.pt"
    state = torch.load(path, weights_only=False)
    edit(state)
    torch.save(state, path)
    encoder, policy = _modules()
    with pytest.raises(RunDirConflictError, match=f"checkpoint {path} cannot be resumed: .*{named}"):
        _trainer(3).fit(encoder, policy, _tasks(), Simulator(), run_dir=tmp_path)
