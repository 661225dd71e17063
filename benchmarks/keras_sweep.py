"""Run Keras applications through gplace's TensorFlow paths: import, tf-v1 split runs, SavedModel write-back.

Each model is built with ``weights=None`` at a small input size (nothing is downloaded), batch 2::

    python benchmarks/keras_sweep.py --out benchmarks/keras_sweep.md

Per model, on two logical CPU devices:

- inference: ``from_tensorflow``; tf-v1 runs a placement alternating op by op (colocated and CPU-pinned ops
  kept together) and its outputs equal one device's; whether they are finite; ``save_saved_model`` of that
  placement, loaded in a session with ``session_config``, gives the Keras model's output (atol 1e-5, rtol 1e-4).
- training step (SGD, mean squared error: the defaults for an uncompiled model): ``from_tensorflow(training=True)``;
  tf-v1 split equals one device.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from report_notes import timed_row, write_report  # noqa: E402  (benchmarks/ is on sys.path)

from gplace.export.tensorflow import place_graph_def, save_saved_model, session_config  # noqa: E402
from gplace.importers.tensorflow import from_tensorflow  # noqa: E402
from gplace.ir import Cluster, Device, OpGraph, Placement  # noqa: E402
from gplace.runtime.tf_runtime import TensorFlowRuntime  # noqa: E402
from gplace.testing import alternating  # noqa: E402

APPS = {  # name -> smallest square input side the application accepts (or 32)
    "MobileNetV2": 32, "MobileNetV3Small": 32, "ResNet50": 32, "ResNet50V2": 32, "DenseNet121": 32,
    "EfficientNetB0": 32, "EfficientNetV2B0": 32, "InceptionV3": 75, "Xception": 71, "NASNetMobile": 32,
    "ConvNeXtTiny": 32, "VGG16": 32,
}


def cpus() -> Cluster:
    return Cluster.build([Device(f"/CPU:{i}", "cpu") for i in range(2)], default_bandwidth=1e9, name="2xcpu")


def split_equals_single(g: OpGraph, runtime: TensorFlowRuntime) -> str:
    single = runtime.run(g, cpus(), Placement.single(g, 0))
    split = runtime.run(g, cpus(), alternating(g))
    assert all(np.allclose(a, b, rtol=1e-5, atol=1e-5, equal_nan=True) for a, b in zip(single, split, strict=True)), \
        "tf-v1: split outputs differ from one device"
    floats = [np.asarray(a) for a in single if np.issubdtype(np.asarray(a).dtype, np.floating)]
    return "" if all(np.isfinite(a).all() for a in floats) else " (outputs not finite)"


def saved_model_equals_keras(g: OpGraph, model, x: np.ndarray) -> None:
    placement = alternating(g)
    with tempfile.TemporaryDirectory() as tmp:
        path = save_saved_model(g, cpus(), placement, Path(tmp) / "saved")
        graph = tf.Graph()
        config = session_config(place_graph_def(g, cpus(), placement))
        with graph.as_default(), tf.compat.v1.Session(graph=graph, config=config) as session:
            meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(path))
            signature = meta.signature_def["serving_default"]
            (given,) = signature.inputs.values()
            got = session.run([o.name for o in signature.outputs.values()], {given.name: x})
    want = np.asarray(model(x, training=False))
    assert any(np.allclose(a, want, rtol=1e-4, atol=1e-5) for a in got), "the SavedModel's output differs from Keras"


def check(name: str, runtime: TensorFlowRuntime) -> list[str]:
    """The row's cells: inference, training step."""
    side = APPS[name]
    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, name)(weights=None, input_shape=(side, side, 3), classes=10)
    x = np.random.default_rng(0).random((2, side, side, 3)).astype(np.float32)
    cells = []
    for training in (False, True):
        try:
            g = from_tensorflow(model, batch_size=2, training=training)
            note = split_equals_single(g, runtime)
            if not training:
                saved_model_equals_keras(g, model, x)
                note += ", SavedModel = Keras"
            cells.append(f"ok, {g.num_ops:,} ops{note}")
        except Exception as err:  # noqa: BLE001 - a sweep records every failure
            frame = next((f for f in reversed(traceback.extract_tb(err.__traceback__)) if "gplace" in f.filename), None)
            where = f" ({Path(frame.filename).name}:{frame.lineno})" if frame else ""
            cells.append(f"**{type(err).__name__}**{where}: {str(err).splitlines()[0][:160] if str(err) else ''}")
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="applications (default: all of APPS)")
    parser.add_argument("--out", type=Path, default=None, help="write the report here")
    args = parser.parse_args()
    runtime = TensorFlowRuntime(steps=2, warmup=1, time_limit=120.0)
    rows = [timed_row(name, lambda name=name: [str(APPS[name]), *check(name, runtime)]) for name in args.names or APPS]
    if args.out:
        head = (f"# Keras applications through gplace's TensorFlow paths\n\n"
                f"Made by `python benchmarks/keras_sweep.py --out {args.out}` (see its docstring for each check), "
                f"{time.strftime('%Y-%m-%d')}: TensorFlow {tf.__version__}, Keras {keras.__version__}, Python "
                f"{platform.python_version()}, 2 CPU cores; `weights=None`, batch 2.\n\n"
                "| application | input side | inference: tf-v1 split = one device, SavedModel write-back | "
                "training step: tf-v1 split = one device | s |\n|---|---:|---|---|---:|\n")
        write_report(args.out, head + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
