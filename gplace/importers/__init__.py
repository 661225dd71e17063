"""Importers: read graphs and clusters written by other tools into gplace's IR.

Framework importers (ONNX, torch.export, TensorFlow) import their framework only when called.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gplace.importers.load import detect_graph_format, load_cluster, load_graph
from gplace.importers.profiles import (
    load_doppler,
    load_giph_graph,
    load_giph_network,
    load_pipedream,
    pipedream_stage_ids,
    without_activation_memory,
)

if TYPE_CHECKING:  # what the lazy names are, for type checkers (gplace ships py.typed)
    from gplace.importers.onnx import from_onnx as from_onnx
    from gplace.importers.tensorflow import from_tensorflow as from_tensorflow
    from gplace.importers.torch_export import from_module_shapes as from_module_shapes
    from gplace.importers.torch_export import from_torch as from_torch

_LAZY = {
    "from_onnx": "gplace.importers.onnx",
    "from_torch": "gplace.importers.torch_export",
    "from_module_shapes": "gplace.importers.torch_export",
    "from_tensorflow": "gplace.importers.tensorflow",
}

__all__ = [
    "detect_graph_format", "from_module_shapes", "from_onnx", "from_tensorflow", "from_torch", "load_cluster",
    "load_doppler", "load_giph_graph", "load_giph_network", "load_graph", "load_pipedream", "pipedream_stage_ids",
    "without_activation_memory",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gplace.importers' has no attribute {name!r}")
