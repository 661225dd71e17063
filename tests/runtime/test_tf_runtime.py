"""The ``tf-v1`` runtime (gplace.runtime.tf_runtime): placed GraphDefs run on logical CPU devices, failures report."""

from __future__ import annotations

import math
import os
import re
import time
import zlib

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
from google.protobuf import text_format  # noqa: E402

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402
from gplace.ir import Cluster, Device, InvalidPlacementError, OpGraph, Placement, UnsupportedGraphError  # noqa: E402
from gplace.runtime.conformance import check_failure, check_runtime  # noqa: E402
from gplace.runtime.tf_runtime import TensorFlowRunError, TensorFlowRuntime, tf_device  # noqa: E402
from gplace.testing import alternating, diamond  # noqa: E402

pytestmark = pytest.mark.tf

# x[?, 4] @ w[4, 3] with w a v1 reference variable (initialised through Assign), times 2.
V1_GRAPH = """
node { name: "x" op: "Placeholder"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: -1 } dim { size: 4 } } } } }
node { name: "w" op: "VariableV2"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: 4 } dim { size: 3 } } } }
  attr { key: "container" value { s: "" } } attr { key: "shared_name" value { s: "" } } }
node { name: "w/read" op: "Identity" input: "w"
  attr { key: "T" value { type: DT_FLOAT } } attr { key: "_class" value { list { s: "loc:@w" } } } }
node { name: "mm" op: "MatMul" input: "x" input: "w/read"
  attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "transpose_a" value { b: false } } attr { key: "transpose_b" value { b: false } } }
node { name: "two" op: "Const"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 2.0 } } } }
node { name: "y" op: "Mul" input: "mm" input: "two" attr { key: "T" value { type: DT_FLOAT } } }
"""


def _cpus(n: int = 2, *extra: Device) -> Cluster:
    return Cluster.build([*(Device(f"/CPU:{i}", "cpu") for i in range(n)), *extra], default_bandwidth=1e9,
                         name=f"{n}xcpu")


@pytest.fixture(scope="module")
def runtime() -> TensorFlowRuntime:
    return TensorFlowRuntime(steps=3, warmup=1, time_limit=30.0)


@pytest.fixture(scope="module")
def mlp() -> OpGraph:
    """A tf.function MLP over captured variables."""
    rng = np.random.default_rng(0)
    w1, b1 = tf.Variable(rng.random((8, 16), np.float32)), tf.Variable(np.zeros(16, np.float32))
    w2, b2 = tf.Variable(rng.random((16, 4), np.float32)), tf.Variable(np.zeros(4, np.float32))

    @tf.function(input_signature=[tf.TensorSpec([4, 8], tf.float32, name="x")])
    def mlp(x):
        return tf.matmul(tf.tanh(tf.matmul(x, w1) + b1), w2) + b2

    return from_tensorflow(mlp, name="mlp")


@pytest.fixture(scope="module")
def keras_model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(16, activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(4)(hidden), name="tiny")


@pytest.fixture(scope="module")
def keras_graphs(keras_model) -> dict[str, OpGraph]:
    return {"inference": from_tensorflow(keras_model, batch_size=2),
            "training": from_tensorflow(keras_model, training=True, batch_size=2)}


@pytest.fixture(scope="module")
def graphs(mlp, keras_graphs) -> dict[str, OpGraph]:
    return {"mlp": mlp, **{f"keras-{k}": g for k, g in keras_graphs.items()}}


# ---------------------------------------------------------------------- device names
def test_tf_device_names_and_device_map() -> None:
    """/CPU:i and /GPU:i map to /device:..., full names too; device_map wins; other names are errors."""
    assert tf_device("/CPU:1") == "/device:CPU:1"
    assert tf_device("/GPU:0") == "/device:GPU:0"
    assert tf_device("/job:localhost/replica:0/task:0/device:GPU:3") == "/device:GPU:3"
    assert tf_device("fast", {"fast": "/GPU:1"}) == "/device:GPU:1"
    with pytest.raises(ValueError, match="device_map entry"):
        tf_device("/TPU:0")
    with pytest.raises(ValueError, match="not a TensorFlow CPU or GPU device"):
        TensorFlowRuntime(device_map={"a": "cuda:0"})
    with pytest.raises(ValueError, match="steps"):
        TensorFlowRuntime(steps=0)


# ---------------------------------------------------------------------- running placed graphs
@pytest.mark.parametrize("name", ["mlp", "keras-inference", "keras-training"])
def test_placed_run_equals_single_device(runtime, graphs, name) -> None:
    """Outputs of a placement over two logical CPU devices equal those of running everything on one."""
    g, cluster = graphs[name], _cpus()
    single = runtime.run(g, cluster, Placement.single(g, 0))
    split = runtime.run(g, cluster, alternating(g))
    assert len(single) == len(g.source.outputs) == len(split) >= 1
    for a, b in zip(single, split, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
        assert np.all(np.isfinite(a))


@pytest.mark.parametrize("name", ["mlp", "keras-inference", "keras-training"])
def test_measure_on_two_logical_cpus(runtime, graphs, name) -> None:
    """ok, a positive median step time, a finite spread; a split placement moves bytes, one device none."""
    g, cluster = graphs[name], _cpus()
    single = runtime.measure(g, cluster, Placement.single(g, 1))
    split = runtime.measure(g, cluster, alternating(g))
    for m in (single, split):
        assert m.ok, m.reason
        assert m.runtime == "tf-v1" and 0 < m.step_time < 1.0
        assert math.isfinite(m.spread) and m.spread >= 0
    assert single.bytes_moved == 0 < split.bytes_moved


def test_run_takes_feeds(runtime, mlp) -> None:
    """Feeds by tensor or node name replace the generated inputs; the same feed gives the same outputs."""
    cluster, p = _cpus(), alternating(mlp)
    zeros, ones = np.zeros((4, 8), np.float32), np.ones((4, 8), np.float32)
    by_tensor = runtime.run(mlp, cluster, p, feeds={"x:0": ones})[0]
    by_node = runtime.run(mlp, cluster, p, feeds={"x": ones})[0]
    np.testing.assert_array_equal(by_tensor, by_node)
    assert not np.allclose(by_tensor, runtime.run(mlp, cluster, p, feeds={"x": zeros})[0])


def test_variables_hold_the_programs_own_weights(runtime, keras_model, keras_graphs) -> None:
    """A Keras model's variables run with their own values, so a placed run computes what the model computes
    (made-up weights overflow deep models' outputs to inf or nan)."""
    x = np.random.default_rng(5).random((2, 8)).astype(np.float32)
    g = keras_graphs["inference"]
    (got,) = runtime.run(g, _cpus(), alternating(g), feeds={g.source.inputs[0]: x})
    np.testing.assert_allclose(got, np.asarray(keras_model(x)), rtol=1e-5, atol=1e-6)


def test_a_keras_training_step_loss_is_the_batch_mean_as_keras_computes_it(runtime) -> None:
    """A model compiled with ``loss="mse"`` (a per-sample function): the placed step returns the batch's mean loss,
    a scalar equal to Keras's (the per-sample vector before, whose summed gradient scaled the update by the
    batch size)."""
    keras.utils.set_random_seed(1)
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs), name="lin")
    model.compile(loss="mse", optimizer=keras.optimizers.SGD(0.1))
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)
    want = float(keras.losses.MeanSquaredError()(y, model(x)))
    g = from_tensorflow(model, training=True, batch_size=4)
    (loss,) = runtime.run(g, _cpus(), alternating(g), feeds=dict(zip(g.source.inputs, (x, y), strict=True)))
    assert np.shape(loss) == () and float(loss) == pytest.approx(want, rel=1e-5)


def test_keras_dict_inputs_in_any_key_order_run_as_the_model(runtime) -> None:
    """A model built from a dict of inputs whose keys are not in sorted order imports and computes what the
    model computes."""
    zz, aa = keras.Input((4,), name="zz"), keras.Input((4,), name="aa")
    model = keras.Model({"zz": zz, "aa": aa}, keras.layers.Dense(2)(zz) - 3.0 * aa[:, :2], name="keyed")
    rng = np.random.default_rng(2)
    xz, xa = rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)
    g = from_tensorflow(model, batch_size=2)
    feeds = {t: {"zz": xz, "aa": xa}[t.split(":")[0]] for t in g.source.inputs}
    (got,) = runtime.run(g, _cpus(), alternating(g), feeds=feeds)
    np.testing.assert_allclose(got, np.asarray(model({"zz": xz, "aa": xa})), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("loss", [["mse", "categorical_crossentropy"], {"b": "categorical_crossentropy", "a": "mse"}],
                         ids=["list", "dict"])
def test_keras_multi_output_training_steps_take_a_loss_per_output(runtime, loss) -> None:
    """Two outputs compiled with a list or a dict of losses: the step sums each output's mean loss, as Keras."""
    keras.utils.set_random_seed(3)
    inputs = keras.Input((4,))
    a = keras.layers.Dense(2, name="a")(inputs)
    b = keras.layers.Dense(3, activation="softmax", name="b")(inputs)
    model = keras.Model(inputs, [a, b], name="two_heads")
    model.compile(loss=loss, optimizer="sgd")
    rng = np.random.default_rng(4)
    x, ya = rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((2, 2)).astype(np.float32)
    yb = np.eye(3, dtype=np.float32)[[0, 2]]
    pa, pb = model(x)
    want = float(keras.losses.MeanSquaredError()(ya, pa) + keras.losses.CategoricalCrossentropy()(yb, pb))
    g = from_tensorflow(model, training=True, batch_size=2)
    (got,) = runtime.run(g, _cpus(), alternating(g), feeds=dict(zip(g.source.inputs, (x, ya, yb), strict=True)))
    assert float(got) == pytest.approx(want, rel=1e-5)


def test_v1_reference_variable_graph_runs_placed(runtime) -> None:
    """A GraphDef with a VariableV2 (initialised through Assign) runs split, and y = 2 * x @ w."""
    g = from_tensorflow(text_format.Parse(V1_GRAPH, tf.compat.v1.GraphDef()), batch_size=3)
    cluster, x = _cpus(), np.arange(12, dtype=np.float32).reshape(3, 4)
    single = runtime.run(g, cluster, Placement.single(g, 0), feeds={"x": x})[0]
    names = {op: "/CPU:1" if op in ("x", "mm") else "/CPU:0" for op in g.op_names}
    split = runtime.run(g, cluster, Placement.from_names(g, cluster, names), feeds={"x": x})
    np.testing.assert_allclose(single, split[0], rtol=1e-6)
    w = np.random.default_rng(zlib.crc32(b"w")).random((4, 3)).astype(np.float32)  # the documented initial value
    np.testing.assert_allclose(single, 2 * x @ w, rtol=1e-5)


def test_a_graph_def_step_ending_in_a_group_runs_and_its_outputs_are_tensors(runtime) -> None:
    """A TF1 step whose sink is a ``tf.group`` (a NoOp) failed every measurement ("'train:0' refers to a Tensor
    which does not exist"); an output named by its node ("y") was fetched as the operation (None)."""
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        y = tf.identity(tf.nn.relu(x) * 2.0, name="y")
        tf.group(y, tf.identity(x + 1.0, name="z"), name="train")
    cluster, x = _cpus(), np.array([-1.0, 3.0], np.float32)
    whole = from_tensorflow(tf_graph.as_graph_def())
    assert whole.source.outputs == ("train",)
    assert runtime.measure(whole, cluster, alternating(whole)).ok
    named = from_tensorflow(tf_graph.as_graph_def(), outputs=["y", "^train"])
    assert named.source.outputs == ("y:0", "train")
    got, ran = runtime.run(named, cluster, alternating(named), feeds={"x": x})
    np.testing.assert_allclose(got, [0.0, 6.0])
    assert ran is None


def test_a_graph_def_step_ending_in_an_update_op_runs(runtime) -> None:
    """A sink without outputs other than NoOp and Assign*Variable (an optimiser's ResourceApplyGradientDescent, an
    Assert) was fetched as 'apply:0': every measurement failed."""
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
        w = tf.compat.v1.get_variable("w", [3, 2], use_resource=True)
        loss = tf.reduce_sum(tf.square(tf.matmul(x, w)), name="loss")
        tf.raw_ops.ResourceApplyGradientDescent(var=w.handle, alpha=0.1, delta=tf.gradients(loss, [w])[0],
                                                name="apply")
    graph = from_tensorflow(tf_graph.as_graph_def(), outputs=["loss", "apply"])
    assert graph.source.outputs == ("loss:0", "apply")
    assert runtime.measure(graph, _cpus(), alternating(graph)).ok


def test_a_function_graphs_graph_def_with_captured_variables_is_named_not_fed(runtime) -> None:
    """A GraphDef of a tf.function's graph holds its captured variables as resource placeholders: tf-v1 tried to
    generate a value for one and failed deep inside TensorFlow (KeyError: 20, the resource dtype)."""
    v = tf.Variable(np.zeros(3, np.float32))

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32, name="x")])
    def bump(x):
        v.assign_add(x)
        return x * 2

    graph = from_tensorflow(bump.get_concrete_function().graph.as_graph_def())
    assert graph.source.inputs == ("x:0",) and len(graph.source.resources) == 1
    m = runtime.measure(graph, _cpus(), Placement.single(graph, 0))
    assert not m.ok and "import the tf.function, SavedModel or Keras model itself" in m.reason


@pytest.mark.parametrize("layer", ["LSTM", "GRU"])
def test_keras_recurrent_loops_run_split(runtime, layer: str) -> None:
    """A Keras LSTM or GRU, its time loop one While op, runs split over two devices: inference gives Keras's
    output, and a training step (the loop and its gradient loop) the single-device step's values."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6, 8), batch_size=2), getattr(keras.layers, layer)(8),
                              keras.layers.Dense(4)])
    x = np.random.default_rng(0).standard_normal((2, 6, 8)).astype(np.float32)
    g = from_tensorflow(model)
    assert "While" in g.op_types
    [got] = runtime.run(g, _cpus(), alternating(g), feeds={g.source.inputs[0]: x})
    np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-6)
    model.compile(loss="mse", optimizer="sgd")
    train = from_tensorflow(model, training=True)
    single = runtime.run(train, _cpus(), Placement.single(train, 0))
    for a, b in zip(single, runtime.run(train, _cpus(), alternating(train)), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_every_op_runs_on_its_device(runtime, keras_graphs) -> None:
    """One traced step of a split training step: each op (fed inputs aside) ran, on its placement's device."""
    g, cluster = keras_graphs["training"], _cpus()
    placement = alternating(g)
    step = runtime._open(g, cluster, placement, None, time.perf_counter() + 30)
    try:
        metadata = tf.compat.v1.RunMetadata()
        step.call(*step.feed_values, options=tf.compat.v1.RunOptions(trace_level=3), run_metadata=metadata)
    finally:
        step.close()
    ran = {node.node_name: dev.device for dev in metadata.step_stats.dev_stats for node in dev.node_stats}
    fed = {name.split(":")[0] for name in g.source.inputs}
    for name, d in zip(g.op_names, placement.devices.tolist(), strict=True):
        if name not in fed:
            assert ran[name].endswith(f"/device:CPU:{d}"), (name, ran.get(name))


def test_device_map_names_devices(mlp) -> None:
    """Cluster names that are not TF device names run through device_map."""
    cluster = Cluster.build([Device("left", "cpu"), Device("right", "cpu")], default_bandwidth=1e9)
    runtime = TensorFlowRuntime(steps=1, warmup=0, device_map={"left": "/device:CPU:0", "right": "/CPU:1"})
    assert runtime.measure(mlp, cluster, alternating(mlp)).ok


# ---------------------------------------------------------------------- failures
def test_gpu_on_a_cpu_machine_fails_naming_the_device(runtime, mlp) -> None:
    """/GPU:0 on a machine where TensorFlow sees no GPU: a failed measurement naming the device."""
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU")
    m = runtime.measure(mlp, _cpus(2, Device("/GPU:0", "gpu")), Placement.single(mlp, 2))
    assert not m.ok and m.step_time == math.inf
    assert "/GPU:0" in m.reason and "not available" in m.reason


def test_device_tensorflow_rejects_is_reported(runtime, mlp, monkeypatch) -> None:
    """Past the up-front GPU check, the session's InvalidArgumentError becomes 'device ... is not available'."""
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: ["a fake GPU"] * 8)
    m = runtime.measure(mlp, _cpus(2, Device("/GPU:7", "gpu")), Placement.single(mlp, 2))
    assert not m.ok
    assert m.reason.startswith("device /GPU:7 (/device:GPU:7) is not available (op '")
    with pytest.raises(TensorFlowRunError, match="not available"):
        runtime.run(mlp, _cpus(2, Device("/GPU:7", "gpu")), Placement.single(mlp, 2))


def test_graph_without_source_fails(runtime) -> None:
    """A graph with no TensorFlowSource (a testing graph, a cached zoo graph) is a failed measurement."""
    g = diamond()
    m = runtime.measure(g, _cpus(), Placement.single(g, 0))
    assert not m.ok and "has no TensorFlow program to run" in m.reason
    with pytest.raises(UnsupportedGraphError, match="has no TensorFlow program to run"):
        runtime.check_graph(g)  # up front, before a search
    # cache=False helps a Keras zoo graph only: the default lstm_lm has no such setting (it was the advice for all)
    assert "Keras zoo graph" in m.reason and "lstm_lm" in m.reason and "with the simulator" in m.reason


def test_a_captured_lookup_table_imports_for_the_simulator_and_is_refused_by_tf_v1(runtime) -> None:
    """A tf.function reading a StaticHashTable: the table stays a placeholder nothing creates, so the graph
    imports (and can be simulated) but tf-v1 refuses it up front, naming the table, not mid-run."""
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant([1, 2, 3], tf.int64), tf.constant([7.0, 8.0, 9.0])), -1.0)

    @tf.function(input_signature=[tf.TensorSpec([3], tf.int64, name="k")])
    def lookup(k):
        return table.lookup(k) * 2.0

    g = from_tensorflow(lookup, name="table")
    assert len(g.source.resources) == 1
    with pytest.raises(UnsupportedGraphError, match="graph 'table' reads captured resource"):
        runtime.check_graph(g)
    m = runtime.measure(g, _cpus(), Placement.single(g, 0))
    assert not m.ok and "lookup tables" in m.reason


def test_error_in_an_op_names_the_op(runtime) -> None:
    """An op that fails at run time (gather out of range) is a failed measurement naming op and device."""
    table = tf.constant(np.ones((3, 2), np.float32))

    @tf.function(input_signature=[tf.TensorSpec([2], tf.int32, name="ids")])
    def lookup(ids):
        return tf.gather(table, ids + 7)

    g = from_tensorflow(lookup)
    m = runtime.measure(g, _cpus(), Placement.single(g, 1))
    assert not m.ok
    assert "(GatherV2) on /CPU:1 (/device:CPU:1) failed: InvalidArgumentError: indices[0] = 7 is not in" in m.reason

    step = runtime._open(g, _cpus(), Placement.single(g, 1), None, time.perf_counter() + 30)
    step.close()
    oom = tf.errors.ResourceExhaustedError(None, None, "2 root error(s) found.\n  (0) RESOURCE_EXHAUSTED: OOM when "
                                           "allocating tensor\n\t [[{{node GatherV2}}]]")
    assert str(step._failure(oom)) == (
        "out of memory on /CPU:1 (/device:CPU:1) in op 'GatherV2' (GatherV2): OOM when allocating tensor"
    )


def test_out_of_memory_names_device_and_what_ran(runtime, mlp) -> None:
    """ResourceExhaustedError in a variable's initialisation, or naming only a device: 'out of memory on ...'."""
    step = runtime._open(mlp, _cpus(), Placement.single(mlp, 1), None, time.perf_counter() + 30)
    step.close()
    init = next(name for name in step.initialises if "Assign" in name)
    oom = tf.errors.ResourceExhaustedError(None, None, f"OOM when allocating\n\t [[{{{{node {init}}}}}]]")
    assert str(step._failure(oom)) == (
        f"out of memory on /CPU:1 (/device:CPU:1) in initialising variable {step.initialises[init]!r}: "
        "OOM when allocating"
    )
    oom = tf.errors.ResourceExhaustedError(None, None, "OOM on /job:localhost/replica:0/task:0/device:CPU:1 by x")
    assert str(step._failure(oom)).startswith("out of memory on /CPU:1 (/device:CPU:1) in the step: OOM on")


def test_time_limit_is_a_failure(mlp) -> None:
    """A limit passed during set-up, or during the steps (cancelled by TensorFlow): a failed measurement."""
    m = TensorFlowRuntime(steps=3, warmup=1, time_limit=1e-6).measure(mlp, _cpus(), Placement.single(mlp, 0))
    assert not m.ok and "time limit of 1e-06 s exceeded" in m.reason

    @tf.function(input_signature=[tf.TensorSpec([400, 400], tf.float32, name="a")])
    def chain(a):
        for _ in range(8):
            a = tf.matmul(a, a) * 1e-3
        return a

    g = from_tensorflow(chain)
    # 1 GFLOP a step: 10**5 steps outlast 0.5 s on any CPU (1,000 steps could end in time on a large one)
    m = TensorFlowRuntime(steps=10**5, warmup=0, time_limit=0.5).measure(g, _cpus(), Placement.single(g, 0))
    assert not m.ok and re.search(r"time limit of 0.5 s exceeded after \d+ of 100000 steps", m.reason), m.reason


@pytest.mark.gpu
def test_gpu_placements_run_and_match(runtime, keras_graphs) -> None:
    """On a machine with a GPU TensorFlow sees: a CPU+GPU split runs and equals the all-GPU run."""
    if not tf.config.list_physical_devices("GPU"):
        pytest.skip("needs a GPU that TensorFlow sees")
    g = keras_graphs["training"]
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/GPU:0", "gpu")], default_bandwidth=1e9)
    gpu, split = Placement.single(g, 1), alternating(g)
    assert runtime.measure(g, cluster, gpu).ok and runtime.measure(g, cluster, split).ok
    np.testing.assert_allclose(runtime.run(g, cluster, gpu)[0], runtime.run(g, cluster, split)[0], rtol=1e-4)


def test_a_measurement_holds_gpu_inputs_on_their_device_instead_of_feeding_them(runtime, keras_graphs,
                                                                                monkeypatch) -> None:
    """Which inputs a measurement holds in a variable on their device (_held_inputs): float Placeholders placed on
    a GPU, not on a CPU, not int32 or of unknown shape or fetched. The held path, forced here onto CPU devices
    (it is the same ops on any device; a GPU has never run it): the step feeds nothing, gives the fed step's
    outputs and bytes_moved, and a failure in it names the input's op."""
    from gplace.runtime import tf_runtime

    graph_def = text_format.Parse("""
        node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
          attr { key: "shape" value { shape { dim { size: 2 } } } } }
        node { name: "i" op: "Placeholder" attr { key: "dtype" value { type: DT_INT32 } }
          attr { key: "shape" value { shape { dim { size: 2 } } } } }
        node { name: "u" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
          attr { key: "shape" value { shape { dim { size: -1 } } } } }
        node { name: "o" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
          attr { key: "shape" value { shape { dim { size: 2 } } } } }""", tf.compat.v1.GraphDef())
    gpu = dict.fromkeys("xiuo", "/device:GPU:0")
    assert tf_runtime._held_inputs(tf, graph_def, ["x:0", "i:0", "u:0", "o:0"], gpu, ["o:0"]) == {
        "x:0": "/device:GPU:0"}
    assert tf_runtime._held_inputs(tf, graph_def, ["x:0"], {**gpu, "x": "/device:CPU:0"}) == {}

    g, cluster = keras_graphs["training"], _cpus()
    placement = alternating(g)
    want = runtime.run(g, cluster, placement)
    fed = runtime._open(g, cluster, placement, None, time.perf_counter() + 30, hold=True)
    fed.close()
    assert not fed.held and len(fed.feed_values) == len(g.source.inputs)  # CPU inputs: fed as before
    monkeypatch.setattr(tf_runtime, "_held_on", lambda device: True)
    step = runtime._open(g, cluster, placement, None, time.perf_counter() + 30, hold=True)
    try:
        assert sorted(step.held) == sorted(g.source.inputs) and step.feed_values == ()
        assert step.moved == fed.moved > 0
        for a, b in zip(want, step.run(time.perf_counter() + 30), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    finally:
        step.close()
    read = step.held[g.source.inputs[0]].read.op.name
    name = g.source.inputs[0].split(":")[0]
    home = step.labels[step.homes[name]]
    oom = tf.errors.ResourceExhaustedError(None, None, f"OOM when allocating\n\t [[{{{{node {read}}}}}]]")
    assert str(step._failure(oom)) == f"out of memory on {home} in op {name!r} (Placeholder): OOM when allocating"
    assert runtime.measure(g, cluster, placement).ok


def test_gpu_placements_get_the_gpu_warm_up_and_an_untimed_first_step(monkeypatch) -> None:
    """A placement using a GPU: at least one untimed step even with warmup=0, and, on the runtime's first use of
    that GPU, GPU_WARMUP_SECONDS of steps back to back first (torch-v1's rule). Counted on a CPU step given a GPU
    name (the GPU path itself never ran); without a GPU the steps are warmup + steps, as before."""
    from gplace.runtime import calibration

    monkeypatch.setattr(calibration, "GPU_WARMUP_SECONDS", 0.05)
    runtime = TensorFlowRuntime(steps=2, warmup=0, time_limit=30.0)

    class Step:
        runs = 0
        tf = None

        def run(self, deadline: float) -> list:
            Step.runs += 1
            time.sleep(0.001)
            return []

    def runs(used: frozenset[str]) -> tuple[int, int]:
        Step.runs = 0
        times = runtime._time_steps(Step(), time.perf_counter() + 30, None, used)
        return Step.runs, len(times)

    assert runs(frozenset()) == (2, 2)
    first, timed = runs(frozenset({"/device:GPU:0"}))
    assert timed == 2 and first > 3  # 1 untimed + 2 timed + the warm-up's
    assert runs(frozenset({"/device:GPU:0"})) == (3, 2)  # warm already: the untimed first step only
    assert runs(frozenset()) == (2, 2)


@pytest.mark.gpu
def test_gpu_inputs_are_held_on_the_gpu_and_the_held_step_matches_the_fed_one(runtime, keras_graphs) -> None:
    """On a GPU TensorFlow sees: a measurement's step of an all-GPU training step feeds nothing, reads each input
    from its variable on /device:GPU:0 (traced), and gives the outputs of the fed run (never run on a GPU)."""
    if not tf.config.list_physical_devices("GPU"):
        pytest.skip("needs a GPU that TensorFlow sees")
    g = keras_graphs["training"]
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/GPU:0", "gpu")], default_bandwidth=1e9)
    on_gpu = Placement.single(g, 1)
    want = runtime.run(g, cluster, on_gpu)
    step = runtime._open(g, cluster, on_gpu, None, time.perf_counter() + 30, hold=True)
    try:
        assert sorted(step.held) == sorted(g.source.inputs) and step.feed_values == ()
        metadata = tf.compat.v1.RunMetadata()
        got = step.call(options=tf.compat.v1.RunOptions(trace_level=3), run_metadata=metadata)[0]
    finally:
        step.close()
    ran = {node.node_name: dev.device for dev in metadata.step_stats.dev_stats for node in dev.node_stats}
    for held in step.held.values():
        assert ran[held.read.op.name].endswith("/device:GPU:0"), ran.get(held.read.op.name)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_invalid_placement_raises(runtime, mlp) -> None:
    with pytest.raises(InvalidPlacementError):
        runtime.measure(mlp, _cpus(), Placement(np.zeros(mlp.num_ops + 1, dtype=np.int64)))


# ---------------------------------------------------------------------- conformance
def test_conforms(runtime, keras_graphs) -> None:
    """The shared conformance suite: check_runtime on placements over two logical CPUs, check_failure on /GPU:99."""
    g = keras_graphs["training"]
    placements = [Placement.single(g, 0), Placement.single(g, 1), alternating(g)]
    measurements = check_runtime(runtime, g, _cpus(), placements)
    assert all(m.ok for m in measurements)
    m = check_failure(runtime, g, _cpus(2, Device("/GPU:99", "gpu")), Placement.single(g, 2))
    assert "/GPU:99" in m.reason
    assert runtime.deterministic is False


def test_no_time_limit_measures(mlp) -> None:
    """time_limit=None (no limit, as documented) failed every measurement: the run options took int(inf)."""
    m = TensorFlowRuntime(steps=1, warmup=0, time_limit=None).measure(mlp, _cpus(), Placement.for_graph(
        mlp, np.zeros(mlp.num_ops, np.int64)))
    assert m.ok, m.reason
