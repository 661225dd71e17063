"""Executing one ``torch-v1`` step of a plan: calls in order, copies between devices on their streams, the
deadline, seeded random ops (:mod:`gplace.runtime.torch_runtime`, Values and Transfers)."""

from __future__ import annotations

import operator
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch.fx.node import map_arg
from torch.utils import _pytree as pytree

from gplace.importers.torch_export import sparse_nbytes
from gplace.runtime.torch_cuda import streams_restored, synchronize
from gplace.runtime.torch_errors import TorchRunError, failure
from gplace.runtime.torch_program import op_name_of
from gplace.torch_modes import forked_rng

if TYPE_CHECKING:
    from gplace.runtime.torch_plan import Call, Plan

__all__ = ["STEP_SEED", "Step", "TimeUp", "check_time", "execute_step", "fresh_step", "nbytes", "pinned_copy",
           "seeded", "to_device"]


STEP_SEED = 0
"""The seed of the generators random ops (dropout) draw from in each step (:mod:`gplace.runtime.torch_runtime`,
Values)."""


class TimeUp(TorchRunError):
    """The time limit passed during a step."""


def check_time(deadline: float) -> None:
    """Raise :class:`TimeUp` once ``time.perf_counter()`` is past ``deadline``."""
    if time.perf_counter() > deadline:
        raise TimeUp("time limit exceeded during the step")


def execute_step(plan: Plan, deadline: float, step: Step | None = None) -> tuple[Any, int]:
    """Run one step; return the output structure and the bytes moved between cluster devices. ``step``: a fresh,
    unrun :class:`Step` of ``plan`` (:func:`fresh_step`, made before a timer starts); ``None``: one made here.
    Random ops draw from the CPU's and the plan's CUDA devices' generators seeded with :data:`STEP_SEED`; the
    caller's random state is given back."""
    step = Step(plan) if step is None else step
    with seeded(plan), streams_restored(plan):
        for call in plan.calls:
            step.run(call)
            check_time(deadline)
    outputs = map_arg(plan.outputs, lambda n: step.env[n.name])
    return outputs, step.moved


def fresh_step(plan: Plan) -> Step:
    """A :class:`Step` of ``plan`` whose copies of the written inputs are made and, on a GPU, finished (every CUDA
    device synchronised): made before a step's timer starts, the copies are not timed."""
    step = Step(plan)
    if plan.written:
        synchronize(plan)
    return step


class Step:
    """The values of one step: per node, and copies per (node, torch device). Made, it holds fresh copies of the
    written inputs (:meth:`restore`), still running on a GPU until :func:`fresh_step` waits for them.

    :meth:`run` makes a GPU's compute stream current (and its device); run calls inside
    :func:`~gplace.runtime.torch_cuda.streams_restored` to give the caller's back, as :func:`execute_step` does.
    """

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.env: dict[str, Any] = dict(plan.initial)
        self.copies: dict[tuple[str, torch.device], Any] = {}
        self.sent: set[tuple[str, int]] = set()
        self.events: dict[str, Any] = {}
        self.moved = 0
        self.copied_out: dict[torch.device, Any] = {}
        """GPU -> an event after the last copy started from it (its copy stream runs them in order)."""
        self.stream: Any = None
        """The compute stream made current last (switched only when a call's device has another one)."""
        for name in sorted(plan.written):
            self.restore(name)

    def restore(self, name: str) -> None:
        """A fresh copy of written input ``name``, made on its device's compute stream (the event marks it)."""
        plan = self.plan
        stream = plan.streams.get(plan.torch_devices[plan.homes[name]])
        with torch.cuda.stream(stream) if stream is not None else nullcontext():
            self.env[name] = pytree.tree_map_only(torch.Tensor, torch.clone, plan.initial[name])
            if stream is not None:
                self.events[name] = stream.record_event()

    def run(self, call: Call) -> None:
        node, plan = call.node, self.plan
        device = plan.torch_devices[call.device]
        if node.target is operator.getitem:
            self.env[node.name] = operator.getitem(self.env[node.args[0].name], *node.args[1:])
            self.free(call.free)
            return
        args, kwargs = map_arg((call.args, call.kwargs), lambda dep: self.fetch(dep.name, call.device))
        stream = plan.streams.get(device)
        if stream is not None and stream is not self.stream:
            torch.cuda.set_stream(stream)  # and its device; a context per op cost more host time than most ops
            self.stream = stream
        if call.writes and stream is not None and device in self.copied_out:
            stream.wait_event(self.copied_out[device])  # a copy still reading a value this op overwrites
        try:
            self.env[node.name] = call.target(*args, **kwargs)
            if call.event and stream is not None:
                self.events[node.name] = stream.record_event()
            for cpu in plan.host_readers.get(node.name, ()):
                self.copies[node.name, cpu] = self.send_to_host(self.env[node.name], device, self.events[node.name])
        except Exception as err:  # an op may raise anything
            what = f"op {op_name_of(node)!r} ({node.meta.get('onnx_op_type', node.target)})"
            raise failure(err, what, plan.labels[call.device]) from err
        self.free(call.free)

    def fetch(self, name: str, device: int) -> Any:
        """The value of node ``name`` on cluster device ``device``, copied at most once per step."""
        plan = self.plan
        src = plan.homes[name]
        value = self.env[name]
        if src == device:
            return value
        if (name, device) not in self.sent:
            self.sent.add((name, device))
            self.moved += nbytes(value)
        dst, home = plan.torch_devices[device], plan.torch_devices[src]
        if dst == home:
            return value
        try:
            if (name, dst) not in self.copies:
                self.copies[name, dst] = self.copy(value, home, dst, self.events.get(plan.roots[name]))
            return _arrived(self.copies[name, dst])
        except Exception as err:  # OutOfMemoryError and CUDA errors
            raise failure(err, f"copying {name!r} from {plan.labels[src]}", plan.labels[device]) from err

    def copy(self, value: Any, src: torch.device, dst: torch.device, event: Any) -> Any:
        """``value`` copied to ``dst`` on the copy streams, after its producer's ``event``; the destination's
        compute stream waits for the copy (an event), nothing else does."""
        if src.type == "cuda" and dst.type == "cpu":
            return self.send_to_host(value, src, event)
        if dst.type != "cuda":
            return to_device(value, dst)
        copies, compute = self.plan.copy_streams, self.plan.streams
        inbound = copies[dst]
        outbound = copies[src] if src.type == "cuda" else inbound
        if event is not None:
            outbound.wait_event(event)
        with torch.cuda.stream(outbound), torch.cuda.stream(inbound):  # torch copies between GPUs on the source's
            out = to_device(value, dst, non_blocking=True)                    # current stream, ordered with the dst's
        if src.type == "cuda":
            _record_stream(value, outbound)  # the source block stays allocated until the copy ran
            self.copied_out[src] = outbound.record_event()  # an op writing in place on src waits for it
        _record_stream(out, compute[dst])  # allocated on the copy stream, read on the compute stream
        compute[dst].wait_event(inbound.record_event())
        return out

    def send_to_host(self, value: Any, src: torch.device, event: Any) -> _HostCopy:
        """Start copying ``value`` into pinned host memory on ``src``'s copy stream, after ``event``; the host
        waits for it only when a CPU op reads it (:func:`_arrived`), so other devices' launches go on."""
        stream = self.plan.copy_streams[src]
        if event is not None:
            stream.wait_event(event)
        with torch.cuda.stream(stream):
            out = pytree.tree_map_only(torch.Tensor, pinned_copy, value)
            done = stream.record_event()
        _record_stream(value, stream)
        self.copied_out[src] = done  # an op writing in place on src waits for it
        return _HostCopy(out, done)

    def free(self, names: tuple[str, ...]) -> None:
        """Drop values (and their copies) no later call reads."""
        for name in names:
            self.env.pop(name, None)
            for device in self.plan.device_set:
                self.copies.pop((name, device), None)


@dataclass(frozen=True)
class _HostCopy:
    """A copy to pinned host memory that may still be running; ``done`` is recorded after it."""

    value: Any
    done: Any


def _arrived(copy: Any) -> Any:
    """A copy's value, once it is there (waits for a :class:`_HostCopy`)."""
    if isinstance(copy, _HostCopy):
        copy.done.synchronize()
        return copy.value
    return copy


def pinned_copy(t: torch.Tensor) -> torch.Tensor:
    """``t`` copied to the host into pinned memory, non-blocking (how torch-v1 brings a GPU result back)."""
    return torch.empty(t.shape, dtype=t.dtype, pin_memory=True).copy_(t, non_blocking=True)


def to_device(value: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """Tensors in ``value`` (a tensor, or lists and tuples of them) moved to ``device``."""
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to(device, non_blocking=non_blocking), value)


def _record_stream(value: Any, stream: Any) -> None:
    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, torch.Tensor) and leaf.device.type == "cuda":
            leaf.record_stream(stream)


def nbytes(value: Any) -> int:
    """The bytes of the tensors in ``value``: a dense one ``numel * element_size``, a sparse one its values and
    indices, as the importer sizes it (:func:`~gplace.importers.torch_export.sparse_nbytes`), so a value's bytes
    moved agree with ``sim-v1``'s (which also charges edges ``torch-v1`` copies nothing for: docs/runtimes.md)."""
    return sum(_tensor_nbytes(t) for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor))


def _tensor_nbytes(t: torch.Tensor) -> int:
    sparse = sparse_nbytes(t)
    return t.numel() * t.element_size() if sparse is None else sparse


@contextmanager
def seeded(plan: Plan) -> Iterator[None]:
    """Generators of the host and the plan's CUDA devices seeded with :data:`STEP_SEED` inside, the caller's
    states given back on leaving."""
    gpus = sorted({dev.index for dev in plan.device_set if dev.type == "cuda"})
    with forked_rng(STEP_SEED, gpus):  # one step at a time in the process: the generators are the process's
        yield
