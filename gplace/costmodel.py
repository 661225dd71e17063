"""Analytic cost model: FLOPs and memory traffic of an op from its type and tensor shapes.

The importers describe every op by its type (an ONNX op type such as ``"MatMul"`` or an ATen target such as
``"aten.addmm.default"``), its input and output shapes, the bytes it reads and writes, and a few attributes.
:func:`op_flops` turns that into an operation count; :func:`op_kind_costs` adds the roofline of
:mod:`gplace.zoo.roofline` (``max(FLOPs / peak, bytes / bandwidth) + launch``) per device kind.

Counting conventions (one multiply-add is 2 FLOPs):

- ``MatMul``/``mm``/``bmm``: ``2 * numel(out) * K`` (K: A's last dimension, its second last with ``transA``, as
  ONNX Runtime's ``FusedMatMul`` has it); ``Gemm``/``addmm``/``linear`` add ``numel(out)`` for the bias.
- ``tensordot``: ``2 * numel(out) * C``, C the product of the contracted sizes (``sqrt(numel(a) * numel(b) /
  numel(out))``); ``bilinear(x1[N, I1], x2[N, I2], W[O, I1, I2], b)``: ``2 * N * O * I1 * I2`` (+ ``N * O`` for
  the bias), ``_trilinear`` (``nn.Bilinear`` decomposed, and its gradients): ``2 * numel`` of its inputs'
  broadcast product (the same without the bias); ``cdist(x1[..., P, M], x2[..., R, M])``: ``3 * numel(out) * M``
  (a difference, a square or power and a sum per coordinate of each pair, whatever ``p``; the matrix-product
  form torch may use for ``p=2`` takes about as many).
- ``Conv``: ``2 * numel(out) * numel(W) / W.shape[0]`` (the weight layout ``[M, C/g, k...]`` makes groups
  implicit); ``ConvTranspose`` (or ``transposed=True``): ``2 * numel(X) * numel(W) / W.shape[0]``;
  ``convolution_backward``: one forward (without bias) per gradient of input and weight its ``output_mask``
  asks for, plus ``numel(grad_out)`` for the bias's (no mask: input and weight, twice the forward).
- Recurrent layers (``LSTM``, ``GRU``, ``RNN``, ``aten.lstm``, ``aten.lstm_cell``, ...):
  ``2 * T * B * numel(weights)`` for the matrix products, where ``T * B = numel(X) / X.shape[-1]`` and the
  weights are the inputs listed in ``attrs["weight_inputs"]`` (ONNX: W and R) or else the rank-2 inputs after
  the input and its states (ATen: ``hx`` is not a weight), plus :data:`RNN_POINTWISE` FLOPs per hidden unit per
  step for the gates, counting every direction and layer (ONNX: R's ``directions * hidden_size``; ATen: the
  last state's ``layers * directions * hidden_size``, the cell state's with ``proj_size``).
  ``_thnn_fused_lstm_cell`` (gates already multiplied) counts only the pointwise term. ``mkldnn_rnn_layer``
  (one layer and direction of an LSTM in a CPU training graph) counts as ``aten.lstm`` does for that layer and
  direction, its ``mkldnn_rnn_layer_backward`` twice that.
- Attention (``Attention``, ``ai.onnx.preview::FlexAttention``, ``scaled_dot_product_attention`` and its fused
  variants):
  ``2 * S_k * (numel(Q) + numel(out))`` for ``Q K^T`` and ``P V``, plus the softmax; backward 2.5x that.
  ONNX Runtime's ``com.microsoft::Attention(input[B, S, H_in], weights[H_in, Hq + Hk + Hv], bias)`` also
  projects Q, K and V: ``2 * B * S * H_in * (Hq + Hk + Hv)`` (+ ``B * S * (Hq + Hk + Hv)`` for the bias), then
  ``2 * B * S * S * (Hq + Hv)`` for ``Q K^T`` and ``P V`` over the ``S = input.shape[-2]`` keys, plus the
  softmax over ``num_heads * B * S * S`` scores (a ``past`` state's keys are not counted).
- ``Einsum``: ``2 * prod(size of every index letter)``.
- Pooling: ``numel(out) * prod(kernel_shape)``, its backward (``max_pool2d_with_indices_backward``,
  ``avg_pool2d_backward``, their 3-d kinds) ``numel(grad_out) * prod(kernel_size)``, adaptive pooling's
  backward the same with the window ``ceil(input size / grad_out size)`` per spatial dimension; global pooling and
  reductions (ATen ``sum``/``mean``/``max``/``min`` of one tensor too): ``numel(X)``; ONNX's variadic
  ``Sum``/``Mean``/``Max``/``Min``: ``sum(numel(inputs)) - numel(out)``.
- ONNX ``GridSample``: its interpolation per output element (as below, over X's spatial axes); ``AffineGrid``:
  ``2 * (r + 1)`` per output coordinate; ``DeformConv``: ``Conv``'s count plus a bilinear sample per input channel,
  kernel tap and output position; ``Det``: ``2 n^3 / 3`` per matrix (LU); ``NegativeLogLikelihoodLoss``:
  ``2 * numel(target)``, ``SoftmaxCrossEntropyLoss`` that after a log-softmax over the scores; ``CumProd`` and
  ``Col2Im`` (its overlapping patches summed): ``numel(X)``; ``QuantizeLinear``, ``DequantizeLinear``,
  ``DynamicQuantizeLinear`` a fixed count per element (:data:`PER_ELEMENT_FLOPS`); ``RoiAlign``: a bilinear
  sample and its pooling per sampling point (an adaptive ``sampling_ratio`` taken as 2); ``DFT``, ``STFT``:
  ``5 n log2(n)`` per transform of length n (an FFT), ``STFT``'s window product too; ``LinearAttention``: per token
  each key/value head's state update and each query head's readout (``_linear_attention``);
  ``CausalConvWithState``: a depthwise convolution, ``2 k`` per output element, with its bias and fused SiLU;
  ``ScatterElements``, ``ScatterND`` with a ``reduction``: one per update (without, a copy); the window functions
  (``HannWindow``, ...) a fixed count per sample.
- Interpolation (``Resize``, ``upsample_bilinear2d``, ...), one axis after another, per output element: linear
  ``3 * (2^axes - 1)`` (a lerp, 3 FLOPs, per pair of points: bilinear 9), cubic ``7 * (4^axes - 1) / 3``
  (bicubic 35), over the axes an ATen op's name gives or an ONNX op changes the size of; nearest 0 (a gather);
  a backward op the same per element of its output gradient.
- Normalisations, softmax, elementwise and activation ops (and their backward ops): a fixed count per output
  element (see :data:`ELEMENTWISE_FLOPS`, :data:`PER_ELEMENT_FLOPS`); an in-place ATen op (``hardtanh_``) as
  its out-of-place form. ``batch_norm``/``BatchNormalization`` with ``attrs["training"]`` (ONNX:
  ``training_mode``) set computes batch statistics: ``native_batch_norm``'s count, not the inference one;
  ``dropout`` counts only with ``attrs["train"]`` set (and ``p`` not 0), else it is the identity.
- Everything else (concatenations, copies, pads, gathers, ...) does no arithmetic: its time is its memory
  traffic, the bytes it reads plus the bytes it writes (a gather reads only the rows it writes).
- Metadata-only ops (reshapes, squeezes, identities, ATen views in place or not, metadata asserts, ONNX
  Constants; :func:`is_metadata_only`) cost nothing.

A rule whose shapes do not fit (an unexpected rank, a missing input) falls back to memory traffic only. Each op
type costed by memory traffic alone for either reason (no rule, or shapes that do not fit) is logged at DEBUG
by this module's logger (``gplace.costmodel``), once per op type and process, from :func:`op_flops`: turn
that logger to DEBUG to see which ops of an import count no arithmetic.
Pure Python and numpy; no framework is imported.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gplace.zoo import roofline

logger = logging.getLogger(__name__)

ShapeLike = Sequence[int]

RNN_POINTWISE = 12
"""FLOPs per hidden unit per step for the gate nonlinearities and state updates of a recurrent layer."""

ELEMENTWISE_FLOPS = 1
"""FLOPs per output element of a plain elementwise op (add, mul, relu, ...)."""

PER_ELEMENT_FLOPS: dict[str, int] = {
    # transcendental activations
    "exp": 4, "log": 4, "tanh": 6, "sigmoid": 5, "hardsigmoid": 3, "softplus": 6, "softsign": 3, "erf": 6,
    "erfc": 6, "special_erfc": 6,
    "gelu": 8, "silu": 6, "mish": 10, "elu": 5, "selu": 5, "celu": 5, "sqrt": 2, "rsqrt": 3, "reciprocal": 1,
    "pow": 4, "sin": 6, "cos": 6, "tan": 8, "atan": 8, "asin": 8, "acos": 8, "sinh": 8, "cosh": 8,
    "asinh": 8, "acosh": 8, "atanh": 8,
    # ONNX Swish(x, alpha) = x * sigmoid(alpha * x): silu's and a scale; SwiGLU: silu of one half times the other,
    # per output element; RotaryEmbedding: x * cos + rotate(x) * sin
    "swish": 7, "swiglu": 7, "rotaryembedding": 3,
    # ONNX quantisation: (x - zero_point) * scale; x / scale, round, + zero_point, saturate; DynamicQuantizeLinear
    # also finds x's min and max
    "dequantizelinear": 2, "quantizelinear": 4, "dynamicquantizelinear": 6,
    # ONNX window functions, per sample: its angle (2), a cosine (6) and a - b cos (2); Blackman's second cosine,
    # at twice the angle, and its term
    "hannwindow": 10, "hammingwindow": 10, "blackmanwindow": 19,
    "leakyrelu": 2, "prelu": 2, "thresholdedrelu": 2, "hardswish": 4, "shrink": 2, "clip": 2, "clamp": 2,
    "hardtanh": 2, "dropout": 2, "native_dropout": 2, "gelu_backward": 10, "silu_backward": 8,
    "elu_backward": 5, "hardtanh_backward": 2, "leaky_relu_backward": 2, "native_dropout_backward": 1,
    # ATen spellings: as leakyrelu, prelu; log_sigmoid(x) = -softplus(-x); glu: a sigmoid and a product per output
    "leaky_relu": 2, "_prelu_kernel": 2, "log_sigmoid": 6, "log_sigmoid_forward": 6, "glu": 6, "log1p": 4,
    "expm1": 4,
    # backward: a smooth activation's forward count + 2 (as gelu's, silu's), a piecewise one's forward count (as
    # elu's, hardtanh's); glu's per element of its gradient, twice its output; _prelu_kernel's two gradients
    "softplus_backward": 8, "mish_backward": 12, "log_sigmoid_backward": 8, "hardswish_backward": 4,
    "hardsigmoid_backward": 3, "glu_backward": 4, "_prelu_kernel_backward": 4, "softsign_backward": 5,
    # normalisations and softmax (per output element)
    "batchnormalization": 2, "_native_batch_norm_legit_no_training": 2, "_native_batch_norm_legit": 6,
    "_native_batch_norm_legit_functional": 6, "_native_batch_norm_legit_no_stats": 6,
    "native_batch_norm": 6, "batch_norm": 2, "instancenormalization": 8, "groupnormalization": 8,
    "native_group_norm": 8, "group_norm": 8, "instance_norm": 8, "layernormalization": 8, "native_layer_norm": 8,
    "layer_norm": 8,
    "rmsnormalization": 5, "rms_norm": 5, "simplifiedlayernormalization": 5, "lpnormalization": 4,
    "meanvariancenormalization": 8, "softmax": 5, "_softmax": 5, "logsoftmax": 5, "_log_softmax": 5,
    "log_softmax": 5, "_safe_softmax": 5, "hardmax": 2, "native_layer_norm_backward": 10,
    "native_batch_norm_backward": 10, "native_group_norm_backward": 10, "_softmax_backward_data": 4,
    "_log_softmax_backward_data": 4,
}
"""FLOPs per output element of ops that are elementwise but cost more than one operation."""

METADATA_ONLY = frozenset({
    "reshape", "squeeze", "unsqueeze", "flatten", "identity", "shape", "size", "view", "_unsafe_view", "alias",
    "detach", "view_as", "_reshape_alias", "lift_fresh_copy", "sym_size", "sym_numel", "sym_stride",
    "sym_storage_offset", "_assert_tensor_metadata", "constant",
})
"""Ops (ONNX or ATen) that only relabel a tensor's metadata: no arithmetic, no memory traffic, no kernel.
(``_assert_tensor_metadata``: the dtype/device/layout check ``torch.export`` puts before each ``.to()``; ONNX's
``Constant``, whose value is held as persistent memory, as an initializer is, and which runtimes turn into one.)
An ATen ``.to()`` that changes nothing returns its input, but only its shapes tell (the torch importer, not this
module, costs it 0); ``_to_copy`` always copies."""

ATEN_VIEWS = frozenset({
    "permute", "t", "transpose", "expand", "expand_as", "slice", "select", "as_strided", "split",
    "split_with_sizes", "unbind", "chunk", "narrow", "unflatten", "numpy_t", "diagonal", "unfold", "movedim",
})
"""ATen ops that return views (their ONNX namesakes, e.g. ``Transpose`` or ``Slice``, copy data)."""

SPARSE_READS = frozenset({"gather", "gatherelements", "gathernd", "embedding", "index_select", "index"})
"""Ops that read only the rows they return of their first input (a table), not the whole table."""

_ELEMENTWISE = frozenset({
    "add", "sub", "mul", "div", "neg", "abs", "relu", "maximum", "minimum",
    "where", "sign", "floor", "ceil", "round", "mod", "fmod", "remainder", "bitshift", "and", "or", "xor",
    "not", "equal", "greater", "less", "greaterorequal", "lessorequal", "eq", "ne", "gt", "lt", "ge", "le",
    "logical_and", "logical_or", "logical_not", "isnan", "isinf", "addcmul", "addcdiv", "rsub", "threshold",
    "threshold_backward", "sigmoid_backward", "tanh_backward", "relu_", "add_", "mul_", "sub_", "div_",
    "square", "trunc", "bitwiseand", "bitwiseor", "bitwisexor", "bitwisenot", "lerp",
})


@dataclass(frozen=True)
class TensorSpec:
    """What the cost model needs to know about one tensor."""

    shape: tuple[int, ...]
    """Dimensions; a scalar is ``()``."""
    nbytes: int
    """Bytes of the whole tensor."""

    @property
    def numel(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)


@dataclass(frozen=True)
class OpWork:
    """The work one op does."""

    flops: float
    """Floating-point operations (a multiply-add counts 2)."""
    nbytes: float
    """Bytes read plus bytes written."""


def canonical_op_type(op_type: str) -> str:
    """The lookup key of an op type: lower case, without an ``aten.``-style prefix or an overload suffix.

    >>> [canonical_op_type(t) for t in ("aten.addmm.default", "MatMul", "com.microsoft::Attention")]
    ['addmm', 'matmul', 'attention']
    """
    name = op_type.rsplit("::", 1)[-1]
    parts = name.split(".")
    if len(parts) >= 2 and parts[0] in {"aten", "prims", "quantized", "torch", "ops"}:
        parts = parts[1:]
        if len(parts) >= 2:
            parts = parts[:-1]  # overload name such as "default", "Tensor", "input"
    return parts[0].lower() if len(parts) == 1 else ".".join(parts).lower()


def op_flops(
    op_type: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    attrs: Mapping[str, Any] | None = None,
) -> float:
    """Analytic FLOPs of one op (0 for ops that only move memory).

    Args:
        op_type: ONNX op type or ATen target name (see :func:`canonical_op_type`).
        inputs: the op's tensor inputs in argument order (missing optional inputs left out at the end).
        outputs: the op's tensor outputs.
        attrs: op attributes the count needs: ``kernel_shape`` (pooling), ``transposed`` (convolution),
            ``output_mask`` (``convolution_backward``), ``training`` (``batch_norm``), ``train`` and ``p``
            (``dropout``),
            ``equation`` (Einsum), ``transA`` (FusedMatMul), ``num_heads`` (``com.microsoft::Attention``).
            (default: none)

    An op type counted by memory traffic alone (no rule, or shapes that do not fit its rule) is logged at DEBUG
    once per op type and process (the module docstring).
    """
    attrs = attrs or {}
    key = _rule_key(op_type)
    if not outputs:
        return 0.0
    fn = _FLOP_RULES.get(op_type.lower(), _FLOP_RULES.get(key))
    try:
        if fn is not None:
            return float(fn(inputs, outputs, attrs))
    except (IndexError, KeyError, ValueError, ZeroDivisionError, TypeError):
        _note_memory_only(op_type, "its shapes do not fit the FLOP rule")
        return 0.0  # shapes do not fit the rule (e.g. an unexpected rank): count memory traffic only
    out = outputs[0].numel
    if key in PER_ELEMENT_FLOPS:
        return float(PER_ELEMENT_FLOPS[key] * out)
    if key in _ELEMENTWISE:
        return float(ELEMENTWISE_FLOPS * out)
    if not is_metadata_only(op_type):
        _note_memory_only(op_type, "no FLOP rule")
    return 0.0


def _rule_key(op_type: str) -> str:
    """:func:`canonical_op_type`, an in-place ATen op (``aten.hardtanh_``, ``aten.unsqueeze_``) under its
    out-of-place name: it does the same arithmetic, or relabels the same metadata."""
    key = canonical_op_type(op_type)
    in_place = op_type.startswith("aten.") and key.endswith("_") and not key.endswith("__")  # not __and__
    return key[:-1] if in_place else key


def _note_memory_only(op_type: str, why: str) -> None:
    """Log at DEBUG, once per op type and reason in this process while DEBUG is on, that ``op_type`` is costed by
    memory traffic only (nothing is remembered while it is off, so turning it on later shows every such type)."""
    if logger.isEnabledFor(logging.DEBUG):
        _log_memory_only(op_type, why)


@functools.lru_cache(maxsize=4096)
def _log_memory_only(op_type: str, why: str) -> None:
    logger.debug("cost model: %s has %s: costed by its memory traffic only (0 FLOPs)", op_type, why)


def peak_held(steps: Sequence[tuple[Sequence[tuple[int, int]], int]]) -> int:
    """The most bytes held at once by ``steps`` run in order (a control-flow op's subgraph, its
    ``temporary_memory``), each ``(made, inner)``: ``made`` the ``(bytes, index of its last reader)`` of each
    value it makes, held from its step until that reader has run (an index at or before its own step: until it
    has run); ``inner`` bytes held only while it runs (a nested control-flow op's own)."""
    live = peak = 0
    freed = [0] * (len(steps) + 1)
    for i, (made, inner) in enumerate(steps):
        held = sum(nbytes for nbytes, _ in made)
        peak = max(peak, live + held + inner)
        live += held
        for nbytes, last in made:
            freed[min(max(last, i), len(steps))] += nbytes
        live -= freed[i]
    return peak


def is_metadata_only(op_type: str) -> bool:
    """Whether the op only relabels metadata (a reshape, an ATen view, ...) and so costs nothing.

    >>> is_metadata_only("Reshape"), is_metadata_only("aten.unsqueeze_.default"), is_metadata_only("Transpose")
    (True, True, False)
    """
    key = _rule_key(op_type)
    return key in METADATA_ONLY or (op_type.startswith("aten.") and key in ATEN_VIEWS)


def op_work(
    op_type: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    attrs: Mapping[str, Any] | None = None,
    distinct: Sequence[TensorSpec] | None = None,
    flops: float | None = None,
) -> OpWork:
    """FLOPs (:func:`op_flops`) and memory traffic (bytes of all inputs plus all outputs) of one op.

    Metadata-only ops (:func:`is_metadata_only`) do no work at all; gathers (:data:`SPARSE_READS`) read as many
    bytes of their table as they write, not the whole table. ``distinct``: the tensors read, each once, where
    ``inputs`` repeats one (``x * x``: ``inputs`` [x, x], ``distinct`` [x]); the traffic counts those.
    (default: ``inputs``) ``flops``: the FLOPs an importer's own rule counts (a layout the rules here do not fit),
    used instead of :func:`op_flops`, which is then not asked (nor its DEBUG log). (default: ``None``)
    """
    if is_metadata_only(op_type):
        return OpWork(0.0, 0.0)
    distinct = inputs if distinct is None else distinct
    sparse = canonical_op_type(op_type) in SPARSE_READS
    written = sum(t.nbytes for t in outputs)
    nbytes = sum(t.nbytes for t in (distinct[1:] if sparse else distinct)) + written * (2 if sparse else 1)
    return OpWork(op_flops(op_type, inputs, outputs, attrs) if flops is None else flops, float(nbytes))


def roofline_costs(flops: float, nbytes: float) -> dict[str, float]:
    """Seconds per device kind, ``{"gpu": s, "cpu": s}``, on the reference devices of :mod:`gplace.zoo.roofline`."""
    return roofline.kind_costs(flops, nbytes)


def op_kind_costs(
    op_type: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    attrs: Mapping[str, Any] | None = None,
    distinct: Sequence[TensorSpec] | None = None,
) -> dict[str, float]:
    """Roofline seconds per device kind for one op: :func:`op_work` (``distinct`` as there) then
    :func:`roofline_costs`.

    Metadata-only ops launch no kernel: 0 seconds on every kind.
    """
    if is_metadata_only(op_type):
        return dict.fromkeys(roofline.REFERENCE, 0.0)
    work = op_work(op_type, inputs, outputs, attrs, distinct)
    return roofline_costs(work.flops, work.nbytes)


# ---------------------------------------------------------------------- rules
Rule = Callable[[Sequence[TensorSpec], Sequence[TensorSpec], Mapping[str, Any]], float]


def _matmul(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """K is A's last dimension, its second last with ``transA`` (ONNX Runtime's FusedMatMul)."""
    a = ins[0].shape
    k = (a[-2] if attrs.get("transA") and len(a) > 1 else a[-1]) if a else 1
    return 2.0 * outs[0].numel * k


def _gemm(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """Gemm(A, B, C): K = numel(A) / M with M = out.shape[0] (works with either transA)."""
    out = outs[0]
    m = out.shape[0] if out.shape else 1
    k = ins[0].numel // max(m, 1)
    return 2.0 * out.numel * k + (out.numel if len(ins) > 2 else 0)


def _addmm(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """addmm(bias, mat1, mat2) / baddbmm / addmv: K is the last dimension of mat1."""
    return 2.0 * outs[0].numel * ins[1].shape[-1] + outs[0].numel


def _addbmm(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """addbmm(input, batch1[b, n, m], batch2[b, m, p]): the sum of b matrix products into one (n, p)."""
    batch = ins[1].shape[0] if len(ins[1].shape) == 3 else 1
    return 2.0 * outs[0].numel * ins[1].shape[-1] * batch + outs[0].numel


def _linear(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """linear(x, W[out, in], b): K = W.shape[-1]."""
    bias = outs[0].numel if len(ins) > 2 else 0
    return 2.0 * outs[0].numel * ins[1].shape[-1] + bias


def _conv(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    x, w = ins[0], ins[1]
    per_out = w.numel // w.shape[0]
    bias = outs[0].numel if len(ins) > 2 and ins[2].numel else 0
    if attrs.get("transposed"):
        return 2.0 * x.numel * per_out + bias
    return 2.0 * outs[0].numel * per_out + bias


def _conv_transpose(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    return _conv(ins, outs, {**attrs, "transposed": True})


def _recurrence(x: TensorSpec, weights: int, hidden: int) -> float:
    """A recurrent layer over ``x`` (its last dimension the features, the rest steps x batch): the matrix products
    with ``weights`` (their summed numel), and :data:`RNN_POINTWISE` per hidden unit per step for the gates."""
    steps_batch = x.numel // x.shape[-1]
    return 2.0 * steps_batch * weights + RNN_POINTWISE * steps_batch * hidden


def _rnn(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """ONNX (``attrs["weight_inputs"]``: W and R): the weights are those, and the hidden units R's
    ``directions * hidden_size``; ATen: see :func:`_aten_rnn` (states: 2 for an LSTM, 1 for a GRU or RNN)."""
    if "weight_inputs" not in attrs:
        return _aten_rnn(ins, outs, attrs, states=1)
    weights = sum(ins[i].numel for i in attrs["weight_inputs"])
    r = ins[attrs["weight_inputs"][-1]].shape
    hidden = r[0] * r[-1] if len(r) == 3 else (outs[0].shape[-1] if outs[0].shape else 0)
    return _recurrence(ins[0], weights, hidden)


def _aten_rnn(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any], *,
              states: int, cell: bool = False) -> float:
    """ATen ``lstm(input, (h0, c0), params, ...)``, ``gru(input, h0, ...)`` and their cells: ``states`` state
    tensors follow the input (a layer's ``.data`` overload has its rank-1 ``batch_sizes`` before them); the
    weights are the rank-2 inputs after them. Hidden units per step: the last state's
    ``layers * directions * hidden_size`` (an LSTM's cell state: ``hidden_size`` even with ``proj_size``); a
    cell's: its last dimension. A layer's states have the input's rank (one more for the packed input of
    ``.data``); without them, the output's last dimension."""
    if attrs.get("weight_inputs") is not None:  # the ONNX layout under an ATen-like name
        return _rnn(ins, outs, attrs)
    x = ins[0]
    first = 2 if not cell and len(ins) > 1 and len(ins[1].shape) == 1 else 1
    state_rank = len(x.shape) + (first == 2)  # packed (.data): input (T*B, I), states (layers, B, H)
    found = states if cell else 0
    while found < states and first + found < len(ins) and len(ins[first + found].shape) == state_rank:
        found += 1
    weights = sum(t.numel for t in ins[first + found:] if len(t.shape) == 2)
    if not found:
        hidden = outs[0].shape[-1] if outs[0].shape else 0
    else:
        last = ins[first + found - 1].shape  # cell: (B, H); layer: (layers * directions, [B,] H)
        hidden = last[-1] if cell else last[0] * last[-1]
    return _recurrence(x, weights, hidden)


def _batch_norm(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """ATen ``batch_norm`` / ONNX ``BatchNormalization``: with batch statistics (``attrs["training"]``, ONNX's
    ``training_mode``) as ``native_batch_norm``, else as inference, per output element."""
    train = attrs.get("training") or attrs.get("training_mode")
    return float(PER_ELEMENT_FLOPS["native_batch_norm" if train else "batch_norm"] * outs[0].numel)


def _dropout(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """ATen ``dropout(x, p, train)`` (and ``dropout_``, ``feature_dropout``, ``alpha_dropout``, ...), ONNX
    ``Dropout``: a mask and a scale, ``PER_ELEMENT_FLOPS["dropout"]`` per element, in training (``attrs["train"]``)
    with ``attrs["p"]`` not 0; else the identity, 0. No ``train``: inference (an eval-mode export; a joint training
    graph's dropout is ``native_dropout``, counted by its own entry)."""
    if not attrs.get("train") or attrs.get("p") == 0:
        return 0.0
    return float(PER_ELEMENT_FLOPS["dropout"] * outs[0].numel)


def _fused_lstm_cell(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """_thnn_fused_lstm_cell(input_gates[B, 4H], hidden_gates, cx[B, H], ...): the gates are already multiplied,
    only the pointwise work is left."""
    return float(RNN_POINTWISE * ins[2].numel)


def _mkldnn_rnn_layer(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """mkldnn_rnn_layer(input[T, B, I], w_ih[G*H, I], w_hh[G*H, H], ...): one layer and direction, as
    :func:`_aten_rnn` counts it."""
    w_ih, w_hh = ins[1], ins[2]
    return _recurrence(ins[0], w_ih.numel + w_hh.numel, w_hh.shape[-1])


def _mkldnn_rnn_layer_backward(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec],
                               attrs: Mapping[str, Any]) -> float:
    """mkldnn_rnn_layer_backward(input, w_ih, w_hh, ...): gradients of input, state and weights, twice the
    forward (as ``convolution_backward``)."""
    return 2.0 * _mkldnn_rnn_layer(ins, outs, attrs)


def _ms_attention(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """com.microsoft::Attention(input[B, S, H_in], weights[H_in, Hq + Hk + Hv], bias?, ...): the QKV
    projection, then ``Q K^T`` and ``P V`` over S keys per head, then the softmax (module docstring)."""
    x, w, out = ins[0], ins[1], outs[0]
    if len(w.shape) != 2:
        raise ValueError("weights must be rank 2")
    h_in, width = w.shape
    tokens = x.numel // h_in
    seq = x.shape[-2]
    bias = tokens * width if len(ins) > 2 and ins[2].shape == (width,) else 0
    h_v = out.shape[-1]
    h_q = (width - h_v) / 2  # Hq == Hk; without qkv_hidden_sizes all three are width / 3
    heads = int(attrs.get("num_heads", 1))
    scores = heads * tokens * seq
    return (2.0 * tokens * h_in * width + bias + 2.0 * tokens * seq * (h_q + h_v)
            + PER_ELEMENT_FLOPS["softmax"] * scores)


def _tensordot(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """tensordot(a, b, dims): ``numel(out) = numel(a) * numel(b) / C^2``, C the contracted size."""
    contracted = round(math.sqrt(ins[0].numel * ins[1].numel / outs[0].numel))
    return 2.0 * outs[0].numel * contracted


def _bilinear(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """bilinear(x1[..., I1], x2[..., I2], W[O, I1, I2], b?): ``x1^T W_o x2`` per output."""
    w = ins[2].shape
    if len(w) != 3:
        raise ValueError("weight must be rank 3")
    bias = outs[0].numel if len(ins) > 3 else 0
    return 2.0 * outs[0].numel * w[1] * w[2] + bias


def _trilinear(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim): the three inputs, each with size-1 dimensions
    inserted at its ``attrs["expand"]`` positions, multiplied and summed over ``sumdim``: 2 FLOPs per point of
    their broadcast product. Without ``expand``, ``nn.Bilinear``'s layout: ``_trilinear(x1, W, x2)`` is bilinear
    without the bias."""
    expands = attrs.get("expand")
    if expands is None:
        return _bilinear([ins[0], ins[2], ins[1]], outs, attrs)
    space: dict[int, int] = {}
    for spec, expand in zip(ins, expands, strict=True):
        shape = list(spec.shape)
        for d in sorted(expand):
            shape.insert(d, 1)
        for d, size in enumerate(shape):
            space[d] = max(space.get(d, 1), size)
    return 2.0 * math.prod(space.values())


def _cdist(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """cdist(x1[..., P, M], x2[..., R, M]): 3 FLOPs per coordinate of each of the ``numel(out)`` pairs."""
    return 3.0 * outs[0].numel * ins[0].shape[-1]


def _attention(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """Q[B, H, S_q, d] or packed Q[B, S_q, H * d] (H from ``q_num_heads`` or ``num_heads``), K[..., S_k, d]:
    ``Q K^T`` and ``P V``, then a softmax over the ``B * H * S_q * S_k`` scores."""
    q, k, out = ins[0], ins[1], outs[0]
    s_k = k.shape[-2] if len(k.shape) >= 2 else 1
    heads = int(attrs.get("q_num_heads") or attrs.get("num_heads") or 1) if len(q.shape) == 3 else 1
    scores = q.numel // q.shape[-1] * s_k * heads if q.shape else 0
    return 2.0 * s_k * (q.numel + out.numel) + PER_ELEMENT_FLOPS["softmax"] * scores


def _variadic_or_reduce(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """Sum/Mean/Max/Min: elementwise over several inputs (ONNX), ``numel(X)`` for a reduction over one (ATen)."""
    if len(ins) == 1:
        return float(ins[0].numel)
    out = outs[0].numel
    return float(max(sum(t.numel for t in ins) - out, out))


def _conv_backward(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """convolution_backward(grad_out, input, weight, ...): the gradients ``attrs["output_mask"]`` asks for (of
    input, weight, bias; default: input and weight), each of input and weight one forward (without bias), the
    bias ``numel(grad_out)``."""
    want_input, want_weight, want_bias = (bool(m) for m in attrs.get("output_mask", (True, True, False)))
    forward = _conv([ins[1], ins[2]], [ins[0]], attrs)
    return forward * (want_input + want_weight) + (ins[0].numel if want_bias else 0.0)


def _attention_backward(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """SDPA backward(grad_out, q, k, v, ...): recomputes scores, then three more products: 2.5x the forward."""
    return 2.5 * _attention([ins[1], ins[2]], [ins[0]], attrs)


def _pool(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    kernel = attrs.get("kernel_shape") or attrs.get("kernel_size") or ()
    return float(outs[0].numel * math.prod(int(k) for k in kernel))


def _pool_backward(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """max_pool2d_with_indices_backward / avg_pool2d_backward(grad_out, input, kernel_size, ...): one window per
    element of grad_out, as the forward (TensorFlow's MaxPoolGrad and AvgPoolGrad count the same)."""
    return _pool(ins[1:], ins[:1], attrs)


def _adaptive_pool_backward(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any], *,
                            spatial: int) -> float:
    """_adaptive_avg_pool2d_backward / adaptive_max_pool2d_backward(grad_out, input, ...): :func:`_pool_backward`
    with the window ``ceil(input / grad_out)`` along each of the ``spatial`` last dimensions."""
    grad, x = ins[0].shape, ins[1].shape
    if len(grad) < spatial:
        raise ValueError("grad_out has too few dimensions")
    kernel = [math.ceil(i / o) for i, o in zip(x[-spatial:], grad[-spatial:], strict=True)]
    return _pool_backward(ins, outs, {"kernel_size": kernel})


INTERPOLATION_FLOPS = {"linear": (2, 3), "cubic": (4, 7)}
"""Interpolation mode -> (points read along each axis, FLOPs to combine them: a lerp ``a + w * (b - a)``; four
products and three sums)."""


def _interpolation(mode: str, axes: int, points: int) -> float:
    """FLOPs of ``points`` values interpolated over ``axes`` axes, one axis after another: ``taps^(axes - 1)``
    combinations along the first, ..., one along the last (bilinear: 3 lerps, 9 FLOPs; bicubic: 35)."""
    if mode not in INTERPOLATION_FLOPS:
        return 0.0  # nearest: a gather, no arithmetic
    taps, flops = INTERPOLATION_FLOPS[mode]
    return float(points * flops * (taps**axes - 1) // (taps - 1))


def _upsample(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any], *, mode: str,
              axes: int, backward: bool = False) -> float:
    """ATen upsample_bilinear2d (..., bicubic2d, trilinear3d): :func:`_interpolation` per output element; their
    backward the same per element of grad_out, its first input."""
    return _interpolation(mode, axes, (ins[0] if backward else outs[0]).numel)


def _resize(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """ONNX Resize / Upsample(X, ...): ``attrs["mode"]`` (default nearest) over the axes whose size changes."""
    mode = str(attrs.get("mode", "nearest")).replace("bilinear", "linear")
    axes = sum(a != b for a, b in zip(ins[0].shape, outs[0].shape, strict=True))
    return _interpolation(mode, axes, outs[0].numel)


def _lrn(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    return float(outs[0].numel * (2 * int(attrs.get("size", 5)) + 4))


def _reduce(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    return float(ins[0].numel)


def _einsum(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """2 x the product of every index's size; the dimensions an ellipsis covers are indices of their own,
    aligned from the right and broadcast across operands."""
    equation = str(attrs.get("equation", "")).replace(" ", "")
    lhs = equation.split("->")[0].split(",")
    if len(lhs) != len(ins):
        raise ValueError(f"einsum {equation!r} not counted")
    sizes: dict[Any, int] = {}
    for term, t in zip(lhs, ins, strict=True):
        head, dots, tail = term.partition("...")
        covered = len(t.shape) - len(head) - len(tail) if dots else 0
        labels = [*head, *(("...", covered - j) for j in range(covered)), *tail]
        for label, size in zip(labels, t.shape, strict=True):
            sizes[label] = max(sizes.get(label, 1), int(size))
    return 2.0 * math.prod(sizes.values())


def _grid_sample(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """GridSample(X[N, C, D...], grid, mode): :func:`_interpolation` (default linear) over X's spatial axes, per
    output element."""
    mode = str(attrs.get("mode", "linear")).replace("bilinear", "linear").replace("bicubic", "cubic")
    return _interpolation(mode, len(ins[0].shape) - 2, outs[0].numel)


def _affine_grid(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """AffineGrid(theta[N, r, r + 1], size): each output coordinate a product of a theta row and the
    homogeneous point, ``2 * (r + 1)`` FLOPs."""
    return 2.0 * outs[0].numel * ins[0].shape[-1]


def _deform_conv(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """DeformConv(X[N, C, ...], W[M, C/g, k...], offset, B?, mask?): the convolution's products and bias as
    :func:`_conv`, plus a bilinear sample (:func:`_interpolation`) per input channel, kernel tap and output
    position, and its mask's product."""
    x, w, out = ins[0], ins[1], outs[0]
    products = 2.0 * out.numel * (w.numel // w.shape[0])
    bias = out.numel if len(ins) > 3 and ins[3].numel else 0
    samples = out.numel // out.shape[1] * x.shape[1] * math.prod(w.shape[2:])
    mask = samples if len(ins) > 4 and ins[4].numel else 0
    return products + bias + _interpolation("linear", len(w.shape) - 2, samples) + mask


def _nll_loss(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """NegativeLogLikelihoodLoss(input, target[N, d...], weight?): a weighted negation per target and its
    reduction, ``2 * numel(target)``."""
    return 2.0 * ins[1].numel


def _softmax_cross_entropy(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """SoftmaxCrossEntropyLoss(scores, labels, weights?): a log-softmax over the scores, then
    :func:`_nll_loss`."""
    return PER_ELEMENT_FLOPS["logsoftmax"] * ins[0].numel + _nll_loss(ins, outs, attrs)


def _det(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """Det(X[..., n, n]): an LU factorisation per matrix, ``2 n^3 / 3``."""
    n = ins[0].shape[-1]
    return ins[0].numel // (n * n) * 2.0 * n**3 / 3


def _roi_align(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """RoiAlign(X, rois, batch_indices): per output element ``sampling_ratio^2`` bilinear samples (9 FLOPs each,
    :func:`_interpolation`) and their pooling; an adaptive ``sampling_ratio`` (0, the default: the RoI's size
    over the output's, known only at run time) taken as 2."""
    ratio = int(attrs.get("sampling_ratio", 0)) or 2
    samples = outs[0].numel * ratio * ratio
    return _interpolation("linear", 2, samples) + samples


def _fft(n: int, transforms: int) -> float:
    """``transforms`` complex FFTs of length ``n``: ``5 n log2(n)`` each (the usual FFT estimate)."""
    return 5.0 * n * math.log2(n) * transforms if n > 1 else 0.0


def _dft(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """DFT(input[..., n, ..., 1|2]): :func:`_fft` of length n along ``attrs["axis"]`` (opset 17's attribute;
    else -2, opset 20's default for its axis input, whose value is not known here) for each signal."""
    x = ins[0]
    n = x.shape[int(attrs.get("axis", -2))]
    return _fft(n, x.numel // (n * x.shape[-1]))


def _stft(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """STFT(signal, frame_step, window?, frame_length?) -> [B, frames, bins, 2]: per frame a window product and
    :func:`_fft` of the frame length (the window's; else from the bins, ``2 (bins - 1)`` when ``onesided``)."""
    out = outs[0]
    if len(out.shape) != 4 or out.shape[-1] != 2:
        raise ValueError("not ONNX's [B, frames, bins, 2] output")
    bins = out.shape[2]
    window = len(ins) > 2 and len(ins[2].shape) == 1
    n = ins[2].shape[0] if window else (2 * (bins - 1) if attrs.get("onesided", 1) else bins)
    frames = out.numel // (bins * out.shape[-1])
    return _fft(n, frames) + (frames * n if window else 0)


LINEAR_ATTENTION_UPDATE = {"linear": 2, "gated": 3, "delta": 4, "gated_delta": 5}
"""ONNX ``LinearAttention``'s ``update_rule`` -> FLOPs per state element per token and key/value head: the outer
product added (2), a decay's product (1), a delta rule's ``S^T k`` (2)."""


def _linear_attention(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """LinearAttention(query[B, T, Hq * dk], key, value[B, T, Hkv * dv], ...): per token, each key/value head's
    ``dk x dv`` state updated (:data:`LINEAR_ATTENTION_UPDATE`, default ``gated_delta``) and each query head's
    read out, ``2 dk dv``."""
    q, v = ins[0], ins[2]
    h_q, h_kv = int(attrs["q_num_heads"]), int(attrs["kv_num_heads"])
    d_k, d_v = q.shape[-1] // h_q, v.shape[-1] // h_kv
    tokens = q.numel // q.shape[-1]
    update = LINEAR_ATTENTION_UPDATE[str(attrs.get("update_rule", "gated_delta"))]
    return float(tokens * d_k * d_v * (update * h_kv + 2 * h_q))


def _causal_conv_with_state(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """CausalConvWithState(input[B, C, L], weight[C, 1, k], bias?, past_state?): a depthwise convolution, ``2 k``
    per output element, its bias, and a fused SiLU (``attrs["activation"]`` silu or swish)."""
    out = outs[0].numel
    bias = out if len(ins) > 2 and len(ins[2].shape) == 1 else 0
    silu = PER_ELEMENT_FLOPS["silu"] * out if attrs.get("activation") in ("silu", "swish") else 0
    return 2.0 * out * ins[1].shape[-1] + bias + silu


def _scatter(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """ONNX ScatterElements / ScatterND(data, indices, updates) with a ``reduction`` (add, mul, max, min): one
    operation per update; without one (``none``) a copy, 0."""
    return 0.0 if attrs.get("reduction", "none") == "none" else float(ins[2].numel)


def _conv_integer(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """ConvInteger(x, w, x_zero_point, w_zero_point): no bias."""
    return _conv(ins[:2], outs, attrs)


def _qlinear_conv(ins: Sequence[TensorSpec], outs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> float:
    """QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, bias?)."""
    return _conv([ins[0], ins[3], *ins[8:9]], outs, attrs)


_FLOP_RULES: dict[str, Rule] = {
    **dict.fromkeys(["matmul", "mm", "bmm", "matmulinteger", "qlinearmatmul", "fusedmatmul", "dot", "mv"],
                    _matmul),
    "gemm": _gemm,
    **dict.fromkeys(["addmm", "baddbmm", "addmv"], _addmm),
    "addbmm": _addbmm,
    "linear": _linear,
    **dict.fromkeys(["conv", "convolution", "conv1d", "conv2d", "conv3d", "_convolution", "mkldnn_convolution"],
                    _conv),
    "convinteger": _conv_integer,
    "qlinearconv": _qlinear_conv,
    **dict.fromkeys(["convtranspose", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"],
                    _conv_transpose),
    **dict.fromkeys(["gru", "rnn", "rnn_tanh", "rnn_relu"], _rnn),
    "lstm": functools.partial(_aten_rnn, states=2),
    "lstm_cell": functools.partial(_aten_rnn, states=2, cell=True),
    **dict.fromkeys(["gru_cell", "rnn_tanh_cell", "rnn_relu_cell"], functools.partial(_aten_rnn, states=1, cell=True)),
    "_thnn_fused_lstm_cell": _fused_lstm_cell,
    "mkldnn_rnn_layer": _mkldnn_rnn_layer,
    "mkldnn_rnn_layer_backward": _mkldnn_rnn_layer_backward,
    "com.microsoft::attention": _ms_attention,
    "tensordot": _tensordot,
    "bilinear": _bilinear,
    "_trilinear": _trilinear,
    **dict.fromkeys(["cdist", "_cdist_forward"], _cdist),
    **dict.fromkeys(["attention", "multiheadattention", "flexattention", "scaled_dot_product_attention",
                     "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
                     "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention"],
                    _attention),
    **dict.fromkeys(["maxpool", "averagepool", "lppool", "max_pool1d", "max_pool2d", "max_pool3d",
                     "max_pool2d_with_indices", "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d",
                     "avg_pool3d"], _pool),
    **dict.fromkeys(["max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward", "avg_pool2d_backward",
                     "avg_pool3d_backward"], _pool_backward),
    **dict.fromkeys(["_adaptive_avg_pool2d_backward", "adaptive_max_pool2d_backward"],
                    functools.partial(_adaptive_pool_backward, spatial=2)),
    **dict.fromkeys(["_adaptive_avg_pool3d_backward", "adaptive_max_pool3d_backward"],
                    functools.partial(_adaptive_pool_backward, spatial=3)),
    "lrn": _lrn,
    **{name: functools.partial(_upsample, mode=mode, axes=axes, backward=backward)
       for stem, mode, axes in (("upsample_linear1d", "linear", 1), ("upsample_bilinear2d", "linear", 2),
                                ("upsample_trilinear3d", "linear", 3), ("upsample_bicubic2d", "cubic", 2))
       for name, backward in ((stem, False), (f"{stem}_backward", True))},
    **dict.fromkeys(["resize", "upsample"], _resize),
    **dict.fromkeys(["globalaveragepool", "globalmaxpool", "globallppool", "adaptive_avg_pool1d",
                     "adaptive_avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool3d",
                     "adaptive_max_pool2d", "adaptive_max_pool3d",
                     "reducesum", "reducemean", "reducemax", "reducemin", "reduceprod", "reducel1", "reducel2",
                     "reducelogsum", "reducelogsumexp", "reducesumsquare", "argmax", "argmin", "amax", "amin",
                     "var", "var_mean", "std", "logsumexp", "cumsum", "cumprod", "col2im", "norm",
                     "linalg_vector_norm", "topk"],
                    _reduce),
    "einsum": _einsum,
    "gridsample": _grid_sample,
    "affinegrid": _affine_grid,
    "deformconv": _deform_conv,
    "negativeloglikelihoodloss": _nll_loss,
    "softmaxcrossentropyloss": _softmax_cross_entropy,
    "det": _det,
    "roialign": _roi_align,
    "dft": _dft,
    "stft": _stft,
    "linearattention": _linear_attention,
    "causalconvwithstate": _causal_conv_with_state,
    **dict.fromkeys(["scatterelements", "scatternd"], _scatter),
    **dict.fromkeys(["batch_norm", "batchnormalization"], _batch_norm),
    **dict.fromkeys(["dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"], _dropout),
    "convolution_backward": _conv_backward,
    **dict.fromkeys(["_scaled_dot_product_flash_attention_for_cpu_backward",
                     "_scaled_dot_product_flash_attention_backward",
                     "_scaled_dot_product_efficient_attention_backward"], _attention_backward),
    **dict.fromkeys(["sum", "mean", "max", "min"], _variadic_or_reduce),
}

