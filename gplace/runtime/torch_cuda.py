"""CUDA bookkeeping around a ``torch-v1`` step: the caller's streams given back, memory caps, synchronising
(:mod:`gplace.runtime.torch_runtime`, Transfers and Peak memory)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch

from gplace.ir.errors import error_summary
from gplace.runtime.torch_errors import failure

if TYPE_CHECKING:
    from gplace.runtime.torch_plan import Plan

logger = logging.getLogger(__name__)

__all__ = ["memory_fractions", "streams_restored", "synchronize"]


@contextmanager
def streams_restored(plan: Plan) -> Iterator[None]:
    """Give back the caller's current CUDA device and each device's current stream on leaving: a
    :class:`~gplace.runtime.torch_step.Step` makes its compute streams current as it goes
    (:func:`~gplace.runtime.torch_step.execute_step` runs it inside this)."""
    if not plan.streams:
        yield
        return
    device, before = torch.cuda.current_device(), [torch.cuda.current_stream(d) for d in plan.streams]
    try:
        yield
    finally:
        for stream in before:
            torch.cuda.set_stream(stream)
        torch.cuda.set_device(device)


@contextmanager
def memory_fractions(limits: Mapping[torch.device, float]) -> Iterator[None]:
    """Each CUDA device of ``limits`` capped at that fraction of its memory inside
    (``torch.cuda.set_per_process_memory_fraction``, which caps the whole process), and given back the fraction
    it had before (``torch.cuda.get_per_process_memory_fraction``; 1.0, no cap, where torch cannot read it) on
    leaving, also on an exception. A device that cannot be given back (a dead CUDA context) is left as it is,
    with a warning, so that the exception that ended the block is the one raised."""
    read = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    before: dict[torch.device, float] = {}
    try:
        for dev, fraction in limits.items():
            before[dev] = float(read(dev)) if read is not None else 1.0
            torch.cuda.set_per_process_memory_fraction(float(fraction), dev)
        yield
    finally:
        for dev, fraction in before.items():
            try:
                torch.cuda.set_per_process_memory_fraction(fraction, dev)
            except Exception as err:  # the sticky error again; usable() turns false
                logger.warning("could not give %s its memory fraction %g back: %s", dev, fraction, error_summary(err))


def synchronize(plan: Plan) -> None:
    """Wait for every CUDA stream of ``plan``; an asynchronous CUDA error is a :class:`TorchRunError` naming the
    device."""
    for device in plan.streams:
        try:
            torch.cuda.synchronize(device)
        except Exception as err:  # an asynchronous CUDA error surfaces here
            label = next(plan.labels[d] for d, dev in plan.torch_devices.items() if dev == device)
            raise failure(err, "the step", label) from err
