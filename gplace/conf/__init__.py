"""gplace's Hydra configs (``pkg://gplace.conf``), one config group per swappable part.

A component's YAML file keeps only what differs from the code: its defaults list starts with
``/_defaults/<group>/<name>@_here_``, a node this package registers in Hydra's ConfigStore from the constructor's
signature (:func:`register_code_defaults`), so every argument can still be overridden on the command line
(``trainer.lr=1e-2``) while its default lives once, in the code.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

__all__ = [
    "CODE_DEFAULTS", "code_defaults", "component_config", "config_groups_help", "register_code_defaults",
    "register_help_resolver",
]

CODE_DEFAULTS: dict[str, str] = {
    "trainer/reinforce": "gplace.training.ReinforceTrainer",
    "trainer/ppo": "gplace.training.PPOTrainer",
    "encoder/lstm": "gplace.encoders.LSTMEncoder",
    "encoder/sage": "gplace.encoders.GNNEncoder",
    "encoder/gat": "gplace.encoders.GNNEncoder",
    "encoder/gin": "gplace.encoders.GNNEncoder",
    "policy/seq2seq": "gplace.policies.Seq2SeqPolicy",
    "policy/gdp": "gplace.policies.GDPPolicy",
    "policy/superposition": "gplace.policies.SuperpositionPolicy",
    "policy/mlp": "gplace.policies.MLPPolicy",
    "policy/device_aware": "gplace.policies.DeviceAwarePolicy",
    "policy/list_scheduling": "gplace.policies.ListSchedulingPolicy",
    "runtime/cached_simulator": "gplace.runtime.cache.CachedRuntime",
    "runtime/simulator": "gplace.runtime.Simulator",
    "runtime/simulator_pool": "gplace.runtime.parallel.PoolRuntime",
    "runtime/tensorflow": "gplace.runtime.TensorFlowRuntime",
    "runtime/torch": "gplace.runtime.TorchRuntime",
    "runtime/torch_pipeline": "gplace.runtime.torch_pipeline.TorchPipelineRuntime",
    "graph/doppler": "gplace.importers.load_doppler",
    "graph/file": "gplace.importers.load_graph",
    "graph/gnmt": "gplace.zoo.unrolled_gnmt",
    "graph/inception_v3": "gplace.zoo.keras_models.inception_v3",
    "graph/lstm_lm": "gplace.zoo.lstm_lm",
    "graph/nasnet": "gplace.zoo.keras_models.nasnet",
    "graph/nmt": "gplace.zoo.unrolled_nmt",
    "graph/nmt_keras": "gplace.zoo.keras_models.nmt",
    "graph/onnx": "gplace.importers.from_onnx",
    "graph/rnnlm": "gplace.zoo.lstm_lm",
    "graph/rnnlm_keras": "gplace.zoo.keras_models.rnnlm",
    "graph/tensorflow": "gplace.importers.from_tensorflow",
    "graph/torch": "gplace.importers.from_module_shapes",
    "graph/transformer_xl": "gplace.zoo.transformer_xl",
    "cluster/file": "gplace.importers.load_cluster",
    "cluster/local_cpus": "gplace.zoo.clusters.local_cpu_cluster",
    "cluster/modern_4gpu": "gplace.zoo.clusters.modern_cluster",
    "cluster/paper_2gpu": "gplace.zoo.paper_cluster",
    "cluster/paper_4gpu": "gplace.zoo.paper_cluster",
    "logger/none": "gplace.loggers.NullLogger",
    "logger/wandb": "gplace.loggers.WandbLogger",
}
"""Config (``group/name``) -> the ``_target_`` whose constructor defaults it starts from."""

_PLAIN = (bool, int, float, str, type(None))


def code_defaults(target: str) -> dict[str, Any]:
    """``_target_`` and every constructor argument of ``target`` (a dotted path) with a plain default value.

    >>> code_defaults("gplace.training.ReinforceTrainer")["lr"]
    0.001
    """
    module, _, name = target.rpartition(".")
    signature = inspect.signature(getattr(importlib.import_module(module), name))
    node: dict[str, Any] = {"_target_": target}
    for param in signature.parameters.values():
        if param.default is not inspect.Parameter.empty and isinstance(param.default, _PLAIN):
            node[param.name] = param.default
    return node


def register_code_defaults() -> None:
    """Store ``code_defaults`` of every :data:`CODE_DEFAULTS` entry as ``_defaults/<group>/<name>``."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for config, target in CODE_DEFAULTS.items():
        group, _, name = config.rpartition("/")
        store.store(group=f"_defaults/{group}", name=name, node=code_defaults(target))


def component_config(group: str, name: str) -> Any:
    """The config ``name`` of ``group`` (``"graph"``, ``"nmt"``) as the main config composes it, its defaults list
    applied (the ``_defaults/<group>/<name>`` node with the constructor's defaults), ready for ``instantiate``:
    ``OmegaConf.load`` of the YAML file gives only what differs from the code and its ``defaults`` list. Composes with
    the running Hydra where there is one (a job, a test's ``initialize_config_module``), else with ``gplace.conf``.

    >>> c = component_config("cluster", "paper_4gpu")
    >>> c._target_, c.num_gpus, c.gpu_memory
    ('gplace.zoo.paper_cluster', 4, 12000000000)
    """
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    overrides = [f"{group}={name}"]
    if GlobalHydra.instance().is_initialized():
        return compose(config_name="config", overrides=overrides)[group]
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        return compose(config_name="config", overrides=overrides)[group]


def config_groups_help(choices: Any = None) -> str:
    """The config groups and their options as Hydra's ``--help`` lists them (``$APP_CONFIG_GROUPS``), without
    Hydra's own groups and the generated ``_defaults/*`` ones (a folder of one's own given with ``--config-dir`` is
    listed too, as by Hydra); with ``choices`` (``hydra.runtime.choices``: group -> option), only the groups the
    command's primary config selects (``gplace place`` takes no ``policy=``, ``gplace bench`` no group at all). For
    ``hydra/help/gplace.yaml``'s resolver ``gplace_config_groups``, while Hydra runs."""
    from hydra.core.global_hydra import GlobalHydra

    def listed(group: str) -> bool:
        if choices is not None and group.split("/")[0] not in choices:
            return False
        return not any(group == top or group.startswith(top + "/") for top in ("hydra", "_defaults"))

    hydra = GlobalHydra.instance().hydra
    if hydra is None:  # resolved outside Hydra (a config read back and resolved): no groups to list
        return ""
    groups = hydra.format_config_groups(listed).rstrip("\n") or "(none: this command selects no group)"
    return groups.replace("$", "$$")  # a string.Template: "$" stays one


def register_help_resolver() -> None:
    """Register the OmegaConf resolver ``gplace_config_groups`` (:func:`config_groups_help`) that gplace's help
    template reads, for the command line and for Hydra's compose API alike."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("gplace_config_groups"):
        OmegaConf.register_new_resolver("gplace_config_groups", config_groups_help)


register_code_defaults()
register_help_resolver()
