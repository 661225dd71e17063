"""torch's process-wide modes a host may have set, held as gplace needs them for a block of its own work.

A compiler that imports gplace may run it inside ``torch.no_grad()`` or ``torch.inference_mode()``, or after
``torch.set_default_dtype(torch.float64)``; training, tracing a backward and timing one need gradients, and
gplace's networks are float32. Each block here sets the mode it needs and leaves the caller's as it was.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from gplace.ir.locks import ForkSafeLock

__all__ = ["float32_default", "forked_rng", "gradients_on", "tracing"]

_DTYPE = ForkSafeLock(reentrant=True)
"""Held while torch's default dtype is float32 for a block: the setting is the process's, not the thread's."""

_RANDOM = ForkSafeLock(reentrant=True)
"""Held while a block has torch's global generators forked: they are the process's, and a block gives back the
states it saved, so two blocks at once in two threads gave each other's (and the caller's draws changed)."""

_TRACING = ForkSafeLock(reentrant=True)
"""Held while torch traces a program: torch.export, aot_autograd and pipelining keep their tracing state in the
process (two traces at once in two threads failed with errors that blamed the model)."""


@contextlib.contextmanager
def gradients_on() -> Iterator[None]:
    """Autograd records in the block whatever the caller's mode (``torch.no_grad()``, ``torch.inference_mode()``,
    ``torch.set_grad_enabled(False)``); the caller's mode is back after it. Tensors made in the block are normal
    tensors, usable by autograd later."""
    import torch

    with torch.inference_mode(False), torch.enable_grad():
        yield


@contextlib.contextmanager
def forked_rng(seed: int | None = None, cuda: Sequence[int] = ()) -> Iterator[None]:
    """torch's CPU generator and those of the CUDA devices ``cuda`` seeded with ``seed`` in the block (left as they
    were if ``None``), the caller's states given back after it; one block at a time in the process."""
    import torch

    with _RANDOM, torch.random.fork_rng(devices=list(cuda)):
        if seed is not None:
            torch.random.default_generator.manual_seed(seed)
            for index in cuda:
                torch.cuda.default_generators[index].manual_seed(seed)
        yield


@contextlib.contextmanager
def tracing() -> Iterator[None]:
    """A block in which torch traces a program (``torch.export``, ``aot_autograd``, pipelining), one at a time in
    the process. It holds torch's generators (:func:`forked_rng`: a trace gives back the state it found, which put
    another thread's seeded draws back) and numba's compiler lock (``torch.export`` swaps ``math.pow``,
    ``max`` and ``min`` for the whole process while it traces, and a kernel compiled then failed to type)."""
    from numba.core.compiler_lock import global_compiler_lock

    with _TRACING, forked_rng(), global_compiler_lock:
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
