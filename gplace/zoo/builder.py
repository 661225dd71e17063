"""Build training-step graphs op by op: :class:`GraphBuilder` (ops, edges, roofline costs, variables) and
:meth:`GraphBuilder.add_backward`, the backward pass and optimiser updates of any forward graph it built."""

from __future__ import annotations

import dataclasses
import math

from gplace.ir import Edge, Op, OpGraph
from gplace.zoo.roofline import kind_costs

F32 = 4
OPTIMIZER_SLOTS = {"sgd": 0, "adagrad": 1, "adam": 2}
"""Persistent copies of each variable an optimiser keeps (momenta, accumulators)."""
UPDATE_OPS = {"sgd": "ApplyGradientDescent", "adagrad": "ApplyAdagrad", "adam": "ApplyAdam"}


class GraphBuilder:
    """Collects ops and edges; costs are roofline times of FLOPs and bytes on the reference devices.

    Args:
        optimizer: ``"sgd"``, ``"adagrad"`` or ``"adam"``: the persistent slots of each variable and the type
            of its update op. (default: ``"adam"``)
    """

    def __init__(self, optimizer: str = "adam") -> None:
        if optimizer not in OPTIMIZER_SLOTS:
            raise ValueError(f"optimizer must be one of {sorted(OPTIMIZER_SLOTS)}, got {optimizer!r}")
        self.optimizer = optimizer
        self.ops: list[Op] = []
        self.edges: list[Edge] = []
        self.variables: list[str] = []
        self.inputs: dict[str, list[str]] = {}
        """Op name -> the ops it reads."""
        self.flops: dict[str, float] = {}
        self.reads: dict[str, dict[str, int]] = {}
        """Op name -> the bytes it reads of those inputs it does not read whole."""
        self.receives: dict[str, dict[str, int]] = {}
        """Op name -> the bytes its in-edges carry from those inputs that do not send their whole output."""
        self._index: dict[str, int] = {}

    def op(self, name: str, type: str, inputs: list[str], *, flops: float = 0.0, out_shape: tuple[int, ...] = (),
           persistent: int = 0, colocation: str | None = None, pinned: str | None = None, phase: str | None = None,
           grad_of: str | None = None, reads: dict[str, int] | None = None,
           receives: dict[str, int] | None = None) -> str:
        """Add an op reading ``inputs``; returns its name.

        Its cost counts the whole output of each input, except the bytes ``reads`` gives for some of them (the
        rows a gather reads of its table); its in-edges carry each input's whole output, except the bytes
        ``receives`` gives (a gradient passed on in the shape of the op it is for).
        """
        reads, receives = {**(receives or {}), **(reads or {})}, receives or {}
        out = F32 * math.prod(out_shape) if out_shape else 0
        touched = out + sum(reads.get(i, self.ops[self._index[i]].output_bytes) for i in inputs)
        self._index[name] = len(self.ops)
        self.ops.append(Op(name, type, None, kind_costs(flops, touched), persistent_memory=persistent,
                           output_bytes=out, output_shapes=(out_shape,) if out_shape else (),
                           colocation=colocation, pinned=pinned, phase=phase, grad_of=grad_of))
        self.edges += [Edge(i, name, receives.get(i)) for i in inputs]
        self.inputs[name], self.flops[name], self.reads[name] = list(inputs), flops, reads
        self.receives[name] = receives
        return name

    def gather(self, name: str, table: str, indices: str, out_shape: tuple[int, ...]) -> str:
        """An embedding lookup (``GatherV2``): it reads the ``out_shape`` rows it gathers of ``table``, not the
        whole table (its in-edge from the table still carries the whole table, as a variable read does)."""
        return self.op(name, "GatherV2", [table, indices], out_shape=out_shape,
                       reads={table: F32 * math.prod(out_shape)})

    def variable(self, name: str, shape: tuple[int, ...]) -> str:
        """A variable: its weights and optimiser slots are persistent; its update is colocated with it."""
        size = F32 * math.prod(shape)
        self.variables.append(name)
        return self.op(name, "VariableV2", [], out_shape=shape, persistent=size * (1 + OPTIMIZER_SLOTS[self.optimizer]),
                       colocation=name)

    def shape(self, name: str) -> tuple[int, ...]:
        """The output shape of op ``name``."""
        shapes = self.ops[self._index[name]].output_shapes
        return tuple(shapes[0]) if shapes else ()

    def add_backward(self, loss: str) -> None:
        """The backward pass of everything built so far, from ``loss``, and one update per variable.

        Each forward op that depends on a variable gets ``grad/<name>`` (twice its FLOPs, as TensorFlow's
        gradients cost), reading its own inputs (as the op read them) and, from the gradient op of each of its
        consumers, the gradient with respect to the part of its output that consumer read (its output's bytes, or
        what the consumer's ``reads`` gives, whatever the consumer's size: an attention's keys take their own slice
        of the score's gradient); a variable's gradient is the
        ``AddN`` of the gradient ops of the ops that read it, and its update is colocated with it. Phases: the ops
        built so far are ``forward``; the gradient ops and sums ``backward``, each naming (``grad_of``) the forward
        op or variable it differentiates; the updates ``update``.
        """
        forward = list(self.ops)
        consumers: dict[str, list[str]] = {op.name: [] for op in forward}
        for name, inputs in self.inputs.items():
            for i in inputs:
                consumers[i].append(name)
        needs = self._differentiable(forward)
        grads: dict[str, str] = {}
        for op in reversed(forward):
            if op.name not in needs or op.name in self.variables:
                continue
            users = [c for c in consumers[op.name] if c in grads]
            if op.name != loss and not users:
                continue
            seed = [loss] if op.name == loss else []  # d loss / d loss = 1, once the loss is computed
            upstream = [grads[c] for c in users]
            own_gradient = {grads[c]: self.reads[c].get(op.name, op.output_bytes) for c in users}
            grads[op.name] = self.op(f"grad/{op.name}", f"{op.type}Grad", seed + upstream + self.inputs[op.name],
                                     flops=2 * self.flops[op.name], out_shape=self.shape(op.name),
                                     phase="backward", grad_of=op.name, reads=self.reads[op.name],
                                     receives={**self.receives[op.name], **own_gradient})
        for var in self.variables:
            users = [c for c in consumers[var] if c in grads]
            if users:
                self.update(var, [grads[c] for c in users],
                            {grads[c]: self.reads[c][var] for c in users if var in self.reads[c]})

    def update(self, var: str, grads: list[str], parts: dict[str, int] | None = None) -> None:
        """Sum ``grads``, the gradient ops of variable ``var``, in ``grad/<var>/AddN`` (``backward``), and apply the
        sum with the optimiser's ``update/<var>`` (``update``), colocated with the variable. Each of ``grads`` passes
        the sum a gradient of the whole variable, or the bytes ``parts`` gives for it (the rows a lookup read)."""
        shape = self.shape(var)
        whole = F32 * math.prod(shape)
        total = self.op(f"grad/{var}/AddN", "AddN", grads, flops=len(grads) * math.prod(shape), out_shape=shape,
                        phase="backward", grad_of=var, receives={g: (parts or {}).get(g, whole) for g in grads})
        self.op(f"update/{var}", UPDATE_OPS[self.optimizer], [total, var], flops=10 * math.prod(shape),
                colocation=var, phase="update")

    def build(self, name: str) -> OpGraph:
        """The validated graph; where some ops have a phase (a training step), the others are ``forward``."""
        ops = self.ops
        if any(op.phase is not None for op in ops):
            ops = [op if op.phase is not None else dataclasses.replace(op, phase="forward") for op in ops]
        return OpGraph.from_ops(ops, self.edges, name=name)

    def _differentiable(self, forward: list[Op]) -> set[str]:
        """Ops that depend on some variable (their gradients matter), the variables included."""
        reached = set(self.variables)
        for op in forward:  # built in topological order
            if any(i in reached for i in self.inputs[op.name]):
                reached.add(op.name)
        return reached
