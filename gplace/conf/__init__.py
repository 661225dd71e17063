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

__all__ = ["CODE_DEFAULTS", "code_defaults", "register_code_defaults"]

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


register_code_defaults()
