"""A weight read by several ops becomes a Parameter op, which held it twice: persistent_memory and output_bytes
both 262,144 for a 256x256 fp32 weight read by two matmuls, so sim-v1's peak was 532,480 where the weight and the
live activations take 270,336."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from gplace.importers.torch_export import from_torch  # noqa: E402
from gplace.ir import Placement  # noqa: E402
from gplace.runtime import Simulator  # noqa: E402
from gplace.testing import uniform_cluster  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

WEIGHT = 256 * 256 * 4


class Tied(nn.Module):
    """One 256x256 weight read by two matmuls."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(256, 256))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.w) @ self.w


@pytest.fixture(scope="module")
def graph():
    torch.manual_seed(0)
    return from_torch(Tied(), (torch.randn(4, 256),))


def test_a_shared_weight_is_held_once_and_its_edges_carry_its_bytes(graph):
    """The Parameter op holds the weight as persistent memory and outputs no bytes of its own; each matmul's edge
    from it carries 262,144 bytes, so moving the weight to another device still costs its size."""
    (i,) = [i for i, t in enumerate(graph.op_types) if t == "Parameter"]
    assert int(graph.persistent_memory[i]) == WEIGHT and int(graph.output_bytes[i]) == 0
    assert sorted(int(b) for b in graph.edge_bytes[graph.edge_index[0] == i]) == [WEIGHT, WEIGHT]


def test_sim_v1_peak_is_the_weight_and_the_live_activations(graph):
    """On one device: the weight (262,144) plus two 4x256 fp32 activations (4,096 each) live at once (h and y
    during the second matmul; x is freed when the first ends): 270,336."""
    result = Simulator().measure(graph, uniform_cluster(1), Placement.single(graph, 0))
    assert int(result.peak_memory[0]) == WEIGHT + 2 * 4096
