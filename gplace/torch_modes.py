"""torch's process-wide modes a host may have set, held as gplace needs them for a block of its own work.

A compiler that imports gplace may run it inside ``torch.no_grad()`` or ``torch.inference_mode()``, or after
``torch.set_default_dtype(torch.float64)``; training, tracing a backward and timing one need gradients, and
gplace's networks are float32. Each block here sets the mode it needs and leaves the caller's as it was.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["float32_default", "gradients_on"]

_DTYPE = threading.RLock()
"""Held while torch's default dtype is float32 for a block: the setting is the process's, not the thread's."""


@contextlib.contextmanager
def gradients_on() -> Iterator[None]:
    """Autograd records in the block whatever the caller's mode (``torch.no_grad()``, ``torch.inference_mode()``,
    ``torch.set_grad_enabled(False)``); the caller's mode is back after it. Tensors made in the block are normal
    tensors, usable by autograd later."""
    import torch

    with torch.inference_mode(False), torch.enable_grad():
        yield


@contextlib.contextmanager
def float32_default() -> Iterator[None]:
    """torch's default dtype float32 in the block, the caller's after it: gplace's networks are float32 even in a
    host that set another (``torch.set_default_dtype(torch.float64)``), so a seed learns the same placement there.
    One block at a time in the process (threads' blocks would restore each other's default)."""
    import torch

    with _DTYPE:
        before = torch.get_default_dtype()
        torch.set_default_dtype(torch.float32)
        try:
            yield
        finally:
            torch.set_default_dtype(before)
