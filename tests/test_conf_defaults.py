"""Settings live in one place: a component's YAML keeps only what differs from its constructor's defaults, every
key is an argument of its ``_target_``, and the composed config still lists (and overrides) every argument."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_module
from hydra.utils import instantiate

import gplace.conf
from gplace.conf import CODE_DEFAULTS, code_defaults

CONF = Path(gplace.conf.__file__).parent
META = {"_target_", "_partial_", "defaults"}


def _target(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _component_files():
    return sorted(p for p in CONF.glob("*/*.yaml") if p.parent.name not in ("hydra",))


@pytest.fixture(scope="module", autouse=True)
def hydra_conf():
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        yield


@pytest.mark.parametrize("config", sorted(CODE_DEFAULTS))
def test_yaml_keeps_only_what_differs_from_the_code(config):
    written = yaml.safe_load((CONF / f"{config}.yaml").read_text())
    assert written["defaults"][0] == f"/_defaults/{config}@_here_"
    defaults = code_defaults(CODE_DEFAULTS[config])
    repeated = {k: v for k, v in written.items() if k not in META and k in defaults and defaults[k] == v}
    assert repeated == {}, f"{config}.yaml repeats the code's defaults {repeated}"


@pytest.mark.parametrize("path", _component_files(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_key_is_an_argument_of_its_target(path):
    group = path.parent.name
    cfg = compose(config_name="config", overrides=[f"{group}={path.stem}"])[group]
    target = _target(cfg["_target_"])
    params = inspect.signature(target).parameters
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = set(cfg) - META - set(params)
    assert takes_kwargs or not unknown, f"{path.name}: {sorted(unknown)} are not arguments of {cfg['_target_']}"


@pytest.mark.parametrize("config", sorted(CODE_DEFAULTS))
def test_composed_config_lists_every_defaulted_argument(config):
    group, _, name = config.partition("/")
    composed = compose(config_name="config", overrides=[f"{group}={name}"])[group]
    assert set(code_defaults(CODE_DEFAULTS[config])) <= set(composed)


def test_a_code_default_can_be_overridden_and_reaches_the_object():
    cfg = compose(config_name="config", overrides=["trainer=ppo", "trainer.clip_eps=0.3", "trainer.progress=false"])
    trainer = instantiate(cfg.trainer)
    assert (trainer.clip_eps, trainer.epochs, trainer.updates) == (0.3, 4, 100)


def test_gnn_is_an_alias_of_sage():
    gnn = compose(config_name="config", overrides=["encoder=gnn"]).encoder
    sage = compose(config_name="config", overrides=["encoder=sage"]).encoder
    assert gnn == sage and gnn.conv == "sage"


def test_the_real_pipelined_runtimes_usage_line_composes_as_written():
    """torch_pipeline.yaml's usage line (``runtime.module._target_=...``) failed: ``module: ???`` is no mapping,
    so Hydra refused the key ("Could not override 'runtime.module._target_'")."""
    overrides = ["runtime=torch_pipeline", "runtime.module._target_=torch.nn.Linear", "+runtime.module.in_features=4",
                 "+runtime.module.out_features=2", "runtime.loss_fn._target_=torch.nn.MSELoss"]
    cfg = compose(config_name="config", overrides=overrides)  # this module's fixture initialised Hydra
    assert "runtime.module._target_=" in (CONF / "runtime" / "torch_pipeline.yaml").read_text()
    assert type(instantiate(cfg.runtime.module)).__name__ == "Linear"
    assert type(instantiate(cfg.runtime.loss_fn)).__name__ == "MSELoss"


def test_the_help_template_resolves_under_hydras_compose_api():
    """gplace's --help template reads the resolver ``gplace_config_groups``, registered by the command line alone at
    first: a config composed with Hydra's API, its ``hydra`` node resolved, failed (UnsupportedInterpolationType)."""
    template = compose("config", return_hydra_config=True).hydra.help.template  # the fixture initialised Hydra
    assert "encoder: gat, gin, gnn, lstm, sage\n" in template and "_defaults" not in template
