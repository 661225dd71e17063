"""A built-in training-step graph of a multi-layer LSTM language model (the paper's RNNLM, scaled)."""

from __future__ import annotations

from gplace.ir import OpGraph
from gplace.ir.errors import check_flags, check_sizes
from gplace.zoo.builder import F32, GraphBuilder


def lstm_lm(
    layers: int = 2, hidden: int = 1024, steps: int = 20, batch: int = 64, vocab: int = 10000,
    training: bool = True, optimizer: str = "adam",
) -> OpGraph:
    """An unrolled LSTM language model: embedding, ``layers`` LSTM layers over ``steps``, softmax, loss.

    With ``training`` the graph is a full step: forward, backward (each op's gradient at twice its FLOPs),
    gradient accumulation and ``optimizer`` updates (``"adam"``, ``"adagrad"``, ``"sgd"``) colocated with their
    variables. The input pipeline is pinned to the CPU. Costs are roofline times on a K80 GPU and a Haswell
    CPU (:mod:`gplace.zoo.roofline`). Each layer at step ``t`` reads the layer below at ``t`` and itself at
    ``t - 1`` (two ops per cell and step, its gate MatMul and its LSTMBlockCell, as the paper's TensorFlow
    graphs); logits and loss are per step.

    Raises:
        ValueError: a size that is not a whole number >= 1, by name.
    """
    check_sizes("lstm_lm", layers=layers, hidden=hidden, steps=steps, batch=batch, vocab=vocab)
    check_flags("lstm_lm", training=training)
    GraphBuilder(optimizer)  # an unknown optimiser is named, training or not
    b = GraphBuilder(optimizer if training else "sgd")  # no optimiser slots without training
    tokens = b.op("input/IteratorGetNext", "IteratorGetNext", [], out_shape=(batch, steps), pinned="cpu")
    emb = b.variable("embedding", (vocab, hidden))
    weights = [b.variable(f"lstm{layer}/kernel", (2 * hidden, 4 * hidden)) for layer in range(layers)]
    softmax_w = b.variable("softmax/kernel", (hidden, vocab))

    h = {}  # (layer, t) -> op producing h and c
    logits = []
    for t in range(steps):
        x = b.gather(f"embed/t{t}", emb, tokens, (batch, hidden))
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
    if training and optimizer != "adam":
        name += f"_{optimizer}"
    return b.build(name)


def _backward(b: GraphBuilder, layers: int, steps: int, batch: int, hidden: int, vocab: int,
              emb: str, weights: list[str], softmax_w: str) -> None:
    """Gradient ops in reverse (phase ``backward``, each naming the op it differentiates), weight-gradient
    accumulation and colocated Adam updates (phase ``update``)."""
    grads: dict[str, list[str]] = {v: [] for v in [emb, softmax_w, *weights]}
    dh: dict[tuple[int, int], str] = {}
    for t in reversed(range(steps)):
        dlogit = b.op(f"grad/softmax/t{t}/MatMul", "MatMulGrad",
                      [f"loss/t{t}", f"lstm{layers - 1}/t{t}/Cell", softmax_w],
                      flops=2 * 2 * batch * hidden * vocab, out_shape=(batch, hidden), phase="backward",
                      grad_of=f"softmax/t{t}/MatMul")
        grads[softmax_w].append(dlogit)
        upstream = dlogit
        for layer in reversed(range(layers)):
            inputs = [upstream, f"lstm{layer}/t{t}/Cell"] + ([dh[layer, t + 1]] if t + 1 < steps else [])
            dcell = b.op(f"grad/lstm{layer}/t{t}/Cell", "LSTMBlockCellGrad", inputs, flops=20 * batch * 4 * hidden,
                         out_shape=(batch, 4 * hidden), phase="backward", grad_of=f"lstm{layer}/t{t}/Cell")
            dh[layer, t] = upstream = b.op(f"grad/lstm{layer}/t{t}/MatMul", "MatMulGrad", [dcell, weights[layer]],
                                       flops=2 * 2 * batch * 2 * hidden * 4 * hidden, out_shape=(batch, 2 * hidden),
                                       phase="backward", grad_of=f"lstm{layer}/t{t}/MatMul")
            grads[weights[layer]].append(dh[layer, t])
        grads[emb].append(b.op(f"grad/embed/t{t}", "UnsortedSegmentSum", [upstream], flops=batch * hidden,
                               out_shape=(batch, hidden), phase="backward", grad_of=f"embed/t{t}"))
    rows = F32 * batch * hidden  # each step's lookup gradient: the rows it read of the table
    for var, parts in grads.items():
        b.update(var, parts, {p: rows for p in parts} if var == emb else None)
