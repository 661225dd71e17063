"""TensorFlow write-back: a placed Keras model's SavedModel signature feeds each Keras input under its own name,
whatever names TensorFlow gave their placeholders; inputs whose keys would clash are refused, named."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from gplace import UnsupportedGraphError, from_tensorflow  # noqa: E402
from gplace.baselines import RoundRobin  # noqa: E402
from gplace.export.tensorflow import place_graph_def, save_saved_model, session_config  # noqa: E402
from gplace.ir import Cluster, Device  # noqa: E402

pytestmark = pytest.mark.tf

A, B = np.ones((2, 4), np.float32), np.arange(8, dtype=np.float32).reshape(2, 4)


def _placed(first: str, second: str):
    """``first - 2 * second`` as a Keras model of inputs so named, imported and placed on two CPUs."""
    x, y = keras.Input((4,), name=first), keras.Input((4,), name=second)
    model = keras.Model([x, y], x - 2.0 * y)
    graph = from_tensorflow(model, batch_size=2)
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)
    return model, graph, cluster, RoundRobin().place(graph, cluster)


def test_each_keras_input_is_fed_under_its_own_name(tmp_path):
    """"größe" is no node name, so TensorFlow names its placeholder "Placeholder" and the input "Placeholder"
    beside it "Placeholder_1": the key "Placeholder" fed the other input."""
    model, graph, cluster, placement = _placed("größe", "Placeholder")
    assert graph.source.inputs == ("Placeholder:0", "Placeholder_1:0")
    export = save_saved_model(graph, cluster, placement, tmp_path / "m")
    config = session_config(place_graph_def(graph, cluster, placement))
    with tf.compat.v1.Session(graph=tf.Graph(), config=config) as session:
        signature = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(export)).signature_def[
            "serving_default"]
        assert {k: v.name for k, v in signature.inputs.items()} == {"größe": "Placeholder:0",
                                                                    "Placeholder": "Placeholder_1:0"}
        [out] = session.run([o.name for o in signature.outputs.values()],
                            {signature.inputs["größe"].name: A, signature.inputs["Placeholder"].name: B})
    np.testing.assert_allclose(out, model([A, B]).numpy(), rtol=1e-6)
    assert len(from_tensorflow(export).source.inputs) == 2  # tf.saved_model.load takes the keys as argument names


def test_keras_inputs_whose_keys_would_clash_are_refused_naming_them(tmp_path):
    """"in:1" is fed by a placeholder "in_1" and the input "in_1" by "in_1_1": keyed by tensor, "in_1" fed
    "in:1" (Keras [1. 1.], SavedModel [-2. -2.]); "in:1" is no Python name, which ``tf.saved_model.load`` takes it
    as ("in_1"), so the two inputs cannot both keep their names."""
    _, graph, cluster, placement = _placed("in:1", "in_1")
    assert graph.source.inputs == ("in_1:0", "in_1_1:0")
    with pytest.raises(UnsupportedGraphError, match=r"inputs 'in:1' \(tensor 'in_1:0'\) and 'in_1' \(tensor "
                                                    r"'in_1_1:0'\) would share the signature key 'in_1'"):
        save_saved_model(graph, cluster, placement, tmp_path / "m")
    assert not (tmp_path / "m").exists()
