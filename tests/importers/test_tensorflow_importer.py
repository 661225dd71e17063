"""TensorFlow importer: GraphDefs, tf.functions, Keras models, SavedModels; every failure an UnsupportedGraphError."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")
from google.protobuf import text_format  # noqa: E402

from gplace.costmodel import roofline_costs  # noqa: E402
from gplace.importers.tensorflow import TensorFlowSource, from_tensorflow  # noqa: E402
from gplace.ir import UnsupportedGraphError  # noqa: E402
from gplace.pipeline import PipelineSimulator  # noqa: E402
from gplace.testing import alternating, uniform_cluster  # noqa: E402

pytestmark = pytest.mark.tf

F32 = 4

# x[?, 4] @ w[4, 3] (a v1 reference variable read through w/read, colocated with w), times a constant,
# after a control dependency on an init NoOp.
GRAPH_PBTXT = """
node { name: "x" op: "Placeholder"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: -1 } dim { size: 4 } } } } }
node { name: "w" op: "VariableV2"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: 4 } dim { size: 3 } } } }
  attr { key: "container" value { s: "" } } attr { key: "shared_name" value { s: "" } } }
node { name: "w/read" op: "Identity" input: "w"
  attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "_class" value { list { s: "loc:@w" } } } }
node { name: "init" op: "NoOp" }
node { name: "mm" op: "MatMul" input: "x" input: "w/read"
  attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "transpose_a" value { b: false } } attr { key: "transpose_b" value { b: false } } }
node { name: "two" op: "Const"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 2.0 } } } }
node { name: "y" op: "Mul" input: "mm" input: "two" input: "^init"
  attr { key: "T" value { type: DT_FLOAT } } }
"""


def _graph_def(text: str = GRAPH_PBTXT):
    return text_format.Parse(text, tf.compat.v1.GraphDef())


def _edges(g):
    return {(e.src, e.dst): e.bytes for e in g.edges()}


def _op(g, name):
    return g.ops()[g.op_index[name]]


# ---------------------------------------------------------------------- GraphDef
def test_graph_def_ops_shapes_bytes_colocation_and_control_edges():
    """One op per node; the batch dim takes batch_size; the variable is persistent and colocated with its read."""
    g = from_tensorflow(_graph_def(), batch_size=8, name="tiny")
    assert g.name == "tiny"
    assert set(g.op_names) == {"x", "w", "w/read", "init", "mm", "two", "y"}
    assert _op(g, "mm").output_shapes == ((8, 3),)
    assert _op(g, "x").output_shapes == ((8, 4),)
    assert _op(g, "w").persistent_memory == 4 * 3 * F32
    assert _op(g, "w").output_shapes == ((4, 3),)
    assert _op(g, "w").output_bytes == 0  # the variable's buffer is its persistent memory
    assert _op(g, "w").colocation == _op(g, "w/read").colocation == "w"
    assert _op(g, "mm").colocation is None
    edges = _edges(g)
    assert edges[("x", "mm")] == 8 * 4 * F32
    assert edges[("w", "w/read")] == 4 * 3 * F32  # a reference edge carries the variable
    assert edges[("init", "y")] == 0  # control dependency
    assert edges[("mm", "y")] == 8 * 3 * F32
    assert _op(g, "two").persistent_memory == F32


def test_graph_def_costs_count_matmul_flops_and_free_bookkeeping():
    """MatMul costs 2*M*N*K FLOPs on the roofline; NoOp, Const, Identity, Placeholder cost nothing."""
    g = from_tensorflow(_graph_def(), batch_size=8)
    flops = 2 * 8 * 3 * 4
    nbytes = (8 * 4 + 4 * 3 + 8 * 3) * F32
    assert _op(g, "mm").kind_cost == pytest.approx(roofline_costs(flops, nbytes))
    for name in ("x", "w", "w/read", "init", "two"):
        assert _op(g, name).kind_cost == {"gpu": 0.0, "cpu": 0.0}
    assert _op(g, "y").kind_cost["gpu"] > 0


def test_graph_def_unknown_batch_without_batch_size_names_the_node():
    """An unknown dimension with no batch_size is an error naming the placeholder and suggesting batch_size."""
    with pytest.raises(UnsupportedGraphError, match=r"node 'x' \(Placeholder\).*\[-1, 4\].*batch_size"):
        from_tensorflow(_graph_def())


def test_graph_def_is_not_mutated_and_is_kept_as_source():
    """The caller's GraphDef stays as it was; the source holds a copy with one node per op, same names."""
    graph_def = _graph_def()
    g = from_tensorflow(graph_def, batch_size=8)
    assert graph_def.node[0].attr["shape"].shape.dim[0].size == -1
    assert isinstance(g.source, TensorFlowSource)
    assert [n.name for n in g.source.graph_def.node] == list(g.op_names)
    assert g.source.inputs == ("x:0",)


def test_graph_def_outputs_prunes_to_the_step():
    """``outputs`` keeps only what the named nodes depend on."""
    g = from_tensorflow(_graph_def(), batch_size=8, outputs=["mm"])
    assert set(g.op_names) == {"x", "w", "w/read", "mm"}
    one = from_tensorflow(_graph_def(), batch_size=8, outputs="mm")  # was read as the nodes "m" and "m"
    assert set(one.op_names) == set(g.op_names)


def test_graph_def_file_and_text_file(tmp_path):
    """A binary .pb and a text .pbtxt GraphDef file import alike; the file name is the graph name."""
    (tmp_path / "tiny.pbtxt").write_text(GRAPH_PBTXT)
    (tmp_path / "tiny.pb").write_bytes(_graph_def().SerializeToString())
    a = from_tensorflow(tmp_path / "tiny.pbtxt", batch_size=2)
    b = from_tensorflow(str(tmp_path / "tiny.pb"), batch_size=2)
    assert a.name == "tiny" and a.op_names == b.op_names and a.fingerprint == b.fingerprint


def test_v1_control_flow_node_is_named():
    """A v1 Switch/Merge node raises UnsupportedGraphError naming it."""
    text = GRAPH_PBTXT + """
    node { name: "pred" op: "Const" attr { key: "dtype" value { type: DT_BOOL } }
      attr { key: "value" value { tensor { dtype: DT_BOOL tensor_shape { } bool_val: true } } } }
    node { name: "cond/Switch" op: "Switch" input: "y" input: "pred" attr { key: "T" value { type: DT_FLOAT } } }
    """
    with pytest.raises(UnsupportedGraphError, match=r"node 'cond/Switch' \(Switch\): TensorFlow 1 control flow"):
        from_tensorflow(_graph_def(text), batch_size=2)


def test_unregistered_op_and_unreadable_inputs_raise_ours(tmp_path):
    """Custom ops, garbage files, missing paths and wrong types fail with our errors, never TensorFlow's."""
    bad = GRAPH_PBTXT + 'node { name: "custom" op: "MyCustomOp" input: "y" }'
    with pytest.raises(UnsupportedGraphError, match=r"node 'custom'.*'MyCustomOp' is not registered"):
        from_tensorflow(_graph_def(bad), batch_size=2)
    (tmp_path / "junk.pb").write_bytes(b"\x00\xffnot a graph")
    with pytest.raises(UnsupportedGraphError, match="not a readable GraphDef"):
        from_tensorflow(tmp_path / "junk.pb")
    with pytest.raises(FileNotFoundError):
        from_tensorflow(tmp_path / "missing.pb")
    with pytest.raises(TypeError, match="from_tensorflow expects"):
        from_tensorflow(42)
    with pytest.raises(UnsupportedGraphError, match="training=True needs a Keras model"):
        from_tensorflow(_graph_def(), training=True)


# ---------------------------------------------------------------------- tf.function
def _function_with_variable():
    w = tf.Variable(tf.ones((4, 3)), name="weights")

    @tf.function(input_signature=[tf.TensorSpec((5, 4), tf.float32, name="x")])
    def f(x):
        return tf.nn.relu(tf.matmul(x, w))

    return f, w


def test_tf_function_variable_becomes_a_named_persistent_var_handle():
    """A captured variable becomes a VarHandleOp named after it: persistent, colocated with its reads."""
    f, _ = _function_with_variable()
    g = from_tensorflow(f)
    var = _op(g, "weights")
    assert var.type == "VarHandleOp" and var.persistent_memory == 4 * 3 * F32 and var.output_shapes == ((4, 3),)
    reads = [n for n, t in zip(g.op_names, g.op_types, strict=True) if t == "ReadVariableOp"]
    assert reads and all(_op(g, r).colocation == "weights" for r in reads)
    assert all(_op(g, r).output_bytes == 0 for r in reads)  # a read aliases the variable
    mm = next(n for n, t in zip(g.op_names, g.op_types, strict=True) if t == "MatMul")
    assert _op(g, mm).output_shapes == ((5, 3),)
    assert _edges(g)[(reads[0], mm)] == 4 * 3 * F32  # ...but a reader elsewhere pays the copy
    assert g.source.inputs == ("x:0",)


def test_unnamed_captured_variables_get_their_own_shared_names():
    """Two unnamed variables (both "Variable" to TensorFlow) become two handles with distinct shared names."""
    a, b = tf.Variable(tf.ones((2, 2))), tf.Variable(tf.zeros((2, 2)))

    @tf.function(input_signature=[tf.TensorSpec((2, 2), tf.float32)])
    def f(x):
        return tf.matmul(x, a) + b

    handles = [n for n in from_tensorflow(f).source.graph_def.node if n.op == "VarHandleOp"]
    shared = [n.attr["shared_name"].s for n in handles]
    assert len(handles) == 2 and len(set(shared)) == 2, shared


@pytest.mark.parametrize("name", ["my var", "_lead", "w\u00ebird"])
def test_a_variable_whose_name_is_no_legal_node_name_keeps_its_nodes_name(name):
    """TensorFlow runs such a function; the import renamed the handle after the variable and TensorFlow refused."""
    weights = tf.Variable(tf.ones((4, 4)), name=name)

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
    def f(x):
        return tf.matmul(x, weights)

    graph = from_tensorflow(f)
    [handle] = [n for n, t in zip(graph.op_names, graph.op_types, strict=True) if t == "VarHandleOp"]
    assert handle != name and graph.persistent_memory[graph.op_index[handle]] == 4 * 4 * F32


def test_tf_function_without_signature_and_v1_control_flow_raise():
    """A tf.function with no input_signature, and TensorFlow 1 control flow (also inside a called function), are
    named."""

    @tf.function
    def no_signature(x):
        return x * 2

    with pytest.raises(UnsupportedGraphError, match="input_signature"):
        from_tensorflow(no_signature)

    @tf.function(input_signature=[tf.TensorSpec((4,))])
    def switch(x):
        return tf.raw_ops.Switch(data=x, pred=tf.constant(True))[1] * 2.0

    with pytest.raises(UnsupportedGraphError, match=r"node 'Switch' \(Switch\): TensorFlow 1 control flow"):
        from_tensorflow(switch)

    @tf.function(input_signature=[tf.TensorSpec((4,))])
    def caller(x):
        return switch(x) + 1.0

    with pytest.raises(UnsupportedGraphError, match=r"calls function .*whose node 'Switch'"):
        from_tensorflow(caller.get_concrete_function())


def _loop(limit):
    @tf.function(input_signature=[tf.TensorSpec((4,))])
    def loop(x):
        return tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2.0), [0, x], maximum_iterations=limit)[1]
    return from_tensorflow(loop)


def _cost(graph, op_type):
    (op,) = [op for op in graph.ops() if op.type.endswith(op_type)]
    return op.kind_cost


def test_a_while_costs_its_functions_times_a_constant_trip_count(caplog):
    """A functional While is one op costing its condition and body times maximum_iterations when constants
    compute it (7 passes cost 7 times 1), else one pass, with a warning naming it."""
    seven, one = _cost(_loop(7), "While"), _cost(_loop(1), "While")
    assert seven == pytest.approx({kind: 7 * seconds for kind, seconds in one.items()})
    with caplog.at_level("WARNING", logger="gplace.importers.tensorflow"):
        unknown = _cost(_loop(None), "While")
    assert "node 'while' (StatelessWhile): trip count unknown" in caplog.text and unknown["gpu"] > 0


def test_an_if_costs_its_dearer_branch():
    """A functional If is one op costing its dearer branch: a matrix-vector product, not a subtraction."""

    @tf.function(input_signature=[tf.TensorSpec((4,))])
    def branch(x):
        return tf.cond(tf.reduce_sum(x) > 0, lambda: tf.linalg.matvec(tf.ones((4, 4)), x), lambda: x - 1.0)

    @tf.function(input_signature=[tf.TensorSpec((4,))])
    def product(x):
        return tf.linalg.matvec(tf.ones((4, 4)), x)

    alone = from_tensorflow(product)
    want = {kind: float(alone.kind_cost[kind].sum()) for kind in ("gpu", "cpu")}
    assert _cost(from_tensorflow(branch), "If") == pytest.approx(want)


def test_a_keras_lstm_is_one_loop_op_colocated_with_its_weights(caplog):
    """Keras's LSTM (unroll=False) imports with its loop as one While op, colocated with the layer's variables,
    costing its 20 time steps; in a training step the loop is forward and its gradient loop backward, and the
    phases suit the pipeline simulator."""
    keras = tf.keras
    model = keras.Sequential([keras.Input((20, 16), batch_size=4), keras.layers.LSTM(32), keras.layers.Dense(8)])
    with caplog.at_level("WARNING", logger="gplace.importers.tensorflow"):
        g = from_tensorflow(model)
    assert "unknown" not in caplog.text
    (loop,) = [op for op in g.ops() if op.type == "While"]
    assert loop.colocation is not None and "kernel" in loop.colocation
    step_flops = 2 * 4 * (16 + 32) * 4 * 32  # a step's two MatMuls (the step-0 cell outside the loop is pruned)
    assert loop.kind_cost["gpu"] > 19 * roofline_costs(step_flops, 0)["gpu"]
    model.compile(loss="mse", optimizer="sgd")
    train = from_tensorflow(model, training=True)
    phases = {op.type: op.phase for op in train.ops() if op.type.endswith("While")}
    assert phases == {"While": "forward", "StatelessWhile": "backward"}
    assert PipelineSimulator(microbatches=2).measure(train, uniform_cluster(2, kind="cpu"), alternating(train)).ok


def test_a_keras_lstm_moves_its_sequences_as_tensor_lists_of_their_bytes():
    """The lists a Keras LSTM's loop reads and fills carry their elements' bytes: the input sequence (20 x 4 x 16
    float32) into the While, the 20 outputs of 4 x 32 out of it; the reserved, empty output list carries none."""
    keras = tf.keras
    model = keras.Sequential([keras.Input((20, 16), batch_size=4), keras.layers.LSTM(32, return_sequences=True)])
    g = from_tensorflow(model)
    types = dict(zip(g.op_names, g.op_types, strict=True))
    into = {types[e.src]: e.bytes for e in g.edges() if types[e.dst] == "While" and "TensorList" in types[e.src]}
    assert into == {"TensorListFromTensor": 20 * 4 * 16 * 4, "TensorListReserve": 0}
    out = [e.bytes for e in g.edges() if types[e.src] == "While" and types[e.dst] == "TensorListStack"]
    assert out == [20 * 4 * 32 * 4]


@pytest.mark.parametrize("batch_size", [0, -4, 2.5, True])
def test_a_batch_size_that_is_not_a_positive_int_is_refused(batch_size):
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        from_tensorflow(model, batch_size=batch_size)


def test_a_keras_model_file_is_refused_saying_how_to_import_it(tmp_path):
    path = tmp_path / "model.keras"
    tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)]).save(path)
    with pytest.raises(UnsupportedGraphError, match="a Keras model file, not a GraphDef; load it with keras"):
        from_tensorflow(str(path))


def test_cpu_only_ops_are_pinned_and_set_shapes_are_kept():
    """PyFunc and string ops are pinned to the CPU; a shape set in Python (``_output_shapes``) is used."""

    @tf.function(input_signature=[tf.TensorSpec((4,), tf.float32)])
    def f(x):
        y = tf.numpy_function(lambda a: a * 2, [x], tf.float32, stateful=False)
        y.set_shape((4,))
        return y + 1.0, tf.strings.as_string(x)

    g = from_tensorflow(f)
    pinned = dict(zip(g.op_types, g.pinned, strict=True))
    assert pinned["PyFuncStateless"] == "cpu" and pinned["AsString"] == "cpu" and pinned["AddV2"] is None
    assert _op(g, g.op_names[g.op_types.index("PyFuncStateless")]).output_shapes == ((4,),)


def test_conv2d_flops_use_the_hwio_filter():
    """Conv2D FLOPs are 2 * numel(out) * kh * kw * cin (HWIO filter), not divided by cout."""

    @tf.function(input_signature=[tf.TensorSpec((2, 8, 8, 3)), tf.TensorSpec((3, 3, 3, 16))])
    def conv(x, w):
        return tf.nn.conv2d(x, w, strides=1, padding="SAME")

    g = from_tensorflow(conv)
    op = _op(g, g.op_names[g.op_types.index("Conv2D")])
    assert op.output_shapes == ((2, 8, 8, 16),)
    flops = 2 * (2 * 8 * 8 * 16) * 3 * 3 * 3
    nbytes = (2 * 8 * 8 * 3 + 3 * 3 * 3 * 16 + 2 * 8 * 8 * 16) * F32
    assert op.kind_cost == pytest.approx(roofline_costs(flops, nbytes))


# ---------------------------------------------------------------------- Keras and SavedModel
def _mlp():
    keras = tf.keras
    inp = keras.Input((8,), name="features")
    h = keras.layers.Dense(16, activation="relu", name="hidden")(inp)
    return keras.Model(inp, keras.layers.Dense(4, name="out")(h), name="mlp")


WEIGHTS = (8 * 16 + 16 + 16 * 4 + 4) * F32


def test_keras_inference_and_training_step():
    """Inference: forward only. Training: gradients and an Adam update, whose two slots per weight are persistent."""
    model = _mlp()
    inference = from_tensorflow(model, batch_size=32)
    assert inference.name == "mlp"
    assert inference.persistent_memory.sum() == WEIGHTS
    assert "hidden/kernel" in inference.op_names
    step = from_tensorflow(model, training=True, batch_size=32, optimizer="adam")
    assert step.name == "mlp_train"
    assert step.num_ops > 3 * inference.num_ops
    assert {"ReluGrad", "BiasAddGrad"} <= set(step.op_types)
    assert step.persistent_memory.sum() >= 3 * WEIGHTS  # weights + Adam's m and v
    slots = {n.rsplit("/", 1)[-1] for n, t in zip(step.op_names, step.op_types, strict=True) if t == "VarHandleOp"}
    assert {"hidden_kernel_momentum", "hidden_kernel_velocity"} <= slots
    updates = [i for i, t in enumerate(step.op_types) if t.startswith("Assign")]
    assert updates and all(step.colocation[i] is not None for i in updates)
    for i, shapes in enumerate(step.output_shapes):
        assert all(d >= 0 for s in shapes for d in s), step.op_names[i]


def test_a_tf_function_with_an_unknown_batch_is_traced_at_batch_size_through_its_loops():
    """batch_size was written into the placeholders only: a tf.while_loop's outputs kept the unknown batch, and the
    import failed asking for the batch_size it was given."""
    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def loop(x):
        w = tf.ones([4, 4])
        _, y = tf.while_loop(lambda i, x: i < 5, lambda i, x: (i + 1, tf.matmul(x, w)), (tf.constant(0), x))
        return tf.reduce_sum(y)

    g = from_tensorflow(loop, batch_size=8)
    assert g.output_shapes[g.op_index["x"]] == ((8, 4),)
    assert (8, 4) in g.output_shapes[g.op_index["while"]]


_FINGERPRINT_SCRIPT = """
import os, sys
sys.path.insert(0, os.environ["GPLACE_TEST_DIR"])
from test_tensorflow_importer import _mlp
from gplace.importers.tensorflow import from_tensorflow
print(from_tensorflow(_mlp(), training=True, batch_size=4).fingerprint)
"""


def test_a_training_step_imports_with_one_fingerprint_in_every_process():
    """A training step's fingerprint changed with each import: an optimiser named by string was numbered anew
    (sgd/..., then sgd_1/...), and control edges kept TensorFlow's order, which differs between processes; a
    placement saved for one import was refused for the next."""
    import subprocess
    import sys

    here = from_tensorflow(_mlp(), training=True, batch_size=4)
    assert from_tensorflow(_mlp(), training=True, batch_size=4).fingerprint == here.fingerprint
    env = {**os.environ, "GPLACE_TEST_DIR": os.path.dirname(__file__)}
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", _FINGERPRINT_SCRIPT], env={**env, "PYTHONHASHSEED": seed},
                             capture_output=True, text=True, timeout=300, check=True)
        assert out.stdout.split()[-1] == here.fingerprint


def test_a_keras_training_step_carries_forward_backward_and_update_phases():
    """Gradient-tape ops are backward (each naming the forward op it differentiates where its scope is one),
    the optimiser and what follows it are update ops, the rest forward; the pipeline simulator accepts it.
    Inference has no phases."""
    from gplace.ir import Placement
    from gplace.pipeline import PipelineSimulator
    from gplace.testing import uniform_cluster

    model = _mlp()
    assert from_tensorflow(model, batch_size=32).phase == ()
    step = from_tensorflow(model, training=True, batch_size=32, optimizer="adam")
    phase = dict(zip(step.op_names, step.phase, strict=True))
    backward = {n for n, p in phase.items() if p == "backward"}
    assert backward == {n for n in phase if n.startswith("gradient_tape/")} | {"ones"}  # and the tape's seed
    types = dict(zip(step.op_names, step.op_types, strict=True))
    assert phase["hidden/kernel"] == "forward"
    assert {phase[n] for n in phase if types[n] == "MatMul" and not n.startswith("gradient_tape/")} == {"forward"}
    updates = [n for n, t in zip(step.op_names, step.op_types, strict=True) if t.startswith("Assign")]
    assert updates and any(phase[n] == "update" for n in updates)  # the optimiser writes the weights
    assert {phase[n] for n in phase if n.split("/")[0].startswith("adam") and "Assign" in n} == {"update"}
    named = [(step.op_names[b], step.op_names[f]) for b, f in enumerate(step.grad_of) if f >= 0]  # -1: none
    assert any(types[f] == "MatMul" for _, f in named)  # e.g. gradient_tape/mlp_1/hidden_1/MatMul/MatMul
    assert all(b.startswith(f"gradient_tape/{f}/") and phase[f] == "forward" for b, f in named
               if not b.endswith("Grad")), named
    assert ("gradient_tape/mlp_1/hidden_1/ReluGrad", "mlp_1/hidden_1/Relu") in named  # its scope is no op
    cluster = uniform_cluster(2)
    t = PipelineSimulator(4, "1f1b").measure(step, cluster, Placement.single(step, 0)).step_time
    assert t > 0


def _regularised_two_output_model() -> object:
    """Two outputs with loss weights, an L2 regulariser, an ``add_loss`` term and a loss-scaling optimiser."""
    import keras

    class Penalty(keras.layers.Layer):
        def call(self, t):
            self.add_loss(0.3 * keras.ops.mean(keras.ops.square(t)))
            return t

    keras.utils.set_random_seed(0)
    x = keras.Input((6,), name="x")
    h = keras.layers.Dense(8, activation="relu", name="d1", kernel_regularizer=keras.regularizers.L2(0.5))(x)
    model = keras.Model(x, [Penalty(name="pen")(keras.layers.Dense(2, name="o1")(h)),
                            keras.layers.Dense(1, name="o2")(h)], name="m")
    model.compile(optimizer=keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1)), loss=["mse", "mse"],
                  loss_weights=[1.0, 0.25])
    return model


def _one_step(graph, feeds: dict) -> tuple[float, dict]:
    """Run an imported training step once from its captured variables' values: (loss, {variable: value after})."""
    source = graph.source
    start = {name: var.numpy() for name, var in source.variables.items()}
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(source.graph_def, name="")
        handles = {op.name: op for op in g.get_operations() if op.type == "VarHandleOp"}
        values = {tf.compat.v1.placeholder(op.get_attr("dtype"), op.get_attr("shape")): (name, op)
                  for name, op in handles.items()}
        inits = [tf.raw_ops.AssignVariableOp(resource=op.outputs[0], value=ph) for ph, (_, op) in values.items()]
        reads = {n: tf.raw_ops.ReadVariableOp(resource=op.outputs[0], dtype=op.get_attr("dtype"))
                 for n, op in handles.items()}
    with tf.compat.v1.Session(graph=g) as session:
        session.run(inits, {ph: start[name] for ph, (name, _) in values.items()})
        [loss] = session.run(list(source.outputs), feeds)
        return float(loss), session.run(reads)


def test_a_keras_training_step_is_the_one_keras_trains_with():
    """The imported step left out the model's regularisers and add_loss terms, ignored the compiled loss weights,
    and took the gradient of the unscaled loss to a LossScaleOptimizer (mixed_float16 compiles one), whose update
    divided it by the scale: weights moved 32,768x too little. Loss and weights now equal train_on_batch's."""
    import numpy as np

    model = _regularised_two_output_model()
    step = from_tensorflow(model, training=True, batch_size=8)
    rng = np.random.default_rng(0)
    x, y0, y1 = (rng.standard_normal((8, k)).astype(np.float32) for k in (6, 2, 1))
    loss, after = _one_step(step, {"x:0": x, "y0:0": y0, "y1:0": y1})
    reference = _regularised_two_output_model()
    expected = reference.train_on_batch(x, [y0, y1])
    assert loss == pytest.approx(expected[0], rel=1e-6)
    weights = {id(v.value): k for k, v in enumerate(model.weights)}
    node_of = {weights[id(var)]: node for node, var in step.source.variables.items() if id(var) in weights}
    assert len(node_of) == len(model.trainable_weights) == 6
    for k, node in node_of.items():
        before = model.weights[k].numpy()
        moved = reference.weights[k].numpy() - before
        assert np.abs(moved).max() > 1e-3, reference.weights[k].path
        np.testing.assert_allclose(after[node] - before, moved, rtol=1e-4, atol=1e-7)


def test_a_loops_gradient_loop_names_the_loop_it_differentiates():
    """An LSTM's gradient loop (``gradient_tape/lstm/while/lstm/while_grad``, its costliest backward op) named no
    forward op, as a ``ReluGrad`` whose scope is no op did not: their activations' lifetimes were unknown."""
    import keras

    keras.utils.set_random_seed(0)
    x = keras.Input((5, 6), name="seq")
    h = keras.layers.ReLU(name="act")(keras.layers.LSTM(8, name="lstm", return_sequences=True)(x))
    step = from_tensorflow(keras.Model(x, keras.layers.Dense(2, name="out")(h[:, -1])), training=True,
                           batch_size=4)
    of = {step.op_names[b]: step.op_names[f] for b, f in enumerate(step.grad_of) if f >= 0}
    types = dict(zip(step.op_names, step.op_types, strict=True))
    [loop_grad] = [n for n, t in types.items() if "While" in t and n.startswith("gradient_tape/")]
    assert types[of[loop_grad]].endswith("While") and not of[loop_grad].startswith("gradient_tape/")
    [relu_grad] = [n for n, t in types.items() if t == "ReluGrad"]
    assert types[of[relu_grad]] == "Relu"


def test_keras_model_without_batch_size_is_unsupported():
    """A Keras model's unknown batch dimension, with no batch_size, raises naming the node."""
    with pytest.raises(UnsupportedGraphError, match=r"node '\w+' \(Placeholder\).*batch_size"):
        from_tensorflow(_mlp())


def test_saved_model_directory_imports_with_calls_inlined(tmp_path):
    """A SavedModel's signature imports: its function call is inlined and its variables are VarHandleOps."""
    path = tmp_path / "exported"
    _mlp().export(str(path), verbose=False)
    g = from_tensorflow(path, batch_size=5)
    assert g.name == "exported"
    assert not {"StatefulPartitionedCall", "PartitionedCall"} & set(g.op_types)
    assert {"hidden/kernel", "out/bias"} <= set(g.op_names)
    assert g.persistent_memory.sum() == WEIGHTS
    mms = [s for s, t in zip(g.output_shapes, g.op_types, strict=True) if t == "MatMul"]
    assert sorted(mms) == [((5, 4),), ((5, 16),)]
    with pytest.raises(UnsupportedGraphError, match="batch_size"):
        from_tensorflow(path)


def test_a_saved_models_loop_stays_one_while_op_when_its_call_is_inlined(tmp_path):
    """Inlining a SavedModel's call keeps a Keras LSTM's loop a functional While (Grappler would otherwise lower
    it to TensorFlow 1 control flow, which is refused)."""
    keras = tf.keras

    class Recurrent(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = keras.Sequential([keras.Input((6, 4), batch_size=2), keras.layers.LSTM(8)])

        @tf.function(input_signature=[tf.TensorSpec((2, 6, 4), tf.float32, name="x")])
        def __call__(self, x):
            return self.model(x)

    module = Recurrent()
    tf.saved_model.save(module, str(tmp_path / "rnn"), signatures=module.__call__)
    g = from_tensorflow(tmp_path / "rnn")
    assert "While" in g.op_types and not {"Enter", "Switch", "Merge"} & set(g.op_types)
