"""ONNX operators as torch functions: the converter protocol, element-wise ops, reductions, matrix products.

Each converter reads a node's attributes through :class:`Attrs` (which rejects any attribute no converter
read) and returns ``(function, kwargs)``: a module-level torch function that takes the node's inputs in order
(``None`` for a missing optional one) and its attributes as keyword arguments. A node with more than one
output gets a tuple. The other tables: :mod:`gplace.runtime.onnx.shape` (shape and indexing ops),
:mod:`gplace.runtime.onnx.nn` (padding, convolution, pooling, normalisation, resizing) and
:mod:`gplace.runtime.onnx.rnn` (recurrent layers).

- Binary ops broadcast like NumPy; before opset 7, ``broadcast=1, axis=k`` lines B up with A from axis k.
- Integer ``Div`` truncates; ``Mod`` is Python's (sign of the divisor) unless ``fmod=1``; ``Pow`` keeps the
  base's type. ``PRelu`` before opset 7 applies a 1-D slope along the channel axis.
- ``Softmax`` / ``LogSoftmax`` / ``Hardmax`` before opset 13 see the input as 2-D (the axes before ``axis``
  and from it on); from 13 on they work along ``axis`` alone.
- Reductions take axes from the input (newer opsets) or the attribute; none means all axes, or the input
  unchanged with ``noop_with_empty_axes``.
- ``Gemm``: ``alpha * A' B' + beta * C`` with ``transA`` / ``transB``. ``Dropout`` is the identity (and an
  all-true mask); in training mode (``is_test=0`` before opset 7, a ``training_mode`` input that is true or
  not a constant) it is random, and refused. ``Cast`` follows torch's conversions (floats to integers truncate).

``onnx`` is imported inside the functions that need it.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from gplace.ir import UnsupportedGraphError

__all__ = ["CONVERTERS", "Attrs", "Converter", "Known", "as_ints", "as_scalar", "constant_value", "host_inputs",
           "host_list", "host_reads", "host_tensor", "norm_axis", "outputs", "plain", "reads_on_host",
           "sparse_to_dense", "tensor_from_proto", "torch_dtype", "with_attrs"]

Converter = Callable[["Attrs"], tuple[Callable[..., Any], dict[str, Any]]]

_DTYPES = {
    1: torch.float32, 2: torch.uint8, 3: torch.int8, 4: torch.uint16, 5: torch.int16, 6: torch.int32,
    7: torch.int64, 9: torch.bool, 10: torch.float16, 11: torch.float64, 12: torch.uint32, 13: torch.uint64,
    14: torch.complex64, 15: torch.complex128, 16: torch.bfloat16,
}
"""ONNX ``TensorProto.DataType`` -> torch dtype (strings and 8/4-bit floats have none)."""

_IGNORED = frozenset({"consumed_inputs"})
"""Attributes of old opsets that change nothing at inference."""


class Attrs:
    """A node's attributes, each read at most once; :meth:`finish` rejects any attribute no converter read.

    Args:
        node: the ``onnx.NodeProto``.
        opset: the model's default-domain opset.
        label: the gplace op name, for messages.
    """

    def __init__(self, node: Any, opset: int, label: str) -> None:
        self.node, self.opset, self.label = node, opset, label
        self._attrs = {attr.name: attr for attr in node.attribute}
        self._read: set[str] = set()

    @property
    def num_outputs(self) -> int:
        """Outputs of the node, empty (skipped) ones included."""
        return len(self.node.output)

    def get(self, name: str, default: Any = None) -> Any:
        """The attribute's Python value (strings decoded, tensors as torch tensors), or ``default``."""
        import onnx

        self._read.add(name)
        attr = self._attrs.get(name)
        if attr is None:
            return default
        value = onnx.helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            return value.decode()
        if isinstance(value, onnx.TensorProto):
            return _attribute_tensor(value, self)
        if isinstance(value, list) and value and isinstance(value[0], bytes):
            return [v.decode() for v in value]
        return list(value) if isinstance(value, list | tuple) else value

    def choice(self, name: str, default: Any, allowed: Sequence[Any]) -> Any:
        """An attribute restricted to ``allowed`` values; another one is unsupported."""
        value = self.get(name, default)
        if value not in allowed:
            supported = ", ".join(map(repr, allowed))
            raise self.error(f"attribute {name}={value!r} is not supported (supported: {supported})")
        return value

    def error(self, what: str) -> UnsupportedGraphError:
        """An :class:`UnsupportedGraphError` naming the node and its op type."""
        return UnsupportedGraphError(f"node {self.label!r} ({self.node.op_type}): {what}")

    def finish(self) -> None:
        """Raise if the node has an attribute its converter did not read."""
        unread = sorted(set(self._attrs) - self._read - _IGNORED)
        if unread:
            raise self.error(f"attribute {unread[0]!r} is not supported")


def torch_dtype(onnx_type: int | str, attrs: Attrs | None = None, what: str = "") -> torch.dtype:
    """The torch dtype of an ONNX element type (an id, or its name in opsets before 6)."""
    import onnx

    if isinstance(onnx_type, str):
        onnx_type = onnx.TensorProto.DataType.Value(onnx_type.upper())
    dtype = _DTYPES.get(int(onnx_type))
    if dtype is None:
        name = onnx.TensorProto.DataType.Name(int(onnx_type))
        message = f"element type {name} has no torch dtype"
        raise attrs.error(message) if attrs is not None else UnsupportedGraphError(f"{what}: {message}")
    return dtype


def tensor_from_proto(proto: Any, what: str, base_dir: str | None = None) -> torch.Tensor | None:
    """A ``TensorProto``'s value, or ``None`` when its data is missing, or external and no ``base_dir`` (the
    model's directory) holds it.

    Raises:
        UnsupportedGraphError: the element type has no torch dtype (strings, 8-bit floats).
    """
    import onnx
    from onnx import numpy_helper

    dtype = torch_dtype(proto.data_type, what=what)
    if proto.data_location == onnx.TensorProto.EXTERNAL and base_dir is None:
        return None
    try:
        array = numpy_helper.to_array(proto, base_dir=base_dir or "")
    except Exception:  # no data at all, or data of the wrong size
        return None
    if array.size != math.prod(proto.dims):
        return None
    if dtype == torch.bfloat16:
        return torch.from_numpy(array.astype(np.float32)).to(dtype)
    return torch.from_numpy(np.array(array, copy=True)).reshape(tuple(proto.dims))


def _attribute_tensor(proto: Any, attrs: Attrs) -> torch.Tensor:
    value = tensor_from_proto(proto, f"node {attrs.label!r} ({attrs.node.op_type})")
    if value is None:
        raise attrs.error("a tensor attribute without data")
    return value


def constant_value(attrs: Attrs) -> torch.Tensor:
    """The value of a ``Constant`` node."""
    import onnx

    for name, dtype in (("value_float", torch.float32), ("value_int", torch.int64),
                        ("value_floats", torch.float32), ("value_ints", torch.int64)):
        if name in attrs._attrs:
            return torch.tensor(attrs.get(name), dtype=dtype)
    if "sparse_value" in attrs._attrs:
        attrs._read.add("sparse_value")
        return sparse_to_dense(onnx.helper.get_attribute_value(attrs._attrs["sparse_value"]), attrs.label)
    if "value" in attrs._attrs:
        return attrs.get("value")
    raise attrs.error(f"attribute {next(iter(attrs._attrs), 'value')!r} (string constants have no torch type)")


def sparse_to_dense(sparse: Any, what: str, base_dir: str | None = None) -> torch.Tensor | None:
    """A ``SparseTensorProto`` as a dense tensor (indices linear ``[NNZ]`` or ``[NNZ, rank]``)."""
    values = tensor_from_proto(sparse.values, what, base_dir)
    indices = tensor_from_proto(sparse.indices, what, base_dir)
    if values is None or indices is None:
        return None
    dims = tuple(int(d) for d in sparse.dims)
    flat = indices if indices.ndim == 1 else _ravel(indices, dims)
    dense = torch.zeros(math.prod(dims), dtype=values.dtype)
    dense[flat.long()] = values.reshape(-1)
    return dense.reshape(dims)


def _ravel(indices: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    strides = [math.prod(dims[i + 1:]) for i in range(len(dims))]
    return (indices * torch.tensor(strides, dtype=indices.dtype)).sum(-1)


# ---------------------------------------------------------------------- host reads
@dataclass(frozen=True, eq=False)
class Known:
    """A shape-like input whose value was computed on the host when the step was planned.

    :func:`~gplace.runtime.onnx.program.known_inputs` finds such inputs; the executor passes them in place of
    the tensor, so that no step reads a device tensor on the host (on a GPU: waits for its stream).
    """

    value: torch.Tensor
    """On the host."""


_host_reads = [0]


def host_reads() -> int:
    """How many device tensors the op functions have read on the host so far in this process."""
    return _host_reads[0]


def host_tensor(value: torch.Tensor | Known) -> torch.Tensor:
    """A shape-like input on the host: a :class:`Known`'s value, else the tensor read (counted by
    :func:`host_reads`)."""
    if isinstance(value, Known):
        return value.value
    read = value.cpu()
    _host_reads[0] += 1
    return read


def host_list(value: torch.Tensor | Known) -> list[Any]:
    """The flat values of a shape-like input, as Python numbers."""
    return host_tensor(value).reshape(-1).tolist()


def as_ints(value: torch.Tensor | Known | Sequence[int] | None) -> list[int] | None:
    """Integers of a shape-like input (an attribute's list passes through)."""
    if value is None:
        return None
    return [int(v) for v in (host_list(value) if isinstance(value, torch.Tensor | Known) else value)]


def as_scalar(value: torch.Tensor | Known) -> Any:
    """The first value of a shape-like input."""
    return host_list(value)[0]


def reads_on_host(*params: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark the parameters an op function reads on the host (shape-like inputs); see :func:`host_inputs`."""
    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        names = list(inspect.signature(fn).parameters)
        fn.host_inputs = frozenset(names.index(p) for p in params)  # type: ignore[attr-defined]
        return fn

    return mark


def host_inputs(fn: Any) -> frozenset[int]:
    """Positions of the arguments ``fn`` reads on the host."""
    return getattr(fn, "host_inputs", frozenset())


# ---------------------------------------------------------------------- helpers used at run time


def norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def outputs(values: Sequence[Any], count: int) -> Any:
    """The first output alone for a one-output node, else a tuple of ``count``."""
    return values[0] if count == 1 else tuple(values[:count])


# ---------------------------------------------------------------------- converter builders
def plain(fn: Callable[..., Any]) -> Converter:
    """A converter for an op without attributes."""
    return lambda a: (fn, {})


def with_attrs(fn: Callable[..., Any], **params: tuple[str, Any]) -> Converter:
    """A converter passing attributes as keyword arguments: ``kwarg=(attribute, default)``."""
    return lambda a: (fn, {key: a.get(attr, default) for key, (attr, default) in params.items()})


_BINARY: dict[str, Callable[..., Any]] = {}


def _binary(name: str, fn: Callable[..., Any]) -> Converter:
    """A numpy-broadcasting binary op; before opset 7, ``broadcast=1, axis=k`` aligns B at axis k of A."""
    _BINARY[name] = fn

    def convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
        broadcast, axis = a.get("broadcast", 0), a.get("axis")
        if a.opset < 7 and broadcast and axis is not None:
            return _broadcast_at, {"op": name, "axis": axis}
        return fn, {}

    return convert


def _broadcast_at(x: torch.Tensor, y: torch.Tensor, *, op: str, axis: int) -> torch.Tensor:
    """Legacy broadcasting: ``y``'s dimensions line up with ``x``'s from ``axis`` on."""
    axis = norm_axis(axis, x.ndim)
    return _BINARY[op](x, y.reshape((*y.shape, *[1] * (x.ndim - axis - y.ndim))))


# ---------------------------------------------------------------------- element-wise
def _div(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Integer division truncates, as in C."""
    if x.dtype.is_floating_point or x.dtype.is_complex:
        return x / y
    return torch.div(x, y, rounding_mode="trunc")


def _pow(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The result has the base's type."""
    return torch.pow(x, y).to(x.dtype)


def _mod(x: torch.Tensor, y: torch.Tensor, *, fmod: int) -> torch.Tensor:
    return torch.fmod(x, y) if fmod else torch.remainder(x, y)


def _bit_shift(x: torch.Tensor, y: torch.Tensor, *, direction: str) -> torch.Tensor:
    return torch.bitwise_left_shift(x, y) if direction == "LEFT" else torch.bitwise_right_shift(x, y)


def _variadic(*xs: torch.Tensor, kind: str) -> torch.Tensor:
    fn = {"sum": torch.add, "max": torch.maximum, "min": torch.minimum, "mean": torch.add}[kind]
    out = functools.reduce(fn, xs)
    return out / len(xs) if kind == "mean" else out


def _prelu(x: torch.Tensor, slope: torch.Tensor, *, legacy: bool) -> torch.Tensor:
    """Before opset 7 a 1-D slope of length C applies along the channel axis 1."""
    if legacy and slope.ndim == 1 and slope.numel() > 1 and x.ndim >= 2:
        slope = slope.reshape(-1, *[1] * (x.ndim - 2))
    return torch.where(x < 0, x * slope, x)


def _selu(x: torch.Tensor, *, alpha: float, gamma: float) -> torch.Tensor:
    return gamma * torch.where(x > 0, x, alpha * (torch.exp(x) - 1))


def _hard_sigmoid(x: torch.Tensor, *, alpha: float, beta: float) -> torch.Tensor:
    return torch.clamp(alpha * x + beta, 0, 1)


def _thresholded_relu(x: torch.Tensor, *, alpha: float) -> torch.Tensor:
    return torch.where(x > alpha, x, torch.zeros_like(x))


def _shrink(x: torch.Tensor, *, bias: float, lambd: float) -> torch.Tensor:
    zero = torch.zeros_like(x)
    return torch.where(x < -lambd, x + bias, torch.where(x > lambd, x - bias, zero))


def _is_inf(x: torch.Tensor, *, detect_negative: int, detect_positive: int) -> torch.Tensor:
    return (torch.isneginf(x) & bool(detect_negative)) | (torch.isposinf(x) & bool(detect_positive))


def _clip(x: torch.Tensor, low: Any = None, high: Any = None, *, attr_min: float | None,
          attr_max: float | None) -> torch.Tensor:
    """Bounds from the inputs (opset 11 on) or the attributes; ``low > high`` gives ``high``."""
    low = attr_min if low is None else low
    high = attr_max if high is None else high
    return x if low is None and high is None else torch.clamp(x, low, high)


def _cast(x: torch.Tensor, *, dtype: torch.dtype) -> torch.Tensor:
    return x.to(dtype)


def _cast_like(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return x.to(like.dtype)


def _identity(x: Any, *rest: Any) -> Any:
    return x


@reads_on_host("training")
def _dropout(x: torch.Tensor, ratio: Any = None, training: Any = None, *, outputs_: int, node_: str) -> Any:
    """Inference: the input, and an all-true mask when asked for. A ``training_mode`` that is true, or not known
    when the step is planned (a graph input, a computed value), is refused: training dropout is random."""
    if training is not None and (not isinstance(training, Known) or bool(training.value.reshape(-1)[0])):
        what = "true" if isinstance(training, Known) else "not a constant"
        raise UnsupportedGraphError(f"node {node_!r} (Dropout): training_mode is {what}; training dropout is a "
                                    "random op, which torch-v1 does not run")
    return outputs((x, torch.ones_like(x, dtype=torch.bool)), outputs_)


def _dropout_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    for name in ("ratio", "seed"):
        a.get(name)
    if a.opset < 7 and not a.get("is_test", 0):
        raise a.error("is_test=0 (training mode) is a random op, which is not supported")
    a.get("is_test")
    return _dropout, {"outputs_": a.num_outputs, "node_": a.label}


def _clip_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    return _clip, {"attr_min": a.get("min"), "attr_max": a.get("max")}


def _cast_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    a.get("saturate")
    return _cast, {"dtype": torch_dtype(a.get("to"), a)}


def _prelu_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    return _prelu, {"legacy": a.opset < 7}


def _gelu_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    return F.gelu, {"approximate": a.choice("approximate", "none", ("none", "tanh"))}


def _bit_shift_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    return _bit_shift, {"direction": a.choice("direction", None, ("LEFT", "RIGHT"))}


# ---------------------------------------------------------------------- softmax family
def _hardmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.zeros_like(x).scatter_(dim, x.argmax(dim, keepdim=True), 1)


_SOFTMAX = {"Softmax": torch.softmax, "LogSoftmax": torch.log_softmax, "Hardmax": _hardmax}


def _softmax(x: torch.Tensor, *, kind: str, axis: int, coerce_2d: bool) -> torch.Tensor:
    """Before opset 13 the input is seen as 2-D: dimensions before ``axis`` and from ``axis`` on."""
    fn = _SOFTMAX[kind]
    if not coerce_2d:
        return fn(x, axis)
    axis = norm_axis(axis, x.ndim)
    flat = x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))
    return fn(flat, 1).reshape(x.shape)


def _softmax_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    legacy = a.opset < 13
    return _softmax, {"kind": a.node.op_type, "axis": a.get("axis", 1 if legacy else -1), "coerce_2d": legacy}


# ---------------------------------------------------------------------- reductions
def _reduce_prod(x: torch.Tensor, dims: list[int], keepdim: bool) -> torch.Tensor:
    for d in sorted(dims, reverse=True):
        x = torch.prod(x, d, keepdim=True)
    return x if keepdim else x.squeeze(dims)


def _reduce_mean(x: torch.Tensor, dims: list[int], keepdim: bool) -> torch.Tensor:
    if x.dtype.is_floating_point or x.dtype.is_complex:
        return torch.mean(x, dims, keepdim=keepdim)
    count = math.prod(x.shape[d] for d in dims)
    return torch.div(torch.sum(x, dims, keepdim=keepdim), count, rounding_mode="trunc").to(x.dtype)


_REDUCE: dict[str, Callable[[torch.Tensor, list[int], bool], torch.Tensor]] = {
    "ReduceSum": lambda x, d, k: torch.sum(x, d, keepdim=k),
    "ReduceMean": _reduce_mean,
    "ReduceMax": lambda x, d, k: torch.amax(x, d, keepdim=k),
    "ReduceMin": lambda x, d, k: torch.amin(x, d, keepdim=k),
    "ReduceProd": _reduce_prod,
    "ReduceL1": lambda x, d, k: torch.sum(x.abs(), d, keepdim=k),
    "ReduceL2": lambda x, d, k: torch.sqrt(torch.sum(x * x, d, keepdim=k)),
    "ReduceLogSum": lambda x, d, k: torch.log(torch.sum(x, d, keepdim=k)),
    "ReduceLogSumExp": lambda x, d, k: torch.logsumexp(x, d, keepdim=k),
    "ReduceSumSquare": lambda x, d, k: torch.sum(x * x, d, keepdim=k),
}


@reads_on_host("axes")
def _reduce(x: torch.Tensor, axes: Any = None, *, kind: str, attr_axes: list[int] | None, keepdims: int,
            noop_with_empty_axes: int) -> torch.Tensor:
    """Axes from the input (newer opsets) or the attribute; none means all, or nothing with ``noop``. The result
    keeps ``x``'s type, as ONNX says (torch sums integers as int64, and takes an integer's root or log as float)."""
    dims = as_ints(axes) if axes is not None else attr_axes
    if not dims:
        if noop_with_empty_axes:
            return x
        dims = list(range(x.ndim))
    dims = [norm_axis(d, x.ndim) for d in dims]
    return _REDUCE[kind](x, dims, bool(keepdims)).to(x.dtype) if x.ndim else x


def _reduce_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    return _reduce, {"kind": a.node.op_type, "attr_axes": a.get("axes"), "keepdims": a.get("keepdims", 1),
                     "noop_with_empty_axes": a.get("noop_with_empty_axes", 0)}


def _arg_extreme(x: torch.Tensor, *, largest: bool, axis: int, keepdims: int, select_last_index: int) -> torch.Tensor:
    axis = norm_axis(axis, x.ndim)
    fn = torch.argmax if largest else torch.argmin
    if not select_last_index:
        return fn(x, axis, keepdim=bool(keepdims))
    return x.shape[axis] - 1 - fn(x.flip(axis), axis, keepdim=bool(keepdims))


def _arg_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    return _arg_extreme, {"largest": a.node.op_type == "ArgMax", "axis": a.get("axis", 0),
                          "keepdims": a.get("keepdims", 1), "select_last_index": a.get("select_last_index", 0)}


# ---------------------------------------------------------------------- matrix products
def _gemm(x: torch.Tensor, y: torch.Tensor, c: torch.Tensor | None = None, *, alpha: float, beta: float,
          trans_a: int, trans_b: int) -> torch.Tensor:
    """``alpha * A' B' + beta * C``, C broadcast to the product."""
    x, y = (x.T if trans_a else x), (y.T if trans_b else y)
    if c is None or beta == 0:
        out = x @ y
        return out if alpha == 1 else alpha * out
    return torch.addmm(c, x, y, beta=beta, alpha=alpha)


def _gemm_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    a.get("broadcast")
    return _gemm, {"alpha": a.get("alpha", 1.0), "beta": a.get("beta", 1.0), "trans_a": a.get("transA", 0),
                   "trans_b": a.get("transB", 0)}


def _einsum(*xs: torch.Tensor, equation: str) -> torch.Tensor:
    return torch.einsum(equation.replace(" ", ""), *xs)

def _constant(value: torch.Tensor) -> torch.Tensor:
    """A ``Constant`` node: its value, a placeholder on the node's device."""
    return value


def _where(condition: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.where(condition, x, y)


def _sum_like(name: str) -> Converter:
    return lambda a: (_variadic, {"kind": name})


# ---------------------------------------------------------------------- the table
CONVERTERS: dict[str, Converter] = {
    **{name: plain(fn) for name, fn in {
        "Abs": torch.abs, "Neg": torch.neg, "Exp": torch.exp, "Log": torch.log, "Sqrt": torch.sqrt,
        "Reciprocal": torch.reciprocal, "Floor": torch.floor, "Ceil": torch.ceil, "Round": torch.round,
        "Sign": torch.sign, "Sin": torch.sin, "Cos": torch.cos, "Tan": torch.tan, "Asin": torch.asin,
        "Acos": torch.acos, "Atan": torch.atan, "Sinh": torch.sinh, "Cosh": torch.cosh, "Asinh": torch.asinh,
        "Acosh": torch.acosh, "Atanh": torch.atanh, "Erf": torch.erf, "Not": torch.logical_not,
        "IsNaN": torch.isnan, "Relu": torch.relu, "Sigmoid": torch.sigmoid, "Tanh": torch.tanh,
        "Softsign": F.softsign, "Softplus": F.softplus, "Mish": F.mish, "HardSwish": F.hardswish,
        "BitwiseNot": torch.bitwise_not, "Identity": _identity, "MatMul": torch.matmul, "Where": _where,
        "CastLike": _cast_like,
    }.items()},
    **{name: _binary(name, fn) for name, fn in {
        "Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": _div, "Pow": _pow, "Equal": torch.eq,
        "Less": torch.lt, "LessOrEqual": torch.le, "Greater": torch.gt, "GreaterOrEqual": torch.ge,
        "And": torch.logical_and, "Or": torch.logical_or, "Xor": torch.logical_xor,
        "BitwiseAnd": torch.bitwise_and, "BitwiseOr": torch.bitwise_or, "BitwiseXor": torch.bitwise_xor,
    }.items()},
    "Sum": _sum_like("sum"), "Max": _sum_like("max"), "Min": _sum_like("min"), "Mean": _sum_like("mean"),
    "Mod": with_attrs(_mod, fmod=("fmod", 0)),
    "BitShift": _bit_shift_convert,
    "LeakyRelu": with_attrs(F.leaky_relu, negative_slope=("alpha", 0.01)),
    "Elu": with_attrs(F.elu, alpha=("alpha", 1.0)),
    "Celu": with_attrs(F.celu, alpha=("alpha", 1.0)),
    "Selu": with_attrs(_selu, alpha=("alpha", 1.67326319217681884765625), gamma=("gamma", 1.05070102214813232421875)),
    "HardSigmoid": with_attrs(_hard_sigmoid, alpha=("alpha", 0.2), beta=("beta", 0.5)),
    "ThresholdedRelu": with_attrs(_thresholded_relu, alpha=("alpha", 1.0)),
    "Shrink": with_attrs(_shrink, bias=("bias", 0.0), lambd=("lambd", 0.5)),
    "IsInf": with_attrs(_is_inf, detect_negative=("detect_negative", 1), detect_positive=("detect_positive", 1)),
    "PRelu": _prelu_convert, "Gelu": _gelu_convert, "Clip": _clip_convert, "Cast": _cast_convert,
    "Dropout": _dropout_convert,
    "Softmax": _softmax_convert, "LogSoftmax": _softmax_convert, "Hardmax": _softmax_convert,
    **{name: _reduce_convert for name in _REDUCE},
    "ArgMax": _arg_convert, "ArgMin": _arg_convert,
    "Gemm": _gemm_convert,
    "Einsum": with_attrs(_einsum, equation=("equation", None)),
}
"""ONNX op type (default domain) -> converter for these ops (:mod:`gplace.runtime.onnx.program` merges the tables)."""
