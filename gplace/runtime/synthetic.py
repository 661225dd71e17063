"""Made-up input and weight values for graphs measured without their data (torch-v1, ONNX programs)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import torch

__all__ = ["synthesised"]


def synthesised(name: str, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A made-up value: floats uniform in [0, 1) from a generator seeded by the CRC-32 of ``name``, other types 0."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return torch.zeros(list(shape), dtype=dtype)
    generator = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    return torch.rand(list(shape), generator=generator).to(dtype)
