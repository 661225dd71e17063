"""GNMT-8 (Wu et al. 2016) training step, unrolled per time step with TensorFlow's fine-grained LSTM cells: the
largest of GDP's workloads (more than 50,000 ops at the default sizes).

Each cell is the ops of TensorFlow's ``BasicLSTMCell`` (``ConcatV2`` of input and ``h(t-1)``, ``MatMul``,
``BiasAdd``, ``Split``, three ``Sigmoid`` and two ``Tanh``, ``f * c(t-1) + i * j``, ``o * tanh(c)``) and, when
``dropout``, a ``RandomUniform`` mask and its ``Mul`` on the output, as GNMT trains with dropout. The encoder's
first layer is bidirectional (a forward cell reading step ``t - 1``, a backward one reading step ``t + 1``, their
outputs concatenated per step); layers from the third on add a residual connection. The decoder's first layer
reads the target embedding and the previous step's attention context; its output queries Bahdanau attention over
the encoder's per-step top outputs; every higher layer reads the layer below and this step's context. Logits and
a loss per step, summed. Op names follow :mod:`gplace.zoo.nmt` (``encoder<l>``, ``decoder<l>``,
``attention_score``, ``logits``), so :func:`gplace.baselines.nmt_expert` places it layer by layer.
"""

from __future__ import annotations

from gplace.ir import OpGraph
from gplace.ir.errors import check_flags, check_sizes
from gplace.zoo.builder import GraphBuilder
from gplace.zoo.nmt import attention_context


def unrolled_gnmt(
    layers: int = 8, hidden: int = 1024, src_len: int = 100, tgt_len: int = 100, batch: int = 128, vocab: int = 32000,
    dropout: bool = True, optimizer: str = "adam", training: bool = True,
) -> OpGraph:
    """GNMT with ``layers`` encoder and ``layers`` decoder layers (``layers >= 2``), fine-grained cells.

    With ``training``, the backward pass and an update per variable (:meth:`GraphBuilder.add_backward`); costs are
    roofline times on a K80 GPU and a Haswell CPU (:mod:`gplace.zoo.roofline`).

    Raises:
        ValueError: ``layers < 2`` (the first layer is bidirectional, the second reads both directions), or another
            size that is not a whole number >= 1, by name.
    """
    check_sizes("unrolled_gnmt", hidden=hidden, src_len=src_len, tgt_len=tgt_len, batch=batch, vocab=vocab)
    check_sizes("unrolled_gnmt", 1, layers=layers)
    check_flags("unrolled_gnmt", dropout=dropout, training=training)
    if layers < 2:
        raise ValueError(f"GNMT needs at least 2 layers (a bidirectional one and one above it), got {layers}")
    GraphBuilder(optimizer)  # an unknown optimiser is named, training or not
    b = GraphBuilder(optimizer if training else "sgd")  # no optimiser slots without training
    cell = _Cells(b, batch, hidden, dropout)
    src = b.op("input/source", "IteratorGetNext", [], out_shape=(batch, src_len), pinned="cpu")
    tgt = b.op("input/target", "IteratorGetNext", [], out_shape=(batch, tgt_len), pinned="cpu")
    src_emb = b.variable("source_embedding", (vocab, hidden))
    tgt_emb = b.variable("target_embedding", (vocab, hidden))
    top = _encoder(b, cell, src, src_emb, layers, src_len)
    keys_w, query_w = b.variable("attention_keys/kernel", (hidden, hidden)), b.variable(
        "attention_query/kernel", (hidden, hidden))
    score_v, logits_w = b.variable("attention_score/v", (hidden,)), b.variable("logits/kernel", (hidden, vocab))
    keys = [b.op(f"attention_keys/t{t}", "MatMul", [x, keys_w], flops=2 * batch * hidden * hidden,
                 out_shape=(batch, hidden)) for t, x in enumerate(top)]
    losses, state = [], {}
    context = b.op("attention/initial_context", "Fill", [], out_shape=(batch, hidden))  # zeros, as GNMT starts
    for t in range(tgt_len):
        x = b.gather(f"target_embedding/t{t}", tgt_emb, tgt, (batch, hidden))
        for layer in range(layers):
            out, _ = state[layer] = cell(f"decoder{layer}", t, [x, context], state.get(layer))
            if layer == 0:
                context = attention_context(b, t, out, keys, top, query_w, score_v, batch, hidden)
            x = b.op(f"decoder{layer}/t{t}/Residual", "Add", [out, x], flops=batch * hidden,
                     out_shape=(batch, hidden)) if layer >= 2 else out
        logits = b.op(f"logits/t{t}", "MatMul", [x, logits_w], flops=2 * batch * hidden * vocab,
                      out_shape=(batch, vocab))
        losses.append(b.op(f"sparse_categorical_crossentropy/t{t}", "SparseSoftmaxCrossEntropyWithLogits",
                           [logits, tgt], flops=5 * batch * vocab, out_shape=(batch,)))
    loss = b.op("loss/total", "AddN", losses, flops=batch * tgt_len, out_shape=())
    if training:
        b.add_backward(loss)
    suffix = "_train" if training else ""
    return b.build(f"gnmt_layers{layers}_h{hidden}_s{src_len}_t{tgt_len}_b{batch}{suffix}")


def _encoder(b: GraphBuilder, cell: _Cells, src: str, emb: str, layers: int, steps: int) -> list[str]:
    """The encoder's top output per source step."""
    h = cell.hidden
    inputs = [b.gather(f"source_embedding/t{t}", emb, src, (cell.batch, h)) for t in range(steps)]
    forward, backward = [""] * steps, [""] * steps
    state = None
    for t in range(steps):
        state = cell("encoder0_bidi/fw", t, [inputs[t]], state)
        forward[t] = state[0]
    state = None
    for t in reversed(range(steps)):
        state = cell("encoder0_bidi/bw", t, [inputs[t]], state)
        backward[t] = state[0]
    xs = [b.op(f"encoder0/t{t}/Concat", "ConcatV2", [forward[t], backward[t]], flops=0,
               out_shape=(cell.batch, 2 * h)) for t in range(steps)]
    for layer in range(1, layers):
        state, outs = None, []
        for t in range(steps):
            state = cell(f"encoder{layer}", t, [xs[t]], state)
            out = state[0]
            outs.append(b.op(f"encoder{layer}/t{t}/Residual", "Add", [out, xs[t]], flops=cell.batch * h,
                             out_shape=(cell.batch, h)) if layer >= 2 else out)
        xs = outs
    return xs


class _Cells:
    """Builds fine-grained LSTM cells; one kernel and bias per scope, made on first use."""

    def __init__(self, b: GraphBuilder, batch: int, hidden: int, dropout: bool) -> None:
        self.b, self.batch, self.hidden, self.dropout = b, batch, hidden, dropout
        self.weights: dict[str, tuple[str, str]] = {}

    def __call__(self, scope: str, t: int, inputs: list[str], previous: tuple[str, str] | None) -> tuple[str, str]:
        """The cell of ``scope`` at step ``t``: its output ``h`` and its state ``c``."""
        b, e, h = self.b, self.batch, self.hidden
        name = f"{scope}/t{t}"
        reads = [*inputs, previous[0]] if previous else list(inputs)
        width = sum(b.shape(x)[-1] for x in reads)
        if scope not in self.weights:
            self.weights[scope] = (b.variable(f"{scope}/kernel", (width + (0 if previous else h), 4 * h)),
                                   b.variable(f"{scope}/bias", (4 * h,)))
        kernel, bias = self.weights[scope]
        x = b.op(f"{name}/Concat", "ConcatV2", reads, out_shape=(e, width))
        mm = b.op(f"{name}/MatMul", "MatMul", [x, kernel], flops=2 * e * width * 4 * h, out_shape=(e, 4 * h))
        z = b.op(f"{name}/BiasAdd", "BiasAdd", [mm, bias], flops=e * 4 * h, out_shape=(e, 4 * h))
        split = b.op(f"{name}/Split", "Split", [z], out_shape=(e, 4 * h))
        i, f, o = (b.op(f"{name}/Sigmoid_{g}", "Sigmoid", [split], flops=4 * e * h, out_shape=(e, h)) for g in "ifo")
        j = b.op(f"{name}/Tanh_j", "Tanh", [split], flops=4 * e * h, out_shape=(e, h))
        c = b.op(f"{name}/Mul_ij", "Mul", [i, j], flops=e * h, out_shape=(e, h))
        if previous:
            kept = b.op(f"{name}/Mul_fc", "Mul", [f, previous[1]], flops=e * h, out_shape=(e, h))
            c = b.op(f"{name}/Add_c", "Add", [kept, c], flops=e * h, out_shape=(e, h))
        tanh_c = b.op(f"{name}/Tanh_c", "Tanh", [c], flops=4 * e * h, out_shape=(e, h))
        out = b.op(f"{name}/Mul_h", "Mul", [o, tanh_c], flops=e * h, out_shape=(e, h))
        if self.dropout:
            mask = b.op(f"{name}/dropout/RandomUniform", "RandomUniform", [], flops=e * h, out_shape=(e, h))
            out = b.op(f"{name}/dropout/Mul", "Mul", [out, mask], flops=e * h, out_shape=(e, h))
        return out, c
