"""A built-in training-step graph of a multi-layer LSTM language model (the paper's RNNLM, scaled)."""

from __future__ import annotations

from gplace.ir import Edge, Op, OpGraph
from gplace.zoo.roofline import kind_costs

F32 = 4


class _Builder:
    """Collects ops and edges; costs come from FLOPs and bytes on the reference devices."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.edges: list[Edge] = []

    def op(self, name: str, type: str, inputs: list[str], *, flops: float = 0.0, out_shape: tuple[int, ...] = (),
           persistent: int = 0, colocation: str | None = None, pinned: str | None = None) -> str:
        out = F32 * _numel(out_shape) if out_shape else 0
        touched = out + sum(self._bytes(i) for i in inputs)
        self.ops.append(Op(name, type, None, kind_costs(flops, touched), persistent_memory=persistent,
                           output_bytes=out, output_shapes=(out_shape,) if out_shape else (),
                           colocation=colocation, pinned=pinned))
        self.edges += [Edge(i, name) for i in inputs]
        return name

    def _bytes(self, name: str) -> int:
        return next(o.output_bytes for o in reversed(self.ops) if o.name == name)

    def variable(self, name: str, shape: tuple[int, ...], optimiser_slots: int) -> str:
        """A variable: its weights (and optimiser slots) are persistent; its update is colocated with it."""
        size = F32 * _numel(shape)
        return self.op(name, "VariableV2", [], out_shape=shape, persistent=size * (1 + optimiser_slots),
                       colocation=name)


def lstm_lm(
    layers: int = 2, hidden: int = 1024, steps: int = 20, batch: int = 64, vocab: int = 10000,
    training: bool = True,
) -> OpGraph:
    """An unrolled LSTM language model: embedding, ``layers`` LSTM layers over ``steps``, softmax, loss.

    With ``training`` the graph is a full step: forward, backward (each op's gradient at twice its FLOPs),
    gradient accumulation and Adam updates colocated with their variables. The input pipeline is pinned
    to the CPU. Costs are roofline times on a K80 GPU and a Haswell CPU (:mod:`gplace.zoo.roofline`).
    """
    b = _Builder()
    slots = 2 if training else 0
    tokens = b.op("input/IteratorGetNext", "IteratorGetNext", [], out_shape=(batch, steps), pinned="cpu")
    emb = b.variable("embedding", (vocab, hidden), slots)
    weights = [b.variable(f"lstm{layer}/kernel", (2 * hidden, 4 * hidden), slots) for layer in range(layers)]
    softmax_w = b.variable("softmax/kernel", (hidden, vocab), slots)

    h = {}  # (layer, t) -> op producing h and c
    logits = []
    for t in range(steps):
        x = b.op(f"embed/t{t}", "GatherV2", [emb, tokens], out_shape=(batch, hidden))
        for layer in range(layers):
            inputs = [x, weights[layer]] + ([h[layer, t - 1]] if t else [])
            mm = b.op(f"lstm{layer}/t{t}/MatMul", "MatMul", inputs, flops=2 * batch * 2 * hidden * 4 * hidden,
                      out_shape=(batch, 4 * hidden))
            gates_in = [mm] + ([h[layer, t - 1]] if t else [])
            x = h[layer, t] = b.op(f"lstm{layer}/t{t}/Cell", "LSTMBlockCell", gates_in, flops=10 * batch * 4 * hidden,
                               out_shape=(2, batch, hidden))
        logits.append(b.op(f"softmax/t{t}/MatMul", "MatMul", [x, softmax_w], flops=2 * batch * hidden * vocab,
                           out_shape=(batch, vocab)))
    losses = [b.op(f"loss/t{t}", "SparseSoftmaxCrossEntropyWithLogits", [lg, tokens],
                   flops=5 * batch * vocab, out_shape=(batch, vocab)) for t, lg in enumerate(logits)]
    b.op("loss/total", "AddN", losses, flops=batch * steps, out_shape=())
    if training:
        _backward(b, layers, steps, batch, hidden, vocab, emb, weights, softmax_w)
    name = f"lstm_lm_{layers}x{hidden}_t{steps}_b{batch}" + ("_train" if training else "")
    return OpGraph.from_ops(b.ops, b.edges, name=name)


def _backward(b: _Builder, layers: int, steps: int, batch: int, hidden: int, vocab: int,
              emb: str, weights: list[str], softmax_w: str) -> None:
    """Gradient ops in reverse, weight-gradient accumulation and colocated Adam updates."""
    grads: dict[str, list[str]] = {v: [] for v in [emb, softmax_w, *weights]}
    dh: dict[tuple[int, int], str] = {}
    for t in reversed(range(steps)):
        dlogit = b.op(f"grad/softmax/t{t}/MatMul", "MatMulGrad",
                      [f"loss/t{t}", f"lstm{layers - 1}/t{t}/Cell", softmax_w],
                      flops=2 * 2 * batch * hidden * vocab, out_shape=(batch, hidden))
        grads[softmax_w].append(dlogit)
        upstream = dlogit
        for layer in reversed(range(layers)):
            inputs = [upstream, f"lstm{layer}/t{t}/Cell"] + ([dh[layer, t + 1]] if t + 1 < steps else [])
            dcell = b.op(f"grad/lstm{layer}/t{t}/Cell", "LSTMBlockCellGrad", inputs, flops=20 * batch * 4 * hidden,
                         out_shape=(batch, 4 * hidden))
            dh[layer, t] = upstream = b.op(f"grad/lstm{layer}/t{t}/MatMul", "MatMulGrad", [dcell, weights[layer]],
                                       flops=2 * 2 * batch * 2 * hidden * 4 * hidden, out_shape=(batch, 2 * hidden))
            grads[weights[layer]].append(dh[layer, t])
        grads[emb].append(b.op(f"grad/embed/t{t}", "UnsortedSegmentSum", [upstream], flops=batch * hidden,
                               out_shape=(batch, hidden)))
    for var, parts in grads.items():
        shape = next(o.output_shapes[0] for o in b.ops if o.name == var)
        total = b.op(f"grad/{var}/AddN", "AddN", parts, flops=len(parts) * _numel(shape), out_shape=shape)
        b.op(f"update/{var}", "ApplyAdam", [total, var], flops=10 * _numel(shape), out_shape=(), colocation=var)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
