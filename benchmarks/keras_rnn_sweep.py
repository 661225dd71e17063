"""Keras recurrent layers (their time loops TensorFlow 2 ``While`` ops) through gplace's TensorFlow paths.

Run from the repository root: ``python benchmarks/keras_rnn_sweep.py [--out benchmarks/keras_rnn_sweep.md]``.

Each model (random weights, batch 2) is imported for inference and as a training step (``from_tensorflow``, each
time loop one op); then, as in ``keras_sweep.py``: tf-v1 under a split placement (``gplace.testing.alternating``)
gives Keras's output, the SavedModel write-back gives Keras's output, and the training step split gives the
one-device step's values; finally ``pipe-v3`` (2 micro-batches) measures the training step split, which needs its
phases to be consistent (no backward op feeding a forward one). Each cell says ``ok`` or the failure.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras_sweep import cpus, saved_model_equals_keras  # noqa: E402
from report_notes import timed_row, write_report  # noqa: E402

from gplace import Placement, from_tensorflow  # noqa: E402
from gplace.pipeline import PipelineSimulator  # noqa: E402
from gplace.runtime.tf_runtime import TensorFlowRuntime  # noqa: E402
from gplace.testing import alternating  # noqa: E402

keras = tf.keras
layers = keras.layers


def _sequential(*body, shape=(10, 8), dtype="float32"):
    return keras.Sequential([keras.Input(shape, batch_size=2, dtype=dtype), *body])


MODELS = {
    "SimpleRNN": lambda: _sequential(layers.SimpleRNN(16), layers.Dense(4)),
    "LSTM x2 (stacked)": lambda: _sequential(layers.LSTM(16, return_sequences=True), layers.LSTM(16), layers.Dense(4)),
    "Bidirectional LSTM": lambda: _sequential(layers.Bidirectional(layers.LSTM(8)), layers.Dense(4)),
    "GRU + TimeDistributed": lambda: _sequential(layers.GRU(8, return_sequences=True),
                                                 layers.TimeDistributed(layers.Dense(3))),
    "Embedding + LSTM": lambda: _sequential(layers.Embedding(50, 8), layers.LSTM(8), layers.Dense(2), shape=(10,),
                                            dtype="int32"),
    "ConvLSTM1D": lambda: _sequential(layers.ConvLSTM1D(4, 3), layers.Flatten(), layers.Dense(2), shape=(5, 12, 3)),
}


def _input(model) -> np.ndarray:
    shape = (2, *model.input_shape[1:])
    rng = np.random.default_rng(0)
    if isinstance(model.layers[0], layers.Embedding):  # token ids
        return rng.integers(0, 50, shape).astype(np.int32)
    return rng.random(shape, np.float32)


def check(model, runtime: TensorFlowRuntime) -> list[str]:
    """The row's cells: ops (inference / training), loops, inference, write-back, training split, pipe-v3."""
    x = _input(model)
    g = from_tensorflow(model)
    [out] = runtime.run(g, cpus(), alternating(g), feeds={g.source.inputs[0]: x})
    inference = "ok" if np.allclose(out, model(x).numpy(), rtol=1e-5, atol=1e-5) else "differs from Keras"
    saved_model_equals_keras(g, model, x)
    model.compile(loss="mse", optimizer="adam")
    train = from_tensorflow(model, training=True)
    single = runtime.run(train, cpus(), Placement.single(train, 0))
    split = runtime.run(train, cpus(), alternating(train))
    same = all(np.allclose(a, b, rtol=1e-5, atol=1e-5) for a, b in zip(single, split, strict=True))
    pipe = PipelineSimulator(microbatches=2).measure(train, cpus(), alternating(train))
    return [f"{g.num_ops} / {train.num_ops}", str(g.op_types.count("While")), inference, "ok",
            "ok" if same else "differs from one device", "ok" if pipe.ok else pipe.reason]


def attempt(build, runtime: TensorFlowRuntime) -> list[str]:
    """:func:`check` of the model ``build()`` makes; a failure fills the row's first cell and the sweep goes on."""
    try:
        return check(build(), runtime)
    except Exception as err:  # a row records the failure and the sweep goes on
        return [f"{type(err).__name__}: {err}"[:200], "", "", "", "", ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="write the report here")
    args = parser.parse_args()
    keras.utils.set_random_seed(0)
    runtime = TensorFlowRuntime(steps=1, warmup=0, time_limit=120.0)
    rows = [timed_row(name, lambda build=build: attempt(build, runtime)) for name, build in MODELS.items()]
    if args.out:
        head = (f"# Keras recurrent layers through gplace's TensorFlow paths\n\n"
                f"Made by `python benchmarks/keras_rnn_sweep.py --out {args.out}` (see its docstring for each "
                f"check), {time.strftime('%Y-%m-%d')}: TensorFlow {tf.__version__}, Keras {keras.__version__}, "
                f"Python {platform.python_version()}, 2 CPU cores; random weights, batch 2, `unroll=False` (each "
                "time loop one `While` op).\n\n"
                "| model | ops: inference / training | loops | inference: tf-v1 split = Keras | SavedModel "
                "write-back = Keras | training step: tf-v1 split = one device | pipe-v3 (M = 2) | s |\n"
                "|---|---:|---:|---|---|---|---|---:|\n")
        write_report(args.out, head + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
