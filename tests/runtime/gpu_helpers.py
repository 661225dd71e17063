"""Runtimes for the GPU-readiness tests, importable by pool workers."""

from __future__ import annotations

import os
import time

from gplace.ir import Cluster, OpGraph, Placement
from gplace.runtime.base import Measurement, Runtime
from gplace.runtime.torch_runtime import TorchRuntime

CPU_MAP = {"/CPU:0": "cpu", "/CPU:1": "cpu"}


class VisibleGpus(Runtime):
    """Reports, as a failed measurement's reason, ``"<pid>:<CUDA_VISIBLE_DEVICES>"`` of the process measuring."""

    id = "visible-gpus"

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        time.sleep(0.2)  # long enough for the other workers to take placements too
        return Measurement.failure(self.id, f"{os.getpid()}:{os.environ.get('CUDA_VISIBLE_DEVICES')}")


class StickyError(TorchRuntime):
    """``torch-v1`` on two logical CPUs, where a placement with op 0 on device 1 fails as a sticky CUDA error
    does: the measurement fails and every later one in this process would too (``usable()`` turns false)."""

    def __init__(self) -> None:
        super().__init__(steps=1, warmup=0, device_map=CPU_MAP)
        self.dead = False

    def plan(self, graph: OpGraph, cluster: Cluster, placement: Placement, inputs=None):
        if placement.devices[0] == 1 or self.dead:
            self.dead = True
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return super().plan(graph, cluster, placement, inputs)

    def usable(self) -> bool:
        return not self.dead
