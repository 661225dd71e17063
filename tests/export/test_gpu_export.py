"""The PyTorch write-back on a GPU: a placement over ``/CPU:0`` and ``/GPU:0`` split into per-device parts, and a
module ``device_map`` dispatched, run where they say with the CPU model's outputs. Needs CUDA (``gpu`` marker)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from gplace import Placement, from_torch
from gplace.export.torch import OnDevice, dispatch, module_device_map, split_program
from gplace.testing import cpu_gpu_cluster

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


class TwoTower(nn.Module):
    """Two branches joined in the parent's forward, with a factory op (``torch.ones``) on the CPU."""

    def __init__(self) -> None:
        super().__init__()
        self.left, self.right, self.head = nn.Linear(4, 8), nn.Linear(4, 8), nn.Linear(8, 3)

    def forward(self, x):
        left, right = self.left(x).relu(), self.right(x).sigmoid()
        return self.head(left + right + torch.ones(8)).split(1, dim=1)[0]


X = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))
CLUSTER = cpu_gpu_cluster(num_gpus=1)


@pytest.fixture(scope="module")
def imported():
    torch.manual_seed(0)
    model = TwoTower().eval()
    return model, from_torch(model, (X,))


def _by_module(graph, devices: dict[str, int]) -> Placement:
    paths = graph.source.module_paths
    return Placement.for_graph(graph, [devices.get(paths.get(op, ""), 0) for op in graph.op_names])


@pytest.mark.parametrize("devices", [{"right": 1}, {"left": 1, "right": 1}, {"head": 1}, {"": 1, "left": 1,
                                     "right": 1, "head": 1}], ids=["right", "towers", "head", "all"])
def test_split_program_runs_its_parts_on_the_gpu_with_the_cpu_outputs(imported, devices):
    model, graph = imported
    split = split_program(graph, CLUSTER, _by_module(graph, devices))
    kinds = {m.device.type for name, m in split.named_children() if isinstance(m, OnDevice)}
    assert "cuda" in kinds
    with torch.no_grad():
        out = split(X)
        torch.testing.assert_close(out.cpu(), model(X), rtol=1e-5, atol=1e-5)
    assert out.device.type == ("cuda" if "" in devices else "cpu")  # the last op (split) is the parent's


def test_an_interleaved_placement_runs_over_the_cpu_and_the_gpu(imported):
    model, graph = imported
    split = split_program(graph, CLUSTER, Placement.for_graph(graph, np.arange(graph.num_ops) % 2))
    with torch.no_grad():
        torch.testing.assert_close(split(X).cpu(), model(X), rtol=1e-5, atol=1e-5)


def test_a_dispatched_chain_runs_each_layer_on_its_device():
    """Module-level placement of a chain (each module's inputs moved by its pre-hook): CPU, GPU, CPU, GPU."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3)).eval()
    graph = from_torch(model, (X,))
    placement = _by_module(graph, {"0": 0, "2": 1, "4": 1})
    device_map = module_device_map(graph, CLUSTER, placement)
    assert device_map == {"0": "cpu", "2": "cuda:0", "4": "cuda:0"}
    with torch.no_grad():
        expected = model(X)
        out = dispatch(model, {**device_map, "4": "cpu"})(X)
    assert model[2].weight.is_cuda and not model[4].weight.is_cuda
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
