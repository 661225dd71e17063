"""Pooling's backward ops in a torch training graph (max_pool2d_with_indices_backward, avg_pool2d_backward) and
erfc had no FLOP rule and counted 0 FLOPs, where TensorFlow's MaxPoolGrad counts numel(grad_out) * prod(kernel)
and erf 6 per element."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from gplace.importers.torch_export import from_torch  # noqa: E402
from tests.flops_device import add_flops_kind  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _flops(g, kind: str, op_type: str) -> float:
    (i,) = [i for i, t in enumerate(g.op_types) if t == op_type]
    return float(g.kind_cost[kind][i])


class Erfc(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.erfc(x), torch.special.erfc(x)


def test_pooling_backward_counts_a_window_per_gradient_element(monkeypatch):
    """Conv2d(3, 4, 3) -> MaxPool2d(2) -> AvgPool2d(3, stride=1) on x[2, 3, 16, 16]: the max pool's gradient
    [2, 4, 7, 7] (392 elements) times a 2x2 window, the average pool's [2, 4, 5, 5] (200) times 3x3."""
    flops_kind = add_flops_kind(monkeypatch)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.MaxPool2d(2), nn.AvgPool2d(3, stride=1))
    g = from_torch(net, (torch.randn(2, 3, 16, 16),), training=True)
    assert _flops(g, flops_kind, "aten.max_pool2d_with_indices_backward.default") == 392 * 4
    assert _flops(g, flops_kind, "aten.avg_pool2d_backward.default") == 200 * 9


def test_erfc_counts_as_erf(monkeypatch):
    """torch.erfc and torch.special.erfc of x[4, 8]: 6 FLOPs per element each, as erf."""
    flops_kind = add_flops_kind(monkeypatch)
    g = from_torch(Erfc(), (torch.randn(4, 8),))
    assert _flops(g, flops_kind, "aten.erfc.default") == 6 * 32
    assert _flops(g, flops_kind, "aten.special_erfc.default") == 6 * 32
