"""Cost model rules for ops that were counted 0 FLOPs: in-place ATen ops, adaptive pooling's backward."""

from __future__ import annotations

import math

from gplace.costmodel import TensorSpec, op_flops


def _t(*shape: int) -> TensorSpec:
    return TensorSpec(shape, 4 * math.prod(shape))


def test_an_in_place_aten_op_counts_as_its_out_of_place_form() -> None:
    """aten.clamp_ and aten.addmm_ count as clamp and addmm; ``__and__`` (not in place) and an ONNX name ending in
    '_' are left as they are."""
    x = _t(4, 8)
    assert op_flops("aten.clamp_.default", [x], [x]) == op_flops("aten.clamp.default", [x], [x]) == 2 * 32
    mm = [_t(4, 8), _t(4, 3), _t(3, 8)]
    assert op_flops("aten.addmm_.default", mm, [x]) == op_flops("aten.addmm.default", mm, [x]) == 2 * 32 * 3 + 32
    assert op_flops("aten.__and__.Tensor", [x, x], [x]) == 0
    assert op_flops("Clip_", [x], [x]) == 0


def test_adaptive_pooling_backward_takes_its_window_from_the_shapes() -> None:
    """_adaptive_avg_pool2d_backward(grad_out[1, 2, 3, 3], input[1, 2, 7, 6]): a ceil(7/3) x ceil(6/3) = 3 x 2
    window per gradient element; the 3-d kind over its three last dimensions."""
    grad, x = _t(1, 2, 3, 3), _t(1, 2, 7, 6)
    assert op_flops("aten._adaptive_avg_pool2d_backward.default", [grad, x], [x]) == 18 * 6
    assert op_flops("aten.adaptive_max_pool2d_backward.default", [grad, x, grad], [x]) == 18 * 6
    grad3, x3 = _t(1, 2, 2, 2, 2), _t(1, 2, 4, 4, 4)
    assert op_flops("aten._adaptive_avg_pool3d_backward.default", [grad3, x3], [x3]) == 16 * 8


def test_interpolation_backward_counts_per_gradient_element() -> None:
    """upsample_bilinear2d_backward(grad_out[1, 2, 8, 8], ...) -> grad_input[1, 2, 4, 4]: 9 per element of
    grad_out; upsample_linear1d 3, upsample_trilinear3d 21 per output element."""
    grad, x = _t(1, 2, 8, 8), _t(1, 2, 4, 4)
    assert op_flops("aten.upsample_bilinear2d_backward.default", [grad], [x]) == 9 * 128
    assert op_flops("aten.upsample_linear1d.default", [_t(1, 2, 4)], [_t(1, 2, 8)]) == 3 * 16
    assert op_flops("aten.upsample_trilinear3d.vec", [_t(1, 1, 2, 2, 2)], [_t(1, 1, 4, 4, 4)]) == 21 * 64


def test_dropout_counts_only_in_training_with_p_above_0() -> None:
    """dropout(x[4, 8], p, train): 2 FLOPs per element with train and p > 0; the identity (0) with train False, p 0,
    or no train given (an eval-mode export)."""
    x = _t(4, 8)
    assert op_flops("aten.dropout.default", [x], [x], {"train": True, "p": 0.5}) == 2 * 32
    assert op_flops("aten.feature_dropout.default", [x], [x], {"train": True, "p": 0.5}) == 2 * 32
    assert op_flops("aten.dropout.default", [x], [x], {"train": False, "p": 0.5}) == 0
    assert op_flops("aten.dropout.default", [x], [x], {"train": True, "p": 0.0}) == 0
    assert op_flops("aten.dropout.default", [x], [x]) == 0
