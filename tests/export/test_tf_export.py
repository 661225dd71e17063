"""TensorFlow write-back: import a tf.function, place it, set NodeDef.device, run it on two CPU devices."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")

from gplace import InvalidPlacementError, Placement, UnsupportedGraphError, from_tensorflow  # noqa: E402
from gplace.baselines import RoundRobin  # noqa: E402
from gplace.export.tensorflow import place_graph_def, save_saved_model, session_config  # noqa: E402
from gplace.ir import Cluster, Device  # noqa: E402
from gplace.testing import random_dag  # noqa: E402

pytestmark = pytest.mark.tf

RNG = np.random.default_rng(0)
W1, W2 = RNG.standard_normal((4, 8)).astype(np.float32), RNG.standard_normal((8, 3)).astype(np.float32)
X = RNG.standard_normal((2, 4)).astype(np.float32)


@tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
def mlp(x):
    return tf.matmul(tf.tanh(tf.matmul(x, tf.constant(W1))), tf.constant(W2))


@pytest.fixture(scope="module")
def imported():
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9, name="2xcpu")
    return from_tensorflow(mlp, name="mlp"), cluster


def _alternating(graph):
    """Ops on the two devices in turn, colocation groups kept whole."""
    return RoundRobin().place(graph, Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")],
                                                   default_bandwidth=1e9))


def test_placed_graph_def_runs_on_each_device_with_the_original_outputs(imported):
    graph, cluster = imported
    placed = place_graph_def(graph, cluster, _alternating(graph))
    placement = _alternating(graph)
    assert {n.name: n.device for n in placed.node} == {
        op: f"/device:CPU:{d}" for op, d in zip(graph.op_names, placement.devices.tolist(), strict=True)}
    assert set(placement.devices.tolist()) == {0, 1}
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.graph_util.import_graph_def(placed, name="")
    source = graph.source
    with tf.compat.v1.Session(graph=tf_graph, config=session_config(placed)) as session:
        options, metadata = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE), \
            tf.compat.v1.RunMetadata()
        [out] = session.run(list(source.outputs), {source.inputs[0]: X}, options=options, run_metadata=metadata)
    ran_on = {s.device.rpartition("/")[2] for s in metadata.step_stats.dev_stats if s.node_stats}
    assert {"device:CPU:0", "device:CPU:1"} <= ran_on
    np.testing.assert_allclose(out, mlp(X).numpy(), rtol=1e-5)
    assert not any(n.device for n in source.graph_def.node)  # the imported GraphDef is untouched


def test_bad_placements_and_devices_are_named(imported):
    graph, cluster = imported
    with pytest.raises(InvalidPlacementError, match="placement was made for graph"):
        place_graph_def(graph, cluster, Placement.single(random_dag(graph.num_ops), 0))
    odd = Cluster.build([Device("/CPU:0", "cpu"), Device("tpu_core", "cpu")], default_bandwidth=1e9)
    with pytest.raises(InvalidPlacementError, match="'tpu_core' maps to no TensorFlow device"):
        place_graph_def(graph, odd, _alternating(graph))
    assert place_graph_def(graph, odd, _alternating(graph), device_map={"tpu_core": "/CPU:1"}).node


def test_a_graph_not_from_tensorflow_is_refused():
    graph = random_dag(4)
    with pytest.raises(UnsupportedGraphError, match="not imported from TensorFlow"):
        place_graph_def(graph, Cluster.build([Device("/CPU:0", "cpu")]), Placement.single(graph, 0))


class Dense(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1, self.w2 = tf.Variable(W1, name="w1"), tf.Variable(W2, name="w2")

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
    def __call__(self, x):
        return tf.matmul(tf.tanh(tf.matmul(x, self.w1)), self.w2)


def test_a_saved_model_comes_back_as_a_placed_saved_model_with_its_weights(tmp_path, imported):
    cluster = imported[1]
    module = Dense()
    tf.saved_model.save(module, str(tmp_path / "original"), signatures=module.__call__)
    graph = from_tensorflow(tmp_path / "original")
    assert set(graph.source.variables) == {"w1", "w2"}
    placement = _alternating(graph)
    export = save_saved_model(graph, cluster, placement, tmp_path / "placed")
    expected = {op: f"/device:CPU:{d}" for op, d in zip(graph.op_names, placement.devices.tolist(), strict=True)}
    with tf.compat.v1.Session(graph=tf.Graph(), config=session_config(place_graph_def(graph, cluster, placement))
                              ) as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(export))
        signature = meta.signature_def["serving_default"]
        devices = {op.name: op.device for op in session.graph.get_operations() if op.name in expected}
        [out] = session.run([signature.outputs[k].name for k in signature.outputs], {signature.inputs["x"].name: X})
    assert devices == expected and set(expected.values()) == {"/device:CPU:0", "/device:CPU:1"}
    np.testing.assert_allclose(out, module(X).numpy(), rtol=1e-5)
    with pytest.raises(FileExistsError, match="exists"):
        save_saved_model(graph, cluster, placement, export)


def test_a_keras_lstm_comes_back_as_a_placed_saved_model(tmp_path, imported):
    """A Keras LSTM, its time loop one While op placed with its weights, written back as a SavedModel whose
    output is Keras's."""
    keras = tf.keras
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6, 4), batch_size=2), keras.layers.LSTM(8), keras.layers.Dense(3)])
    graph, cluster = from_tensorflow(model), imported[1]
    placement = _alternating(graph)
    export = save_saved_model(graph, cluster, placement, tmp_path / "placed")
    x = np.random.default_rng(1).standard_normal((2, 6, 4)).astype(np.float32)
    np.testing.assert_allclose(_serve(export, graph, cluster, placement, x), model(x).numpy(), rtol=1e-5, atol=1e-6)


def test_a_graph_def_without_weights_cannot_become_a_saved_model(tmp_path, imported):
    cluster = imported[1]
    v1 = tf.Graph()
    with v1.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 4], name="x")
        w = tf.compat.v1.get_variable("w", initializer=W1, use_resource=True)
        tf.matmul(x, w, name="y")
    graph = from_tensorflow(v1.as_graph_def(), name="bare", outputs=["y"])
    with pytest.raises(UnsupportedGraphError, match="has no value"):
        save_saved_model(graph, cluster, Placement.single(graph, 0), tmp_path / "x")


def test_two_outputs_of_one_op_keep_two_signature_keys(tmp_path, imported):
    """'split:0' and 'split:1' both became the key 'split' and the second replaced the first (one output lost)."""
    cluster = imported[1]
    v1 = tf.Graph()
    with v1.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 8], name="x")
        tf.split(tf.nn.relu(x), 2, axis=1, name="split")
    graph = from_tensorflow(v1.as_graph_def(), outputs=["split:0", "split:1"])
    export = save_saved_model(graph, cluster, Placement.single(graph, 0), tmp_path / "placed")
    given = np.arange(32, dtype=np.float32).reshape(4, 8) - 16
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        signature = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(export)).signature_def[
            "serving_default"]
        assert set(signature.outputs) == {"split", "split_1"}
        left, right = session.run([signature.outputs[k].name for k in ("split", "split_1")],
                                  {signature.inputs["x"].name: given})
    np.testing.assert_array_equal(np.concatenate([left, right], 1), np.maximum(given, 0))


def test_a_captured_lookup_table_cannot_become_a_saved_model(tmp_path, imported):
    """The SavedModel was written with the table a placeholder nobody could feed; it failed when run."""
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant([1, 2], tf.int64), tf.constant([10.0, 20.0])), -1.0)

    @tf.function(input_signature=[tf.TensorSpec([2], tf.int64, name="ids")])
    def lookup(ids):
        return table.lookup(ids) * 2.0

    graph = from_tensorflow(lookup)
    with pytest.raises(UnsupportedGraphError, match="is a captured resource"):
        save_saved_model(graph, imported[1], Placement.single(graph, 0), tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_the_session_config_takes_gpu_memory_as_needed(imported):
    """It left TensorFlow's default, which reserves most of every GPU when the session starts (tf-v1 sets memory
    growth itself; a user loading the exported program with this config did not get it)."""
    graph, cluster = imported
    config = session_config(place_graph_def(graph, cluster, _alternating(graph)))
    assert config.gpu_options.allow_growth and not config.allow_soft_placement


@tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
def dense_relu(x):
    return tf.nn.relu(tf.nn.bias_add(tf.matmul(x, tf.constant(W1)), tf.ones([8])))


def test_ops_grappler_would_fuse_across_devices_run_where_placed():
    """Grappler's remapper fused MatMul + BiasAdd + Relu into one op on the MatMul's device: BiasAdd and Relu,
    placed on /CPU:1, ran on /CPU:0 under this config."""
    graph = from_tensorflow(dense_relu, name="dense_relu")
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)
    placement = Placement.from_names(graph, cluster, {op: "/CPU:1" if op in ("BiasAdd", "Relu") else "/CPU:0"
                                                      for op in graph.op_names})
    placed = place_graph_def(graph, cluster, placement)
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.graph_util.import_graph_def(placed, name="")
    source = graph.source
    with tf.compat.v1.Session(graph=tf_graph, config=session_config(placed)) as session:
        metadata = tf.compat.v1.RunMetadata()
        [out] = session.run(list(source.outputs), {source.inputs[0]: X}, run_metadata=metadata,
                            options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE))
    ran_on = {n.node_name: s.device.rpartition("/")[2] for s in metadata.step_stats.dev_stats for n in s.node_stats
              if n.node_name in ("MatMul", "BiasAdd", "Relu")}
    assert ran_on == {"MatMul": "device:CPU:0", "BiasAdd": "device:CPU:1", "Relu": "device:CPU:1"}
    np.testing.assert_allclose(out, dense_relu(X).numpy(), rtol=1e-5)


def test_a_graph_def_output_named_by_its_node_becomes_a_signature_tensor(tmp_path):
    """``outputs=["y"]`` (a node name, as the importer allows) failed inside TensorFlow ("The name 'y' refers to an
    Operation"); a NoOp output is refused naming it."""
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        y = tf.identity(tf.nn.relu(x) * 2.0, name="y")
        tf.group(y, name="train")
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)
    graph = from_tensorflow(tf_graph.as_graph_def(), outputs=["y"])
    export = save_saved_model(graph, cluster, _alternating(graph), tmp_path / "sm")
    with tf.compat.v1.Session(graph=tf.Graph(), config=session_config(place_graph_def(graph, cluster,
                                                                                      _alternating(graph)))) as s:
        meta = tf.compat.v1.saved_model.loader.load(s, ["serve"], str(export))
        signature = meta.signature_def["serving_default"]
        [out] = s.run([signature.outputs["y"].name], {signature.inputs["x"].name: np.array([-1.0, 3.0], np.float32)})
    np.testing.assert_allclose(out, [0.0, 6.0])
    trained = from_tensorflow(tf_graph.as_graph_def(), outputs=["y", "train"])
    with pytest.raises(UnsupportedGraphError, match="output 'train' of graph .* is a node without outputs"):
        save_saved_model(trained, cluster, _alternating(trained), tmp_path / "sm2")


def _serve(export, graph, cluster, placement, x):
    """The first output of ``export``'s signature for ``x``, in a session placed as ``placement``."""
    with tf.compat.v1.Session(graph=tf.Graph(), config=session_config(place_graph_def(graph, cluster, placement))
                              ) as session:
        signature = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(export)).signature_def[
            "serving_default"]
        (given,) = signature.inputs.values()
        [out] = session.run([o.name for o in signature.outputs.values()], {given.name: x})
    return out


def test_a_placed_saved_model_reimports_with_its_weights_and_is_written_again(tmp_path, imported):
    """place -> save_saved_model -> from_tensorflow(dir): the in-graph variables (TF1 layout) keep their values,
    read from the init op that assigns them, and the re-import is written and served again with the same output."""
    cluster = imported[1]
    module = Dense()
    graph = from_tensorflow(module.__call__.get_concrete_function(), name="dense")
    placement = _alternating(graph)
    first = save_saved_model(graph, cluster, placement, tmp_path / "first")
    again = from_tensorflow(first, name="dense")
    assert set(again.source.variables) == set(graph.source.variables) == {"w1", "w2"}
    for name, variable in graph.source.variables.items():
        np.testing.assert_array_equal(again.source.variables[name].numpy(), variable.numpy())
    replaced = _alternating(again)
    second = save_saved_model(again, cluster, replaced, tmp_path / "second")
    expected = module(X).numpy()
    np.testing.assert_allclose(_serve(first, graph, cluster, placement, X), expected, rtol=1e-5)
    np.testing.assert_allclose(_serve(second, again, cluster, replaced, X), expected, rtol=1e-5)
    third = from_tensorflow(second, name="dense")
    for name, variable in graph.source.variables.items():
        np.testing.assert_array_equal(third.source.variables[name].numpy(), variable.numpy())


def _bare_saved_model(export_dir):
    """A TF1 SavedModel ``y = x @ w`` whose variable ``w`` is an in-graph ``VarHandleOp`` in no collection: neither a
    checkpoint nor an init op gives it a value."""
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 4], name="x")
        handle = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[4, 3], shared_name="w", name="w")
        y = tf.matmul(x, tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.float32), name="y")
        info = tf.compat.v1.saved_model.utils.build_tensor_info
        signature = tf.compat.v1.saved_model.signature_def_utils.build_signature_def(
            inputs={"x": info(x)}, outputs={"y": info(y)},
            method_name=tf.compat.v1.saved_model.signature_constants.PREDICT_METHOD_NAME)
        builder = tf.compat.v1.saved_model.Builder(str(export_dir))
        with tf.compat.v1.Session(graph=tf_graph) as session:
            builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={"serving_default": signature})
        builder.save()
    return export_dir


def test_a_saved_model_variable_without_a_value_is_named_on_import_and_export(tmp_path, imported, caplog):
    """A TF1 SavedModel whose in-graph variable neither its checkpoint nor its init op gives a value: the import
    warns naming it, and writing it back says it has none without calling the SavedModel a GraphDef."""
    cluster = imported[1]
    with caplog.at_level("WARNING", logger="gplace.importers.tensorflow"):
        graph = from_tensorflow(_bare_saved_model(tmp_path / "bare"), name="bare")
    assert "1 variable(s) without a value" in caplog.text and ": w;" in caplog.text
    assert not graph.source.variables
    with pytest.raises(UnsupportedGraphError, match="variable 'w' of graph 'bare' has no value") as err:
        save_saved_model(graph, cluster, Placement.single(graph, 0), tmp_path / "x")
    assert "the program was a GraphDef" not in str(err.value)


def test_a_saved_model_in_graph_variable_takes_its_checkpoint_value(tmp_path, imported):
    """A TF1 SavedModel's in-graph variable whose value is in ``variables/variables`` under its shared name."""
    export = _bare_saved_model(tmp_path / "bare")
    tf.raw_ops.SaveV2(prefix=str(export / "variables" / "variables"), tensor_names=["w"], shape_and_slices=[""],
                      tensors=[tf.constant(W2[:4])])
    graph = from_tensorflow(export, name="bare")
    np.testing.assert_array_equal(graph.source.variables["w"].numpy(), W2[:4])
    placement = _alternating(graph)
    placed = save_saved_model(graph, imported[1], placement, tmp_path / "placed")
    np.testing.assert_allclose(_serve(placed, graph, imported[1], placement, X), X @ W2[:4], rtol=1e-5)


def _signature_of(export, graph, cluster, placement):
    """The loaded ``serving_default`` signature of ``export`` and a session holding it (close it)."""
    session = tf.compat.v1.Session(graph=tf.Graph(), config=session_config(place_graph_def(graph, cluster, placement)))
    meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(export))
    return meta.signature_def["serving_default"], session


def test_a_keras_models_output_names_are_the_signature_keys(tmp_path, imported):
    """A Keras model's outputs {"cls", "reg"} (a dict) and ["reg", "cls"] (a list) come back under those keys, each
    serving its own output (they were "Identity" and "Identity_1")."""
    keras = tf.keras
    keras.utils.set_random_seed(0)
    img, meta = keras.Input((4,), name="img", batch_size=2), keras.Input((3,), name="meta", batch_size=2)
    h = keras.layers.Concatenate()([keras.layers.Dense(5)(img), meta])
    cls, reg = keras.layers.Dense(3, name="cls")(h), keras.layers.Dense(1, name="reg")(h)
    given = {"img": X, "meta": RNG.standard_normal((2, 3)).astype(np.float32)}
    cluster = imported[1]
    for i, model in enumerate([keras.Model({"img": img, "meta": meta}, {"reg": reg, "cls": cls}),
                               keras.Model([img, meta], [reg, cls])]):
        expected = model(given if i == 0 else [given["img"], given["meta"]])
        expected = dict(zip(["reg", "cls"], expected, strict=True)) if i else expected
        graph = from_tensorflow(model)
        placement = _alternating(graph)
        signature, session = _signature_of(save_saved_model(graph, cluster, placement, tmp_path / f"m{i}"), graph,
                                           cluster, placement)
        with session:
            assert set(signature.outputs) == {"cls", "reg"}
            feed = {signature.inputs[k].name: v for k, v in given.items()}
            for key in ("cls", "reg"):
                np.testing.assert_allclose(session.run(signature.outputs[key].name, feed), expected[key], rtol=1e-5)


def test_a_saved_model_signatures_output_keys_survive_placement(tmp_path, imported):
    """A SavedModel signature returning {"logits": ...} is written back with the key "logits", and a re-import of
    the placed SavedModel keeps it."""
    module = Dense()
    fn = tf.function(lambda x: {"logits": module(x)}, input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
    tf.saved_model.save(module, str(tmp_path / "original"), signatures=fn.get_concrete_function())
    graph, cluster = from_tensorflow(tmp_path / "original"), imported[1]
    assert graph.source.output_names == ("logits",)
    placement = _alternating(graph)
    export = save_saved_model(graph, cluster, placement, tmp_path / "placed")
    signature, session = _signature_of(export, graph, cluster, placement)
    with session:
        [out] = session.run([signature.outputs["logits"].name], {signature.inputs["x"].name: X})
    np.testing.assert_allclose(out, module(X).numpy(), rtol=1e-5)
    assert from_tensorflow(export).source.output_names == ("logits",)


def test_the_placed_program_runs_at_the_batch_size_it_was_imported_with(tmp_path, imported):
    """Documented, not restored: ``batch_size`` is written into the kept GraphDef and the Keras model is traced at
    it, so the placed SavedModel's input has that batch and another batch is refused by TensorFlow."""
    keras = tf.keras
    model = keras.Sequential([keras.Input((4,), name="x"), keras.layers.Dense(3)])
    graph, cluster, expected = from_tensorflow(model, batch_size=2), imported[1], model(X).numpy()
    placement = _alternating(graph)
    signature, session = _signature_of(save_saved_model(graph, cluster, placement, tmp_path / "placed"), graph,
                                       cluster, placement)
    with session:
        (given,) = signature.inputs.values()
        assert [d.size for d in given.tensor_shape.dim] == [2, 4]
        (out,) = signature.outputs.values()
        np.testing.assert_allclose(session.run(out.name, {given.name: X}), expected, rtol=1e-5)
        with pytest.raises(ValueError, match="Cannot feed value of shape"):
            session.run(out.name, {given.name: np.zeros((5, 4), np.float32)})


def test_placed_pb_is_written_with_its_attribute_maps_in_key_order(tmp_path, imported):
    """protobuf wrote each NodeDef's attr map in a varying order, so placed.pb differed byte for byte between runs of
    the same command: it is the deterministic serialisation now."""
    from gplace.export import write_back

    graph, cluster = imported
    [path] = write_back(graph, cluster, _alternating(graph), tmp_path)
    graph_def = tf.compat.v1.GraphDef.FromString(path.read_bytes())
    assert path.read_bytes() == graph_def.SerializeToString(deterministic=True)
