"""gplace: learn where to run each op of a computation graph.

``import gplace`` loads only the IR (numpy); everything needing torch or other frameworks loads on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from gplace.ir import (
    Cluster,
    Device,
    Edge,
    GraphError,
    InvalidPlacementError,
    Link,
    Op,
    OpGraph,
    Placement,
    UnsupportedGraphError,
)

_LAZY = {
    "place": "gplace.experiment",
    "PlacementReport": "gplace.experiment",
    "Simulator": "gplace.runtime",
    "Measurement": "gplace.runtime",
    "Runtime": "gplace.runtime",
    "group_ops": "gplace.grouping",
    "load_graph": "gplace.importers",
    "load_cluster": "gplace.importers",
    "from_onnx": "gplace.importers",
    "from_torch": "gplace.importers",
    "from_tensorflow": "gplace.importers",
    "pipeline_from_file": "gplace.export.torch",
    "save_policy": "gplace.pretrained",
    "load_policy": "gplace.pretrained",
    "place_with_pretrained": "gplace.pretrained",
    "profile_onnx": "gplace.profiling",
    "profile_torch": "gplace.profiling",
    "Placer": "gplace.interfaces",
    "PolicyCapabilities": "gplace.interfaces",
}

__all__ = [
    "Cluster", "Device", "Edge", "GraphError", "InvalidPlacementError", "Link", "Measurement", "Op", "OpGraph",
    "Placement", "PlacementReport", "Placer", "PolicyCapabilities", "Runtime", "Simulator", "UnsupportedGraphError",
    "from_onnx", "from_tensorflow", "from_torch", "group_ops", "load_cluster", "load_graph", "load_policy",
    "pipeline_from_file", "place", "place_with_pretrained", "profile_onnx", "profile_torch", "save_policy",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gplace' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names with the lazily loaded ones of ``__all__``, for completion and ``dir(gplace)``."""
    return sorted({*globals(), *__all__})
