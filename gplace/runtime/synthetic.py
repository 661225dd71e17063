"""Made-up input and weight values for graphs measured without their data (torch-v1, ONNX programs)."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import torch

from gplace.runtime.torch_errors import out_of_memory

__all__ = ["synthesised"]


def synthesised(name: str, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A made-up value: floats uniform in [0, 1) from a generator seeded by the CRC-32 of ``name`` (drawn as float32,
    then converted: a half-precision value needs its float32 draw's memory too), other types 0.

    Raises:
        ValueError: the value does not fit in memory, naming ``name``, its shape and size (torch's allocator
            error read as the placement networks' out of memory: an initialiser of a model without weights that
            declared 60,000 x 60,000 floats).
    """
    try:
        if not (dtype.is_floating_point or dtype.is_complex):
            return torch.zeros(list(shape), dtype=dtype)
        generator = torch.Generator().manual_seed(zlib.crc32(name.encode()))
        return torch.rand(list(shape), generator=generator).to(dtype)
    except RuntimeError as err:
        if not (out_of_memory(err) or "Storage size calculation overflowed" in str(err)):
            raise
        size = math.prod(shape) * dtype.itemsize
        raise ValueError(f"{name!r} holds no data, so gplace makes up values to run it: {list(shape)} of {dtype} "
                          f"({size / 1e9:,.1f} GB) do not fit in memory") from None
