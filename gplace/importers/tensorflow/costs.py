"""FLOPs of the TensorFlow op types whose layout the generic rules of :mod:`gplace.costmodel` do not fit
(``MatMul`` transposes, ``HWIO`` filters, convolution and pooling gradients), and the cost model's name of each
TensorFlow op type counting the same work."""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from gplace.costmodel import TensorSpec

logger = logging.getLogger(__name__)

COST_NAMES = {
    "AddV2": "add", "BiasAdd": "add", "RealDiv": "div", "DivNoNan": "div", "FloorDiv": "div",
    "SquaredDifference": "sub", "ReluGrad": "threshold_backward", "Relu6": "clip", "Relu6Grad": "threshold_backward",
    "SigmoidGrad": "sigmoid_backward", "TanhGrad": "tanh_backward", "RsqrtGrad": "mul", "SqrtGrad": "mul",
    "FusedBatchNorm": "native_batch_norm", "FusedBatchNormV2": "native_batch_norm",
    "FusedBatchNormV3": "native_batch_norm", "FusedBatchNormGrad": "native_batch_norm_backward",
    "FusedBatchNormGradV2": "native_batch_norm_backward", "FusedBatchNormGradV3": "native_batch_norm_backward",
    "SparseSoftmaxCrossEntropyWithLogits": "softmax", "SoftmaxCrossEntropyWithLogits": "softmax",
    "LogSoftmax": "logsoftmax", "AddN": "sum", "GatherV2": "gather", "ResourceGather": "gather",
    "Sum": "reducesum", "Mean": "reducemean", "Max": "reducemax", "Min": "reducemin", "Prod": "reduceprod",
    "BiasAddGrad": "reducesum", "ArgMax": "argmax", "ArgMin": "argmin", "TopKV2": "topk",
    "GreaterEqual": "greaterorequal", "LessEqual": "lessorequal", "NotEqual": "ne", "Select": "where",
    "SelectV2": "where", "FloorMod": "mod", "LogicalAnd": "and", "LogicalOr": "or", "LogicalNot": "not",
    "EluGrad": "elu_backward", "SeluGrad": "elu_backward", "LeakyReluGrad": "leaky_relu_backward",
    "SoftsignGrad": "softsign_backward", "SoftplusGrad": "softplus_backward",
    "ResizeBilinear": "upsample_bilinear2d", "ResizeBilinearGrad": "upsample_bilinear2d_backward",
    "ResizeBicubic": "upsample_bicubic2d", "ResizeBicubicGrad": "upsample_bicubic2d_backward",
}
"""TensorFlow op type -> the :mod:`gplace.costmodel` name counting the same work."""


def cost_attrs(node: Any) -> dict[str, Any]:
    """The attributes the FLOP rules read (transposes, pooling window, einsum equation), from the NodeDef."""
    attrs: dict[str, Any] = {}
    if node is None:
        return attrs
    for key in ("transpose_a", "adj_x"):
        if key in node.attr:
            attrs[key] = node.attr[key].b
    if "ksize" in node.attr:
        attrs["ksize"] = list(node.attr["ksize"].list.i)
    if "equation" in node.attr:
        attrs["equation"] = node.attr["equation"].s.decode()
    return attrs


def tf_flops(op_type: str, ins: Sequence[TensorSpec], outs: Sequence[TensorSpec],
             attrs: dict[str, Any]) -> float | None:
    """FLOPs of ops whose TensorFlow layout the generic rules do not fit; ``None``: use the generic rule. Shapes
    that do not fit the rule give 0, logged at DEBUG (once per op type) on this module's logger."""
    rule = _TF_RULES.get(op_type)
    if rule is None:
        return None
    try:
        return float(rule(ins, outs, attrs))
    except (IndexError, ValueError, ZeroDivisionError):
        if logger.isEnabledFor(logging.DEBUG):
            _log_unfit(op_type)
        return 0.0  # shapes do not fit: memory traffic only


@functools.lru_cache(maxsize=1024)
def _log_unfit(op_type: str) -> None:
    """Log at DEBUG, once per op type and process, an op left at 0 FLOPs by its TensorFlow rule."""
    logger.debug("TensorFlow importer: %s's shapes do not fit its FLOP rule: costed by its memory traffic only "
                 "(0 FLOPs)", op_type)


def _matmul(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: dict[str, Any]) -> float:
    a = ins[0].shape
    k = a[-2] if attrs.get("transpose_a") or attrs.get("adj_x") else a[-1]
    return 2.0 * outs[0].numel * k


def _per_output(filter_shape: tuple[int, ...], depthwise: bool) -> int:
    """Multiply-adds per output element of an ``HWIO`` (or depthwise ``HWCM``) filter."""
    return math.prod(filter_shape[:-2]) if depthwise else math.prod(filter_shape[:-1])


def _conv_rule(grad_input: int | None, filter_of: str, depthwise: bool) -> Callable[..., float]:
    """Forward conv (``grad_input=None``) or a backprop op reading the output gradient at ``grad_input``."""

    def rule(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: dict[str, Any]) -> float:
        w = ins[1].shape if filter_of == "input" else outs[0].shape
        out = outs[0] if grad_input is None else ins[grad_input]
        return 2.0 * out.numel * _per_output(w, depthwise)

    return rule


def _pool_rule(grad_input: int | None) -> Callable[..., float]:
    def rule(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: dict[str, Any]) -> float:
        out = outs[0] if grad_input is None else ins[grad_input]
        return float(out.numel * math.prod(int(k) for k in attrs.get("ksize", ())))

    return rule


_TF_RULES: dict[str, Callable[..., float]] = {
    **dict.fromkeys(["MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"], _matmul),
    **dict.fromkeys(["Conv2D", "Conv3D", "Conv"], _conv_rule(None, "input", False)),
    "DepthwiseConv2dNative": _conv_rule(None, "input", True),
    **dict.fromkeys(["Conv2DBackpropInput", "Conv3DBackpropInputV2"], _conv_rule(2, "input", False)),
    **dict.fromkeys(["Conv2DBackpropFilter", "Conv3DBackpropFilterV2"], _conv_rule(2, "output", False)),
    "DepthwiseConv2dNativeBackpropInput": _conv_rule(2, "input", True),
    "DepthwiseConv2dNativeBackpropFilter": _conv_rule(2, "output", True),
    **dict.fromkeys(["MaxPool", "AvgPool", "MaxPool3D", "AvgPool3D"], _pool_rule(None)),
    **dict.fromkeys(["MaxPoolGrad", "MaxPool3DGrad"], _pool_rule(2)),
    **dict.fromkeys(["AvgPoolGrad", "AvgPool3DGrad"], _pool_rule(1)),
}
