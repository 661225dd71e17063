"""Runtimes measure placements: the contract, the ``sim-v1`` simulator, real execution, conformance checks.

The torch runtime (and the ONNX-to-FX converter it runs ONNX graphs with) imports torch when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gplace.runtime.base import ClusterMismatchError, Measurement, Runtime
from gplace.runtime.conformance import check_failure, check_runtime
from gplace.runtime.simulator import Schedule, Simulator, schedule
from gplace.runtime.trace import write_chrome_trace

if TYPE_CHECKING:  # what the lazy names are, for type checkers (gplace ships py.typed)
    from gplace.runtime.cache import CachedRuntime as CachedRuntime
    from gplace.runtime.calibration import Calibration as Calibration
    from gplace.runtime.calibration import LinkFit as LinkFit
    from gplace.runtime.calibration import calibrate as calibrate
    from gplace.runtime.calibration import fit_link as fit_link
    from gplace.runtime.onnx.program import OnnxProgram as OnnxProgram
    from gplace.runtime.onnx.program import onnx_program as onnx_program
    from gplace.runtime.parallel import PoolRuntime as PoolRuntime
    from gplace.runtime.ray_runtime import RayRuntime as RayRuntime
    from gplace.runtime.tf_runtime import TensorFlowRunError as TensorFlowRunError
    from gplace.runtime.tf_runtime import TensorFlowRuntime as TensorFlowRuntime
    from gplace.runtime.tf_runtime import tf_device as tf_device
    from gplace.runtime.torch_pipeline import TorchPipelineRuntime as TorchPipelineRuntime
    from gplace.runtime.torch_runtime import TorchRunError as TorchRunError
    from gplace.runtime.torch_runtime import TorchRuntime as TorchRuntime
    from gplace.runtime.torch_runtime import torch_device as torch_device

_LAZY = {
    **{name: "gplace.runtime.torch_runtime" for name in ("TorchRunError", "TorchRuntime", "torch_device")},
    **{name: "gplace.runtime.calibration" for name in ("Calibration", "LinkFit", "calibrate", "fit_link")},
    **{name: "gplace.runtime.tf_runtime" for name in ("TensorFlowRunError", "TensorFlowRuntime", "tf_device")},
    **{name: "gplace.runtime.onnx.program" for name in ("OnnxProgram", "onnx_program")},
    "CachedRuntime": "gplace.runtime.cache",
    "PoolRuntime": "gplace.runtime.parallel",
    "RayRuntime": "gplace.runtime.ray_runtime",
    "TorchPipelineRuntime": "gplace.runtime.torch_pipeline",
}

__all__ = [
    "ClusterMismatchError",
    "CachedRuntime", "Calibration", "LinkFit", "Measurement", "OnnxProgram", "PoolRuntime", "RayRuntime", "Runtime",
    "Schedule", "Simulator", "TensorFlowRunError", "TensorFlowRuntime", "TorchPipelineRuntime", "TorchRunError",
    "TorchRuntime", "calibrate", "check_failure", "check_runtime", "fit_link", "onnx_program", "schedule", "tf_device",
    "torch_device", "write_chrome_trace",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gplace.runtime' has no attribute {name!r}")
