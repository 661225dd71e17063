"""Cost model terms no other test pinned, each hand-computed from the conventions in ``gplace.costmodel``'s
docstring: the bias of ``linear``/``addmm``, a broadcast ONNX ``Sum``, ``P V`` counted over the output (not Q),
and the backward factors of convolution (2x) and attention (2.5x)."""

from __future__ import annotations

import math

from gplace.costmodel import TensorSpec, op_flops


def _t(*shape: int) -> TensorSpec:
    return TensorSpec(shape, 4 * math.prod(shape))


def test_linear_adds_one_flop_per_output_for_the_bias() -> None:
    """linear(x[4,8], W[16,8], b[16]) -> y[4,16]: 2 * 64 * 8 multiply-adds + 64 bias additions."""
    assert op_flops("aten.linear.default", [_t(4, 8), _t(16, 8), _t(16)], [_t(4, 16)]) == 1088
    assert op_flops("aten.linear.default", [_t(4, 8), _t(16, 8)], [_t(4, 16)]) == 1024


def test_addmm_adds_one_flop_per_output_for_the_bias() -> None:
    """addmm(bias[16], mat1[4,8], mat2[8,16]) -> y[4,16]: 2 * 64 * 8 + 64."""
    assert op_flops("aten.addmm.default", [_t(16), _t(4, 8), _t(8, 16)], [_t(4, 16)]) == 1088


def test_broadcast_variadic_sum_counts_at_least_one_flop_per_output() -> None:
    """ONNX Sum(a[2,3], b[1]) -> y[2,3]: six additions (one per output element), not numel(a) + numel(b) - 6 = 1;
    without broadcasting the two agree: Sum(a[2,3], b[2,3]) = 12 - 6 = 6."""
    assert op_flops("Sum", [_t(2, 3), _t(1)], [_t(2, 3)]) == 6
    assert op_flops("Sum", [_t(2, 3), _t(2, 3), _t(2, 3)], [_t(2, 3)]) == 12


def test_attention_counts_p_v_over_the_output_width() -> None:
    """SDPA q[1,2,10,8], k[1,2,12,8], v[1,2,12,4] -> out[1,2,10,4]: Q K^T 2 * 12 * 160, P V 2 * 12 * 80 (the value
    width 4, not the query's 8), softmax 5 * 240 scores."""
    q, k, v, out = _t(1, 2, 10, 8), _t(1, 2, 12, 8), _t(1, 2, 12, 4), _t(1, 2, 10, 4)
    assert op_flops("aten.scaled_dot_product_attention.default", [q, k, v], [out]) == 3840 + 1920 + 1200 == 6960


def test_convolution_backward_is_twice_the_forward() -> None:
    """convolution_backward(grad_out[1,4,6,6], x[1,3,8,8], w[4,3,3,3]): the forward is 2 * 144 * 27 = 7776 (no
    bias), the gradients of input and weight twice that."""
    fwd = op_flops("aten.convolution.default", [_t(1, 3, 8, 8), _t(4, 3, 3, 3)], [_t(1, 4, 6, 6)])
    bwd = op_flops("aten.convolution_backward.default", [_t(1, 4, 6, 6), _t(1, 3, 8, 8), _t(4, 3, 3, 3)],
                   [_t(1, 3, 8, 8), _t(4, 3, 3, 3)])
    assert (fwd, bwd) == (7776, 15552)


def test_attention_backward_is_two_and_a_half_times_the_forward() -> None:
    """flash attention backward(grad_out[1,2,10,8], q[1,2,10,8], k[1,2,12,8], v[1,2,12,8]): forward
    2 * 12 * (160 + 160) + 5 * 240 = 8880, backward 2.5x = 22200."""
    g, q, k = _t(1, 2, 10, 8), _t(1, 2, 10, 8), _t(1, 2, 12, 8)
    bwd = op_flops("aten._scaled_dot_product_flash_attention_backward.default", [g, q, k, k], [q, k, k])
    assert bwd == 2.5 * 8880 == 22200


def test_packed_three_d_attention_counts_the_softmax_over_every_head() -> None:
    """ONNX Attention with Q[1,16,32] packing 4 heads of 8 and 32 keys is the computation of Q[1,4,16,8]: Q K^T and
    P V 2 * 32 * (512 + 512) = 65536, the softmax 5 * 4 * 16 * 32 = 10240 (the packed form counted one head's 2560)."""
    heads = {"q_num_heads": 4, "kv_num_heads": 4}
    packed = op_flops("Attention", [_t(1, 16, 32), _t(1, 32, 32), _t(1, 32, 32)], [_t(1, 16, 32)], heads)
    split = op_flops("Attention", [_t(1, 4, 16, 8), _t(1, 4, 32, 8), _t(1, 4, 32, 8)], [_t(1, 4, 16, 8)])
    ms = op_flops("com.microsoft::MultiHeadAttention", [_t(1, 16, 32), _t(1, 32, 32), _t(1, 32, 32)],
                  [_t(1, 16, 32)], {"num_heads": 4})
    assert packed == split == ms == 65536 + 10240


def test_a_linear_attention_without_heads_or_with_an_unknown_rule_counts_memory_traffic_only() -> None:
    """LinearAttention with update_rule "foo", or without q_num_heads, raised a bare KeyError out of the importer;
    the module docstring promises the memory-traffic fallback for a node its rule does not fit."""
    q = _t(1, 16, 64)
    heads = {"q_num_heads": 4, "kv_num_heads": 4}
    assert op_flops("LinearAttention", [q, q, q], [q], {**heads, "update_rule": "linear"}) > 0
    assert op_flops("LinearAttention", [q, q, q], [q], {**heads, "update_rule": "foo"}) == 0.0
    assert op_flops("LinearAttention", [q, q, q], [q], {}) == 0.0
