import json
import logging
import re

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.utils import instantiate

from gplace.encoders import GNNEncoder
from gplace.experiment import place
from gplace.grouping import identity_grouping
from gplace.ir import Placement
from gplace.pipeline import PipelineSimulator, SteadyStateScore
from gplace.placer import PolicyPlacer
from gplace.policies import ListSchedulingPolicy
from gplace.runtime import Simulator
from gplace.testing import uniform_cluster
from gplace.training import ReinforceTrainer
from tests.pipeline.graphs import random_training_dag, training_chain


def test_objective_group_composes_to_the_pipeline_runtimes():
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        step = instantiate(compose(config_name="config").objective)(Simulator())
        pipe = instantiate(compose(config_name="config", overrides=[
            "objective=pipeline", "objective.microbatches=16", "objective.schedule=gpipe"]).objective)(Simulator())
        steady = instantiate(compose(config_name="config", overrides=["objective=pipeline_steady"]).objective)(None)
    assert isinstance(step, Simulator)
    assert isinstance(pipe, PipelineSimulator) and pipe.id == "pipe-v3/gpipe/m16"
    assert isinstance(steady, SteadyStateScore) and steady.id == "pipe-steady-v1/m4"


@pytest.mark.parametrize(("overrides", "refused"), [
    (["+objective.microbatches=16"], "objective step takes no microbatches (given: microbatches=16)"),
    (["objective=pipeline", "objective.name=step"], "objective step takes no microbatches or schedule"),
    (["objective=pipeline_steady", "+objective.schedule=gpipe"], "objective pipeline_steady takes no schedule"),
])
def test_a_setting_the_objective_does_not_take_is_refused(overrides, refused):
    """Hydra's hint for objective.microbatches=16 is +objective.microbatches=16, which then measured sim-v1 steps
    without a word (as did objective.name=step after objective=pipeline)."""
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        objective = instantiate(compose(config_name="config", overrides=overrides).objective)
    with pytest.raises(ValueError, match=re.escape(refused)):
        objective(Simulator())


def test_a_pipeline_objective_says_the_configured_runtime_is_not_used(caplog):
    """runtime=cached_simulator (or torch) objective=pipeline measured with pipe-v3 without a word."""
    from gplace.pipeline.objective import objective_runtime
    from gplace.runtime import Simulator
    from gplace.runtime.cache import CachedRuntime

    with caplog.at_level(logging.WARNING, logger="gplace.pipeline.objective"):
        objective_runtime(Simulator(), "pipeline")
        assert not caplog.records
        assert objective_runtime(CachedRuntime(Simulator()), "pipeline_steady").id.startswith("pipe-steady-v1")
    assert "the configured runtime's CachedRuntime around sim-v1 is not applied to it" in caplog.text


def test_stage_features_are_off_by_default_and_widen_the_dynamic_features_when_on():
    g, c = random_training_dag(6, 0), uniform_cluster(3)
    encoder = GNNEncoder("sage", hidden_size=8, num_layers=1, type_embedding=4, projection=4)
    plain, staged = ListSchedulingPolicy(8, state_size=8), ListSchedulingPolicy(8, state_size=8, stage_features=True)
    assert plain.dynamic[0].in_features == 8 and staged.dynamic[0].in_features == 11
    torch.manual_seed(0)
    placer = PolicyPlacer(g, c, encoder, staged, grouping=identity_grouping(g))
    devices = placer.greedy().devices
    assert devices.shape == (g.num_ops,) and np.isin(devices, range(3)).all()


def test_a_trainer_learns_on_the_pipeline_objective_warm_started(tmp_path):
    torch.manual_seed(0)
    g, c = random_training_dag(8, 2), uniform_cluster(2, bandwidth=1e8)
    runtime = PipelineSimulator(4, "1f1b")
    layer_of = [int(name[1:]) if name[0] in "fb" else 7 for name in g.op_names]
    warm = Placement.for_graph(g, [0 if layer < 4 else 1 for layer in layer_of])
    encoder = GNNEncoder("sage", hidden_size=8, num_layers=1, type_embedding=4, projection=4)
    policy = ListSchedulingPolicy(8, state_size=8, stage_features=True)
    report = place(g, c, encoder=encoder, policy=policy, runtime=runtime, max_groups=64, run_dir=tmp_path,
                   trainer=ReinforceTrainer(updates=2, samples_per_update=2, imitation_steps=5), warm_start=warm)
    assert report.measurement.runtime == "pipe-v3/1f1b/m4"
    assert report.measurement.step_time <= runtime.measure(g, c, warm).step_time
    doc = json.loads((tmp_path / "placement.json").read_text())
    assert doc["runtime"] == "pipe-v3/1f1b/m4" and sum(len(v) for v in doc["stages"].values()) == g.num_ops


ENCODERS = ["gat", "gin", "gnn", "lstm", "sage"]
POLICIES = ["device_aware", "gdp", "list_scheduling", "mlp", "seq2seq", "superposition"]


def test_every_encoder_and_policy_config_is_tested_here():
    from importlib.resources import files

    conf = files("gplace.conf")
    assert sorted(p.name[:-5] for p in conf.joinpath("encoder").iterdir() if p.name.endswith(".yaml")) == ENCODERS
    assert sorted(p.name[:-5] for p in conf.joinpath("policy").iterdir() if p.name.endswith(".yaml")) == POLICIES


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("encoder", ENCODERS)
def test_every_encoder_and_policy_runs_on_the_pipeline_objective(tmp_path, encoder, policy):
    """The CLI's composition (config.yaml + overrides, gplace.cli.run) with objective=pipeline, two updates."""
    from gplace.cli import run
    from gplace.ir import graph_to_dict, save_json

    graph = save_json(graph_to_dict(training_chain((1.0, 2.0, 1.5, 0.5))), tmp_path / "g.json")
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "graph=file", f"graph.path={graph}", "cluster=paper_2gpu", f"encoder={encoder}", f"policy={policy}",
            "objective=pipeline", "objective.microbatches=2", "logger=none", "trainer.updates=2",
            "trainer.samples_per_update=2", "trainer.progress=false", "encoder.hidden_size=8"])
    step_time = run(cfg, tmp_path / "run")
    doc = json.loads((tmp_path / "run" / "placement.json").read_text())
    assert doc["runtime"] == "pipe-v3/1f1b/m2" and doc["step_time"] == pytest.approx(step_time) and step_time > 0


def test_the_cli_table_names_the_pipeline_runtime_and_a_minibatch_time(tmp_path, capsys):
    from gplace.cli import run
    from gplace.ir import graph_to_dict, save_json

    graph = save_json(graph_to_dict(training_chain((1.0, 2.0, 1.5, 0.5))), tmp_path / "g.json")
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "graph=file", f"graph.path={graph}", "cluster=paper_2gpu", "objective=pipeline",
            "objective.microbatches=2", "logger=none", "trainer.updates=1", "trainer.samples_per_update=2",
            "trainer.progress=false"])
    run(cfg, tmp_path / "run")
    out = capsys.readouterr().out
    assert "pipe-v3/1f1b/m2" in out and "mini-batch time" in out and "step time" not in out


def test_the_cli_warm_starts_from_a_pipeline_placer_by_name(tmp_path):
    from gplace.baselines.pipeline import IdealDPPartitioner
    from gplace.cli import run
    from gplace.ir import graph_to_dict, save_json
    from gplace.pipeline import PipelineSimulator
    from gplace.zoo import paper_cluster

    chain = training_chain((1.0, 2.0, 1.5, 0.5, 2.5, 1.0))
    graph = save_json(graph_to_dict(chain), tmp_path / "g.json")
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "graph=file", f"graph.path={graph}", "cluster=paper_2gpu", "objective=pipeline", "objective.microbatches=4",
            "warm_start=ideal_dp", "logger=none", "trainer.updates=1", "trainer.samples_per_update=2",
            "trainer.progress=false"])
    split = IdealDPPartitioner(microbatches=4).place(chain, paper_cluster(2))
    assert run(cfg, tmp_path / "run") <= PipelineSimulator(4, "1f1b").measure(chain, paper_cluster(2), split).step_time
