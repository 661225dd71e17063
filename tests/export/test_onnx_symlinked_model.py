"""A model file reached through a symbolic link finds its external data beside the link, as onnxruntime does."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import Placement, from_onnx  # noqa: E402
from gplace.export import write_back  # noqa: E402
from gplace.export.onnx import run_parts, split_onnx  # noqa: E402
from gplace.testing import uniform_cluster  # noqa: E402

X = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)


def _model() -> onnx.ModelProto:
    """y = relu(x @ W1) @ W2, the weights external."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), f"W{i}") for i in (1, 2)]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["a"], name="mm1"),
             helper.make_node("Relu", ["a"], ["b"], name="relu"),
             helper.make_node("MatMul", ["b", "W2"], ["y"], name="mm2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], initializer=weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_symlinked_model_file_reads_the_data_beside_the_link(tmp_path):
    """``link/m.onnx -> ../real/m.onnx`` with ``m.data`` in ``link/``: onnxruntime reads the data beside the link;
    so do the parts and the written model (was: the folder of the resolved file, where ``m.data`` is missing)."""
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.mkdir()
    onnx.save_model(_model(), str(link / "m.onnx"), save_as_external_data=True, location="m.data", size_threshold=0)
    (link / "m.onnx").rename(real / "m.onnx")
    (link / "m.onnx").symlink_to("../real/m.onnx")
    want = ort.InferenceSession(str(link / "m.onnx"), providers=["CPUExecutionProvider"]).run(["y"], {"x": X})[0]
    graph, cluster = from_onnx(link / "m.onnx"), uniform_cluster(2, kind="cpu")
    assert graph.source.base_dir == str(link)
    placement = Placement.from_names(graph, cluster, {"x": "/CPU:0", "mm1": "/CPU:0", "relu": "/CPU:1",
                                                      "mm2": "/CPU:1"})
    np.testing.assert_allclose(run_parts(split_onnx(graph, cluster, placement), {"x": X}, ["y"])["y"], want,
                               rtol=1e-6)
    write_back(graph, cluster, placement, tmp_path / "out")
    placed = ort.InferenceSession(str(tmp_path / "out" / "placed.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(placed.run(["y"], {"x": X})[0], want, rtol=1e-6)
