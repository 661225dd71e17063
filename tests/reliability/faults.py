"""A real ``torch-v1`` runtime with faults injected by placement, for the fault tests (importable by workers)."""

from __future__ import annotations

import os
import time

import torch

from gplace.ir import Cluster, OpGraph, Placement
from gplace.runtime.torch_runtime import TorchRuntime

CPU_MAP = {"/CPU:0": "cpu", "/CPU:1": "cpu"}


class FaultyTorchRuntime(TorchRuntime):
    """:class:`TorchRuntime` that misbehaves when the first op on device 1 is a key of ``faults``.

    ``faults`` maps an op index to ``"raise"`` (a ``RuntimeError`` escapes the runtime), ``"hang"`` (sleeps an
    hour) or ``"die"`` (``os._exit``, as a segfault would); other placements run normally.
    """

    def __init__(self, faults: dict[int, str], steps: int = 2, warmup: int = 1) -> None:
        super().__init__(steps=steps, warmup=warmup, device_map=CPU_MAP)
        self.faults = dict(faults)

    def plan(self, graph: OpGraph, cluster: Cluster, placement: Placement, inputs=None):
        on_one = [i for i, d in enumerate(placement.devices) if d == 1]
        fault = self.faults.get(on_one[0]) if on_one else None
        if fault == "raise":
            raise RuntimeError("injected kernel bug")
        if fault == "hang":
            time.sleep(3600)
        if fault == "die":
            os._exit(3)
        return super().plan(graph, cluster, placement, inputs)


class AllocatesTooMuch(torch.nn.Module):
    """A model whose step asks the CPU allocator for 4 TiB: a real out-of-memory error."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.zeros(2**40).sum()
