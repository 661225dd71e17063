"""ONNX network operators as torch functions: padding, convolution, pooling, normalisation, resizing.

Same conventions as :mod:`gplace.runtime.onnx.ops` (one converter per op type returning ``(function, kwargs)``).

- **Padding** (``Conv``, ``ConvTranspose``, pools): explicit ``pads`` are ``[x1_begin, x2_begin, ...,
  x1_end, x2_end, ...]``; ``auto_pad`` ``SAME_UPPER`` / ``SAME_LOWER`` puts the odd extra pixel at the end /
  start. Symmetric padding goes to the torch op; asymmetric padding is applied first with ``F.pad``.
- **Pad**: modes ``constant``, ``reflect``, ``edge``, ``wrap``; pads from the attribute (before opset 11)
  or the input, over ``axes`` (opset 18) or every axis; negative pads crop.
- **Pool output sizes** follow onnxruntime: ``floor`` (or ``ceil`` with ``ceil_mode``) of ``(in + pads -
  dilated kernel) / stride + 1``, and a ``ceil_mode`` window that would start past the input and its begin
  padding is dropped. Average pools divide by the window clipped to input plus explicit padding
  (``count_include_pad=1``) or to the input (``0``).
- **Resize** / ``Upsample``: modes ``nearest``, ``linear`` (any rank, one axis at a time) and ``cubic``;
  every coordinate transformation but ``tf_crop_and_resize``; no ``antialias``. ``Upsample`` and opset-10
  ``Resize`` use ``asymmetric`` coordinates and onnxruntime's nearest rounding (floor, ceil when shrinking).
- Recurrent layers are in :mod:`gplace.runtime.onnx.rnn`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gplace.runtime.onnx.ops import Attrs, Converter, Known, as_ints, host_list, host_tensor, outputs, reads_on_host

__all__ = ["CONVERTERS"]

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}
_AUTO_PAD = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


# ---------------------------------------------------------------------- padding
def _pads(spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
          pads: Sequence[int] | None, auto_pad: str) -> tuple[list[int], list[int]]:
    """(begin, end) padding per spatial axis."""
    n = len(spatial)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
            total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else large)
            end.append(large if auto_pad == "SAME_UPPER" else small)
        return begin, end
    if auto_pad == "VALID" or not pads:
        return [0] * n, [0] * n
    return list(pads[:n]), list(pads[n:])


def _torch_pads(begin: Sequence[int], end: Sequence[int]) -> list[int]:
    """``F.pad`` order: the last axis first, ``(begin, end)`` each."""
    return [v for i in reversed(range(len(begin))) for v in (begin[i], end[i])]


def _pad_index(size: int, begin: int, end: int, mode: str, device: torch.device) -> torch.Tensor:
    """Source positions of one padded axis: ``edge`` clamps, ``reflect`` mirrors, ``wrap`` cycles."""
    i = torch.arange(-begin, size + end, device=device)
    if mode == "edge":
        return i.clamp(0, size - 1)
    if mode == "wrap":
        return i % size
    period = 2 * (size - 1) if size > 1 else 1
    i = i.abs() % period
    return torch.where(i >= size, period - i, i)


@reads_on_host("pads", "value", "axes")
def _pad(x: torch.Tensor, pads: Any = None, value: Any = None, axes: Any = None, *, mode: str,
         attr_pads: list[int] | None, attr_value: float) -> torch.Tensor:
    """``pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...]`` over ``axes`` (all by default); negative crops."""
    pads = as_ints(pads) if pads is not None else attr_pads
    axes = [a % x.ndim for a in as_ints(axes)] if axes is not None else list(range(x.ndim))
    n = len(axes)
    begin, end = [0] * x.ndim, [0] * x.ndim
    for k, axis in enumerate(axes):
        begin[axis], end[axis] = pads[k], pads[n + k]
    if mode == "constant":
        fill = host_list(value) if value is not None else []
        fill = fill[0] if fill else attr_value
        return F.pad(x, _torch_pads(begin, end), value=fill)
    for axis in range(x.ndim):
        if begin[axis] or end[axis]:
            x = x.index_select(axis, _pad_index(x.shape[axis], begin[axis], end[axis], mode, x.device))
    return x


def _pad_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    mode = a.choice("mode", "constant", ("constant", "reflect", "edge", "wrap"))
    return _pad, {"mode": mode, "attr_pads": a.get("pads", a.get("paddings")), "attr_value": a.get("value", 0.0)}


def _geometry(x: torch.Tensor, kernel: Sequence[int] | None, strides: Sequence[int] | None,
              dilations: Sequence[int] | None, weight: torch.Tensor | None = None) -> tuple[list[int], ...]:
    n = x.ndim - 2
    kernel = list(kernel) if kernel else list(weight.shape[2:])
    return kernel, list(strides or [1] * n), list(dilations or [1] * n)


# ---------------------------------------------------------------------- convolution
def _conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None, *, auto_pad: str,
          dilations: list[int] | None, group: int, kernel_shape: list[int] | None, pads: list[int] | None,
          strides: list[int] | None) -> torch.Tensor:
    kernel, strides, dilations = _geometry(x, kernel_shape, strides, dilations, w)
    begin, end = _pads(x.shape[2:], kernel, strides, dilations, pads, auto_pad)
    if begin != end:
        x, begin = F.pad(x, _torch_pads(begin, end)), [0] * len(begin)
    return _CONV[x.ndim - 2](x, w, b, strides, begin, dilations, group)


def _conv_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    return _conv, {"auto_pad": a.choice("auto_pad", "NOTSET", _AUTO_PAD), "dilations": a.get("dilations"),
                   "group": a.get("group", 1), "kernel_shape": a.get("kernel_shape"), "pads": a.get("pads"),
                   "strides": a.get("strides")}


def _conv_transpose(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None, *, auto_pad: str,
                    dilations: list[int] | None, group: int, kernel_shape: list[int] | None,
                    output_padding: list[int] | None, output_shape: list[int] | None, pads: list[int] | None,
                    strides: list[int] | None) -> torch.Tensor:
    """The full transposed convolution, then each axis cropped (or zero-padded) to the ONNX output."""
    kernel, strides, dilations = _geometry(x, kernel_shape, strides, dilations, w)
    n = x.ndim - 2
    extra = list(output_padding or [0] * n)
    y = _CONV_T[n](x, w, None, strides, 0, 0, group, dilations)
    full = y.shape[2:]
    begin, end = _transposed_pads(x.shape[2:], full, extra, output_shape, pads, auto_pad, strides)
    y = F.pad(y, _torch_pads([-v for v in begin], [e - v for v, e in zip(end, extra, strict=True)]))
    return y if b is None else y + b.reshape(-1, *[1] * n)


def _transposed_pads(spatial: Sequence[int], full: Sequence[int], extra: Sequence[int],
                     output_shape: Sequence[int] | None, pads: Sequence[int] | None, auto_pad: str,
                     strides: Sequence[int]) -> tuple[list[int], list[int]]:
    n = len(spatial)
    if output_shape is None and auto_pad in ("NOTSET", "VALID"):
        return _pads(spatial, [1] * n, [1] * n, [1] * n, pads, auto_pad)
    target = list(output_shape[-n:]) if output_shape is not None else [s * st for s, st in zip(spatial, strides,
                                                                                               strict=True)]
    total = [f + e - t for f, e, t in zip(full, extra, target, strict=True)]
    if auto_pad == "SAME_UPPER":
        return [t // 2 for t in total], [t - t // 2 for t in total]
    return [t - t // 2 for t in total], [t // 2 for t in total]


def _conv_transpose_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    kwargs = _conv_convert(a)[1]
    return _conv_transpose, {**kwargs, "output_padding": a.get("output_padding"),
                             "output_shape": a.get("output_shape")}


# ---------------------------------------------------------------------- pooling
def _pool_size(size: int, k: int, s: int, d: int, begin: int, end: int, ceil_mode: int) -> int:
    span = size + begin + end - ((k - 1) * d + 1)
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + begin:
        out -= 1
    return out


def _pool_plan(x: torch.Tensor, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
               pads: Sequence[int] | None, auto_pad: str, ceil_mode: int) -> tuple[list[int], ...]:
    """(begin pads, end pads, extra end pads a ceil-mode window needs, output sizes) per spatial axis."""
    begin, end = _pads(x.shape[2:], kernel, strides, dilations, pads, auto_pad)
    sizes = [_pool_size(*args, ceil_mode) for args in zip(x.shape[2:], kernel, strides, dilations, begin, end,
                                                            strict=True)]
    extra = [max(0, (o - 1) * s + (k - 1) * d + 1 - (n + b + e)) for o, s, k, d, n, b, e in
             zip(sizes, strides, kernel, dilations, x.shape[2:], begin, end, strict=True)]
    return begin, end, extra, sizes


def _fits_torch(begin: Sequence[int], end: Sequence[int], kernel: Sequence[int], dilations: Sequence[int]) -> bool:
    """Whether the torch pool's own (symmetric, at most half a window) padding gives the same result."""
    return begin == end and all(p <= ((k - 1) * d + 1) // 2 for p, k, d in zip(begin, kernel, dilations, strict=True))


def _crop(y: torch.Tensor, sizes: Sequence[int]) -> torch.Tensor:
    return y[(slice(None), slice(None), *(slice(0, s) for s in sizes))]


def _max_pool(x: torch.Tensor, *, auto_pad: str, ceil_mode: int, dilations: list[int] | None,
              kernel_shape: list[int], pads: list[int] | None, strides: list[int] | None, storage_order: int,
              outputs_: int) -> Any:
    kernel, strides, dilations = _geometry(x, kernel_shape, strides, dilations)
    begin, end, extra, sizes = _pool_plan(x, kernel, strides, dilations, pads, auto_pad, ceil_mode)
    pool = _MAX_POOL[x.ndim - 2]
    if _fits_torch(begin, end, kernel, dilations):
        y, index = pool(x, kernel, strides, begin, dilations, bool(ceil_mode), return_indices=True)
        padded_shape, offsets = list(x.shape[2:]), [0] * len(begin)
    else:
        low = torch.finfo(x.dtype).min if x.dtype.is_floating_point else torch.iinfo(x.dtype).min
        xp = F.pad(x, _torch_pads(begin, [e + x_ for e, x_ in zip(end, extra, strict=True)]), value=low)
        y, index = pool(xp, kernel, strides, 0, dilations, False, return_indices=True)
        padded_shape, offsets = list(xp.shape[2:]), begin
    y, index = _crop(y, sizes), _crop(index, sizes)
    if outputs_ == 1:
        return y
    return y, _onnx_indices(index, padded_shape, offsets, list(x.shape), storage_order)


def _onnx_indices(index: torch.Tensor, padded: Sequence[int], offsets: Sequence[int], shape: Sequence[int],
                  storage_order: int) -> torch.Tensor:
    """Torch's per-plane indices into the padded input -> ONNX's flat indices into the whole input."""
    spatial = shape[2:]
    flat = torch.zeros_like(index)
    rest = index
    coords = []
    for size in reversed(padded):
        coords.append(rest % size)
        rest = rest // size
    coords = [c - o for c, o in zip(reversed(coords), offsets, strict=True)]
    order = range(len(spatial)) if storage_order == 0 else reversed(range(len(spatial)))
    for i in order:
        flat = flat * spatial[i] + coords[i]
    plane = math.prod(spatial)
    n, c = index.shape[:2]
    base = torch.arange(n * c, device=index.device).reshape(n, c, *[1] * len(spatial)) * plane
    return flat + base


def _window_sum(x: torch.Tensor, kernel: Sequence[int], strides: Sequence[int],
                dilations: Sequence[int]) -> torch.Tensor:
    channels = x.shape[1]
    ones = torch.ones(channels, 1, *kernel, dtype=x.dtype, device=x.device)
    return _CONV[x.ndim - 2](x, ones, None, list(strides), 0, list(dilations), channels)


def _avg_pool(x: torch.Tensor, *, auto_pad: str, ceil_mode: int, count_include_pad: int,
              dilations: list[int] | None, kernel_shape: list[int], pads: list[int] | None,
              strides: list[int] | None) -> torch.Tensor:
    kernel, strides, dilations = _geometry(x, kernel_shape, strides, dilations)
    begin, end, extra, sizes = _pool_plan(x, kernel, strides, dilations, pads, auto_pad, ceil_mode)
    if _fits_torch(begin, end, kernel, dilations) and all(d == 1 for d in dilations):
        y = _AVG_POOL[x.ndim - 2](x, kernel, strides, begin, bool(ceil_mode), bool(count_include_pad))
        return _crop(y, sizes)
    ends = [e + x_ for e, x_ in zip(end, extra, strict=True)]
    sums = _window_sum(F.pad(x, _torch_pads(begin, ends)), kernel, strides, dilations)
    mask = torch.ones(1, 1, *x.shape[2:], dtype=x.dtype, device=x.device)
    if count_include_pad:
        mask = F.pad(mask, _torch_pads(begin, end), value=1.0)
        mask = F.pad(mask, _torch_pads([0] * len(begin), extra))
    else:
        mask = F.pad(mask, _torch_pads(begin, ends))
    counts = _window_sum(mask, kernel, strides, dilations)
    return _crop(sums / counts, sizes)


def _lp_pool(x: torch.Tensor, *, auto_pad: str, ceil_mode: int, dilations: list[int] | None,
             kernel_shape: list[int], pads: list[int] | None, p: int, strides: list[int] | None) -> torch.Tensor:
    kernel, strides, dilations = _geometry(x, kernel_shape, strides, dilations)
    begin, end, extra, sizes = _pool_plan(x, kernel, strides, dilations, pads, auto_pad, ceil_mode)
    ends = [e + x_ for e, x_ in zip(end, extra, strict=True)]
    sums = _window_sum(F.pad(x.abs() ** p, _torch_pads(begin, ends)), kernel, strides, dilations)
    return _crop(sums ** (1.0 / p), sizes)


def _pool_kwargs(a: Attrs) -> dict[str, Any]:
    return {"auto_pad": a.choice("auto_pad", "NOTSET", _AUTO_PAD), "ceil_mode": a.get("ceil_mode", 0),
            "dilations": a.get("dilations"), "kernel_shape": a.get("kernel_shape"), "pads": a.get("pads"),
            "strides": a.get("strides")}


def _max_pool_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    return _max_pool, {**_pool_kwargs(a), "storage_order": a.get("storage_order", 0), "outputs_": a.num_outputs}


def _avg_pool_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    return _avg_pool, {**_pool_kwargs(a), "count_include_pad": a.get("count_include_pad", 0)}


def _lp_pool_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    return _lp_pool, {**_pool_kwargs(a), "p": a.get("p", 2)}


def _global_pool(x: torch.Tensor, *, kind: str, p: int) -> torch.Tensor:
    dims = list(range(2, x.ndim))
    if kind == "GlobalAveragePool":
        return x.mean(dims, keepdim=True)
    if kind == "GlobalMaxPool":
        return x.amax(dims, keepdim=True)
    return (x.abs() ** p).sum(dims, keepdim=True) ** (1.0 / p)


def _global_pool_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    return _global_pool, {"kind": a.node.op_type, "p": a.get("p", 2)}


# ---------------------------------------------------------------------- normalisation
def _channel(v: torch.Tensor, rank: int) -> torch.Tensor:
    return v.reshape(-1, *[1] * (rank - 2))


def _batch_norm(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, *,
                epsilon: float, spatial: int) -> torch.Tensor:
    """Inference: the running statistics. ``spatial=0`` (before opset 9): statistics per activation."""
    if spatial:
        return F.batch_norm(x, mean, var, scale, bias, False, 0.0, epsilon)
    return (x - mean) / torch.sqrt(var + epsilon) * scale + bias


def _batch_norm_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    a.get("momentum")
    if a.get("training_mode", 0) or a.get("is_test", 1) == 0 or a.num_outputs > 1:
        raise a.error("training mode (batch statistics, running-statistic outputs) is not supported")
    return _batch_norm, {"epsilon": a.get("epsilon", 1e-5), "spatial": a.get("spatial", 1)}


def _instance_norm(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, *, epsilon: float) -> torch.Tensor:
    return F.instance_norm(x, weight=scale, bias=bias, eps=epsilon)


def _layer_norm(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None, *, axis: int,
                epsilon: float, outputs_: int) -> Any:
    """Over the axes from ``axis`` on; the mean and inverse deviation are extra outputs (float32)."""
    axis = axis + x.ndim if axis < 0 else axis
    shape = tuple(x.shape[axis:])
    if outputs_ == 1 and scale.shape == shape and (bias is None or bias.shape == shape):
        return F.layer_norm(x, shape, scale, bias, epsilon)
    dims = list(range(axis, x.ndim))
    xf = x.float()
    mean = xf.mean(dims, keepdim=True)
    inv = torch.rsqrt(((xf - mean) ** 2).mean(dims, keepdim=True) + epsilon)
    y = ((xf - mean) * inv).to(x.dtype) * scale
    y = y if bias is None else y + bias
    return outputs((y, mean, inv), outputs_)


def _layer_norm_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    a.choice("stash_type", 1, (1,))
    return _layer_norm, {"axis": a.get("axis", -1), "epsilon": a.get("epsilon", 1e-5), "outputs_": a.num_outputs}


def _group_norm(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, *, num_groups: int,
                epsilon: float) -> torch.Tensor:
    """Scale and bias per channel (opset 21) or per group (opset 18)."""
    channels = x.shape[1]
    if scale.numel() != channels:
        scale = scale.repeat_interleave(channels // num_groups)
        bias = bias.repeat_interleave(channels // num_groups)
    return F.group_norm(x, num_groups, scale, bias, epsilon)


def _group_norm_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    a.choice("stash_type", 1, (1,))
    return _group_norm, {"num_groups": a.get("num_groups"), "epsilon": a.get("epsilon", 1e-5)}


def _lrn(x: torch.Tensor, *, alpha: float, beta: float, bias: float, size: int) -> torch.Tensor:
    """Sum of squares over channels ``[c - floor((size-1)/2), c + ceil((size-1)/2)]``."""
    n, c = x.shape[:2]
    squares = (x * x).reshape(n, 1, c, -1)
    squares = F.pad(squares, (0, 0, (size - 1) // 2, size // 2))
    sums = F.avg_pool2d(squares, (size, 1), stride=1) * size
    return x / (bias + alpha / size * sums.reshape(x.shape)) ** beta


def _lp_norm(x: torch.Tensor, *, axis: int, p: int) -> torch.Tensor:
    return x / torch.linalg.vector_norm(x, p, dim=axis, keepdim=True)


def _mean_variance_norm(x: torch.Tensor, *, axes: list[int]) -> torch.Tensor:
    mean = x.mean(axes, keepdim=True)
    std = torch.sqrt((x * x).mean(axes, keepdim=True) - mean * mean)
    return (x - mean) / (std + 1e-9)


# ---------------------------------------------------------------------- resize
def _original(i: torch.Tensor, size: int, out: int, scale: float, coord: str) -> torch.Tensor:
    """Input coordinates of output positions ``i`` for one axis."""
    if coord == "half_pixel":
        return (i + 0.5) / scale - 0.5
    if coord == "pytorch_half_pixel":
        return (i + 0.5) / scale - 0.5 if out > 1 else torch.zeros_like(i)
    if coord == "align_corners":
        return i * ((size - 1) / (out - 1)) if out > 1 else torch.zeros_like(i)
    if coord == "tf_half_pixel_for_nn":
        return (i + 0.5) / scale
    if coord == "half_pixel_symmetric":
        offset = size / 2 * (1 - out / (scale * size))
        return offset + (i + 0.5) / scale - 0.5
    return i / scale  # asymmetric


def _nearest(x: torch.Tensor, mode: str, shrinking: bool) -> torch.Tensor:
    if mode == "round_prefer_floor":
        return torch.where(x - x.floor() == 0.5, x.floor(), torch.round(x))
    if mode == "round_prefer_ceil":
        return torch.where(x - x.floor() == 0.5, x.ceil(), torch.round(x))
    if mode == "floor" or (mode == "simple" and not shrinking):
        return x.floor()
    return x.ceil()


def _along(w: torch.Tensor, axis: int, rank: int) -> torch.Tensor:
    return w.reshape(-1, *[1] * (rank - axis - 1))


def _cubic_weights(s: torch.Tensor, a: float) -> list[torch.Tensor]:
    def near(t: torch.Tensor) -> torch.Tensor:
        return ((a + 2) * t - (a + 3)) * t * t + 1

    def far(t: torch.Tensor) -> torch.Tensor:
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a

    return [far(s + 1), near(s), near(1 - s), far(2 - s)]


def _resize_axis(x: torch.Tensor, axis: int, out: int, scale: float, o: dict[str, Any]) -> torch.Tensor:
    size = x.shape[axis]
    i = torch.arange(out, dtype=torch.float32, device=x.device)
    pos = _original(i, size, out, scale, o["coord"])
    if o["mode"] == "nearest":
        index = _nearest(pos, o["nearest_mode"], scale < 1).clamp(0, size - 1).long()
        return x.index_select(axis, index)
    if o["mode"] == "linear":
        pos = pos.clamp(0, size - 1)
        low = pos.floor().long()
        high = (low + 1).clamp(max=size - 1)
        w = _along((pos - low).to(x.dtype), axis, x.ndim)
        a = x.index_select(axis, low)
        return a + (x.index_select(axis, high) - a) * w
    low = pos.floor()
    taps = [(low + k).long() for k in (-1, 0, 1, 2)]
    weights = _cubic_weights(pos - low, o["cubic_coeff_a"])
    if o["exclude_outside"]:
        weights = [w * ((t >= 0) & (t < size)) for w, t in zip(weights, taps, strict=True)]
        total = sum(weights)
        weights = [w / total for w in weights]
    return sum(x.index_select(axis, t.clamp(0, size - 1)) * _along(w.to(x.dtype), axis, x.ndim)
               for t, w in zip(taps, weights, strict=True))


def _resize_targets(x: torch.Tensor, scales: Any, sizes: Any, axes: list[int] | None,
                    policy: str) -> tuple[list[int], list[float]]:
    axes = [a + x.ndim if a < 0 else a for a in axes] if axes else list(range(x.ndim))
    outs, factors = list(x.shape), [1.0] * x.ndim
    wanted = as_ints(sizes) if sizes is not None else []
    if wanted:
        ratios = [w / x.shape[a] for w, a in zip(wanted, axes, strict=True)]
        if policy != "stretch":
            ratio = (min if policy == "not_larger" else max)(ratios)
            ratios = [ratio] * len(axes)
            wanted = [int(math.floor(ratio * x.shape[a] + 0.5)) for a in axes]
        for a, w, ratio in zip(axes, wanted, ratios, strict=True):
            outs[a], factors[a] = w, ratio
        return outs, factors
    for a, s in zip(axes, host_list(scales), strict=True):
        outs[a], factors[a] = int(math.floor(x.shape[a] * s)), float(s)
    return outs, factors


@reads_on_host("scales", "sizes")
def _resize(x: torch.Tensor, roi: Any = None, scales: Any = None, sizes: Any = None, *, options: dict[str, Any],
            axes: list[int] | None, policy: str) -> torch.Tensor:
    """Output sizes from ``sizes`` or ``floor(in * scale)``; each changed axis resampled in turn."""
    scales = Known(host_tensor(scales)) if scales is not None else None  # read once
    if scales is not None and not scales.value.numel():
        scales = None
    outs, factors = _resize_targets(x, scales, sizes, axes, policy)
    for axis, (out, factor) in enumerate(zip(outs, factors, strict=True)):
        if out != x.shape[axis] or factor != 1.0 or options["coord"] == "tf_half_pixel_for_nn":
            x = _resize_axis(x, axis, out, factor, options)
    return x


@reads_on_host("scales")
def _upsample(x: torch.Tensor, scales: Any = None, *, options: dict[str, Any], attr_scales: list[float] | None) -> Any:
    factors = scales if scales is not None else Known(torch.tensor(attr_scales))
    return _resize(x, None, factors, None, options=options, axes=None, policy="stretch")


def _resize_options(a: Attrs, legacy: bool) -> dict[str, Any]:
    mode = a.choice("mode", "nearest", ("nearest", "linear", "bilinear", "cubic"))
    if legacy:
        return {"mode": "linear" if mode == "bilinear" else mode, "coord": "asymmetric", "nearest_mode": "simple",
                "cubic_coeff_a": -0.75, "exclude_outside": 0}
    coords = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
              "tf_half_pixel_for_nn")
    a.choice("antialias", 0, (0,))
    a.get("extrapolation_value")
    return {"mode": mode, "coord": a.choice("coordinate_transformation_mode", "half_pixel", coords),
            "nearest_mode": a.choice("nearest_mode", "round_prefer_floor",
                                     ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")),
            "cubic_coeff_a": a.get("cubic_coeff_a", -0.75), "exclude_outside": a.get("exclude_outside", 0)}


def _resize_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    if a.opset < 11:  # (X, scales), like Upsample
        return _upsample_convert(a)
    policy = a.choice("keep_aspect_ratio_policy", "stretch", ("stretch", "not_larger", "not_smaller"))
    return _resize, {"options": _resize_options(a, False), "axes": a.get("axes"), "policy": policy}


def _upsample_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    return _upsample, {"options": _resize_options(a, True), "attr_scales": a.get("scales")}


CONVERTERS: dict[str, Converter] = {
    "Pad": _pad_convert, "Conv": _conv_convert, "ConvTranspose": _conv_transpose_convert,
    "MaxPool": _max_pool_convert, "AveragePool": _avg_pool_convert, "LpPool": _lp_pool_convert,
    "GlobalAveragePool": _global_pool_convert, "GlobalMaxPool": _global_pool_convert,
    "GlobalLpPool": _global_pool_convert,
    "BatchNormalization": _batch_norm_convert,
    "InstanceNormalization": lambda a: (_instance_norm, {"epsilon": a.get("epsilon", 1e-5)}),
    "LayerNormalization": _layer_norm_convert, "GroupNormalization": _group_norm_convert,
    "LRN": lambda a: (_lrn, {"alpha": a.get("alpha", 1e-4), "beta": a.get("beta", 0.75), "bias": a.get("bias", 1.0),
                             "size": a.get("size")}),
    "LpNormalization": lambda a: (_lp_norm, {"axis": a.get("axis", -1), "p": a.get("p", 2)}),
    "MeanVarianceNormalization": lambda a: (_mean_variance_norm, {"axes": a.get("axes", [0, 2, 3])}),
    "Resize": _resize_convert, "Upsample": _upsample_convert,
}
"""ONNX op type (default domain) -> converter for the network ops."""
