"""torch import: a ``cond`` (and any higher-order op with subgraphs) holds its branch's intermediates while it
runs, as ``temporary_memory``. It held only its outputs: a branch making two 16 MiB tensors was simulated at
8.9 MB against a real peak of 42.5 MB (0.21x), and a 25.7 MB device was called enough."""

from __future__ import annotations

import torch

from gplace.importers.torch_export import from_torch
from gplace.ir import Placement
from gplace.runtime import Simulator
from gplace.testing import uniform_cluster

TENSOR = 64 * 64 * 4


class Branches(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def dear(x: torch.Tensor) -> torch.Tensor:
            a = x.exp()
            return (a * 2).t().sum(0)  # a and a * 2 live at once; the transpose is a view; the sum is returned

        def cheap(x: torch.Tensor) -> torch.Tensor:
            return x.sin().sum(0)

        return torch.cond(x.sum() > 0, dear, cheap, (x,))


def test_a_cond_holds_its_dearer_branch_s_intermediates_while_it_runs():
    graph = from_torch(Branches(), (torch.randn(64, 64),))
    cond = next(op for op in graph.ops() if op.type == "cond")
    assert cond.temporary_memory == 2 * TENSOR
    peak = Simulator().measure(graph, uniform_cluster(1), Placement.single(graph, 0)).peak_memory[0]
    assert peak == TENSOR + 2 * TENSOR + cond.output_bytes + 1  # x, the branch's two tensors, its result, the bool
