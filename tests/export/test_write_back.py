"""``write_back`` and ``gplace place graph=onnx``: the placed program lands beside placement.json and runs."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import Placement, from_torch  # noqa: E402
from gplace.export import write_back  # noqa: E402
from gplace.export.onnx import DEVICE_KEY  # noqa: E402
from gplace.ir import InvalidPlacementError, cluster_to_dict, save_json  # noqa: E402
from gplace.testing import random_dag, uniform_cluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _two_tower(path: Path) -> Path:
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), f"W{i}") for i in range(3)]
    nodes = [helper.make_node("MatMul", ["x", "W0"], ["a"], name="left"),
             helper.make_node("MatMul", ["x", "W1"], ["b"], name="right"),
             helper.make_node("Add", ["a", "b"], ["c"], name="join"),
             helper.make_node("MatMul", ["c", "W2"], ["y"], name="head")]
    graph = helper.make_graph(nodes, "two_tower", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 16])], initializer=weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def test_gplace_place_writes_a_placed_onnx_model_and_per_device_models_that_run(tmp_path):
    model = _two_tower(tmp_path / "two_tower.onnx")
    save_json(cluster_to_dict(uniform_cluster(2, kind="cpu")), tmp_path / "cluster.json")
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "-m", "gplace", "place", "graph=onnx", f"graph.model_or_path={model}",
                           "graph.input_shapes={x:[8,16]}", "cluster=file", f"cluster.path={tmp_path / 'cluster.json'}",
                           "method=round_robin", f"hydra.run.dir={out}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    mapping = json.loads((out / "placement.json").read_text())["placement"]
    placed = onnx.load(str(out / "placed.onnx"))
    assert {n.name: {p.key: p.value for p in n.metadata_props}[DEVICE_KEY] for n in placed.graph.node} == {
        n: mapping[n] for n in ("left", "right", "join", "head")}
    parts = sorted((out / "parts").glob("*.onnx"))
    assert len(parts) >= 2
    for path in parts:  # each part runs its nodes on the device its name says
        devices = {mapping[n.name] for n in onnx.load(str(path)).graph.node}
        assert len(devices) == 1 and path.stem.endswith(devices.pop().strip("/").replace(":", "_"))
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    values = {"x": x}
    for path in parts:  # run in the order of their file names
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        values.update(zip(names, session.run(names, {i.name: values[i.name] for i in session.get_inputs()}),
                          strict=True))
    whole = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(["y"], {"x": x})[0]
    np.testing.assert_allclose(values["y"], whole, rtol=1e-5)


def test_write_back_removes_the_parts_of_an_earlier_placement(tmp_path):
    """A second placement with fewer parts in the same directory left the first one's extra parts beside its own,
    and a program run from ``parts/`` in name order ran them too."""
    from gplace import from_onnx

    graph = from_onnx(_two_tower(tmp_path / "two_tower.onnx"), input_shapes={"x": [8, 16]})
    cluster = uniform_cluster(2, kind="cpu")
    spread = write_back(graph, cluster, Placement.for_graph(graph, [i % 2 for i in range(graph.num_ops)]), tmp_path)
    assert len([p for p in spread if p.parent.name == "parts"]) >= 2
    single = write_back(graph, cluster, Placement.for_graph(graph, [0] * graph.num_ops), tmp_path)
    assert sorted((tmp_path / "parts").iterdir()) == sorted(p for p in single if p.parent.name == "parts")
    assert len(list((tmp_path / "parts").iterdir())) == 1


def test_write_back_of_a_torch_program_is_its_device_map_and_of_a_plain_graph_nothing(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).eval()
    graph, cluster = from_torch(model, (torch.randn(2, 4),)), uniform_cluster(2, kind="gpu")
    [path] = write_back(graph, cluster, Placement.single(graph, 1), tmp_path)
    assert json.loads(path.read_text()) == {"0": "cuda:1", "2": "cuda:1"}
    plain = random_dag(4)
    assert write_back(plain, cluster, Placement.single(plain, 0), tmp_path / "none") == []


def test_write_back_of_a_torch_training_graph_writes_nothing_and_says_why(tmp_path, caplog):
    """A training graph (joint forward+backward) has no device map: write_back wrote nothing, silently, so
    `gplace place graph.training=true` ended without device_map.json and without a word."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    graph, cluster = from_torch(model, (torch.randn(2, 4),), training=True), uniform_cluster(2, kind="cpu")
    with caplog.at_level(logging.WARNING, logger="gplace.export"):
        assert write_back(graph, cluster, Placement.single(graph, 0), tmp_path) == []
    assert not list(tmp_path.iterdir())
    [record] = [r for r in caplog.records if r.name == "gplace.export"]
    assert "no device_map.json" in record.message and graph.name in record.message and "training" in record.message


def test_write_back_refuses_a_wrong_placement_of_a_graph_with_no_program(tmp_path):
    """Nothing is written for a graph without a program, but a placement of another graph or with a device outside
    the cluster was accepted silently there (``[]``), unlike for a graph with one."""
    plain, cluster = random_dag(4), uniform_cluster(2)
    with pytest.raises(InvalidPlacementError, match="device"):
        write_back(plain, cluster, Placement.for_graph(plain, [5] * 4), tmp_path)
    other = random_dag(5, seed=3)
    with pytest.raises(InvalidPlacementError, match="entries"):
        write_back(plain, cluster, Placement.single(other, 0), tmp_path)
    with pytest.raises(TypeError, match="Placement"):
        write_back(plain, cluster, [0, 0, 0, 0], tmp_path)
