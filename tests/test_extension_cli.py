"""Parts of one's own through the CLI: config folders on ``hydra.searchpath``, encoders, policies, graphs, clusters
and trainers written outside gplace are taken as the README says, or refused in one line naming them."""

import dataclasses
import os
import subprocess
import sys
import textwrap

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

import gplace
from gplace import cli
from gplace.bench.searches import build_learner
from gplace.ir import Placement
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import TrainResult

MODULE = "gplace_ext_parts"
PARTS = '''
import torch
from torch import nn


class PlainEncoder:
    """An encoder that is no nn.Module: a plain callable."""

    def __call__(self, features):
        return features["numeric"].float()


class NoSettings:
    """A class whose constructor takes nothing."""


class TupleEncoder(nn.Module):
    """An encoder that takes any settings and returns its states twice, as a tuple."""

    num_type_buckets, max_neighbours = 64, 8

    def __init__(self, **settings) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, features):
        return features["numeric"], features["numeric"]


class AnyClusterPolicy(nn.Module):
    """A policy for any cluster: its constructor takes no num_devices."""

    def __init__(self, state_size: int = 8) -> None:
        super().__init__()
        self.head = nn.Linear(state_size, 8)
'''


@pytest.fixture
def parts(tmp_path, monkeypatch):
    """A third-party module, importable as :data:`MODULE`."""
    (tmp_path / f"{MODULE}.py").write_text(textwrap.dedent(PARTS))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    return MODULE


def _config(name: str, *overrides: str):
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        return compose(config_name=name, overrides=list(overrides))


def _refused(capsys, call) -> str:
    with pytest.raises(SystemExit):
        call()
    return capsys.readouterr().err


@pytest.mark.slow
def test_bench_composes_cases_and_searches_with_the_command_lines_searchpath(tmp_path):
    """The cases and learned searches were composed without it: 'Could not find runtime/mine'."""
    conf = tmp_path / "myconf"
    (conf / "runtime").mkdir(parents=True)
    (conf / "encoder").mkdir()
    (conf / "runtime" / "mine.yaml").write_text("defaults:\n  - simulator\n  - _self_\n")
    (conf / "encoder" / "mine.yaml").write_text("defaults:\n  - lstm\n  - _self_\nhidden_size: 8\n")
    case = "['graph=lstm_lm','cluster=paper_2gpu','graph.steps=2','graph.hidden=64','graph.vocab=100','runtime=mine']"
    args = [sys.executable, "-m", "gplace", "bench", f"hydra.searchpath=[file://{conf}]", f"cases=[{case}]",
            f"out_dir={tmp_path / 'out'}", f"hydra.run.dir={tmp_path / 'h'}", "~baselines",
            "+baselines={heft:{_target_:gplace.baselines.HEFT}}", "~learned",
            "+learned={mine:{overrides:['encoder=mine','policy=mlp'],warm_start:false}}",
            "search.seconds=1", "search.updates=1", "search.plots=false"]
    env = {**os.environ, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0"}
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| mine" in (tmp_path / "out" / "RESULTS.md").read_text()


def test_a_trainers_list_of_sample_times_is_taken_as_an_array(tmp_path):
    """A list passed check_trainer, then writing the result failed comparing it with a float."""
    graph, cluster = random_dag(20), cpu_gpu_cluster(2)

    @dataclasses.dataclass
    class ListTrainer:
        def fit(self, placer, runtime, graph, cluster, *, run_dir=None, logger=None, warm_start=None):
            placement = Placement.single(graph, 1)
            measured = runtime.measure(graph, cluster, placement)
            return TrainResult(placement, measured, 1, 0.0, sample_step_times=[measured.step_time])

    report = gplace.place(graph, cluster, trainer=ListTrainer(), run_dir=tmp_path)
    assert report.train.best_sample in (1, None) and report.train.sample_step_times.dtype == "float64"
    assert (tmp_path / "placement.json").is_file()


def test_an_encoder_that_is_no_module_is_refused_naming_it(parts, capsys):
    """It was taken for a partial and called with no arguments ('missing 1 required positional argument')."""
    node = OmegaConf.create({"_target_": f"{parts}.PlainEncoder"})
    err = _refused(capsys, lambda: cli._savable(node, "encoder"))
    assert f"encoder: encoder._target_={parts}.PlainEncoder built a PlainEncoder, not a torch.nn.Module" in err


def test_a_policy_for_any_cluster_is_built_without_num_devices(parts):
    """num_devices was always passed: 'unexpected keyword argument', blamed on the policy's settings."""
    node = OmegaConf.create({"_target_": f"{parts}.AnyClusterPolicy", "_partial_": True, "state_size": 4})
    policy = cli._savable(node, "policy", num_devices=3)
    assert policy.head.in_features == 4 and policy.init_kwargs == {"state_size": 4}
    c = OmegaConf.create({"seed": 0, "encoder": {"_target_": "torch.nn.Identity"}, "policy": node})
    assert type(build_learner(c, 3)[1]).__name__ == "AnyClusterPolicy"


def test_an_encoder_config_without_hidden_size_says_how_to_size_the_policy(capsys):
    cfg = OmegaConf.create({"encoder": {"_target_": "x"}, "policy": {"state_size": "${encoder.hidden_size}"}})
    err = _refused(capsys, lambda: cli._guard(lambda: None, cfg))
    assert "Interpolation key 'encoder.hidden_size' not found" in err and "set policy.state_size=" in err


@pytest.mark.parametrize(("command", "overrides", "message"), [
    ("config", ["logger=none", "cluster._target_=builtins.dict"], "cluster._target_=builtins.dict returned a dict, "
                                                                   "not a gplace Cluster"),
    ("place", ["method=heft", "graph._target_=builtins.dict"], "graph._target_=builtins.dict returned a dict, not a "
                                                                "gplace OpGraph"),
    ("config", ["logger=none", "runtime._target_=builtins.dict"], "runtime._target_=builtins.dict returned a dict, "
                                                                   "not a gplace Runtime"),  # a Hydra traceback, exit 1
    ("place", ["method=heft", "runtime._target_=builtins.dict"], "runtime._target_=builtins.dict returned a dict, "
                                                                  "not a gplace Runtime"),
])
def test_a_graph_cluster_or_runtime_target_returning_another_type_is_refused_naming_it(command, overrides, message,
                                                                                      tmp_path, capsys):
    """A dict went on to an AttributeError ('dict' object has no attribute 'num_devices' / 'source')."""
    run = cli.place_with_policy if command == "place" else cli.run
    cfg = _config(command, *overrides)
    assert message in _refused(capsys, lambda: run(cfg, tmp_path / "run"))


def test_a_target_override_onto_a_class_without_settings_says_how_to_start_from_none(parts, capsys):
    """``runtime._target_=mine.Runtime`` keeps the simulator's settings: "a value of the wrong type (TypeError:
    NoSettings() takes no arguments)" named none of them."""
    from hydra.utils import instantiate

    cfg = _config("config", "logger=none", f"runtime._target_={parts}.NoSettings")
    err = _refused(capsys, lambda: cli._guard(lambda: instantiate(cfg.runtime), cfg))
    assert f"runtime: {parts}.NoSettings takes no settings, but runtime holds some" in err
    assert f"start from none with '~runtime' '+runtime._target_={parts}.NoSettings'" in err
    fresh = _config("config", "logger=none", "~runtime", f"+runtime._target_={parts}.NoSettings")
    assert type(instantiate(fresh.runtime)).__name__ == "NoSettings"  # the hint works (~runtime.NAME did not: a
    # setting whose value is null "does not exist" for Hydra, and every runtime config has one)


@pytest.mark.slow
def test_the_pipeline_bench_composes_its_searches_with_the_command_lines_searchpath(tmp_path):
    """Its learned searches were composed without it: 'Could not find encoder/mine'."""
    conf = tmp_path / "myconf" / "encoder"
    conf.mkdir(parents=True)
    (conf / "mine.yaml").write_text("defaults:\n  - gnn\n  - _self_\nhidden_size: 8\n")
    args = [sys.executable, "-m", "gplace", "bench", "--config-name", "bench_pipeline",
            f"hydra.searchpath=[file://{tmp_path / 'myconf'}]", f"out_dir={tmp_path / 'out'}",
            f"hydra.run.dir={tmp_path / 'h'}", "~graphs",
            "+graphs={c: {_target_: gplace.testing.chain, costs: [1, 2]}}",
            "~clusters", "+clusters={two: {_target_: gplace.testing.uniform_cluster, num_devices: 2}}", "~placers",
            "+placers={single_gpu: {_target_: gplace.baselines.SingleDevice, kind: gpu}}", "~learned",
            "+learned={mine: {overrides: ['encoder=mine','policy=list_scheduling']}}", "search.graphs=[c]",
            "search.clusters=[two]", "search.updates=1", "targets.cluster=two", "targets.profiles=[c]",
            "targets.microbatches=4", "microbatches=[4]", "search.microbatches=[4]", "schedules=[gpipe]",
            "search.schedules=[gpipe]"]
    env = {**os.environ, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0"}
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| mine" in (tmp_path / "out" / "PIPELINE.md").read_text()


def test_an_encoder_returning_the_wrong_kind_of_object_is_bad_input_in_one_line(parts, tmp_path, capsys):
    """A tuple of states gave Hydra's 50-line traceback and exit 1 (a TypeError); a wrong width already gave one line
    and exit 2 (a ContractError, a ValueError)."""
    cfg = _config("config", "logger=none", f"encoder._target_={parts}.TupleEncoder", "trainer.updates=1")
    with pytest.raises(SystemExit) as exited:
        cli._guard(lambda: cli.run(cfg, tmp_path / "run"), cfg)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert "gplace: error: ContractTypeError: encoder TupleEncoder must return its states as a (G=" in err
    assert "Traceback" not in err
