"""The phases of a traced training step's ops (forward, backward, update) and the forward op each gradient
op differentiates, from TensorFlow's gradient names."""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Mapping

from gplace.importers.tensorflow.op_types import FUNCTIONAL_CONTROL_FLOW, VARIABLE_OPS
from gplace.ir import Edge, Op

GRADIENT_SCOPE = "gradient_tape/"
"""Name scope of the ops ``tf.GradientTape.gradient`` adds."""

_SOURCES = frozenset({"Placeholder", "PlaceholderWithDefault", *VARIABLE_OPS})
"""Op types no gradient function or optimiser makes: inputs and variables, which stay ``forward``."""


def training_phases(ops: list[Op], edges: list[Edge], traced: Mapping[str, str] | None = None) -> list[Op]:
    """The ops of a traced training step with their phases (:attr:`Op.phase`).

    ``traced``: node name -> the phase of the call that made it while tracing (``backward``: ``tape.gradient``,
    ``update``: the optimiser's ``apply_gradients``; :func:`_made_by`); variables and inputs are not taken from it.
    ``backward``: the ops under :data:`GRADIENT_SCOPE` (not variables: :func:`_tape_ops`), those ``traced`` says
    (the tape's seed ``ones``), and those of the
    gradient functions it calls, inlined (:func:`_gradient_calls`: a Keras grouped convolution's
    ``PartitionedCall/gradients/...``), but those a forward control-flow op reads that depend on no data (a loop's
    gradient accumulators, created empty), and the ops between two of them (the tape sums the gradients of a
    tensor read twice with a top-level ``AddN``); ``grad_of``
    is the forward op their name points to (:func:`_differentiated`), where there is one. ``update``: the ops
    ``traced`` says (all the optimiser's ops, those that depend on no gradient too: its learning rate, step
    counter, bias corrections, weight decay), every other op that depends on a backward op (the final sums of a
    weight's gradients, what the step runs after the optimiser), and every op that depends on an update op.
    ``forward``: the rest (a batch normalisation's moving averages, updated in the forward pass).
    So no backward op feeds a forward op and update ops feed only update ops, as the pipeline runtimes require.
    Without gradient ops (not a training step) the ops are returned as they are.
    """
    traced = traced or {}
    tape = _tape_ops(ops) | _made_by(ops, traced, "backward")
    if not tape:
        return ops
    consumers: dict[str, list[str]] = defaultdict(list)
    producers: dict[str, list[str]] = defaultdict(list)
    for e in edges:
        consumers[e.src].append(e.dst)
        producers[e.dst].append(e.src)
    calls = _gradient_calls(ops, tape, consumers, producers)
    tape |= {op.name for op in ops if _call_of(op.name, calls) is not None}
    tape -= _constants_for_forward(ops, tape, consumers, producers)
    backward = tape | (_downstream(tape, consumers) & _downstream(tape, producers))  # e.g. AddN of two gradients
    after_gradients = _downstream(backward, consumers) - backward
    update = _downstream(after_gradients | (_made_by(ops, traced, "update") - backward), consumers)
    forward = {op.name for op in ops} - backward - update
    out = []
    for op in ops:
        if op.name in update:
            out.append(dataclasses.replace(op, phase="update"))
        elif op.name in backward:
            of = _differentiated(op.name, forward, calls) if op.name in tape else None
            out.append(dataclasses.replace(op, phase="backward", grad_of=of))
        else:
            out.append(dataclasses.replace(op, phase="forward"))
    return out


def _tape_ops(ops: list[Op]) -> set[str]:
    """The ops the tape's gradient functions made: those under :data:`GRADIENT_SCOPE`, but variables and inputs,
    which no gradient function makes (a variable's node is named after the variable, ``gradient_tape/kernel`` for
    a layer named ``gradient_tape``)."""
    return {op.name for op in ops if op.name.startswith(GRADIENT_SCOPE) and op.type not in _SOURCES}


def _made_by(ops: list[Op], traced: Mapping[str, str], phase: str) -> set[str]:
    """The ops ``traced`` gives ``phase``, with those of the function calls among them, inlined (``<call>/...``,
    ``Func/<call>/...``), but variables and inputs (a captured variable's node is renamed after the variable)."""
    names = {name for name, p in traced.items() if p == phase}
    present = {op.name for op in ops}
    scopes = tuple(s for n in names - present for s in (f"{n}/", f"Func/{n}/"))
    return {op.name for op in ops if op.type not in _SOURCES and (op.name in names or op.name.startswith(scopes))}


def _differentiated(name: str, forward: set[str], calls: Mapping[str, list[str]]) -> str | None:
    """The forward op a gradient-tape op differentiates, by TensorFlow's names, without the tape's prefix: the
    scope the op is in (``gradient_tape/dense/MatMul/MatMul_1``: ``dense/MatMul``), else ``<scope>/<T>`` for an
    op ``<scope>/<T>Grad`` (``re_lu/ReluGrad``: ``re_lu/Relu``), else the scope ``.../<loop>`` that holds a loop's
    gradient loop ``.../<loop>/.../<loop>_grad`` (``lstm/while/lstm/while_grad``: ``lstm/while``); for an op of an
    inlined gradient call (:func:`_gradient_calls`) ``<call>/gradients/<x>_grad/<T>``, ``<forward call>/<x>``;
    ``None`` if none of these is a forward op."""
    call = _call_of(name, calls)
    if call is not None:
        grad = re.fullmatch(r"(.+)_grad/[^/]+", name.removeprefix(f"{call}/gradients/"))
        return next((f"{f}/{grad[1]}" for f in calls[call] if grad and f"{f}/{grad[1]}" in forward), None)
    path = name.removeprefix(GRADIENT_SCOPE)
    parts = path.split("/")
    scope, last = "/".join(parts[:-1]), parts[-1]
    candidates = [scope]
    if grad := re.fullmatch(r"(\w+)Grad(_\d+)?", last):
        candidates.append(f"{scope}/{grad[1]}" if scope else grad[1])
    if last.endswith("_grad"):
        candidates += ["/".join(parts[:k + 1]) for k in range(len(parts) - 1) if parts[k] == last[:-5]]
    return next((c for c in candidates if c in forward), None)


def _gradient_calls(ops: list[Op], tape: set[str], consumers: Mapping[str, list[str]],
                    producers: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """Inlined calls of gradient functions (a Keras grouped ``Conv2D``'s, compiled with XLA, brings its own) that
    read the tape's gradients: call scope (``PartitionedCall``, whose ops are ``PartitionedCall/gradients/...``,
    ``PartitionedCall/...`` and ``Func/PartitionedCall/...``) -> the inlined forward calls whose outputs it reads
    (``Func/<forward call>/output/_<i>``)."""
    names = {op.name for op in ops}
    scopes = {name.split("/gradients/")[0] for name in names if "/gradients/" in name}
    after_tape = _downstream(tape, consumers)
    calls = {}
    for scope in sorted(scopes, key=len):
        entries = [n for n in names if n.startswith(f"Func/{scope}/input/")]
        if scope.startswith("Func/") or not after_tape.intersection(entries):
            continue
        forward = [p.split("/output/")[0].removeprefix("Func/") for n in entries for p in producers.get(n, ())
                   if p.startswith("Func/") and "/output/" in p]
        calls[scope] = sorted(set(forward))
    return calls


def _call_of(name: str, calls: Mapping[str, list[str]]) -> str | None:
    """The gradient call (:func:`_gradient_calls`) op ``name`` belongs to, if any."""
    return next((c for c in calls if name.startswith((f"{c}/", f"Func/{c}/"))), None)


def _constants_for_forward(ops: list[Op], tape: set[str], consumers: Mapping[str, list[str]],
                           producers: Mapping[str, list[str]]) -> set[str]:
    """The tape's ops that a forward control-flow op reads and that depend on no data (a loop's gradient
    accumulators, which the tape creates empty and the forward ``While`` fills), with the constants they read."""
    data = _downstream({op.name for op in ops if op.type in ("Placeholder", *VARIABLE_OPS)}, consumers)
    loops = {op.name for op in ops if op.type in FUNCTIONAL_CONTROL_FLOW and op.name not in tape}
    undetermined = tape - data
    read = {name for name in undetermined if loops.intersection(consumers.get(name, ()))}
    return _downstream(read, producers) & undetermined


def _downstream(start: set[str], consumers: Mapping[str, list[str]]) -> set[str]:
    """``start`` and every op reachable from one of them along ``consumers`` (ops that depend on them; with
    producers instead, the ops they depend on)."""
    seen, stack = set(start), list(start)
    while stack:
        for nxt in consumers.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen
