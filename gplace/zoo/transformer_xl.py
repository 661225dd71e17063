"""A Transformer-XL training step (Dai et al. 2019): segment recurrence with relative positions, one of GDP's
workloads.

Each layer attends over the concatenation of its cached memory (the previous segment's input to that layer, an
input of the step with no gradient: TensorFlow's ``stop_gradient``) and the current segment. Attention is split
per head (content score ``q . k`` with its bias ``u``, position score ``q . r`` with its bias ``v`` and the
relative shift, softmax, context), as the reference TensorFlow code's einsums run per head; then the output
projection, a residual and LayerNorm, the position-wise feed-forward, a residual and LayerNorm. Each layer's
input is also written out as the next segment's memory. A plain softmax over ``vocab`` and a loss close the
step (the reference uses an adaptive softmax). Default sizes: the paper's WikiText-103 base model.
"""

from __future__ import annotations

import math

from gplace.ir import OpGraph
from gplace.ir.errors import check_flags, check_sizes
from gplace.zoo.builder import F32, GraphBuilder


def transformer_xl(
    layers: int = 16, d_model: int = 410, heads: int = 10, ff: int = 2100, seg_len: int = 150, mem_len: int = 150,
    batch: int = 60, vocab: int = 32000, optimizer: str = "adam", training: bool = True,
) -> OpGraph:
    """``layers`` Transformer-XL layers over one segment of ``seg_len`` tokens with ``mem_len`` cached ones.

    With ``training``, the backward pass and an update per variable (:meth:`GraphBuilder.add_backward`); the
    memories get no gradient. Costs are roofline times on a K80 GPU and a Haswell CPU.

    Raises:
        ValueError: ``heads`` does not divide ``d_model``, a size that is not a whole number >= 1 (``mem_len``:
            >= 0), by name.
    """
    check_sizes("transformer_xl", layers=layers, d_model=d_model, heads=heads, ff=ff, seg_len=seg_len, batch=batch,
                vocab=vocab)
    check_sizes("transformer_xl", 0, mem_len=mem_len)
    check_flags("transformer_xl", training=training)
    if d_model % heads:
        raise ValueError(f"heads ({heads}) must divide d_model ({d_model})")
    GraphBuilder(optimizer)  # an unknown optimiser is named, training or not
    b = GraphBuilder(optimizer if training else "sgd")  # no optimiser slots without training
    e, s, k, dh = batch, seg_len, seg_len + mem_len, d_model // heads
    tokens = b.op("input/tokens", "IteratorGetNext", [], out_shape=(e, s), pinned="cpu")
    table = b.variable("embedding", (vocab, d_model))
    x = b.gather("embedding/lookup", table, tokens, (e, s, d_model))
    positions = b.op("position/relative", "Sinusoid", [], flops=4 * k * d_model, out_shape=(k, d_model))
    for layer in range(layers):
        scope = f"layer{layer}"
        memory = b.op(f"{scope}/memory", "Placeholder", [], out_shape=(e, mem_len, d_model))
        b.op(f"{scope}/new_memory", "StopGradient", [x], out_shape=(e, s, d_model))
        x = _layer(b, scope, x, memory, positions, e, s, k, d_model, heads, dh, ff)
    out_w = b.variable("softmax/kernel", (d_model, vocab))
    logits = b.op("softmax/logits", "MatMul", [x, out_w], flops=2 * e * s * d_model * vocab, out_shape=(e, s, vocab))
    loss = b.op("loss", "SparseSoftmaxCrossEntropyWithLogits", [logits, tokens], flops=5 * e * s * vocab,
                out_shape=())
    if training:
        b.add_backward(loss)
    suffix = "_train" if training else ""
    return b.build(f"transformer_xl_layers{layers}_d{d_model}_h{heads}_s{seg_len}_m{mem_len}_b{batch}{suffix}")


def _layer(b: GraphBuilder, scope: str, x: str, memory: str, positions: str, e: int, s: int, k: int, d: int,
           heads: int, dh: int, ff: int) -> str:
    """One layer: relative multi-head attention over [memory, x], then the feed-forward; returns its output."""
    w = {name: b.variable(f"{scope}/{name}", shape) for name, shape in (
        ("q", (d, d)), ("k", (d, d)), ("v", (d, d)), ("r", (d, d)), ("o", (d, d)), ("u_bias", (heads, dh)),
        ("v_bias", (heads, dh)), ("ff1", (d, ff)), ("ff2", (ff, d)), ("norm1", (2, d)), ("norm2", (2, d)))}
    keys_in = b.op(f"{scope}/attention/concat_memory", "ConcatV2", [memory, x], out_shape=(e, k, d))
    q = b.op(f"{scope}/attention/q", "MatMul", [x, w["q"]], flops=2 * e * s * d * d, out_shape=(e, s, d))
    key = b.op(f"{scope}/attention/k", "MatMul", [keys_in, w["k"]], flops=2 * e * k * d * d, out_shape=(e, k, d))
    value = b.op(f"{scope}/attention/v", "MatMul", [keys_in, w["v"]], flops=2 * e * k * d * d, out_shape=(e, k, d))
    r = b.op(f"{scope}/attention/r", "MatMul", [positions, w["r"]], flops=2 * k * d * d, out_shape=(k, d))
    contexts = []
    part = {t: F32 * math.prod(b.shape(t)) // heads for t in (q, key, value, r)}  # one head's slice of each
    for h in range(heads):
        head = f"{scope}/attention/head{h}"
        content = b.op(f"{head}/content_score", "BatchMatMul", [q, key, w["u_bias"]], flops=2 * e * s * k * dh,
                       out_shape=(e, s, k), receives={q: part[q], key: part[key]})
        position = b.op(f"{head}/position_score", "BatchMatMul", [q, r, w["v_bias"]], flops=2 * e * s * k * dh,
                        out_shape=(e, s, k), receives={q: part[q], r: part[r]})
        shifted = b.op(f"{head}/rel_shift", "RelShift", [position], flops=e * s * k, out_shape=(e, s, k))
        weights = b.op(f"{head}/softmax", "Softmax", [content, shifted], flops=7 * e * s * k, out_shape=(e, s, k))
        contexts.append(b.op(f"{head}/context", "BatchMatMul", [weights, value], flops=2 * e * s * k * dh,
                             out_shape=(e, s, dh), receives={value: part[value]}))
    joined = b.op(f"{scope}/attention/concat_heads", "ConcatV2", contexts, out_shape=(e, s, d))
    projected = b.op(f"{scope}/attention/o", "MatMul", [joined, w["o"]], flops=2 * e * s * d * d, out_shape=(e, s, d))
    x = _add_norm(b, f"{scope}/attention", projected, x, w["norm1"], e * s, (e, s, d))
    hidden = b.op(f"{scope}/ff/ff1", "MatMul", [x, w["ff1"]], flops=2 * e * s * d * ff, out_shape=(e, s, ff))
    hidden = b.op(f"{scope}/ff/relu", "Relu", [hidden], flops=e * s * ff, out_shape=(e, s, ff))
    out = b.op(f"{scope}/ff/ff2", "MatMul", [hidden, w["ff2"]], flops=2 * e * s * ff * d, out_shape=(e, s, d))
    return _add_norm(b, f"{scope}/ff", out, x, w["norm2"], e * s, (e, s, d))


def _add_norm(b: GraphBuilder, scope: str, y: str, x: str, scale: str, rows: int, shape: tuple[int, ...]) -> str:
    """``LayerNorm(x + y)``."""
    total = b.op(f"{scope}/residual", "Add", [y, x], flops=rows * shape[-1], out_shape=shape)
    return b.op(f"{scope}/layer_norm", "LayerNorm", [total, scale], flops=8 * rows * shape[-1], out_shape=shape)
