"""TensorFlow importer: every op a Keras optimiser's ``apply_gradients`` makes is an ``update`` op, and the tape's
seed ``ones`` a ``backward`` one. Only the optimiser ops downstream of a gradient were ``update``; its learning-rate
reads, step counter, bias corrections and AdamW's weight-decay writes were ``forward`` (117 of AdamW's 174 ops on a
small MLP), run and held as activations per micro-batch by pipe-v2.

The independent source: hooks on ``GradientTape.gradient`` and ``Optimizer.apply_gradients`` record the ops each
call adds to the graph being traced."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402
from gplace.ir import Placement, graph_from_dict, graph_to_dict  # noqa: E402
from gplace.pipeline.simulator import PipelineSimulator, check_phases  # noqa: E402
from gplace.testing import uniform_cluster  # noqa: E402

pytestmark = pytest.mark.tf

_SOURCES = ("VarHandleOp", "Placeholder")  # captured variables and inputs, made wherever first read


def _recording(monkeypatch) -> dict[str, str]:
    """Node name -> the call that made it while tracing: ``backward`` (tape.gradient), ``update``
    (apply_gradients); ops made before are ``forward``."""
    made: dict[str, str] = {}

    def hook(original, phase):
        def wrapper(self, *args, **kwargs):
            graph = tf.compat.v1.get_default_graph()
            before = graph.get_operations()
            out = original(self, *args, **kwargs)
            made.update((op.name, "forward") for op in before if op.name not in made)
            made.update((op.name, phase) for op in graph.get_operations()[len(before):] if op.name not in made)
            return out
        return wrapper

    monkeypatch.setattr(tf.GradientTape, "gradient", hook(tf.GradientTape.gradient, "backward"))
    optimizer = keras.optimizers.Optimizer
    monkeypatch.setattr(optimizer, "apply_gradients", hook(optimizer.apply_gradients, "update"))
    return made


def _mlp(width: int = 16):
    keras.utils.set_random_seed(0)
    x = keras.Input((8,), name="x")
    h = keras.layers.Dense(width, activation="relu", name="d1")(x)
    return keras.Model(x, keras.layers.Dense(4, name="d2")(h), name="mlp")


def _step(monkeypatch, optimizer, width: int = 16):
    made = _recording(monkeypatch)
    graph = from_tensorflow(_mlp(width), training=True, batch_size=4, loss="mse", optimizer=optimizer)
    return graph, made


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_every_op_the_optimiser_and_the_tape_make_has_their_phase(monkeypatch, optimizer):
    opt = keras.optimizers.AdamW(weight_decay=0.01) if optimizer == "adamw" else keras.optimizers.SGD(0.1)
    graph, made = _step(monkeypatch, opt)
    phase = {op.name: op.phase for op in graph.ops() if op.type not in _SOURCES}
    by_call = {n: made[n] for n in phase if n in made}
    assert sum(p == "update" for p in by_call.values()) >= 18
    wrong = {n: (p, phase[n]) for n, p in by_call.items() if p != phase[n]}
    assert not wrong  # e.g. {'sgd/Cast/ReadVariableOp': ('update', 'forward'), 'ones': ('backward', 'forward')}
    assert phase["ones"] == "backward"  # the tape's seed
    forward = {n for n, p in phase.items() if p == "forward"}
    assert forward == {n for n, p in by_call.items() if p == "forward"}
    check_phases(graph)  # no forward op depends on an update op, none on a backward op


def test_adamw_weight_decay_runs_once_per_mini_batch_and_holds_no_activation(monkeypatch):
    """pipe-v2 on one device: the peak is that of the graph with the ops apply_gradients made relabelled update
    (it was 63.5 MB as imported, 38.2 MB relabelled, for four Dense(1024) layers), and AdamW's weight-decay write
    runs once, not once per micro-batch."""
    opt = keras.optimizers.AdamW(weight_decay=0.01)
    graph, made = _step(monkeypatch, opt, width=256)
    record = graph_to_dict(graph)
    for op in record["ops"]:
        if made.get(op["name"]) == "update":
            op["phase"] = "update"
            op.pop("grad_of", None)
    relabelled = graph_from_dict(record)
    cluster, sim = uniform_cluster(1, memory=10**12), PipelineSimulator(microbatches=8, schedule="gpipe")
    imported = sim.simulate(graph, cluster, Placement.single(graph, 0))
    expected = sim.simulate(relabelled, cluster, Placement.single(relabelled, 0))
    assert int(imported.peak_memory[0]) == int(expected.peak_memory[0])
    decay = graph.op_index[f"{opt.name}/AssignSubVariableOp"]  # the first weight's decay write
    assert int((imported.inst_op == decay).sum()) == 1
