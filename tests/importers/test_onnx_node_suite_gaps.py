"""ONNX import: op types of ONNX's node test suite that compute but counted 0 FLOPs (memory traffic only)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import from_onnx  # noqa: E402
from tests.flops_device import add_flops_kind  # noqa: E402

pytestmark = pytest.mark.onnx

F, I8, U8, I64 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT64

_INPUTS = {
    "x": (F, [4, 8]), "q": (I8, [4, 8]), "b": (F, [4, 8]), "rx": (F, [2, 3, 16]), "pos": (I64, [2, 3]),
    "img": (F, [1, 2, 4, 4]), "grid": (F, [1, 3, 3, 2]), "theta": (F, [2, 2, 3]), "dx": (F, [1, 2, 5, 5]),
    "dw": (F, [3, 2, 3, 3]), "off": (F, [1, 18, 3, 3]), "db": (F, [3]), "dmask": (F, [1, 9, 3, 3]),
    "m": (F, [5, 3, 3]), "cols": (F, [1, 8, 9]), "logp": (F, [4, 5]), "target": (I64, [4]),
}
_CONSTANTS = {
    "scale": np.array(0.5, np.float32), "zp": np.array(0, np.int8), "uzp": np.array(0, np.uint8),
    "cos": np.ones((3, 4), np.float32), "sin": np.zeros((3, 4), np.float32),
    "size": np.array([2, 1, 4, 5], np.int64), "axis": np.array(1, np.int64),
    "image_shape": np.array([4, 4], np.int64), "block": np.array([2, 2], np.int64),
}
_NODES = {  # name: (op type, inputs, outputs, attributes, FLOPs)
    "acosh": ("Acosh", ["x"], 1, {}, 8 * 32),
    "asinh": ("Asinh", ["x"], 1, {}, 8 * 32),
    "atanh": ("Atanh", ["x"], 1, {}, 8 * 32),
    "swish": ("Swish", ["x"], 1, {}, 7 * 32),
    "swiglu": ("SwiGLU", ["x", "b"], 1, {}, 7 * 32),
    "dequantize": ("DequantizeLinear", ["q", "scale", "zp"], 1, {}, 2 * 32),
    "quantize": ("QuantizeLinear", ["x", "scale", "uzp"], 1, {}, 4 * 32),
    "dynamic_quantize": ("DynamicQuantizeLinear", ["x"], 3, {}, 6 * 32),
    "rotary": ("RotaryEmbedding", ["rx", "cos", "sin", "pos"], 1, {"num_heads": 2}, 3 * 96),
    "grid_linear": ("GridSample", ["img", "grid"], 1, {}, 9 * 18),
    "grid_cubic": ("GridSample", ["img", "grid"], 1, {"mode": "cubic"}, 35 * 18),
    "affine_grid": ("AffineGrid", ["theta", "size"], 1, {}, 2 * 3 * 80),
    # 2 * 27 outputs * 18 products; 27 / 3 positions * 2 channels * 9 taps = 162 samples, 9 FLOPs each
    "deform": ("DeformConv", ["dx", "dw", "off"], 1, {"kernel_shape": [3, 3]}, 972 + 9 * 162),
    "deform_bias_mask": ("DeformConv", ["dx", "dw", "off", "db", "dmask"], 1, {"kernel_shape": [3, 3]},
                         972 + 27 + 9 * 162 + 162),
    "det": ("Det", ["m"], 1, {}, 5 * 2 * 27 / 3),
    "cumprod": ("CumProd", ["x", "axis"], 1, {}, 32),
    "col2im": ("Col2Im", ["cols", "image_shape", "block"], 1, {}, 72),
    "nll": ("NegativeLogLikelihoodLoss", ["logp", "target"], 1, {}, 2 * 4),
    "sce": ("SoftmaxCrossEntropyLoss", ["logp", "target"], 1, {}, 5 * 20 + 2 * 4),
}


_SIGNAL_INPUTS = {"img": (F, [1, 2, 8, 8]), "rois": (F, [3, 4]), "idx": (I64, [3]), "sig": (F, [2, 8, 1]),
                  "audio": (F, [1, 16, 1])}
_SIGNAL_CONSTANTS = {"step": np.array(4, np.int64), "window": np.ones(8, np.float32),
                     "flen": np.array(8, np.int64)}
_SIGNAL_NODES = {
    # out [3, 2, 2, 2]: 24 elements, 2 x 2 samples each (adaptive: 2), 9 FLOPs a sample and 1 to pool it
    "roi": ("RoiAlign", ["img", "rois", "idx"], 1, {"output_height": 2, "output_width": 2}, 10 * 96),
    "roi_ratio1": ("RoiAlign", ["img", "rois", "idx"], 1, {"output_height": 2, "output_width": 2,
                                                           "sampling_ratio": 1}, 10 * 24),
    "dft": ("DFT", ["sig"], 1, {}, 2 * 5 * 8 * 3),  # two signals of 8: 5 n log2 n each
    # frames (16 - 8) / 4 + 1 = 3, each an FFT of 8 (120) and the window's 8 products
    "stft": ("STFT", ["audio", "step", "window"], 1, {}, 3 * (120 + 8)),
    "stft_no_window": ("STFT", ["audio", "step", "", "flen"], 1, {}, 3 * 120),
}

_RECURRENT_INPUTS = {"q": (F, [2, 4, 8]), "q4": (F, [2, 4, 16]), "k": (F, [2, 4, 8]), "v": (F, [2, 4, 8]),
                     "decay": (F, [2, 4, 2]), "beta": (F, [2, 4, 2]), "seq": (F, [2, 4, 10]), "cw": (F, [4, 1, 3]),
                     "cb": (F, [4])}
_HEADS = {"q_num_heads": 2, "kv_num_heads": 2}
_RECURRENT_NODES = {
    # 8 tokens, dk = dv = 4: per token 2 key/value heads' updates and 2 query heads' readouts of 16 elements
    "linear": ("LinearAttention", ["q", "k", "v"], 2, {**_HEADS, "update_rule": "linear"}, 8 * 16 * (2 * 2 + 2 * 2)),
    "gqa": ("LinearAttention", ["q4", "k", "v"], 2, {"q_num_heads": 4, "kv_num_heads": 2, "update_rule": "linear"},
            8 * 16 * (2 * 2 + 2 * 4)),
    "gated": ("LinearAttention", ["q", "k", "v", "", "decay"], 2, {**_HEADS, "update_rule": "gated"},
              8 * 16 * (3 * 2 + 2 * 2)),
    "gated_delta": ("LinearAttention", ["q", "k", "v", "", "decay", "beta"], 2, _HEADS, 8 * 16 * (5 * 2 + 2 * 2)),
    # out [2, 4, 10]: 80 elements, 3 taps each, a bias, a SiLU
    "conv": ("CausalConvWithState", ["seq", "cw", "cb"], 2, {}, 2 * 80 * 3 + 80),
    "conv_silu": ("CausalConvWithState", ["seq", "cw", "cb"], 2, {"activation": "silu"}, 2 * 80 * 3 + 80 + 6 * 80),
}

_MISC_INPUTS = {"data": (F, [4, 8]), "idx2": (I64, [2, 8]), "upd": (F, [2, 8]), "nd_idx": (I64, [3, 1]),
                "nd_upd": (F, [3, 8])}
_MISC_CONSTANTS = {"n": np.array(16, np.int64)}
_MISC_NODES = {
    "hann": ("HannWindow", ["n"], 1, {}, 10 * 16),
    "hamming": ("HammingWindow", ["n"], 1, {}, 10 * 16),
    "blackman": ("BlackmanWindow", ["n"], 1, {}, 19 * 16),
    "scatter_add": ("ScatterElements", ["data", "idx2", "upd"], 1, {"reduction": "add"}, 16),
    "scatter_copy": ("ScatterElements", ["data", "idx2", "upd"], 1, {}, 0),
    "scatter_nd_mul": ("ScatterND", ["data", "nd_idx", "nd_upd"], 1, {"reduction": "mul"}, 24),
}


def _model(inputs, constants, specs):
    nodes = [helper.make_node(op, ins, [f"{name}_{j}" for j in range(n_out)], name=name, **attrs)
             for name, (op, ins, n_out, attrs, _) in specs.items()]
    values = [helper.make_tensor_value_info(name, elem, shape) for name, (elem, shape) in inputs.items()]
    inits = [numpy_helper.from_array(value, name) for name, value in constants.items()]
    outputs = [helper.make_empty_tensor_value_info(t) for n in nodes for t in n.output]
    graph = helper.make_graph(nodes, "g", values, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)])


@pytest.mark.parametrize(("inputs", "constants", "specs"), [(_INPUTS, _CONSTANTS, _NODES),
                                                            (_SIGNAL_INPUTS, _SIGNAL_CONSTANTS, _SIGNAL_NODES),
                                                            (_RECURRENT_INPUTS, {}, _RECURRENT_NODES),
                                                            (_MISC_INPUTS, _MISC_CONSTANTS, _MISC_NODES)],
                         ids=["elementwise_and_sampling", "roi_align_and_fft", "linear_attention_and_causal_conv",
                              "windows_and_scatter_reductions"])
def test_node_suite_ops_count_their_arithmetic(monkeypatch, inputs, constants, specs):
    """Each op's FLOPs follow the cost model's rule for it (all were 0 before)."""
    kind = add_flops_kind(monkeypatch)
    g = from_onnx(_model(inputs, constants, specs))
    got = {name: float(g.kind_cost[kind][g.op_index[name]]) for name in specs}
    assert got == pytest.approx({name: float(spec[4]) for name, spec in specs.items()})


def test_flex_attention_counts_as_attention(monkeypatch):
    """ai.onnx.preview::FlexAttention(Q[2, 8, 4, 16], K[2, 2, 6, 16], V) (grouped heads): ``Q K^T`` and ``P V`` over
    6 keys, ``2 * 6 * (1024 + 1024)``, and the softmax of 384 scores, 5 each (was 0)."""
    shapes = {"Q": [2, 8, 4, 16], "K": [2, 2, 6, 16], "V": [2, 2, 6, 16]}
    node = helper.make_node("FlexAttention", list(shapes), ["Y"], name="flex", domain="ai.onnx.preview")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, F, s) for n, s in shapes.items()],
                              [helper.make_empty_tensor_value_info("Y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26),
                                                    helper.make_opsetid("ai.onnx.preview", 1)])
    kind = add_flops_kind(monkeypatch)
    g = from_onnx(model)
    assert float(g.kind_cost[kind][g.op_index["flex"]]) == 2 * 6 * 2048 + 5 * 384
