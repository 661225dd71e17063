"""ONNX shape and indexing operators as torch functions (conventions of :mod:`gplace.runtime.onnx.ops`).

- **Shape-like inputs** (``Reshape``'s shape, ``Slice``'s starts and ends, ``Squeeze`` axes, ``Split`` sizes,
  ``Expand``, ``Tile``, ...) are marked with :func:`~gplace.runtime.onnx.ops.reads_on_host`: a value known when
  the step is planned comes as a :class:`~gplace.runtime.onnx.ops.Known`, any other is read from its device when
  the op runs; older opsets give them as attributes.
- ``Reshape``: a 0 copies the input's dimension unless ``allowzero``; one -1 is inferred.
- ``Slice``: starts and ends clamp to ``[0, dim]`` for a positive step and ``[-1, dim - 1]`` for a negative one
  (huge and negative bounds included); negative steps walk backwards.
- ``Split``: sizes from the input or attribute, else ``num_outputs`` (or one per output) chunks of
  ``ceil(dim / n)``, the last smaller.
- ``Unsqueeze``: negative axes count from the end of the output. ``Transpose`` without ``perm`` reverses.
- Indices (``Gather*``, ``Scatter*``, ``OneHot``) may be negative and count from the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from gplace.runtime.onnx.ops import (
    Attrs,
    Converter,
    as_ints,
    as_scalar,
    host_tensor,
    norm_axis,
    outputs,
    plain,
    reads_on_host,
    torch_dtype,
    with_attrs,
)

__all__ = ["CONVERTERS"]

_HOST = torch.device("cpu")
"""The ``device=`` of factory ops; the executor replaces it with the device the op is placed on."""


# ---------------------------------------------------------------------- shapes
@reads_on_host("shape")
def _reshape(x: torch.Tensor, shape: Any = None, *, attr_shape: list[int] | None, allowzero: int) -> torch.Tensor:
    """A 0 copies the input's dimension (unless ``allowzero``); one -1 is inferred."""
    dims = as_ints(shape) if shape is not None else attr_shape
    if not allowzero:
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return x.reshape(dims)


def _flatten(x: torch.Tensor, *, axis: int) -> torch.Tensor:
    axis = norm_axis(axis, x.ndim)
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


def _transpose(x: torch.Tensor, *, perm: list[int] | None) -> torch.Tensor:
    return x.permute(perm if perm is not None else list(reversed(range(x.ndim))))


@reads_on_host("axes")
def _squeeze(x: torch.Tensor, axes: Any = None, *, attr_axes: list[int] | None) -> torch.Tensor:
    dims = as_ints(axes) if axes is not None else attr_axes
    if dims is None:
        return x.squeeze()
    return x.squeeze(tuple(norm_axis(d, x.ndim) for d in dims))


@reads_on_host("axes")
def _unsqueeze(x: torch.Tensor, axes: Any = None, *, attr_axes: list[int] | None) -> torch.Tensor:
    """Negative axes count from the end of the output."""
    dims = as_ints(axes) if axes is not None else attr_axes
    rank = x.ndim + len(dims)
    for d in sorted(norm_axis(d, rank) for d in dims):
        x = x.unsqueeze(d)
    return x


def _concat(*xs: torch.Tensor, axis: int) -> torch.Tensor:
    return torch.cat(xs, axis)


@reads_on_host("split")
def _split(x: torch.Tensor, split: Any = None, *, axis: int, attr_split: list[int] | None,
           num_outputs: int | None, outputs_: int) -> Any:
    """Sizes from the input or attribute, else ``num_outputs`` (or one per output) chunks of ``ceil``."""
    axis = norm_axis(axis, x.ndim)
    sizes = as_ints(split) if split is not None else attr_split
    if not sizes:
        count, dim = num_outputs or outputs_, x.shape[axis]
        chunk = -(-dim // count)
        sizes = [max(0, min(chunk, dim - chunk * i)) for i in range(count)]
    return outputs(torch.split(x, sizes, axis), outputs_)


def _split_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    return _split, {"axis": a.get("axis", 0), "attr_split": a.get("split"), "num_outputs": a.get("num_outputs"),
                    "outputs_": a.num_outputs}


def _slice_bounds(start: int, end: int, step: int, dim: int) -> tuple[int, int]:
    """ONNX clamping: ``[0, dim]`` for a positive step, ``[-1, dim - 1]`` for a negative one."""
    start, end = start + dim if start < 0 else start, end + dim if end < 0 else end
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim)
    return min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)


@reads_on_host("starts", "ends", "axes", "steps")
def _slice(x: torch.Tensor, starts: Any = None, ends: Any = None, axes: Any = None, steps: Any = None, *,
           attr_starts: list[int] | None, attr_ends: list[int] | None, attr_axes: list[int] | None) -> torch.Tensor:
    """Starts and ends from the inputs (opset 10 on) or the attributes; negative steps walk backwards."""
    starts = as_ints(starts) if starts is not None else attr_starts
    ends = as_ints(ends) if ends is not None else attr_ends
    axes = as_ints(axes) if axes is not None else attr_axes
    axes = axes if axes is not None else list(range(len(starts)))
    steps = as_ints(steps) if steps is not None else [1] * len(starts)
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        axis = norm_axis(axis, x.ndim)
        start, end = _slice_bounds(start, end, step, x.shape[axis])
        if step > 0:
            x = x[(slice(None),) * axis + (slice(start, end, step),)]
        else:
            x = x.index_select(axis, torch.arange(start, end, step, device=x.device))
    return x


def _slice_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    return _slice, {"attr_starts": a.get("starts"), "attr_ends": a.get("ends"), "attr_axes": a.get("axes")}


@reads_on_host("shape")
def _expand(x: torch.Tensor, shape: Any) -> torch.Tensor:
    return x.expand(torch.broadcast_shapes(x.shape, tuple(as_ints(shape))))


@reads_on_host("repeats")
def _tile(x: torch.Tensor, repeats: Any) -> torch.Tensor:
    return x.repeat(as_ints(repeats))


def _shape(x: torch.Tensor, *, start: int, end: int | None) -> torch.Tensor:
    return _from_host(torch.tensor(x.shape[start:end], dtype=torch.int64), x.device)


def _size(x: torch.Tensor) -> torch.Tensor:
    return _from_host(torch.tensor(x.numel(), dtype=torch.int64), x.device)


def _from_host(value: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A small host tensor on ``device``; from pageable memory a non-blocking copy is staged at once, without
    synchronising the device."""
    return value.to(device, non_blocking=True)




@reads_on_host("shape")
def _constant_of_shape(shape: Any, *, value: Any, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.full(as_ints(shape), value, dtype=dtype, device=device)


def _constant_of_shape_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    value = a.get("value")
    if value is None:
        return _constant_of_shape, {"value": 0.0, "dtype": torch.float32, "device": _HOST}
    return _constant_of_shape, {"value": value.reshape(-1)[0].item(), "dtype": value.dtype, "device": _HOST}


@reads_on_host("start", "limit", "delta")
def _range(start: Any, limit: Any, delta: Any, *, device: torch.device) -> torch.Tensor:
    bounds = [as_scalar(v) for v in (start, limit, delta)]
    return torch.arange(*bounds, dtype=host_tensor(start).dtype, device=device)


def _eye_like(x: torch.Tensor, *, dtype: torch.dtype | None, k: int) -> torch.Tensor:
    out = torch.zeros(x.shape, dtype=dtype or x.dtype, device=x.device)
    out.diagonal(k).fill_(1)
    return out


def _eye_like_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    dtype = a.get("dtype")
    return _eye_like, {"dtype": None if dtype is None else torch_dtype(dtype, a), "k": a.get("k", 0)}


@reads_on_host("k")
def _trilu(x: torch.Tensor, k: Any = None, *, upper: int) -> torch.Tensor:
    diagonal = 0 if k is None else int(as_scalar(k))
    return torch.triu(x, diagonal) if upper else torch.tril(x, diagonal)




def _depth_to_space(x: torch.Tensor, *, blocksize: int, mode: str) -> torch.Tensor:
    n, c, h, w = x.shape
    b = blocksize
    if mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (b * b), h * b, w * b)


def _space_to_depth(x: torch.Tensor, *, blocksize: int) -> torch.Tensor:
    n, c, h, w = x.shape
    b = blocksize
    y = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


# ---------------------------------------------------------------------- indexing
def _positive(indices: torch.Tensor, dim: int) -> torch.Tensor:
    indices = indices.long()
    return torch.where(indices < 0, indices + dim, indices)


def _gather(x: torch.Tensor, indices: torch.Tensor, *, axis: int) -> torch.Tensor:
    axis = norm_axis(axis, x.ndim)
    index = _positive(indices, x.shape[axis])
    out = x.index_select(axis, index.reshape(-1))
    return out.reshape((*x.shape[:axis], *index.shape, *x.shape[axis + 1:]))


def _gather_elements(x: torch.Tensor, indices: torch.Tensor, *, axis: int) -> torch.Tensor:
    axis = norm_axis(axis, x.ndim)
    return torch.gather(x, axis, _positive(indices, x.shape[axis]))


def _gather_nd(x: torch.Tensor, indices: torch.Tensor, *, batch_dims: int) -> torch.Tensor:
    batch = x.shape[:batch_dims]
    xb = x.reshape(math.prod(batch), *x.shape[batch_dims:])
    ib = indices.long().reshape(math.prod(batch), *indices.shape[batch_dims:])
    k = ib.shape[-1]
    lead = torch.arange(xb.shape[0], device=x.device).reshape(-1, *[1] * (ib.ndim - 2))
    index = tuple(_positive(ib[..., i], xb.shape[i + 1]) for i in range(k))
    return xb[(lead, *index)].reshape((*batch, *ib.shape[1:-1], *xb.shape[1 + k:]))


def _scatter_elements(x: torch.Tensor, indices: torch.Tensor, updates: torch.Tensor, *, axis: int,
                      reduction: str) -> torch.Tensor:
    axis = norm_axis(axis, x.ndim)
    index = _positive(indices, x.shape[axis])
    if reduction == "none":
        return x.scatter(axis, index, updates)
    reduce = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}[reduction]
    return x.scatter_reduce(axis, index, updates, reduce=reduce, include_self=True)


def _scatter_elements_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    reduction = a.choice("reduction", "none", ("none", "add", "mul", "max", "min"))
    return _scatter_elements, {"axis": a.get("axis", 0), "reduction": reduction}


def _scatter_nd(x: torch.Tensor, indices: torch.Tensor, updates: torch.Tensor, *, reduction: str) -> torch.Tensor:
    out = x.clone()
    index = tuple(_positive(indices[..., i], x.shape[i]) for i in range(indices.shape[-1]))
    out.index_put_(index, updates, accumulate=reduction == "add")
    return out


@reads_on_host("k")
def _top_k(x: torch.Tensor, k: Any, *, axis: int, largest: int, sorted_: int) -> tuple[Any, Any]:
    """ONNX's TopK: of equal values, the lower index first (a stable sort; ``torch.topk`` breaks ties its own
    way)."""
    dim = norm_axis(axis, x.ndim)
    values, indices = torch.sort(x, dim=dim, descending=bool(largest), stable=True)
    count = int(as_scalar(k))
    return values.narrow(dim, 0, count), indices.narrow(dim, 0, count)


def _top_k_convert(a: Attrs) -> tuple[Callable[..., Any], dict[str, Any]]:
    if a.opset < 10:
        raise a.error("TopK before opset 10 (k as an attribute) is not supported")
    return _top_k, {"axis": a.get("axis", -1), "largest": a.get("largest", 1), "sorted_": a.get("sorted", 1)}


@reads_on_host("depth")
def _one_hot(indices: torch.Tensor, depth: Any, values: torch.Tensor, *, axis: int) -> torch.Tensor:
    d = int(as_scalar(depth))
    index = _positive(indices, d)
    hot = index.unsqueeze(-1) == torch.arange(d, device=index.device)
    out = torch.where(hot, values[1], values[0])
    return out.movedim(-1, norm_axis(axis, out.ndim))


def _non_zero(x: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(x).T.contiguous()


@reads_on_host("axis")
def _cum_sum(x: torch.Tensor, axis: Any, *, exclusive: int, reverse: int) -> torch.Tensor:
    dim = norm_axis(int(as_scalar(axis)), x.ndim)
    y = x.flip(dim) if reverse else x
    if not (x.is_floating_point() or x.is_complex()):  # integers summed as int64 (torch has no uint32 cumsum,
        y = y.to(torch.int64)  # nor int64 - uint32), then given ONNX's T back
    out = torch.cumsum(y, dim)
    out = out - y if exclusive else out
    return (out.flip(dim) if reverse else out).to(x.dtype)


CONVERTERS: dict[str, Converter] = {
    **{name: plain(fn) for name, fn in {
        "Expand": _expand, "Tile": _tile, "Size": _size, "NonZero": _non_zero}.items()},
    "Range": lambda a: (_range, {"device": _HOST}),
    "Reshape": with_attrs(_reshape, attr_shape=("shape", None), allowzero=("allowzero", 0)),
    "Flatten": with_attrs(_flatten, axis=("axis", 1)),
    "Transpose": with_attrs(_transpose, perm=("perm", None)),
    "Squeeze": with_attrs(_squeeze, attr_axes=("axes", None)),
    "Unsqueeze": with_attrs(_unsqueeze, attr_axes=("axes", None)),
    "Concat": with_attrs(_concat, axis=("axis", 1)),
    "Split": _split_convert,
    "Slice": _slice_convert,
    "Shape": with_attrs(_shape, start=("start", 0), end=("end", None)),
    "ConstantOfShape": _constant_of_shape_convert,
    "EyeLike": _eye_like_convert,
    "Trilu": with_attrs(_trilu, upper=("upper", 1)),
    "DepthToSpace": lambda a: (_depth_to_space, {"blocksize": a.get("blocksize"),
                                                 "mode": a.choice("mode", "DCR", ("DCR", "CRD"))}),
    "SpaceToDepth": with_attrs(_space_to_depth, blocksize=("blocksize", None)),
    "Gather": with_attrs(_gather, axis=("axis", 0)),
    "GatherElements": with_attrs(_gather_elements, axis=("axis", 0)),
    "GatherND": with_attrs(_gather_nd, batch_dims=("batch_dims", 0)),
    "ScatterElements": _scatter_elements_convert, "Scatter": _scatter_elements_convert,
    "ScatterND": lambda a: (_scatter_nd, {"reduction": a.choice("reduction", "none", ("none", "add"))}),
    "TopK": _top_k_convert,
    "OneHot": with_attrs(_one_hot, axis=("axis", -1)),
    "CumSum": with_attrs(_cum_sum, exclusive=("exclusive", 0), reverse=("reverse", 0)),
}
"""ONNX op type (default domain) -> converter for the shape and indexing ops."""
