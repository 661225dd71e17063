"""How a ``torch-v1`` run fails: :class:`TorchRunError` and the reason a measurement reports
(:mod:`gplace.runtime.torch_runtime`, Failures)."""

from __future__ import annotations

import torch

from gplace.ir.errors import error_summary

__all__ = ["TorchRunError", "failure", "out_of_memory"]


class TorchRunError(RuntimeError):
    """Running a placed program failed; the message is the reason a measurement reports."""


def failure(err: Exception, what: str, where: str) -> TorchRunError:
    """``err``, raised by ``what`` on the device ``where``, as a :class:`TorchRunError` saying which and whether
    it ran out of memory."""
    if isinstance(err, TorchRunError):
        return err
    if out_of_memory(err):
        return TorchRunError(f"out of memory on {where} in {what}: {error_summary(err)}")
    return TorchRunError(f"{what} on {where} failed: {type(err).__name__}: {error_summary(err)}")


def out_of_memory(err: Exception) -> bool:
    """A CUDA out-of-memory error, or the CPU allocator's (a plain ``RuntimeError``)."""
    return isinstance(err, torch.OutOfMemoryError) or "DefaultCPUAllocator: can't allocate memory" in str(err)
