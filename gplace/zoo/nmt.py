"""The paper's attentional NMT training step, unrolled per time step (as the seeds' TensorFlow graphs were).

Encoder layer ``l`` at step ``t`` reads layer ``l - 1`` at step ``t`` and itself at step ``t - 1``; the decoder
likewise, its first layer also reading the previous step's attentional output (input feeding). Each decoder
step attends over the encoder's per-step top outputs (Bahdanau: ``v . tanh(keys + query)``), then projects to
logits and a loss per step; the losses are summed. Op names follow the Keras build's scopes
(``source_embedding``, ``encoder0``, ``decoder1``, ``attention_score``, ``attention_out``, ``logits``,
``sparse_categorical_crossentropy``), so :func:`gplace.baselines.nmt_expert` places it as the paper's expert.
"""

from __future__ import annotations

from gplace.ir import OpGraph
from gplace.ir.errors import check_flags, check_sizes
from gplace.zoo.builder import GraphBuilder


def unrolled_nmt(
    layers: int = 2, hidden: int = 1024, src_len: int = 40, tgt_len: int = 40, batch: int = 64, vocab: int = 32000,
    optimizer: str = "adam", training: bool = True,
) -> OpGraph:
    """A ``layers`` + ``layers`` LSTM encoder-decoder with attention, one op per cell and time step.

    With ``training``, the backward pass and an update per variable (:meth:`GraphBuilder.add_backward`). Costs
    are roofline times on a K80 GPU and a Haswell CPU (:mod:`gplace.zoo.roofline`).

    Raises:
        ValueError: a size that is not a whole number >= 1, by name.
    """
    check_sizes("unrolled_nmt", layers=layers, hidden=hidden, src_len=src_len, tgt_len=tgt_len, batch=batch,
                vocab=vocab)
    check_flags("unrolled_nmt", training=training)
    GraphBuilder(optimizer)  # an unknown optimiser is named, training or not
    b = GraphBuilder(optimizer if training else "sgd")  # no optimiser slots without training
    h, e = hidden, batch
    src = b.op("input/source", "IteratorGetNext", [], out_shape=(batch, src_len), pinned="cpu")
    tgt = b.op("input/target", "IteratorGetNext", [], out_shape=(batch, tgt_len), pinned="cpu")
    src_emb, tgt_emb = b.variable("source_embedding", (vocab, h)), b.variable("target_embedding", (vocab, h))
    enc_w = [b.variable(f"encoder{layer}/kernel", (2 * h, 4 * h)) for layer in range(layers)]
    dec_w = [b.variable(f"decoder{layer}/kernel", ((3 if layer == 0 else 2) * h, 4 * h)) for layer in range(layers)]
    keys_w, query_w = b.variable("attention_keys/kernel", (h, h)), b.variable("attention_query/kernel", (h, h))
    score_v = b.variable("attention_score/v", (h,))
    out_w, logits_w = b.variable("attention_out/kernel", (2 * h, h)), b.variable("logits/kernel", (h, vocab))

    top = []  # the encoder's top output per source step
    state: dict[tuple[str, int], str] = {}
    for t in range(src_len):
        x = b.gather(f"source_embedding/t{t}", src_emb, src, (e, h))
        for layer in range(layers):
            x = state["encoder", layer] = _cell(b, f"encoder{layer}/t{t}", x, enc_w[layer],
                                                state.get(("encoder", layer)), batch, h)
        top.append(x)
    keys = [b.op(f"attention_keys/t{t}", "MatMul", [x, keys_w], flops=2 * e * h * h, out_shape=(e, h))
            for t, x in enumerate(top)]

    losses, feed = [], None
    for t in range(tgt_len):
        x = b.gather(f"target_embedding/t{t}", tgt_emb, tgt, (e, h))
        for layer in range(layers):
            extra = [feed] if layer == 0 and feed is not None else []
            x = state["decoder", layer] = _cell(b, f"decoder{layer}/t{t}", x, dec_w[layer],
                                                state.get(("decoder", layer)), batch, h, extra)
        feed = _attend(b, t, x, keys, top, query_w, score_v, out_w, batch, h)
        logits = b.op(f"logits/t{t}", "MatMul", [feed, logits_w], flops=2 * e * h * vocab, out_shape=(e, vocab))
        losses.append(b.op(f"sparse_categorical_crossentropy/t{t}", "SparseSoftmaxCrossEntropyWithLogits",
                           [logits, tgt], flops=5 * e * vocab, out_shape=(e,)))
    loss = b.op("loss/total", "AddN", losses, flops=e * tgt_len, out_shape=())
    if training:
        b.add_backward(loss)
    suffix = "_train" if training else ""
    return b.build(f"nmt_unrolled_layers{layers}_h{hidden}_s{src_len}_t{tgt_len}_b{batch}{suffix}")


def _cell(b: GraphBuilder, scope: str, x: str, kernel: str, previous: str | None, batch: int, h: int,
          extra: list[str] | None = None) -> str:
    """One LSTM cell at one step: the gate MatMul over [input, h(t-1)] and the cell's element-wise ops."""
    recurrent = [previous] if previous is not None else []
    width = b.shape(kernel)[0]
    mm = b.op(f"{scope}/MatMul", "MatMul", [x, *(extra or []), kernel, *recurrent], flops=2 * batch * width * 4 * h,
              out_shape=(batch, 4 * h))
    return b.op(f"{scope}/Cell", "LSTMBlockCell", [mm, *recurrent], flops=10 * batch * 4 * h, out_shape=(2, batch, h))


def _attend(b: GraphBuilder, t: int, query_in: str, keys: list[str], values: list[str], query_w: str,
            score_v: str, out_w: str, batch: int, h: int) -> str:
    """Bahdanau attention of decoder step ``t`` over every source step; returns the attentional output."""
    context = attention_context(b, t, query_in, keys, values, query_w, score_v, batch, h)
    return b.op(f"attention_out/t{t}", "MatMul", [context, query_in, out_w], flops=2 * batch * 2 * h * h,
                out_shape=(batch, h))


def attention_context(b: GraphBuilder, t: int, query_in: str, keys: list[str], values: list[str], query_w: str,
                      score_v: str, batch: int, h: int) -> str:
    """Bahdanau attention (``v . tanh(keys + query)``) of decoder step ``t`` over every source step: the context."""
    src_len = len(keys)
    query = b.op(f"attention_query/t{t}", "MatMul", [query_in, query_w], flops=2 * batch * h * h, out_shape=(batch, h))
    hidden = b.op(f"attention_score/t{t}/Tanh", "Tanh", [query, *keys], flops=2 * batch * src_len * h,
                  out_shape=(batch, src_len, h))
    scores = b.op(f"attention_score/t{t}/Score", "Mul", [hidden, score_v], flops=2 * batch * src_len * h,
                  out_shape=(batch, src_len))
    weights = b.op(f"attention_score/t{t}/Softmax", "Softmax", [scores], flops=5 * batch * src_len,
                   out_shape=(batch, src_len))
    return b.op(f"attention_score/t{t}/Context", "BatchMatMul", [weights, *values], flops=2 * batch * src_len * h,
                out_shape=(batch, h))
