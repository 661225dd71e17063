"""The benchmark zoo: models built locally with ``tf.keras`` and imported as one training step each.

Every graph is a full training step (forward, loss, gradients, optimiser update) imported with
:func:`gplace.importers.tensorflow.from_tensorflow`. Nothing is downloaded: ``keras.applications`` models
have random weights (``weights=None``), the others start at zero (values change neither the graph nor its
timing, and random orthogonal init of large recurrent kernels takes seconds).

The paper's three models at its sizes (Mirhoseini et al., 2017):

- :func:`rnnlm`: a 2-layer LSTM language model, 2048 units, 40 unrolled steps, batch 64.
- :func:`nmt`: an attentional encoder-decoder (Bahdanau attention inside the decoder loop), 2 layers of
  1024, source and target length 40, batch 64.
- :func:`inception_v3`: ``tf.keras.applications.InceptionV3``, batch 32.

and, for scale, :func:`resnet50`, :func:`transformer` (encoder layers), :func:`wavenet` (a dilated causal
convolution stack) and :func:`gnmt8` (8-layer GNMT-like encoder-decoder, tens of thousands of ops).

Recurrent layers are unrolled (the importer does not handle ``While`` loops). Each model trains with the
optimiser of its original recipe by default (RNNLM: Adagrad, as in Jozefowicz et al. 2016; NMT and GNMT:
Adam; Inception-V3: RMSProp; ResNet-50: SGD with momentum); ``optimizer`` takes any Keras optimiser name.

**Cache.** A built graph is stored as gplace JSON under ``${GPLACE_CACHE:-~/.cache/gplace}/zoo/`` named
``<model>-<hash>.json``, the hash covering the model, its parameters, the gplace version and
:data:`ZOO_VERSION` (with neither ``GPLACE_CACHE`` nor a home directory, nothing is cached, with a warning).
Loading a cached graph does not import TensorFlow. A cached graph has no ``source`` (GraphDef); build with
``cache=False`` to get one. Building calls ``keras.backend.clear_session()`` so that layer and op names do not
depend on what was built before in the process.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gplace.ir import GraphError, OpGraph, graph_from_dict, graph_to_dict, load_json, save_json
from gplace.ir.errors import check_sizes

logger = logging.getLogger(__name__)

ZOO_VERSION = 7
"""Bumped whenever a builder or the importer changes what a cached graph holds."""


# ---------------------------------------------------------------------- public builders (cached)
def rnnlm(layers: int = 2, hidden: int = 2048, steps: int = 40, batch: int = 64, vocab: int = 10000,
          optimizer: str = "adagrad", *, cache: bool = True) -> OpGraph:
    """The paper's RNNLM training step: embedding, ``layers`` unrolled LSTMs, a softmax over ``vocab`` words.

    Args:
        layers: LSTM layers. (default: ``2``)
        hidden: units per layer (and embedding size). (default: ``2048``)
        steps: unrolled time steps. (default: ``40``)
        batch: batch size. (default: ``64``)
        vocab: vocabulary size (Penn Treebank's, as in Zaremba et al. 2014). (default: ``10000``)
        optimizer: Keras optimiser name. (default: ``"adagrad"``)
        cache: read and write the on-disk cache. (default: ``True``)
    """
    return _cached("rnnlm", _params(locals()), cache)


def nmt(layers: int = 2, hidden: int = 1024, src_len: int = 40, tgt_len: int = 40, batch: int = 64,
        vocab: int = 32000, optimizer: str = "adam", *, cache: bool = True) -> OpGraph:
    """The paper's attentional NMT training step: LSTM encoder, LSTM decoder with Bahdanau attention.

    Args:
        layers: LSTM layers in the encoder and in the decoder. (default: ``2``)
        hidden: units per layer, embedding and attention size. (default: ``1024``)
        src_len: unrolled source length. (default: ``40``)
        tgt_len: unrolled target length. (default: ``40``)
        batch: batch size. (default: ``64``)
        vocab: source and target vocabulary size (a 32k word-piece vocabulary, as in GNMT). (default: ``32000``)
        optimizer: Keras optimiser name. (default: ``"adam"``)
        cache: read and write the on-disk cache. (default: ``True``)
    """
    return _cached("nmt", _params(locals()), cache)


def inception_v3(batch: int = 32, image_size: int = 299, classes: int = 1000, optimizer: str = "rmsprop", *,
                 cache: bool = True) -> OpGraph:
    """The paper's Inception-V3 training step (``tf.keras.applications.InceptionV3(weights=None)``).

    Args:
        batch: batch size. (default: ``32``)
        image_size: image height and width. (default: ``299``)
        classes: output classes. (default: ``1000``)
        optimizer: Keras optimiser name. (default: ``"rmsprop"``)
        cache: read and write the on-disk cache. (default: ``True``)
    """
    return _cached("inception_v3", _params(locals()), cache)


def resnet50(batch: int = 32, image_size: int = 224, classes: int = 1000, optimizer: str = "sgd_momentum", *,
             cache: bool = True) -> OpGraph:
    """A ResNet-50 training step (``tf.keras.applications.ResNet50(weights=None)``).

    Args:
        batch: batch size. (default: ``32``)
        image_size: image height and width. (default: ``224``)
        classes: output classes. (default: ``1000``)
        optimizer: Keras optimiser name, or ``"sgd_momentum"`` (SGD, momentum 0.9). (default: ``"sgd_momentum"``)
        cache: read and write the on-disk cache. (default: ``True``)
    """
    return _cached("resnet50", _params(locals()), cache)


def transformer(layers: int = 4, d_model: int = 512, heads: int = 8, ff: int = 2048, seq_len: int = 128,
                batch: int = 32, vocab: int = 32000, optimizer: str = "adam", *, cache: bool = True) -> OpGraph:
    """A Transformer encoder language-model training step (post-norm layers, learned positions).

    Args:
        layers: encoder layers. (default: ``4``)
        d_model: model width. (default: ``512``)
        heads: attention heads. (default: ``8``)
        ff: feed-forward width. (default: ``2048``)
        seq_len: sequence length. (default: ``128``)
        batch: batch size. (default: ``32``)
        vocab: vocabulary size. (default: ``32000``)
        optimizer: Keras optimiser name. (default: ``"adam"``)
        cache: read and write the on-disk cache. (default: ``True``)
    """
    return _cached("transformer", _params(locals()), cache)


def wavenet(stacks: int = 3, layers_per_stack: int = 10, residual: int = 64, skip: int = 256,
            length: int = 16000, batch: int = 4, classes: int = 256, optimizer: str = "adam", *,
            cache: bool = True) -> OpGraph:
    """A WaveNet-like training step: ``stacks`` x ``layers_per_stack`` gated, dilated causal convolutions.

    Dilations double within a stack (1, 2, ..., 2**(layers_per_stack-1)); each layer has a residual and a
    skip 1x1 convolution; the summed skips feed two 1x1 convolutions and a softmax over ``classes``
    (mu-law levels).

    Args:
        stacks: dilation stacks. (default: ``3``)
        layers_per_stack: layers per stack. (default: ``10``)
        residual: residual (and dilation) channels. (default: ``64``)
        skip: skip channels. (default: ``256``)
        length: samples per example (1 s at 16 kHz). (default: ``16000``)
        batch: batch size. (default: ``4``)
        classes: output classes. (default: ``256``)
        optimizer: Keras optimiser name. (default: ``"adam"``)
        cache: read and write the on-disk cache. (default: ``True``)
    """
    return _cached("wavenet", _params(locals()), cache)


def gnmt8(layers: int = 8, hidden: int = 1024, src_len: int = 40, tgt_len: int = 40, batch: int = 64,
          vocab: int = 32000, optimizer: str = "adam", *, cache: bool = True) -> OpGraph:
    """A GNMT-like training step (Wu et al. 2016): ``layers``-deep encoder and decoder.

    The encoder's first layer is bidirectional and layers from the third on are residual; the decoder's first
    layer drives Bahdanau attention, whose context feeds every decoder layer. Tens of thousands of ops at the
    defaults; ``layers``, ``src_len`` and ``tgt_len`` scale it.

    Args:
        layers: LSTM layers in the encoder and in the decoder. (default: ``8``)
        hidden: units per layer. (default: ``1024``)
        src_len: unrolled source length. (default: ``40``)
        tgt_len: unrolled target length. (default: ``40``)
        batch: batch size. (default: ``64``)
        vocab: word-piece vocabulary size. (default: ``32000``)
        optimizer: Keras optimiser name. (default: ``"adam"``)
        cache: read and write the on-disk cache. (default: ``True``)
    """
    return _cached("gnmt8", _params(locals()), cache)


def nasnet(batch: int = 32, image_size: int = 224, classes: int = 1000, large: bool = False,
           optimizer: str = "rmsprop", *, cache: bool = True) -> OpGraph:
    """A NASNet-A training step (``tf.keras.applications.NASNetMobile`` or ``NASNetLarge``, ``weights=None``): the
    nearest public relative of AmoebaNet (cells found by architecture search, many parallel branches), which
    GDP evaluates and Keras does not ship.

    Args:
        batch: batch size. (default: ``32``)
        image_size: image height and width. (default: ``224``)
        classes: output classes. (default: ``1000``)
        large: NASNet-A Large (6 @ 4032) instead of Mobile (4 @ 1056). (default: ``False``)
        optimizer: Keras optimiser name. (default: ``"rmsprop"``)
        cache: read and write the on-disk cache. (default: ``True``)
    """
    return _cached("nasnet", _params(locals()), cache)


ZOO: dict[str, Callable[..., OpGraph]] = {
    "rnnlm": rnnlm, "nmt": nmt, "inception_v3": inception_v3, "resnet50": resnet50,
    "transformer": transformer, "wavenet": wavenet, "gnmt8": gnmt8, "nasnet": nasnet,
}
"""Model name -> builder."""


def load_zoo_model(name: str, *, cache: bool = True, **params: Any) -> OpGraph:
    """A zoo model's training-step graph by name (the Hydra ``graph=`` entry point).

    Args:
        name: one of :data:`ZOO`.
        cache: read and write the on-disk cache. (default: ``True``)
        **params: the builder's parameters (e.g. ``batch=16``); the rest take their defaults.

    Raises:
        ValueError: unknown model name (the message lists the names).
        TypeError: a parameter the builder does not take.
    """
    if name not in ZOO:
        raise ValueError(f"unknown zoo model {name!r}; choose one of {sorted(ZOO)}")
    builder = ZOO[name]
    try:
        inspect.signature(builder).bind(**params)
    except TypeError as err:
        raise TypeError(f"zoo model {name!r}: {err}") from None
    return builder(**params, cache=cache)


def cache_path(name: str, params: dict[str, Any]) -> Path:
    """Where the graph of zoo model ``name`` with (all of) ``params`` is cached.

    Raises:
        RuntimeError: ``GPLACE_CACHE`` is unset and the home directory cannot be determined.
    """
    from gplace import __version__

    key = json.dumps({"model": name, "params": params, "gplace": __version__, "zoo": ZOO_VERSION}, sort_keys=True)
    root = Path(os.environ.get("GPLACE_CACHE") or Path.home() / ".cache" / "gplace")
    return root / "zoo" / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"


def build_keras_model(name: str, **params: Any) -> tuple[Any, Any]:
    """The Keras model of a zoo entry and its loss, uncompiled, with untrained weights.

    Args:
        name: one of :data:`ZOO`.
        **params: the builder's model parameters (not ``optimizer`` or ``cache``).

    Returns:
        ``(keras.Model, loss)``; the model's inputs have a fixed batch size where the builder fixes one.
    """
    if name not in _MODELS:
        raise ValueError(f"unknown zoo model {name!r}; choose one of {sorted(_MODELS)}")
    keras = _keras()
    defaults = {k: p.default for k, p in inspect.signature(ZOO[name]).parameters.items()
                if k not in ("optimizer", "cache")}
    with _float32_keras(keras):
        keras.backend.clear_session()
        return _MODELS[name](keras, **{**defaults, **params})


@contextlib.contextmanager
def _float32_keras(keras: Any) -> Iterator[None]:
    """Keras's global dtype policy and ``floatx`` at float32 inside (the zoo's graphs do not depend on the
    caller's), and given back after (``clear_session`` reset them: a caller's ``mixed_bfloat16`` became float32)."""
    policy, floatx = keras.mixed_precision.global_policy(), keras.config.floatx()
    try:
        keras.config.set_floatx("float32")
        keras.mixed_precision.set_global_policy("float32")
        yield
    finally:
        keras.config.set_floatx(floatx)
        keras.mixed_precision.set_global_policy(policy)


# ---------------------------------------------------------------------- caching and building
def _params(local_vars: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in local_vars.items() if k != "cache"}


def _cached(name: str, params: dict[str, Any], cache: bool) -> OpGraph:
    check_sizes(name, 1, **{k: v for k, v in params.items() if k not in ("optimizer", "large")})  # before TF loads
    if not isinstance(params.get("large", False), bool):
        raise ValueError(f"{name}: large must be a bool, got {params['large']!r}")
    path = _usable_cache_path(name, params) if cache else None
    if path is not None and path.is_file():
        logger.info("zoo model %r: loading cached %s", name, path)
        try:
            return graph_from_dict(load_json(path))
        except GraphError as err:  # a truncated or stale file: build it again
            logger.warning("zoo model %r: ignoring unreadable cache file %s (%s)", name, path, err)
    start = time.perf_counter()
    graph = _build(name, params)
    logger.info("zoo model %r: built %d ops in %.1f s", name, graph.num_ops, time.perf_counter() - start)
    if path is not None:
        try:
            save_json(graph_to_dict(graph), path)
        except OSError as err:  # a read-only or full cache: the graph is built all the same
            logger.warning("zoo model %r: could not cache it at %s (%s)", name, path, err)
    return graph


def _usable_cache_path(name: str, params: dict[str, Any]) -> Path | None:
    """:func:`cache_path`, or ``None`` (with a warning) where it has no home directory to go under or its name is
    one the file system refuses (too long)."""
    try:
        path = cache_path(name, params)
        path.is_file()  # a name too long for the file system (GPLACE_CACHE) raises here, not in the caller
        return path
    except (RuntimeError, OSError) as err:  # RuntimeError: HOME unset and the uid not in the password database
        logger.warning("zoo model %r: not caching it (%s; set GPLACE_CACHE to a directory)", name, err)
        return None


def _build(name: str, params: dict[str, Any]) -> OpGraph:
    from gplace.importers.tensorflow import from_tensorflow

    model_params = {k: v for k, v in params.items() if k != "optimizer"}
    model, loss = build_keras_model(name, **model_params)
    label = "_".join([name, *(f"{k}{v}" for k, v in params.items())])
    return from_tensorflow(model, training=True, batch_size=params["batch"], loss=loss,
                           optimizer=_optimizer(params["optimizer"]), name=label)


def _optimizer(name: str) -> Any:
    keras = _keras()
    if name == "sgd_momentum":
        return keras.optimizers.SGD(learning_rate=0.1, momentum=0.9)
    return keras.optimizers.get(name)


def _keras() -> Any:
    from gplace.tensorflow_setup import import_tensorflow

    return import_tensorflow().keras


def _sparse_ce(keras: Any, from_logits: bool = True) -> Any:
    return keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits)


# ---------------------------------------------------------------------- Keras models
_ZEROS = {"kernel_initializer": "zeros", "recurrent_initializer": "zeros"}
"""Weights start at zero: their values change neither the graph nor its timing, and random (orthogonal) init of
the large recurrent kernels takes seconds."""


def _lstm(keras: Any, hidden: int, name: str, **kwargs: Any) -> Any:
    return keras.layers.LSTM(hidden, return_sequences=True, unroll=True, use_cudnn=False, name=name, **_ZEROS,
                             **kwargs)


def _lstm_cell(keras: Any, hidden: int, name: str) -> Any:
    return keras.layers.LSTMCell(hidden, name=name, **_ZEROS)


def _dense(keras: Any, units: int, name: str, **kwargs: Any) -> Any:
    return keras.layers.Dense(units, name=name, kernel_initializer="zeros", **kwargs)


def _embedding(keras: Any, vocab: int, dim: int, name: str) -> Any:
    return keras.layers.Embedding(vocab, dim, name=name, embeddings_initializer="zeros")


def _rnnlm_model(keras: Any, layers: int, hidden: int, steps: int, batch: int, vocab: int) -> tuple[Any, Any]:
    tokens = keras.Input((steps,), batch_size=batch, dtype="int32", name="tokens")
    x = _embedding(keras, vocab, hidden, "embedding")(tokens)
    for i in range(layers):
        x = _lstm(keras, hidden, f"lstm{i}")(x)
    logits = _dense(keras, vocab, "logits")(x)
    return keras.Model(tokens, logits, name="rnnlm"), _sparse_ce(keras)


def _nmt_model(keras: Any, layers: int, hidden: int, src_len: int, tgt_len: int, batch: int,
               vocab: int) -> tuple[Any, Any]:
    src, tgt, enc, states = _encoder(keras, layers, hidden, src_len, tgt_len, batch, vocab, bidirectional=False)
    logits = _attention_decoder(keras, tgt, enc, states, hidden, vocab, residual_from=None)
    return keras.Model([src, tgt], logits, name="nmt"), _sparse_ce(keras)


def _gnmt8_model(keras: Any, layers: int, hidden: int, src_len: int, tgt_len: int, batch: int,
                 vocab: int) -> tuple[Any, Any]:
    src, tgt, enc, states = _encoder(keras, layers, hidden, src_len, tgt_len, batch, vocab, bidirectional=True)
    logits = _attention_decoder(keras, tgt, enc, states, hidden, vocab, residual_from=2)
    return keras.Model([src, tgt], logits, name="gnmt"), _sparse_ce(keras)


def _encoder(keras: Any, layers: int, hidden: int, src_len: int, tgt_len: int, batch: int, vocab: int,
             bidirectional: bool) -> tuple[Any, Any, Any, list[list[Any]]]:
    """Source and target token inputs, the encoder's outputs and each layer's final ``[h, c]``.

    With ``bidirectional``, layer 0 reads the source both ways (half the units each way), and
    layers from the third on add their input to their output (GNMT's residual connections).
    """
    src = keras.Input((src_len,), batch_size=batch, dtype="int32", name="source")
    tgt = keras.Input((tgt_len,), batch_size=batch, dtype="int32", name="target_in")
    x = _embedding(keras, vocab, hidden, "source_embedding")(src)
    states = []
    for i in range(layers):
        if i == 0 and bidirectional:
            layer = keras.layers.Bidirectional(_lstm(keras, hidden // 2, "encoder0", return_state=True),
                                               name="encoder0_bidi")
            y, h_fwd, c_fwd, h_bwd, c_bwd = layer(x)
            h = keras.layers.Concatenate(name="encoder0_h")([h_fwd, h_bwd])
            c = keras.layers.Concatenate(name="encoder0_c")([c_fwd, c_bwd])
        else:
            y, h, c = _lstm(keras, hidden, f"encoder{i}", return_state=True)(x)
        x = keras.layers.Add(name=f"encoder{i}_residual")([x, y]) if bidirectional and i >= 2 else y
        states.append([h, c])
    return src, tgt, x, states


def _attention_decoder(keras: Any, tgt: Any, enc: Any, states: list[list[Any]], hidden: int, vocab: int,
                       residual_from: int | None) -> Any:
    """An unrolled LSTM decoder; layer 0's output attends over ``enc`` (Bahdanau) and feeds the context on.

    Returns:
        Logits ``(batch, tgt_len, vocab)``.
    """
    ops = keras.ops
    cells = [_lstm_cell(keras, hidden, f"decoder{i}") for i in range(len(states))]
    keys = _dense(keras, hidden, "attention_keys", use_bias=False)(enc)
    query_proj = _dense(keras, hidden, "attention_query")
    score_proj = _dense(keras, 1, "attention_score", use_bias=False)
    emb = _embedding(keras, vocab, hidden, "target_embedding")(tgt)
    context = ops.zeros_like(states[0][0])
    outputs = []
    for t in range(tgt.shape[1]):
        x, states[0] = cells[0](ops.concatenate([emb[:, t, :], context], axis=-1), states[0])
        scores = score_proj(ops.tanh(keys + ops.expand_dims(query_proj(x), 1)))
        context = ops.sum(ops.softmax(scores, axis=1) * enc, axis=1)
        for i in range(1, len(cells)):
            y, states[i] = cells[i](ops.concatenate([x, context], axis=-1), states[i])
            x = x + y if residual_from is not None and i >= residual_from else y
        outputs.append(ops.concatenate([x, context], axis=-1))
    hidden_out = _dense(keras, hidden, "attention_out", activation="tanh")(ops.stack(outputs, axis=1))
    return _dense(keras, vocab, "logits")(hidden_out)


def _inception_v3_model(keras: Any, batch: int, image_size: int, classes: int) -> tuple[Any, Any]:
    model = keras.applications.InceptionV3(weights=None, input_shape=(image_size, image_size, 3), classes=classes,
                                           classifier_activation=None)
    return model, _sparse_ce(keras)


def _nasnet_model(keras: Any, batch: int, image_size: int, classes: int, large: bool) -> tuple[Any, Any]:
    build = keras.applications.NASNetLarge if large else keras.applications.NASNetMobile
    model = build(weights=None, input_shape=(image_size, image_size, 3), classes=classes, classifier_activation=None)
    return model, _sparse_ce(keras)


def _resnet50_model(keras: Any, batch: int, image_size: int, classes: int) -> tuple[Any, Any]:
    model = keras.applications.ResNet50(weights=None, input_shape=(image_size, image_size, 3), classes=classes,
                                        classifier_activation=None)
    return model, _sparse_ce(keras)


def _transformer_model(keras: Any, layers: int, d_model: int, heads: int, ff: int, seq_len: int, batch: int,
                       vocab: int) -> tuple[Any, Any]:
    L = keras.layers
    tokens = keras.Input((seq_len,), batch_size=batch, dtype="int32", name="tokens")
    positions = L.Embedding(seq_len, d_model, name="positions")(keras.ops.arange(seq_len)[None, :])
    x = _embedding(keras, vocab, d_model, "embedding")(tokens) + positions
    for i in range(layers):
        attn = L.MultiHeadAttention(heads, d_model // heads, name=f"layer{i}_attention")(x, x, use_causal_mask=True)
        x = L.LayerNormalization(name=f"layer{i}_norm1")(x + attn)
        y = L.Dense(ff, activation="relu", name=f"layer{i}_ff1")(x)
        x = L.LayerNormalization(name=f"layer{i}_norm2")(x + L.Dense(d_model, name=f"layer{i}_ff2")(y))
    logits = _dense(keras, vocab, "logits")(x)
    return keras.Model(tokens, logits, name="transformer"), _sparse_ce(keras)


def _wavenet_model(keras: Any, stacks: int, layers_per_stack: int, residual: int, skip: int, length: int,
                   batch: int, classes: int) -> tuple[Any, Any]:
    L = keras.layers
    audio = keras.Input((length, 1), batch_size=batch, name="audio")
    x = L.Conv1D(residual, 2, padding="causal", name="causal_in")(audio)
    skips = []
    for s in range(stacks):
        for i in range(layers_per_stack):
            name, rate = f"s{s}_l{i}", 2**i
            f = L.Conv1D(residual, 2, dilation_rate=rate, padding="causal", activation="tanh", name=f"{name}_filter")(x)
            g = L.Conv1D(residual, 2, dilation_rate=rate, padding="causal", activation="sigmoid",
                         name=f"{name}_gate")(x)
            z = L.Multiply(name=f"{name}_gated")([f, g])
            skips.append(L.Conv1D(skip, 1, name=f"{name}_skip")(z))
            x = L.Add(name=f"{name}_residual")([x, L.Conv1D(residual, 1, name=f"{name}_res")(z)])
    y = L.Activation("relu")(L.Add(name="skips")(skips))
    y = L.Conv1D(skip, 1, activation="relu", name="post1")(y)
    logits = L.Conv1D(classes, 1, name="post2")(y)
    return keras.Model(audio, logits, name="wavenet"), _sparse_ce(keras)


_MODELS: dict[str, Callable[..., tuple[Any, Any]]] = {
    "rnnlm": _rnnlm_model, "nmt": _nmt_model, "inception_v3": _inception_v3_model, "resnet50": _resnet50_model,
    "transformer": _transformer_model, "wavenet": _wavenet_model, "gnmt8": _gnmt8_model,
    "nasnet": _nasnet_model,
}
