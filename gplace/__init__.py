"""gplace: learn where to run each op of a computation graph.

``import gplace`` loads only the IR (numpy); everything needing torch or other frameworks loads on first use.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

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

logging.getLogger(__name__).addHandler(logging.NullHandler())  # silent unless the host configures logging

if TYPE_CHECKING:  # what the lazy names are, for type checkers (gplace ships py.typed)
    from gplace.experiment import PlacementReport as PlacementReport
    from gplace.experiment import place as place
    from gplace.export.torch import pipeline_from_file as pipeline_from_file
    from gplace.grouping import group_ops as group_ops
    from gplace.importers import from_onnx as from_onnx
    from gplace.importers import from_tensorflow as from_tensorflow
    from gplace.importers import from_torch as from_torch
    from gplace.importers import load_cluster as load_cluster
    from gplace.importers import load_graph as load_graph
    from gplace.interfaces import Placer as Placer
    from gplace.interfaces import PolicyCapabilities as PolicyCapabilities
    from gplace.pretrained import load_policy as load_policy
    from gplace.pretrained import place_with_pretrained as place_with_pretrained
    from gplace.pretrained import save_policy as save_policy
    from gplace.profiling import profile_onnx as profile_onnx
    from gplace.profiling import profile_torch as profile_torch
    from gplace.runtime import Measurement as Measurement
    from gplace.runtime import Runtime as Runtime
    from gplace.runtime import Simulator as Simulator

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
