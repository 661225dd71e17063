"""ONNX-imported graphs run on torch-v1 (gplace.runtime.onnx.program) and give onnxruntime's outputs."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_control_flow import (  # noqa: E402
    growing_loop_model,
    if_loop_model,
    loop_scan_output_model,
    nested_model,
    scan_model,
    shape_loop_model,
)

from gplace.importers.onnx import from_onnx  # noqa: E402
from gplace.ir import Cluster, Device, OpGraph, Placement, UnsupportedGraphError  # noqa: E402
from gplace.runtime.conformance import check_runtime  # noqa: E402
from gplace.runtime.onnx.program import onnx_program  # noqa: E402
from gplace.runtime.torch_runtime import TorchRunError, TorchRuntime  # noqa: E402

pytestmark = [pytest.mark.onnx, pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"), pytest.mark.filterwarnings("ignore::UserWarning")]

CPU_MAP = {"/CPU:0": "cpu", "/CPU:1": "cpu"}
CLUSTER = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9, name="2xcpu")
RUNTIME = TorchRuntime(steps=2, warmup=1, device_map=CPU_MAP)
DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"

ort.set_default_logger_severity(3)


# ---------------------------------------------------------------------- helpers
def _random_placement(g: OpGraph, seed: int = 0) -> Placement:
    return Placement.for_graph(g, np.random.default_rng(seed).integers(0, 2, g.num_ops).tolist())


def _ort(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]).run(None, feeds)


def _assert_same(got: tuple[Any, ...], want: list[np.ndarray], rtol: float = 1e-4, atol: float = 1e-4) -> None:
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        g = g.numpy()
        assert g.shape == w.shape, f"output {k}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"output {k}: dtype {g.dtype} != {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {k}")


def _check(model: Any, feeds: dict[str, np.ndarray], input_shapes: dict[str, list[int]] | None = None,
           rtol: float = 1e-4, atol: float = 1e-4, scaled: bool = False) -> OpGraph:
    """Torch-v1's outputs under a random 2-device placement equal onnxruntime's on the same inputs.

    With ``scaled``, ``atol`` is relative to each output's largest magnitude (deep float32 sums).
    """
    g = from_onnx(model, input_shapes=input_shapes)
    got = RUNTIME.run(g, CLUSTER, _random_placement(g), inputs=feeds)
    want = _ort(model, feeds)
    if scaled:
        for g_, w in zip(got, want, strict=True):
            _assert_same((g_,), [w], rtol, atol * float(np.abs(w).max()))
    else:
        _assert_same(got, want, rtol, atol)
    return g


def _model(nodes: list[Any], inputs: dict[str, np.ndarray], outputs: list[str], opset: int = 17,
           initializers: dict[str, np.ndarray] | None = None) -> Any:
    """A model whose inputs are typed from arrays; output types are left to shape inference."""
    typed = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
             for n, v in inputs.items()]
    graph = helper.make_graph(
        nodes, "case", typed,
        [helper.make_value_info(n, onnx.TypeProto()) for n in outputs],
        initializer=[numpy_helper.from_array(v, n) for n, v in (initializers or {}).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _rand(*shape: int, seed: int = 0, low: float = -1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, 1.0, shape).astype(np.float32)


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


# ---------------------------------------------------------------------- (a) the ONNX backend-test models
def _randomised(model: Any, limit: int = 1 << 20) -> Any:
    """The light model with random weights instead of constant ones, and more of its tensors as outputs.

    A light model makes every weight with ``ConstantOfShape(0.02)``, so every class gets the same score and the
    softmax output is 0.001 whatever the convolutions compute. Weights up to ``limit`` elements become random
    constants (He-scaled; batch-norm scales and variances positive); the big fully connected ones become zeros
    (to keep the model small), and their readers' inputs (the features) become outputs, as does the softmax's
    input.
    """
    rng = np.random.default_rng(0)
    shapes = {t.name: tuple(int(d) for d in numpy_helper.to_array(t).reshape(-1)) for t in model.graph.initializer}
    role = {t: (node.op_type, k) for node in model.graph.node for k, t in enumerate(node.input)}
    nodes, big = [], set()
    for node in model.graph.node:
        shape = shapes.get(node.input[0]) if node.op_type == "ConstantOfShape" else None
        if shape is not None and np.prod(shape) > limit:  # 0: a constant would only shift the outputs
            zero = numpy_helper.from_array(np.zeros(1, np.float32))
            nodes.append(helper.make_node("ConstantOfShape", list(node.input), list(node.output), value=zero))
            big.update(node.output)
            continue
        if shape is None:
            nodes.append(node)
            continue
        if role[node.output[0]] in (("BatchNormalization", 1), ("BatchNormalization", 4)):
            value = rng.uniform(0.5, 1.5, shape)
        else:
            value = rng.normal(0, np.sqrt(2.0 / max(1, int(np.prod(shape[1:])))), shape)
        tensor = numpy_helper.from_array(value.astype(np.float32), node.output[0])
        nodes.append(helper.make_node("Constant", [], [node.output[0]], value=tensor))
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    extra = [n.input[0] for n in model.graph.node if big & set(n.input)]
    extra += [n.input[0] for n in model.graph.node[-1:] if n.op_type == "Softmax"]
    out.graph.output.extend(helper.make_value_info(t, onnx.TypeProto()) for t in dict.fromkeys(extra))
    return out


LIGHT = sorted(p.name for p in (DATA / "light").glob("*.onnx"))


@pytest.mark.parametrize("name", LIGHT)
def test_light_model_matches_onnxruntime(name: str) -> None:
    """Each backend-test light model (random weights) gives onnxruntime's logits and probabilities."""
    model = _randomised(onnx.load(str(DATA / "light" / name)))
    initializers = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(1)  # the image, and the weights a model takes as inputs (all positive)
    feeds = {v.name: rng.random([d.dim_value for d in v.type.tensor_type.shape.dim], dtype=np.float32)
             for v in model.graph.input if v.name not in initializers}
    g = _check(model, feeds, rtol=1e-4, atol=1e-5, scaled=True)
    assert g.num_ops > 30


def _stored(directory: Path, count: int) -> list[np.ndarray]:
    arrays = []
    for k in range(count):
        tensor = onnx.TensorProto()
        tensor.ParseFromString((directory / "test_data_set_0" / f"output_{k}.pb").read_bytes())
        arrays.append(numpy_helper.to_array(tensor))
    return arrays


def _inputs(directory: Path, model: Any) -> dict[str, np.ndarray]:
    initializers = {t.name for t in model.graph.initializer}
    names = [v.name for v in model.graph.input if v.name not in initializers]
    feeds = {}
    for k, name in enumerate(names):
        tensor = onnx.TensorProto()
        tensor.ParseFromString((directory / "test_data_set_0" / f"input_{k}.pb").read_bytes())
        feeds[name] = numpy_helper.to_array(tensor)
    return feeds


NODE_MODELS = [
    "pytorch-converted/test_AvgPool3d_stride1_pad0_gpu_input", "pytorch-converted/test_BatchNorm2d_eval",
    "pytorch-converted/test_Conv2d_depthwise_padded", "pytorch-converted/test_Conv3d_dilated_strided",
    "pytorch-converted/test_ConvTranspose2d", "pytorch-converted/test_Embedding", "pytorch-converted/test_GLU_dim",
    "pytorch-converted/test_MaxPool2d_stride_padding_dilation", "pytorch-converted/test_PixelShuffle",
    "pytorch-converted/test_PReLU_2d_multiparam", "pytorch-converted/test_ReflectionPad2d",
    "pytorch-converted/test_log_softmax_dim3", "pytorch-operator/test_operator_addmm",
    "pytorch-operator/test_operator_chunk", "pytorch-operator/test_operator_index",
    "pytorch-operator/test_operator_pad", "pytorch-operator/test_operator_repeat_dim_overflow",
    "simple/test_expand_shape_model3", "simple/test_shrink", "simple/test_sign_model",
]


@pytest.mark.parametrize("name", NODE_MODELS)
def test_backend_model_matches_reference(name: str) -> None:
    """Backend-test models give onnxruntime's outputs (the stored ones where onnxruntime lacks the opset 6 op)."""
    directory = DATA / name
    model = onnx.load(str(directory / "model.onnx"))
    feeds = _inputs(directory, model)
    try:
        want = _ort(model, feeds)
    except Exception:  # onnxruntime has no kernel for some opset-6 ops (Add-6, PRelu-6, ...)
        want = _stored(directory, len(model.graph.output))
    g = from_onnx(model, input_shapes={k: list(v.shape) for k, v in feeds.items()})
    _assert_same(RUNTIME.run(g, CLUSTER, _random_placement(g), inputs=feeds), want)


# ---------------------------------------------------------------------- (b) one op at a time
def _node(op: str, inputs: list[str], outputs: list[str] | None = None, **attrs: Any) -> Any:
    return helper.make_node(op, inputs, outputs or ["y"], **attrs)


X4 = _rand(2, 3, 7, 6)
CASES: dict[str, tuple[list[Any], dict[str, np.ndarray], dict[str, np.ndarray], int]] = {
    # id: (nodes, inputs, initialisers, opset); outputs are every node output named y*
    "add_broadcast": ([_node("Add", ["a", "b"])], {"a": _rand(3, 1, 4), "b": _rand(4, seed=1)}, {}, 17),
    "gemm_trans_alpha_beta": ([_node("Gemm", ["a", "b", "c"], transA=1, transB=1, alpha=0.5, beta=2.0)],
                              {"a": _rand(4, 3), "b": _rand(5, 4, seed=1)}, {"c": _rand(1, 5, seed=2)}, 13),
    "gemm_no_c": ([_node("Gemm", ["a", "b"], alpha=2.0)], {"a": _rand(3, 4), "b": _rand(4, 5, seed=1)}, {}, 13),
    "matmul_batched": ([_node("MatMul", ["a", "b"])], {"a": _rand(2, 1, 3, 4), "b": _rand(5, 4, 2, seed=1)}, {}, 13),
    "matmul_vector": ([_node("MatMul", ["a", "b"])], {"a": _rand(4), "b": _rand(2, 4, 3, seed=1)}, {}, 13),
    "conv_same_upper": ([_node("Conv", ["x", "w", "b"], auto_pad="SAME_UPPER", strides=[2, 2])], {"x": X4},
                        {"w": _rand(4, 3, 3, 2, seed=1), "b": _rand(4, seed=2)}, 17),
    "conv_same_lower": ([_node("Conv", ["x", "w"], auto_pad="SAME_LOWER", strides=[2, 1], kernel_shape=[2, 3])],
                        {"x": X4}, {"w": _rand(4, 3, 2, 3, seed=1)}, 17),
    "conv_asym_pads_dilated_groups": ([_node("Conv", ["x", "w"], pads=[0, 1, 2, 1], dilations=[2, 1], group=3)],
                                      {"x": X4}, {"w": _rand(6, 1, 3, 3, seed=1)}, 17),
    "conv_1d": ([_node("Conv", ["x", "w"], pads=[1, 2], strides=[2])], {"x": _rand(2, 3, 9)},
                {"w": _rand(2, 3, 3, seed=1)}, 17),
    "conv_transpose_pads_output_padding": (
        [_node("ConvTranspose", ["x", "w", "b"], strides=[2, 3], pads=[1, 0, 0, 2], output_padding=[1, 2])],
        {"x": _rand(1, 2, 4, 5)}, {"w": _rand(2, 3, 3, 3, seed=1), "b": _rand(3, seed=2)}, 17),
    "conv_transpose_output_shape": (
        [_node("ConvTranspose", ["x", "w"], strides=[2, 2], output_shape=[9, 10])],
        {"x": _rand(1, 2, 4, 5)}, {"w": _rand(2, 3, 3, 3, seed=1)}, 17),
    "conv_transpose_same_upper_group": (
        [_node("ConvTranspose", ["x", "w"], strides=[2, 2], auto_pad="SAME_UPPER", group=2, dilations=[1, 2])],
        {"x": _rand(1, 4, 3, 4)}, {"w": _rand(4, 1, 3, 2, seed=1)}, 17),
    "max_pool_ceil_pads": ([_node("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                  ceil_mode=1)], {"x": X4}, {}, 17),
    "max_pool_ceil_drops_window_in_padding": ([_node("MaxPool", ["x"], kernel_shape=[2, 2], strides=[2, 2],
                                                     pads=[1, 0, 1, 1], ceil_mode=1)],
                                              {"x": _rand(1, 2, 5, 5)}, {}, 17),
    "max_pool_asym_dilated_indices": ([_node("MaxPool", ["x"], ["y", "y_index"], kernel_shape=[2, 3],
                                             pads=[0, 1, 1, 2], dilations=[2, 1], strides=[1, 2])], {"x": X4}, {}, 17),
    "max_pool_indices": ([_node("MaxPool", ["x"], ["y", "y_index"], kernel_shape=[2, 2], strides=[2, 2])],
                         {"x": X4}, {}, 17),
    "max_pool_same_lower_1d": ([_node("MaxPool", ["x"], kernel_shape=[4], strides=[3], auto_pad="SAME_LOWER")],
                               {"x": _rand(2, 3, 10)}, {}, 17),
    "avg_pool_include_pad": ([_node("AveragePool", ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                    count_include_pad=1)], {"x": X4}, {}, 17),
    "avg_pool_exclude_pad_ceil": ([_node("AveragePool", ["x"], kernel_shape=[3, 2], strides=[2, 2],
                                         pads=[1, 0, 1, 0], ceil_mode=1)], {"x": X4}, {}, 17),
    "avg_pool_asym_pads": ([_node("AveragePool", ["x"], kernel_shape=[2, 2], pads=[0, 1, 1, 0],
                                  count_include_pad=1)], {"x": X4}, {}, 17),
    "avg_pool_ceil_include_pad": ([_node("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2],
                                         pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)], {"x": X4}, {}, 17),
    "avg_pool_same_upper_3d": ([_node("AveragePool", ["x"], kernel_shape=[2, 3, 2], strides=[2, 2, 2],
                                      auto_pad="SAME_UPPER")], {"x": _rand(1, 2, 5, 6, 3)}, {}, 17),
    "global_pools": ([_node("GlobalAveragePool", ["x"], ["y0"]), _node("GlobalMaxPool", ["x"], ["y1"])],
                     {"x": X4}, {}, 17),
    "reshape_zero_minus_one": ([_node("Reshape", ["x", "s"])], {"x": X4}, {"s": _i64(0, -1, 6)}, 17),
    "reshape_allowzero": ([_node("Reshape", ["x", "s"], allowzero=1)], {"x": np.zeros((0, 3), np.float32)},
                          {"s": _i64(3, 0)}, 17),
    "flatten_axes": ([_node("Flatten", ["x"], ["y0"], axis=0), _node("Flatten", ["x"], ["y1"], axis=-1),
                      _node("Flatten", ["x"], ["y2"], axis=2)], {"x": X4}, {}, 17),
    "slice_negative_huge_steps": (
        [_node("Slice", ["x", "st", "en", "ax", "sp"])], {"x": X4},
        {"st": _i64(-1, 1, 9), "en": _i64(-(2**62), 2**62, 0), "ax": _i64(3, -3, 2), "sp": _i64(-2, 1, -3)}, 17),
    "slice_start_below_minus_dim": ([_node("Slice", ["x", "st", "en", "ax"])], {"x": X4},
                                    {"st": _i64(-7, -9), "en": _i64(6, -8), "ax": _i64(3, 2)}, 13),
    "slice_attrs_opset9": ([_node("Slice", ["x"], starts=[1, -4], ends=[1000, -1], axes=[1, 3])], {"x": X4}, {}, 9),
    "split_input": ([_node("Split", ["x", "s"], ["y0", "y1", "y2"], axis=2)], {"x": X4}, {"s": _i64(2, 4, 1)}, 13),
    "split_attr_opset11": ([_node("Split", ["x"], ["y0", "y1"], axis=-1, split=[4, 2])], {"x": X4}, {}, 11),
    "split_equal": ([_node("Split", ["x"], ["y0", "y1", "y2"], axis=1)], {"x": X4}, {}, 13),
    "split_num_outputs_uneven": ([_node("Split", ["x"], ["y0", "y1", "y2"], axis=2, num_outputs=3)],
                                 {"x": X4}, {}, 18),
    "squeeze_unsqueeze_inputs": ([_node("Unsqueeze", ["x", "a"], ["t"]), _node("Squeeze", ["t", "b"])],
                                 {"x": X4}, {"a": _i64(-1, 0), "b": _i64(0, 5)}, 13),
    "squeeze_unsqueeze_attrs": ([_node("Unsqueeze", ["x"], ["t"], axes=[1, -1]), _node("Squeeze", ["t"])],
                                {"x": _rand(3, 1, 2)}, {}, 11),
    "softmax_opset11_coerces_2d": ([_node("Softmax", ["x"], axis=1)], {"x": _rand(2, 3, 4)}, {}, 11),
    "log_softmax_opset11_default": ([_node("LogSoftmax", ["x"])], {"x": _rand(2, 3, 4)}, {}, 11),
    "softmax_opset13_axis": ([_node("Softmax", ["x"], axis=1)], {"x": _rand(2, 3, 4)}, {}, 13),
    "hardmax": ([_node("Hardmax", ["x"], axis=-1)], {"x": _rand(2, 3, 4)}, {}, 13),
    "batch_norm": ([_node("BatchNormalization", ["x", "s", "b", "m", "v"], epsilon=1e-3)], {"x": X4},
                   {"s": _rand(3, seed=1), "b": _rand(3, seed=2), "m": _rand(3, seed=3),
                    "v": _rand(3, seed=4, low=0.5)}, 15),
    "instance_norm": ([_node("InstanceNormalization", ["x", "s", "b"], epsilon=1e-3)], {"x": X4},
                      {"s": _rand(3, seed=1), "b": _rand(3, seed=2)}, 17),
    "layer_norm_with_stats": ([_node("LayerNormalization", ["x", "s", "b"], ["y", "y_mean", "y_inv"], axis=-2)],
                              {"x": X4}, {"s": _rand(7, 6, seed=1), "b": _rand(6, seed=2)}, 17),
    "group_norm": ([_node("GroupNormalization", ["x", "s", "b"], num_groups=2)], {"x": _rand(2, 4, 3, 3)},
                   {"s": _rand(4, seed=1), "b": _rand(4, seed=2)}, 21),
    "lrn_odd": ([_node("LRN", ["x"], size=3, alpha=1e-2, beta=0.7, bias=1.5)], {"x": _rand(2, 5, 3, 3)}, {}, 17),
    "dropout_with_mask": ([_node("Dropout", ["x"], ["y", "y_mask"])], {"x": X4}, {}, 13),
    "cast_float_to_int_and_bool": ([_node("Cast", ["x"], ["y0"], to=TensorProto.INT32),
                                    _node("Cast", ["x"], ["y1"], to=TensorProto.BOOL)],
                                   {"x": np.array([-2.7, -0.5, 0.0, 0.4, 3.9], np.float32)}, {}, 13),
    "shape_start_end": ([_node("Shape", ["x"], ["y0"], start=1, end=-1), _node("Shape", ["x"], ["y1"], start=-10)],
                        {"x": X4}, {}, 15),
    "gather_negative": ([_node("Gather", ["x", "i"], axis=1)], {"x": X4}, {"i": _i64(-1, 0, 2, -3).reshape(2, 2)}, 13),
    "gather_scalar": ([_node("Gather", ["x", "i"], axis=-1)], {"x": X4}, {"i": np.array(-2, np.int64)}, 13),
    "gather_elements_nd": ([_node("GatherElements", ["x", "i"], ["y0"], axis=1),
                            _node("GatherND", ["x", "j"], ["y1"], batch_dims=1)],
                           {"x": _rand(2, 3, 4)}, {"i": _i64(0, -1, 2, 1, 0, 0, 2, 2).reshape(2, 1, 4),
                                                    "j": _i64(0, 1, -1, 3).reshape(2, 1, 2)}, 13),
    "concat_transpose": ([_node("Concat", ["x", "x"], ["t"], axis=-1), _node("Transpose", ["t"])], {"x": X4}, {}, 13),
    "reduce_axes_input": ([_node("ReduceSum", ["x", "a"], ["y0"], keepdims=0),
                           _node("ReduceSum", ["x", "e"], ["y1"], noop_with_empty_axes=1),
                           _node("ReduceMax", ["x", "a"], ["y2"])], {"x": X4},
                          {"a": _i64(1, -1), "e": np.zeros(0, np.int64)}, 18),
    "reduce_axes_attr": ([_node("ReduceMean", ["x"], ["y0"], axes=[0, 2], keepdims=0),
                          _node("ReduceL2", ["x"], ["y1"], axes=[-1]), _node("ReduceLogSumExp", ["x"], ["y2"]),
                          _node("ReduceProd", ["x"], ["y3"], axes=[1, 3])], {"x": X4}, {}, 13),
    "argmax_last_index": ([_node("ArgMax", ["x"], ["y0"], axis=1, select_last_index=1),
                           _node("ArgMin", ["x"], ["y1"], keepdims=0)],
                          {"x": np.array([[1, 3, 3], [2, 2, 0]], np.float32)}, {}, 13),
    "pad_constant_value": ([_node("Pad", ["x", "p", "v"])], {"x": X4},
                           {"p": _i64(0, 1, 2, 0, 0, 0, 1, 3), "v": np.array(1.5, np.float32)}, 13),
    "pad_negative_crops": ([_node("Pad", ["x", "p"])], {"x": X4}, {"p": _i64(0, 0, -2, 1, 0, -1, 1, -3)}, 13),
    "pad_reflect": ([_node("Pad", ["x", "p"], mode="reflect")], {"x": X4}, {"p": _i64(0, 0, 2, 3, 0, 0, 4, 1)}, 13),
    "pad_edge_axes": ([_node("Pad", ["x", "p", "", "a"], mode="edge")], {"x": X4},
                      {"p": _i64(2, 1, 3, 0), "a": _i64(-1, 2)}, 18),
    "pad_wrap": ([_node("Pad", ["x", "p"], mode="wrap")], {"x": X4}, {"p": _i64(0, 0, 2, 1, 0, 0, 3, 4)}, 19),
    "pad_attr_opset2": ([_node("Pad", ["x"], pads=[0, 1, 1, 0, 2, 0], value=-1.0)], {"x": _rand(2, 3, 4)}, {}, 2),
    "resize_nearest_sizes": ([_node("Resize", ["x", "", "", "s"], mode="nearest")], {"x": X4},
                             {"s": _i64(2, 3, 11, 4)}, 13),
    "resize_nearest_asym_ceil": ([_node("Resize", ["x", "", "f"], mode="nearest", nearest_mode="ceil",
                                        coordinate_transformation_mode="asymmetric")], {"x": X4},
                                 {"f": np.array([1, 1, 2.0, 1.5], np.float32)}, 13),
    "resize_linear_half_pixel": ([_node("Resize", ["x", "", "f"], mode="linear")], {"x": X4},
                                 {"f": np.array([1, 1, 1.7, 0.6], np.float32)}, 13),
    "resize_linear_align_corners": ([_node("Resize", ["x", "", "", "s"], mode="linear",
                                           coordinate_transformation_mode="align_corners")], {"x": X4},
                                    {"s": _i64(2, 3, 4, 9)}, 13),
    "resize_cubic": ([_node("Resize", ["x", "", "f"], mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1)],
                     {"x": X4}, {"f": np.array([1, 1, 2, 0.5], np.float32)}, 13),
    "resize_axes_not_larger": ([_node("Resize", ["x", "", "", "s"], axes=[3, 2], keep_aspect_ratio_policy="not_larger",
                                      mode="linear")], {"x": X4}, {"s": _i64(10, 20)}, 18),
    "upsample_nearest": ([_node("Upsample", ["x", "f"], mode="nearest")], {"x": X4},
                         {"f": np.array([1, 1, 2, 3], np.float32)}, 9),
    "resize_opset10_linear": ([_node("Resize", ["x", "f"], mode="linear")], {"x": X4},
                              {"f": np.array([1, 1, 2, 2], np.float32)}, 10),
    "clip_min_only": ([_node("Clip", ["x", "lo"])], {"x": X4}, {"lo": np.array(0.2, np.float32)}, 13),
    "where_expand_tile": ([_node("Greater", ["x", "z"], ["c"]), _node("Where", ["c", "x", "z"], ["y0"]),
                           _node("Expand", ["z", "s"], ["y1"]), _node("Tile", ["x", "r"], ["y2"])],
                          {"x": _rand(3, 1)}, {"z": np.zeros((1, 4), np.float32), "s": _i64(2, 1, 1),
                                                "r": _i64(2, 3)}, 13),
    "range_constant_of_shape": ([_node("Range", ["a", "b", "d"], ["y0"]),
                                 _node("ConstantOfShape", ["s"], ["y1"],
                                       value=numpy_helper.from_array(np.array([7], np.int32)))],
                                {"a": np.array(1.0, np.float32)},
                                {"b": np.array(-4.0, np.float32), "d": np.array(-1.5, np.float32), "s": _i64(2, 3)},
                                13),
    "topk_ties": ([_node("TopK", ["x", "k"], ["y0", "y1"], axis=-1), _node("TopK", ["x", "k"], ["y2", "y3"],
                                                                            axis=1, largest=0)],
                  {"x": np.array([[0, 3, 0, 3, 0, 1, 0, 0], [2, 2, 2, 1, 1, 5, 5, 2]], np.float32)},
                  {"k": _i64(4)}, 13),
    "topk_cumsum_onehot": ([_node("TopK", ["x", "k"], ["y0", "y1"], axis=1, largest=0),
                            _node("CumSum", ["x", "a"], ["y2"], exclusive=1, reverse=1),
                            _node("OneHot", ["i", "d", "v"], ["y3"], axis=0)],
                           {"x": _rand(3, 5)}, {"k": _i64(2), "a": np.array(1, np.int64), "i": _i64(0, -1, 2),
                                                 "d": np.array(4, np.int64), "v": np.array([0, 5], np.float32)}, 13),
    "einsum_trilu_depth": ([_node("Einsum", ["a", "b"], ["y0"], equation="bij, bjk -> bik"),
                            _node("Trilu", ["a", "k"], ["y1"], upper=0),
                            _node("DepthToSpace", ["c"], ["y2"], blocksize=2, mode="CRD"),
                            _node("DepthToSpace", ["c"], ["y3"], blocksize=2),
                            _node("SpaceToDepth", ["c"], ["y4"], blocksize=2)],
                           {"a": _rand(2, 3, 4), "b": _rand(2, 4, 2, seed=1), "c": _rand(1, 8, 2, 4, seed=2)},
                           {"k": np.array(1, np.int64)}, 14),
    "scatter": ([_node("ScatterElements", ["x", "i", "u"], ["y0"], axis=1, reduction="add"),
                 _node("ScatterND", ["x", "j", "w"], ["y1"])],
                {"x": _rand(3, 4)}, {"i": _i64(0, 0, -1, 2, 1, 3).reshape(3, 2), "u": _rand(3, 2, seed=1),
                                      "j": _i64(2, 0).reshape(2, 1), "w": _rand(2, 4, seed=2)}, 16),
    "integer_math": ([_node("Div", ["a", "b"], ["y0"]), _node("Mod", ["a", "b"], ["y1"]),
                      _node("Mod", ["a", "b"], ["y2"], fmod=1), _node("Pow", ["a", "c"], ["y3"])],
                     {"a": np.array([7, -7, 9, -9], np.int32)},
                     {"b": np.array([2, 2, -4, -4], np.int32), "c": np.array([2, 0, 1, 3], np.int32)}, 13),
    "activations": ([_node("PRelu", ["x", "s"], ["y0"]), _node("LeakyRelu", ["x"], ["y1"], alpha=0.3),
                     _node("HardSigmoid", ["x"], ["y2"], alpha=0.3), _node("Selu", ["x"], ["y3"]),
                     _node("Elu", ["x"], ["y4"], alpha=0.7), _node("Softplus", ["x"], ["y5"]),
                     _node("Gelu", ["x"], ["y6"], approximate="tanh"), _node("Erf", ["x"], ["y7"]),
                     _node("Shrink", ["x"], ["y8"], lambd=0.3, bias=0.1), _node("HardSwish", ["x"], ["y9"])],
                    {"x": X4}, {"s": _rand(3, 1, 1, seed=1)}, 20),
    "more_activations": ([_node("Celu", ["x"], ["y0"], alpha=0.5), _node("ThresholdedRelu", ["x"], ["y1"], alpha=0.2),
                          _node("Mish", ["x"], ["y2"]), _node("Softsign", ["x"], ["y3"]),
                          _node("Sin", ["x"], ["y4"]), _node("Reciprocal", ["x"], ["y5"]),
                          _node("Size", ["x"], ["y6"]), _node("Sum", ["x", "x", "x"], ["y7"]),
                          _node("Mean", ["x", "x"], ["y8"]), _node("Max", ["x", "s"], ["y9"])],
                         {"x": X4}, {"s": _rand(6, seed=1)}, 18),
    "more_reductions": ([_node("ReduceL1", ["x", "a"], ["y0"]), _node("ReduceLogSum", ["p", "a"], ["y1"]),
                         _node("ReduceSumSquare", ["x", "a"], ["y2"], keepdims=0), _node("ReduceMin", ["x"], ["y3"])],
                        {"x": X4, "p": _rand(2, 3, 4, low=0.1)}, {"a": _i64(-1)}, 18),
    "lp_and_mvn": ([_node("LpPool", ["x"], ["y0"], kernel_shape=[2, 3], p=3, pads=[1, 0, 0, 1]),
                    _node("GlobalLpPool", ["x"], ["y1"]), _node("LpNormalization", ["x"], ["y2"], axis=1, p=1),
                    _node("MeanVarianceNormalization", ["x"], ["y3"])], {"x": X4}, {}, 18),
    "logic_and_bits": ([_node("IsInf", ["f"], ["y0"], detect_negative=0), _node("IsNaN", ["f"], ["y1"]),
                        _node("NonZero", ["f"], ["y2"]), _node("BitShift", ["u", "v"], ["y3"], direction="RIGHT"),
                        _node("BitwiseXor", ["u", "v"], ["y4"]), _node("EyeLike", ["e"], ["y5"], k=-1),
                        _node("Not", ["b"], ["y6"]), _node("Xor", ["b", "c"], ["y7"])],
                       {"f": np.array([[0.0, np.inf, -np.inf], [np.nan, 2.0, 0.0]], np.float32),
                        "u": np.array([16, 255, 7], np.uint8), "b": np.array([True, False, True])},
                       {"v": np.array([1, 4, 0], np.uint8), "e": np.zeros((3, 4), np.float32),
                        "c": np.array([True, True, False])}, 18),
    "resize_nearest_coordinate_modes": (
        [_node("Resize", ["x", "", "f"], ["y0"], coordinate_transformation_mode="pytorch_half_pixel",
               nearest_mode="round_prefer_ceil"),
         _node("Resize", ["x", "", "f"], ["y1"], coordinate_transformation_mode="tf_half_pixel_for_nn",
               nearest_mode="floor"),
         _node("Resize", ["x", "", "f"], ["y2"], coordinate_transformation_mode="half_pixel_symmetric", mode="linear")],
        {"x": X4}, {"f": np.array([1, 1, 1.5, 0.7], np.float32)}, 19),
    "constant_node": ([_node("Constant", [], ["k"], value=numpy_helper.from_array(_rand(6, seed=3))),
                       _node("Mul", ["x", "k"])], {"x": X4}, {}, 13),
    "lstm_bidirectional_peepholes": (
        [_node("LSTM", ["x", "w", "r", "b", "", "h", "c", "p"], ["y", "y_h", "y_c"], hidden_size=3,
               direction="bidirectional", clip=2.0)],
        {"x": _rand(4, 2, 5)}, {"w": _rand(2, 12, 5, seed=1), "r": _rand(2, 12, 3, seed=2),
                                "b": _rand(2, 24, seed=3), "h": _rand(2, 2, 3, seed=4), "c": _rand(2, 2, 3, seed=5),
                                "p": _rand(2, 9, seed=6)}, 14),
    "lstm_reverse_skipped_output": ([_node("LSTM", ["x", "w", "r"], ["", "y_h"], hidden_size=4,
                                           direction="reverse")],
                                    {"x": _rand(3, 2, 5)}, {"w": _rand(1, 16, 5, seed=1), "r": _rand(1, 16, 4, seed=2)},
                                    14),
    "gru_linear_before_reset": ([_node("GRU", ["x", "w", "r", "b"], ["y", "y_h"], hidden_size=3,
                                       linear_before_reset=1)],
                                {"x": _rand(4, 2, 5)}, {"w": _rand(1, 9, 5, seed=1), "r": _rand(1, 9, 3, seed=2),
                                                        "b": _rand(1, 18, seed=3)}, 14),
    "gru_rnn": ([_node("GRU", ["x", "w", "r"], ["y0"], hidden_size=3, direction="bidirectional"),
                 _node("RNN", ["x", "v", "q"], ["y1"], hidden_size=2, activations=["Relu"])],
                {"x": _rand(4, 2, 5)}, {"w": _rand(2, 9, 5, seed=1), "r": _rand(2, 9, 3, seed=2),
                                        "v": _rand(1, 2, 5, seed=3), "q": _rand(1, 2, 2, seed=4)}, 14),
}


CHANGED_IN_ONNXRUNTIME = {"avg_pool_ceil_include_pad": (1, 29)}
"""Cases onnxruntime computed otherwise before a release (measured: 1.18-1.28 divide a ceil-mode window that
runs past the padded input by the whole kernel's size, 1.29 and later by the part inside it, as onnx's reference
does)."""


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("+")[0].split(".")[:2])


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_matches_onnxruntime(case: str) -> None:
    """Each op's ONNX semantics (padding, broadcasting, opset differences, ...) match onnxruntime's."""
    if case in CHANGED_IN_ONNXRUNTIME and _version(ort.__version__) < CHANGED_IN_ONNXRUNTIME[case]:
        pytest.skip(f"onnxruntime {ort.__version__} computes {case} by the rule before "
                    f"{'.'.join(map(str, CHANGED_IN_ONNXRUNTIME[case]))} (torch-v1 follows the current one)")
    nodes, inputs, initializers, opset = CASES[case]
    outputs = [t for n in nodes for t in n.output if t.startswith("y")]
    _check(_model(nodes, inputs, outputs, opset, initializers), inputs)


def test_lstm_layout_1_is_layout_0_transposed() -> None:
    """layout=1 (batch first; onnxruntime lacks it) equals layout=0 on the transposed input and outputs."""
    x, w, r = _rand(2, 3, 5), _rand(2, 16, 5, seed=1), _rand(2, 16, 4, seed=2)
    outputs = {}
    for layout, data in ((0, x.transpose(1, 0, 2)), (1, x)):
        node = _node("LSTM", ["x", "w", "r"], ["y", "y_h", "y_c"], hidden_size=4, direction="bidirectional",
                     layout=layout)
        g = from_onnx(_model([node], {"x": data}, ["y", "y_h", "y_c"], 14, {"w": w, "r": r}))
        outputs[layout] = [t.numpy() for t in RUNTIME.run(g, CLUSTER, _random_placement(g), inputs=[data])]
    (y0, h0, c0), (y1, h1, c1) = outputs[0], outputs[1]
    assert y1.shape == (2, 3, 2, 4) and h1.shape == (2, 2, 4)
    np.testing.assert_allclose(y1, y0.transpose(2, 0, 1, 3), rtol=1e-6)
    np.testing.assert_allclose(h1, h0.transpose(1, 0, 2), rtol=1e-6)
    np.testing.assert_allclose(c1, c0.transpose(1, 0, 2), rtol=1e-6)


# ---------------------------------------------------------------------- exported torch models
def _export(module: Any, x: Any, opset: int = 17, dynamic: bool = False) -> Any:
    buffer = io.BytesIO()
    axes = {"x": {0: "batch"}} if dynamic else None
    torch.onnx.export(module, (x,), buffer, dynamo=False, opset_version=opset, input_names=["x"],
                      dynamic_axes=axes)
    return onnx.load_from_string(buffer.getvalue())


class _LoopThenBranch(torch.nn.Module):
    """A loop whose trip count is the input's first dimension, then a data-dependent branch: scripted, it
    exports as an ONNX Loop (reading the layer's weights from outside its body) and an If."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(x.shape[0]):
            x = torch.relu(self.linear(x))
        if bool(x.sum() > 0):
            x = x * 2
        return x


def _exported_models() -> dict[str, tuple[Any, Any]]:
    torch.manual_seed(0)
    nn = torch.nn
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    return {
        "mlp": (nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4), nn.Softmax(-1)), torch.randn(3, 8)),
        "cnn": (nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2)).eval(), torch.randn(2, 3, 8, 8)),
        "transformer": (nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval(), torch.randn(2, 5, 16)),
        "lstm": (nn.LSTM(8, 6, num_layers=2, bidirectional=True), torch.randn(5, 2, 8)),
        "gru": (nn.GRU(8, 6, batch_first=True), torch.randn(2, 5, 8)),
        "scripted_control_flow": (torch.jit.script(_LoopThenBranch()), torch.randn(4, 8)),
    }


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer", "lstm", "gru", "scripted_control_flow"])
def test_exported_torch_model_matches(name: str) -> None:
    """What torch.onnx.export emits for small models runs and matches onnxruntime and torch itself.

    The transformer is the raw export: its attention's shape arithmetic is folded by the importer. The scripted
    model's Loop leaves its carried value's shape to the importer (its initial value's).
    """
    module, x = _exported_models()[name]
    dynamic = name in ("mlp", "cnn")
    model = _export(module, x, dynamic=dynamic)
    shapes = {"x": list(x.shape)} if dynamic else None
    g = _check(model, {"x": x.numpy()}, input_shapes=shapes)
    with torch.no_grad():
        want = module(x)
    want = want[0] if isinstance(want, tuple) else want
    got = RUNTIME.run(g, CLUSTER, Placement.single(g, 1), inputs=[x])[0]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------- the program itself
def test_every_op_has_one_node() -> None:
    """Each op (Input, shared Initializer, node) is exactly one FX node's meta['gplace_op']; names are sanitised."""
    nodes = [_node("Add", ["x", "w"], ["t"], name="/layer.0/Add"), _node("Mul", ["t", "w"], name="/layer.0/Mul"),
             _node("Relu", ["x"], ["u"])]
    model = _model(nodes, {"x": _rand(2, 3)}, ["y", "u"], initializers={"w": _rand(3, seed=1),
                                                                         "unused": _rand(2, seed=2)})
    g = from_onnx(model)
    program = onnx_program(g.source, g)
    ops = [n.meta["gplace_op"] for n in program.module.graph.nodes if "gplace_op" in n.meta]
    assert sorted(ops) == sorted(g.op_names)
    assert set(g.op_names) == {"x", "w", "unused", "/layer.0/Add", "/layer.0/Mul", "Relu_2"}
    assert all("/" not in n.name for n in program.module.graph.nodes)
    np.testing.assert_array_equal(program.values[program.placeholders["w"]].numpy(), _rand(3, seed=1))


def test_inputs_by_name_or_in_order_and_made_up_by_default() -> None:
    """run takes inputs by ONNX name or in order; without them the input is uniform [0, 1), seeded by its name."""
    model = _model([_node("Sub", ["a", "b"])], {"a": _rand(2, 2), "b": _rand(2, 2)}, ["y"])
    g = from_onnx(model)
    a, b = _rand(2, 2, seed=5), _rand(2, 2, seed=6)
    by_name = RUNTIME.run(g, CLUSTER, Placement.single(g, 0), inputs={"b": b, "a": a})[0]
    in_order = RUNTIME.run(g, CLUSTER, Placement.single(g, 0), inputs=[a, torch.from_numpy(b)])[0]
    np.testing.assert_allclose(by_name.numpy(), a - b)
    np.testing.assert_allclose(in_order.numpy(), a - b)
    made = onnx_program(g.source, g)
    x = made.values[made.placeholders["a"]]
    assert x.dtype == torch.float32 and bool((x >= 0).all() and (x < 1).all())
    default = RUNTIME.run(g, CLUSTER, Placement.single(g, 0))[0]
    torch.testing.assert_close(default, x - made.values[made.placeholders["b"]])
    with pytest.raises(ValueError, match="'c'"):
        RUNTIME.run(g, CLUSTER, Placement.single(g, 0), inputs={"c": a})


def test_input_op_placement_moves_its_bytes() -> None:
    """An Input op placed away from its reader is a transfer: bytes_moved counts the input once."""
    model = _model([_node("Relu", ["x"])], {"x": _rand(4, 8)}, ["y"])
    g = from_onnx(model)
    split = Placement.for_graph(g, [1 if name == "x" else 0 for name in g.op_names])
    assert RUNTIME.measure(g, CLUSTER, split).bytes_moved == 4 * 8 * 4
    assert RUNTIME.measure(g, CLUSTER, Placement.single(g, 1)).bytes_moved == 0


def test_missing_initializer_data_is_made_up(caplog: pytest.LogCaptureFixture) -> None:
    """An initialiser without data (external, or stripped) gets a made-up value of its shape and type."""
    model = _model([_node("Add", ["x", "w"])], {"x": _rand(2, 3)}, ["y"], initializers={"w": _rand(3)})
    weight = model.graph.initializer[0]
    weight.ClearField("raw_data")
    weight.ClearField("float_data")
    g = from_onnx(model)
    with caplog.at_level(logging.INFO, logger="gplace.runtime.onnx.program"):
        program = onnx_program(g.source, g)
    w = program.values[program.placeholders["w"]]
    assert w.shape == (3,) and w.dtype == torch.float32 and bool((w >= 0).all())
    assert "made from their shape: w" in caplog.text


def test_missing_initializer_data_too_large_to_make_up_is_named() -> None:
    """An initialiser without data declaring 60,000 x 60,000 floats (14.4 GB) failed in torch's allocator, which
    gplace place then blamed on its placement networks; it names the initialiser and its size now."""
    model = _model([_node("Identity", ["w"])], {}, ["y"], initializers={"w": _rand(3)})
    weight = model.graph.initializer[0]
    weight.ClearField("raw_data")
    weight.ClearField("float_data")
    weight.dims[:] = [2**20, 2**20]
    g = from_onnx(model)
    with pytest.raises(ValueError, match=r"'w' holds no data, so gplace makes up values to run it: \[1048576, "
                                         r"1048576\] of torch.float32 \(4,398.0 GB\) do not fit in memory"):
        onnx_program(g.source, g)


def test_external_initializer_data_is_read_from_the_models_directory(tmp_path, monkeypatch) -> None:
    """Weights saved as external data beside the model file are the program's values (not made up), from any
    working directory."""
    w = _rand(3)
    model = _model([_node("Add", ["x", "w"])], {"x": _rand(2, 3)}, ["y"], initializers={"w": w})
    onnx.save_model(model, str(tmp_path / "m.onnx"), save_as_external_data=True, location="m.onnx.data",
                    size_threshold=0)
    monkeypatch.chdir(tmp_path.parent)
    g = from_onnx(tmp_path / "m.onnx")
    program = onnx_program(g.source, g)
    np.testing.assert_array_equal(program.values[program.placeholders["w"]].numpy(), w)


# ---------------------------------------------------------------------- control flow
X_THEN, X_ELSE = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8), -np.ones((4, 8), np.float32)


@pytest.mark.parametrize("model, x", [
    (if_loop_model(), X_THEN), (if_loop_model(), X_ELSE), (if_loop_model(trips=None), X_THEN),
    (scan_model(), _rand(6, 4, 8)), (scan_model(axis=1, reverse=True), _rand(4, 6, 8)),
    (nested_model(), _rand(2)), (growing_loop_model(), _rand(2, 1)), (loop_scan_output_model(), _rand(2, 4)),
], ids=["if-then+loop", "if-else+loop", "loop-until", "scan", "scan-axis1-reversed", "loop-if-nested", "loop-growing",
        "loop-scan-output"])
def test_control_flow_matches_onnxruntime(model: Any, x: np.ndarray) -> None:
    """If (either branch), Loop (a trip count or a condition) and Scan (axes, directions), nested too, under a
    random 2-device placement: the outer values their subgraphs read arrive, and the outputs are onnxruntime's."""
    g = _check(model, {"x": x}, rtol=1e-6, atol=1e-6)
    assert set(g.op_types) & {"If", "Loop", "Scan"}


def test_loop_run_by_shape_arithmetic_matches_onnxruntime() -> None:
    """A Loop whose trip count is Gather(Shape(x), 0) and whose carried value is declared without a shape runs
    under a 2-device placement, its outputs onnxruntime's."""
    g = _check(shape_loop_model(), {"x": _rand(5, 3, 8)}, {"x": [5, 3, 8]}, rtol=1e-6, atol=1e-6)
    assert "Loop" in g.op_types


def test_an_unsupported_op_inside_a_subgraph_is_named_with_its_parent() -> None:
    """A node a subgraph holds that torch-v1 cannot run fails at conversion, named under its control-flow op."""
    model = if_loop_model()
    model.graph.node[3].attribute[0].g.node[0].op_type = "Unique"  # the then branch's MatMul
    g = from_onnx(model)
    with pytest.raises(UnsupportedGraphError, match=r"node 'branch/Unique_0' \(Unique\): no torch implementation"):
        onnx_program(g.source, g)


# ---------------------------------------------------------------------- (c) unsupported ops fail clearly
def _unsupported_models() -> dict[str, tuple[Any, str]]:
    x = {"x": _rand(2, 3, 4, 4)}
    return {
        "op": (_model([_node("Relu", ["x"], ["t"]), _node("Unique", ["t"], ["y"], name="uniq")], x, ["y"]),
               "node 'uniq' (Unique): no torch implementation"),
        "domain": (_model([helper.make_node("Foo", ["x"], ["y"], name="foo", domain="my.ops")], x, ["y"]),
                   "node 'foo' (my.ops::Foo)"),
        "attribute": (_model([_node("Resize", ["x", "", "f"], name="rs", antialias=1, mode="linear")], x, ["y"], 18,
                             {"f": np.array([1, 1, 0.5, 0.5], np.float32)}),
                      "node 'rs' (Resize): attribute antialias=1 is not supported"),
    }


@pytest.mark.parametrize("kind", ["op", "domain", "attribute"])
def test_unsupported_node_is_named(kind: str) -> None:
    """An op without a torch implementation, or an unsupported attribute value, raises UnsupportedGraphError
    naming the node at conversion; run raises TorchRunError, measure returns ok=False with the same reason."""
    model, message = _unsupported_models()[kind]
    if kind == "domain":
        model.opset_import.append(helper.make_opsetid("my.ops", 1))
    g = from_onnx(model)
    with pytest.raises(UnsupportedGraphError, match=message.replace("(", r"\(").replace(")", r"\)")):
        onnx_program(g.source, g)
    with pytest.raises(TorchRunError, match="cannot run on torch"):
        RUNTIME.run(g, CLUSTER, Placement.single(g, 0))
    m = RUNTIME.measure(g, CLUSTER, Placement.single(g, 0))
    assert not m.ok and m.step_time == float("inf") and message in m.reason


def test_failure_inside_an_onnx_op_names_the_op() -> None:
    """An op that raises while running (LSTM with shorter sequence_lens) is a failed measurement naming it."""
    model = _model([_node("LSTM", ["x", "w", "r", "", "n"], ["y"], hidden_size=2, name="/rnn/LSTM")],
                   {"x": _rand(3, 1, 2)}, ["y"], 14,
                   {"w": _rand(1, 8, 2), "r": _rand(1, 8, 2), "n": np.array([2], np.int32)})
    g = from_onnx(model)
    m = RUNTIME.measure(g, CLUSTER, Placement.single(g, 0))
    assert not m.ok and m.reason.startswith("op '/rnn/LSTM' (LSTM) on /CPU:0 (cpu) failed: ValueError")


def test_training_dropout_is_refused_naming_the_node() -> None:
    """Dropout in training mode is random: a true training_mode, or one that is not a constant, fails the
    measurement naming the node; a false one runs as the identity; is_test=0 before opset 7 fails conversion."""
    x = {"x": _rand(4, 6)}
    drop = _node("Dropout", ["x", "r", "t"], ["y", "mask"], name="drop")
    for mode in (True, False):
        g = from_onnx(_model([drop], x, ["y", "mask"], 17, {"r": np.array(0.5, np.float32), "t": np.array(mode)}))
        m = RUNTIME.measure(g, CLUSTER, Placement.single(g, 0))
        if mode:
            assert not m.ok and "node 'drop' (Dropout): training_mode is true" in m.reason, m.reason
        else:
            y, mask = RUNTIME.run(g, CLUSTER, Placement.single(g, 0), inputs=x)
            assert m.ok and np.array_equal(y.numpy(), x["x"]) and bool(mask.all())
    g = from_onnx(_model([drop], {**x, "t": np.array(True)}, ["y", "mask"], 17, {"r": np.array(0.5, np.float32)}))
    m = RUNTIME.measure(g, CLUSTER, Placement.single(g, 0))
    assert not m.ok and "node 'drop' (Dropout): training_mode is not a constant" in m.reason, m.reason
    old = _model([_node("Dropout", ["x"], ["y"], name="old", is_test=0)], x, ["y"], 6)
    g = from_onnx(old)
    with pytest.raises(UnsupportedGraphError, match=r"node 'old' \(Dropout\): is_test=0"):
        onnx_program(g.source, g)


# ---------------------------------------------------------------------- (d) measurements and conformance
def test_measure_and_conformance_on_an_onnx_graph() -> None:
    """An exported CNN measures ok with a positive step time, and torch-v1 passes the conformance suite on it."""
    module, x = _exported_models()["cnn"]
    g = from_onnx(_export(module, x))
    m = RUNTIME.measure(g, CLUSTER, _random_placement(g))
    assert m.ok and m.step_time > 0 and m.runtime == "torch-v1" and m.bytes_moved > 0
    n = g.num_ops
    placements = [Placement.single(g, 0), Placement.single(g, 1), Placement.for_graph(g, [i % 2 for i in range(n)])]
    measurements = check_runtime(RUNTIME, g, CLUSTER, placements)
    assert all(mm.ok for mm in measurements)


# ---------------------------------------------------------------------- host reads
@pytest.mark.parametrize("name", ["transformer", "lstm"])
def test_constant_shape_inputs_are_not_read_on_the_host_during_steps(name: str) -> None:
    """The exported transformer's 38 and the bi-LSTM's 10 shape-like inputs are known at plan time: measuring
    reads none of them on the host (on a GPU each read would wait for a stream), and outputs are unchanged."""
    from gplace.runtime.onnx.ops import host_reads

    module, x = _exported_models()[name]
    g = from_onnx(_export(module, x))
    placement = _random_placement(g)
    before = host_reads()
    m = RUNTIME.measure(g, CLUSTER, placement)
    assert m.ok and host_reads() == before, (m.reason, host_reads() - before)
    want = _ort(_export(module, x), {"x": x.numpy()})
    _assert_same(RUNTIME.run(g, CLUSTER, placement, inputs=[x]), want)
    known = onnx_program(g.source, g).known({})
    assert sum(map(len, known.values())) == {"transformer": 38, "lstm": 10}[name]


def test_a_shape_computed_from_input_data_is_read_each_step() -> None:
    """The counter can fail: a Reshape whose shape is a graph input is read on the host once per step."""
    from gplace.runtime.onnx.ops import host_reads

    model = _model([_node("Reshape", ["x", "s"], ["y"])], {"x": _rand(2, 3), "s": _i64(3, 2)}, ["y"])
    g = from_onnx(model)
    before = host_reads()
    m = TorchRuntime(steps=2, warmup=1).measure(g, CLUSTER, Placement.single(g, 0))
    assert m.ok and host_reads() - before == 3


def test_integer_reductions_and_cumsum_keep_their_input_type() -> None:
    """ONNX reductions and CumSum give T back: int32 sums came back int64 (torch widens integer sums), L2 and the
    logs float32, and a ScatterElements reading an int32 sum into int32 data failed ("self.dtype ... src.dtype")."""
    x = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    kinds = ["ReduceSum", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
    nodes = [_node(kind, ["x", "a"], [f"y{k}"]) for k, kind in enumerate(kinds)]
    nodes += [_node("CumSum", ["x", "one"], ["yc"]),
              _node("ReduceSum", ["x", "a"], ["s"]), _node("ScatterElements", ["d", "i", "s"], ["ys"], axis=1)]
    inputs = {"x": x, "d": np.zeros((3, 2), np.int32)}
    constants = {"a": _i64(1), "one": np.array(1, np.int64), "i": _i64(0, 1, 0).reshape(3, 1)}
    _check(_model(nodes, inputs, [*(f"y{k}" for k in range(len(kinds))), "yc", "ys"], 18, constants), inputs)


def test_outputs_do_not_share_memory_with_the_programs_kept_values() -> None:
    """A Reshape of an initialiser returned a view of the runtime's cached value: a caller adding 100 to it in place
    changed every later run of that runtime (Add(x, w) gave [101, 102] instead of [1, 2])."""
    nodes = [_node("Reshape", ["w", "s"], ["y0"]), _node("Add", ["x", "w"], ["y1"])]
    model = _model(nodes, {"x": np.zeros(2, np.float32)}, ["y0", "y1"], 17,
                   {"w": np.array([1, 2], np.float32), "s": _i64(2)})
    g = from_onnx(model)
    runtime = TorchRuntime(steps=1, warmup=0, device_map=CPU_MAP)
    view, _ = runtime.run(g, CLUSTER, Placement.single(g, 0), inputs=(np.zeros(2, np.float32),))
    view.add_(100)
    _, total = runtime.run(g, CLUSTER, Placement.single(g, 0), inputs=(np.zeros(2, np.float32),))
    np.testing.assert_array_equal(total.numpy(), [1, 2])


@pytest.mark.parametrize("value", [None, "abc", np.array([None, None], dtype=object)])
def test_an_input_value_that_makes_no_tensor_is_named(value: Any) -> None:
    """run(inputs={"x": None}) raised torch's "Could not infer dtype of NoneType", naming no input."""
    g = from_onnx(_model([_node("Relu", ["x"])], {"x": _rand(2)}, ["y"]))
    with pytest.raises(ValueError, match="^input 'x': cannot make a tensor of "):
        RUNTIME.run(g, CLUSTER, Placement.single(g, 0), inputs={"x": value})
    with pytest.raises(ValueError, match="^input 'x': cannot make a tensor of "):
        RUNTIME.run(g, CLUSTER, Placement.single(g, 0), inputs=[value])


def test_check_graph_names_an_onnx_node_without_a_torch_implementation_before_any_search() -> None:
    """check_graph passed a model with a Unique node, so every measurement of a search failed the same way and
    gplace.place ran its whole budget before raising."""
    model, message = _unsupported_models()["op"]
    g = from_onnx(model)
    with pytest.raises(UnsupportedGraphError, match="cannot run on torch: " + message.replace("(", r"\(").replace(
            ")", r"\)")):
        TorchRuntime(device_map=CPU_MAP).check_graph(g)
    TorchRuntime(device_map=CPU_MAP).check_graph(from_onnx(_model([_node("Relu", ["x"])], {"x": _rand(2)}, ["y"])))


def test_an_unsigned_cumsum_keeps_its_type():
    """Casting CumSum's sum to T first failed every uint32 measurement: torch has no uint32 cumsum on the CPU."""
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.uint32)
    model = _model([_node("CumSum", ["x", "a"], ["y"], exclusive=1)], {"x": x}, ["y"], 14,
                   {"a": np.array(1, np.int64)})
    g = from_onnx(model)
    (y,) = RUNTIME.run(g, CLUSTER, Placement.single(g, 0), inputs={"x": x})
    assert y.dtype == torch.uint32
    np.testing.assert_array_equal(y.numpy(), [[0, 1, 3], [0, 4, 9]])
