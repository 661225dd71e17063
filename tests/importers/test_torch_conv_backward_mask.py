"""convolution_backward computes only the gradients its output_mask asks for: a first convolution's input needs
none, yet it was charged twice the forward whatever the mask (Conv2d(3, 16, 3) on x[4, 3, 32, 32]: 7,077,888 FLOPs
where the weight's and bias's gradients take 3,538,944 + 65,536)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from gplace.costmodel import TensorSpec, op_flops, roofline_costs  # noqa: E402
from gplace.importers.torch_export import from_torch  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

BACKWARD = "aten.convolution_backward.default"


def _spec(*shape: int) -> TensorSpec:
    return TensorSpec(shape, 4 * math.prod(shape))


def test_a_first_convolution_is_charged_its_weight_and_bias_gradients_only():
    """Conv2d(3, 16, 3, padding=1), x[4, 3, 32, 32] (no gradient wanted): mask [False, True, True]; weight
    gradient 2*4*16*32*32*27 = 3,538,944 FLOPs, bias gradient numel(grad_out) = 65,536."""
    torch.manual_seed(0)
    g = from_torch(nn.Conv2d(3, 16, 3, padding=1), (torch.randn(4, 3, 32, 32),), training=True)
    node = next(n for n in g.source.program.graph.nodes if "convolution_backward" in str(n.target))
    assert list(node.args[10]) == [False, True, True]
    grad_out, x, w, b = _spec(4, 16, 32, 32), _spec(4, 3, 32, 32), _spec(16, 3, 3, 3), _spec(16)
    hand = 3_538_944 + 65_536
    traffic = sum(t.nbytes for t in (grad_out, x, w, w, b))  # reads grad_out, x, w; writes grad_w, grad_b
    i = g.op_index[node.name]
    want = roofline_costs(hand, traffic)
    assert {k: float(g.kind_cost[k][i]) for k in want} == pytest.approx(want)


def test_the_mask_picks_the_gradients_charged():
    """Each of the input's and weight's gradients is one forward (without bias), the bias's numel(grad_out); no
    mask: input and weight."""
    grad_out, x, w = _spec(2, 4, 6, 6), _spec(2, 3, 8, 8), _spec(4, 3, 3, 3)
    fwd = 2 * 2 * 4 * 6 * 6 * 27
    masks = ([True, True, True], [True, False, False], [False, True, False], [False, False, True])
    flops = [op_flops(BACKWARD, [grad_out, x, w], [x, w], {"output_mask": m}) for m in masks]
    assert flops == [2 * fwd + 288, fwd, fwd, 288]
    assert op_flops(BACKWARD, [grad_out, x, w], [x, w]) == 2 * fwd
