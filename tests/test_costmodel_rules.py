"""Cost model rules: hand-derived FLOP counts of tiny ops, one assertion per rule."""

from __future__ import annotations

import logging
import math

import pytest

from gplace.costmodel import RNN_POINTWISE, TensorSpec, op_flops, roofline_costs


def _t(*shape: int) -> TensorSpec:
    return TensorSpec(shape, 4 * math.prod(shape))


@pytest.mark.onnx
def test_fused_matmul_trans_a_reaches_the_rule() -> None:
    """ONNX Runtime's FusedMatMul(transA=1) takes K from A's second last dimension: the importer passes transA."""
    helper = pytest.importorskip("onnx.helper")
    from gplace.importers.onnx.tensors import cost_attrs, qualified_op_type

    node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain="com.microsoft", transA=1)
    flops = op_flops(qualified_op_type(node), [_t(1024, 8), _t(1024, 16)], [_t(8, 16)], cost_attrs(node))
    assert flops == 2 * 8 * 16 * 1024


@pytest.mark.onnx
def test_ms_attention_counts_the_qkv_projection_and_every_key() -> None:
    """com.microsoft::Attention: QKV projection (+bias), Q K^T and P V over S keys per head, softmax."""
    helper = pytest.importorskip("onnx.helper")
    from gplace.importers.onnx.tensors import cost_attrs, qualified_op_type

    node = helper.make_node("Attention", ["x", "w", "b"], ["y"], domain="com.microsoft", num_heads=2)
    b, s, h_in, heads, head = 1, 64, 8, 2, 4
    ins, outs = [_t(b, s, h_in), _t(h_in, 3 * heads * head), _t(3 * heads * head)], [_t(b, s, heads * head)]
    expected = (2 * b * s * h_in * 24 + b * s * 24  # projection and bias
                + 2 * 2 * b * heads * s * s * head  # Q K^T and P V
                + 5 * b * heads * s * s)  # softmax
    assert op_flops(qualified_op_type(node), ins, outs, cost_attrs(node)) == expected == 198_144


def test_standard_attention_keeps_the_generic_rule() -> None:
    """ONNX's own Attention(Q, K, V) is not taken for ONNX Runtime's contrib op."""
    q, k, out = _t(2, 4, 10, 8), _t(2, 4, 12, 8), _t(2, 4, 10, 8)
    assert op_flops("Attention", [q, k, k], [out]) == 2 * 12 * (q.numel + out.numel) + 5 * 2 * 4 * 10 * 12


def test_tensordot_counts_the_contracted_size() -> None:
    """tensordot(a[3, 4, 5], b[4, 5, 6], dims=2): 2 * numel(out) * 4 * 5."""
    assert op_flops("aten.tensordot.default", [_t(3, 4, 5), _t(4, 5, 6)], [_t(3, 6)]) == 2 * 18 * 20


def test_bilinear_counts_every_weight_per_sample_and_the_bias() -> None:
    """bilinear(x1[N, I1], x2[N, I2], W[O, I1, I2], b[O]): 2 * N * O * I1 * I2 + N * O."""
    n, i1, i2, o = 32, 5, 7, 3
    ins = [_t(n, i1), _t(n, i2), _t(o, i1, i2), _t(o)]
    assert op_flops("aten.bilinear.default", ins, [_t(n, o)]) == 2 * n * o * i1 * i2 + n * o


def test_cdist_counts_three_flops_per_coordinate_of_each_pair() -> None:
    """cdist(x1[P, M], x2[R, M]): 3 * P * R * M (difference, square, sum)."""
    assert op_flops("aten.cdist.default", [_t(16, 32), _t(24, 32)], [_t(16, 24)]) == 3 * 16 * 24 * 32


def test_an_op_type_costed_by_memory_only_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """An op type with no rule logs one DEBUG line per process naming it, also when it was costed before DEBUG was
    turned on (nothing was logged then, and nothing after); a metadata-only op logs none."""
    with caplog.at_level(logging.INFO, logger="gplace.costmodel"):
        op_flops("aten.some_kernel_without_a_rule.default", [_t(4)], [_t(4)])
    with caplog.at_level(logging.DEBUG, logger="gplace.costmodel"):
        for _ in range(3):
            assert op_flops("aten.some_kernel_without_a_rule.default", [_t(4)], [_t(4)]) == 0.0
        op_flops("aten.view.default", [_t(4)], [_t(2, 2)])
    lines = [r.getMessage() for r in caplog.records if r.name == "gplace.costmodel"]
    assert len(lines) == 1 and "aten.some_kernel_without_a_rule.default" in lines[0]


def test_onnx_bidirectional_lstm_counts_both_directions_gates() -> None:
    """ONNX LSTM: the pointwise term counts directions * hidden_size units (R is [D, 4H, H])."""
    t, b, i, h, d = 5, 3, 4, 6, 2
    ins = [_t(t, b, i), _t(d, 4 * h, i), _t(d, 4 * h, h)]
    flops = op_flops("LSTM", ins, [_t(t, d, b, h)], {"weight_inputs": (1, 2)})
    assert flops == 2 * t * b * d * 4 * h * (i + h) + RNN_POINTWISE * t * b * d * h


def test_aten_two_layer_lstm_counts_every_layers_gates() -> None:
    """aten.lstm(x, h0, c0, params...): pointwise term per layer (c0 is [layers, B, H])."""
    t, b, i, h = 5, 3, 16, 8
    params = [_t(4 * h, i), _t(4 * h, h), _t(4 * h), _t(4 * h), _t(4 * h, h), _t(4 * h, h), _t(4 * h), _t(4 * h)]
    ins = [_t(t, b, i), _t(2, b, h), _t(2, b, h), *params]
    weights = 4 * h * i + 3 * 4 * h * h
    assert op_flops("aten.lstm.input", ins, [_t(t, b, h)]) == 2 * t * b * weights + RNN_POINTWISE * t * b * 2 * h


def test_aten_lstm_with_projection_counts_hidden_units_not_projected_ones() -> None:
    """aten.lstm with proj_size P: h0 is [1, B, P], c0 [1, B, H]: the gates run over H units."""
    t, b, i, h, p = 5, 3, 16, 8, 4
    ins = [_t(t, b, i), _t(1, b, p), _t(1, b, h), _t(4 * h, i), _t(4 * h, p), _t(4 * h), _t(4 * h), _t(p, h)]
    weights = 4 * h * i + 4 * h * p + p * h
    assert op_flops("aten.lstm.input", ins, [_t(t, b, p)]) == 2 * t * b * weights + RNN_POINTWISE * t * b * h


def test_aten_lstm_cell_does_not_count_its_states_as_weights() -> None:
    """aten.lstm_cell(x, (h, c), w_ih, w_hh, b_ih, b_hh): h and c [B, H] are rank 2 but no weights."""
    b, i, h = 4, 16, 8
    ins = [_t(b, i), _t(b, h), _t(b, h), _t(4 * h, i), _t(4 * h, h), _t(4 * h), _t(4 * h)]
    flops = op_flops("aten.lstm_cell.default", ins, [_t(b, h), _t(b, h)])
    assert flops == 2 * b * 4 * h * (i + h) + RNN_POINTWISE * b * h == 6528


def test_aten_gru_cell_does_not_count_its_state_as_a_weight() -> None:
    """aten.gru_cell(x, h, w_ih, w_hh, b_ih, b_hh): h [B, H] is no weight."""
    b, i, h = 4, 16, 8
    ins = [_t(b, i), _t(b, h), _t(3 * h, i), _t(3 * h, h), _t(3 * h), _t(3 * h)]
    assert op_flops("aten.gru_cell.default", ins, [_t(b, h)]) == 2 * b * 3 * h * (i + h) + RNN_POINTWISE * b * h


def test_aten_sum_of_one_tensor_counts_every_element() -> None:
    """aten.sum/mean of one tensor: numel(X), as every reduction."""
    assert op_flops("aten.sum.dim_IntList", [_t(4, 6)], [_t(4)]) == 24
    assert op_flops("aten.mean.dim", [_t(4, 6)], [_t(4)]) == 24


@pytest.mark.tf
def test_tensorflow_counts_a_tensor_read_twice_once() -> None:
    """x * x reads x once (1 read + 1 write), as the ONNX and torch importers count it."""
    tf = pytest.importorskip("tensorflow")
    from gplace.importers import from_tensorflow

    n = 1 << 12
    graph = from_tensorflow(tf.function(lambda x: x * x, input_signature=[tf.TensorSpec([n], tf.float32)]))
    i = graph.op_types.index("Mul")
    assert graph.kind_cost["cpu"][i] == pytest.approx(roofline_costs(n, 2 * 4 * n)["cpu"])


def test_a_packed_aten_lstm_counts_every_layers_gates_as_the_padded_one() -> None:
    """aten.lstm.data takes the packed input (T*B, I) and batch_sizes before its (layers, B, H) states, which the
    rank test skipped: the gates of one layer were counted, not of both."""
    t, b, i, h, layers = 5, 3, 8, 16, 2
    weights = [_t(4 * h, i), _t(4 * h, h), _t(4 * h, h), _t(4 * h, h)]
    padded = op_flops("aten.lstm.input", [_t(t, b, i), _t(layers, b, h), _t(layers, b, h), *weights], [_t(t, b, h)])
    packed = op_flops("aten.lstm.data", [_t(t * b, i), _t(t), _t(layers, b, h), _t(layers, b, h), *weights],
                      [_t(t * b, h)])
    assert packed == padded == 2 * t * b * sum(w.numel for w in weights) + RNN_POINTWISE * t * b * layers * h


def test_trilinear_counts_as_bilinear_without_the_bias() -> None:
    """nn.Bilinear decomposed: _trilinear(x1[N, I1], W[O, I1, I2], x2[N, I2]) is 2 * N * O * I1 * I2 (it was 0);
    with its expand dims (the importer's attrs), any layout, as its weight gradient's (out [O, I1, I2])."""
    n, i1, i2, o = 32, 5, 7, 3
    want = 2 * n * o * i1 * i2
    assert op_flops("aten._trilinear.default", [_t(n, i1), _t(o, i1, i2), _t(n, i2)], [_t(n, o)]) == want
    bilinear = {"expand": [[1, 3], [0], [1, 2]]}
    assert op_flops("aten._trilinear.default", [_t(n, i1), _t(o, i1, i2), _t(n, i2)], [_t(n, o)], bilinear) == want
    weight_grad = {"expand": [[2, 3], [1, 3], [1, 2]]}
    assert op_flops("aten._trilinear.default", [_t(n, o), _t(n, i1), _t(n, i2)], [_t(o, i1, i2)],
                    weight_grad) == want


@pytest.mark.parametrize("op", ["_native_batch_norm_legit_functional", "_native_batch_norm_legit_no_stats"])
def test_training_batch_norms_count_as_the_other_training_batch_norm(op: str) -> None:
    """A training graph's batch norm (functional, or without running stats) counted 0 FLOPs."""
    x, c = _t(8, 4, 5, 5), _t(4)
    want = op_flops("aten._native_batch_norm_legit.default", [x, c, c, c, c], [x, c, c])
    assert want > 0
    assert op_flops(f"aten.{op}.default", [x, c, c, c, c], [x, c, c, c, c]) == want
