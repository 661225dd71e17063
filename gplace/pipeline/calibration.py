"""``pipe-v3`` calibrated on this machine for a torch module: a training graph of its top-level modules with the
forward and backward times measured here, to predict what ``torch-pipeline-v1`` measures.

:func:`measure_modules` times each top-level module on one micro-batch (the module must run them one after
another, ``module(x) == children[-1](...children[0](x))``, checked). :func:`module_training_graph` makes each a
forward and a backward op (colocated, ``grad_of`` the forward op) costing those times x ``M`` (pipe-v3 divides by
``M``), with the activations sent forward and their gradients backward between consecutive modules; the first
module of each stage also pays a per-micro-batch ``overhead`` in each direction (the schedule's bookkeeping and
its sends and receives, fitted by the caller from runs of the real runtime). The link cost is the cluster's.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from gplace.ir import Edge, GraphError, Op, OpGraph
from gplace.ir.errors import check_sizes
from gplace.torch_modes import forked_rng, gradients_on

__all__ = ["ModuleTimes", "measure_modules", "module_training_graph", "stage_placement"]


@dataclass(frozen=True)
class ModuleTimes:
    """One top-level module timed on one micro-batch."""

    name: str
    forward: float
    """Median seconds of its forward."""
    backward: float
    """Median seconds of its backward (the last module's includes the loss)."""
    output_bytes: int
    """Bytes of its output on one micro-batch."""
    input_bytes: int
    """Bytes of its input on one micro-batch (the gradient it sends back)."""
    parameter_bytes: int


def measure_modules(module: nn.Module, inputs: torch.Tensor, target: torch.Tensor,
                    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *, microbatches: int,
                    repeats: int = 5) -> list[ModuleTimes]:
    """Time each top-level module of ``module`` on one micro-batch of ``inputs`` (median of ``repeats`` runs).

    ``module``'s parameters, buffers and gradients are as they were after it (timing trains it: gradients,
    BatchNorm's statistics), and random ops draw from torch's generators seeded with 0, the caller's states given
    back after.

    Raises:
        GraphError: the module is not the chain of its children.
        ValueError: ``microbatches`` or ``repeats`` not a whole number >= 1, or more micro-batches than ``inputs``
            has rows (each would be empty).
    """
    check_sizes("measure_modules", microbatches=microbatches, repeats=repeats)
    if microbatches > inputs.shape[0]:
        raise ValueError(f"measure_modules: {microbatches} micro-batches of a batch of {inputs.shape[0]} would be "
                         "empty; give at most one per row of inputs")
    x = inputs[: inputs.shape[0] // microbatches]
    y = target[: target.shape[0] // microbatches]
    with _kept(module):
        return _timed_children(module, x, y, loss_fn, repeats, functools.partial(forked_rng, 0, _cuda_indices(x)))


def _timed_children(module: nn.Module, x: torch.Tensor, y: torch.Tensor, loss_fn: Callable, repeats: int,
                    seeded: Callable) -> list[ModuleTimes]:
    """:func:`measure_modules` on one micro-batch ``x``, ``y``; ``seeded()`` a block of seeded generators."""
    children = list(module.named_children())
    acts = [x]
    with torch.no_grad():  # both runs from one seed: a Dropout draws the same masks in each
        with seeded():
            for _, child in children:
                acts.append(child(acts[-1]))
        with seeded():
            whole = module(x)
        if not torch.allclose(acts[-1], whole, rtol=1e-4, atol=1e-5):
            raise GraphError(f"{type(module).__name__} does not run its top-level modules one after another; "
                             "calibrate a module that does (e.g. an nn.Sequential)")
    timed = []
    for i, (name, child) in enumerate(children):
        loss = (lambda out: loss_fn(out, y)) if i == len(children) - 1 else None
        with seeded():
            fwd, bwd = _times(child, acts[i], loss, repeats)
        timed.append(ModuleTimes(name, fwd, bwd, _nbytes(acts[i + 1]), _nbytes(acts[i]),
                                 sum(_nbytes(p) for p in child.parameters())))
    return timed


@contextlib.contextmanager
def _kept(module: nn.Module) -> Iterator[None]:
    """``module``'s parameters, buffers (a copy on the CPU) and gradients given back after the block."""
    state = {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}
    grads = [(p, None if p.grad is None else p.grad.detach().clone()) for p in module.parameters()]
    try:
        yield
    finally:
        with gradients_on(), torch.no_grad():
            module.load_state_dict(state)
        for param, grad in grads:
            param.grad = grad


def module_training_graph(times: Sequence[ModuleTimes], *, microbatches: int, stage_of: dict[str, int] | None = None,
                          overhead: float = 0.0, kind: str = "cpu", name: str = "modules") -> OpGraph:
    """A ``pipe-v3`` training graph: a forward and a backward op per module (colocated, ``grad_of``), costs for M
    micro-batches, activations forward and gradients backward between consecutive modules.

    Args:
        times: from :func:`measure_modules`, in order.
        microbatches: M.
        stage_of: module name -> stage; the first module of each stage's run also pays ``overhead`` per
            micro-batch in each direction (the schedule's bookkeeping, sends and receives). (default: none)
        overhead: seconds per stage action and micro-batch. (default: 0)
        kind: the device kind the costs are for. (default: "cpu")
        name: the graph's name. (default: "modules")

    Raises:
        ValueError: ``microbatches`` is not a whole number >= 1, or ``stage_of`` lacks a module (names both).
    """
    check_sizes("module_training_graph", microbatches=microbatches)
    if stage_of is not None:
        _check_stage_of(stage_of, [t.name for t in times])
    ops, edges = [], []
    for i, t in enumerate(times):
        first = stage_of is not None and (i == 0 or stage_of[t.name] != stage_of[times[i - 1].name])
        extra = overhead if first else 0.0
        ops.append(Op(f"fwd/{t.name}", "forward", None, {kind: (t.forward + extra) * microbatches},
                      output_bytes=t.output_bytes * microbatches, persistent_memory=t.parameter_bytes,
                      colocation=t.name, phase="forward"))
        ops.append(Op(f"bwd/{t.name}", "backward", None, {kind: (t.backward + extra) * microbatches},
                      output_bytes=t.input_bytes * microbatches, colocation=t.name, phase="backward",
                      grad_of=f"fwd/{t.name}"))
        edges.append(Edge(f"fwd/{t.name}", f"bwd/{t.name}"))
        if i:
            prev = times[i - 1].name
            edges += [Edge(f"fwd/{prev}", f"fwd/{t.name}"), Edge(f"bwd/{t.name}", f"bwd/{prev}")]
    return OpGraph.from_ops(ops, edges, name=f"{name}_m{microbatches}")


def stage_placement(graph: OpGraph, stage_of: dict[str, int]) -> list[int]:
    """The device of each op of :func:`module_training_graph`'s graph, from each module's stage.

    Raises:
        ValueError: ``stage_of`` lacks a module of the graph (names it).
    """
    modules = [op.split("/", 1)[1] for op in graph.op_names]
    _check_stage_of(stage_of, modules)
    return [stage_of[m] for m in modules]


def _check_stage_of(stage_of: dict[str, int], modules: Sequence[str]) -> None:
    missing = [m for m in modules if m not in stage_of]
    if missing:
        raise ValueError(f"stage_of gives no stage for module {missing[0]!r} (it names {sorted(stage_of)})")


def _times(child: nn.Module, x: torch.Tensor, loss: Callable | None, repeats: int) -> tuple[float, float]:
    """Median forward and backward seconds of ``child`` on ``x`` (the backward of the loss too, if given)."""
    fwd, bwd = [], []
    clock = _clock([x.device, *(t.device for t in itertools.chain(child.parameters(), child.buffers()))])
    with gradients_on():  # a backward to time, whatever the caller's mode
        for _ in range(repeats + 1):  # the first run warms up
            inp = x.clone().requires_grad_(x.is_floating_point())
            start = clock()
            out = child(inp)
            mid = clock()
            scalar = loss(out) if loss is not None else (out * torch.ones_like(out)).sum()
            scalar.backward()
            end = clock()
            fwd.append(mid - start)
            bwd.append(end - mid)
    return statistics.median(fwd[1:]), statistics.median(bwd[1:])


def _clock(devices: Iterable[torch.device]) -> Callable[[], float]:
    """``time.perf_counter`` once the work queued on every CUDA device of ``devices`` is done (a GPU runs its
    kernels after they are launched: without waiting, a forward on a GPU would be timed at its launches; a module
    whose layers span GPUs is waited for on each, not on its input's alone)."""
    cuda = sorted({d.index if d.index is not None else torch.cuda.current_device() for d in devices
                   if d.type == "cuda"})
    if not cuda:
        return time.perf_counter

    def clock() -> float:
        for index in cuda:
            torch.cuda.synchronize(index)
        return time.perf_counter()

    return clock


def _cuda_indices(t: torch.Tensor) -> list[int]:
    """The CUDA device ``t`` lives on, as a list (empty for a CPU tensor)."""
    if t.device.type != "cuda":
        return []
    return [t.device.index if t.device.index is not None else torch.cuda.current_device()]


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()
