"""A model whose outputs are a sequence of maps (sklearn-style LinearClassifier + ZipMap) is split and written
back; its parts run with onnxruntime give the whole model's outputs."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from gplace import Placement, from_onnx  # noqa: E402
from gplace.export import write_back  # noqa: E402
from gplace.export.onnx import run_parts, split_onnx  # noqa: E402
from gplace.testing import uniform_cluster  # noqa: E402
from tests.export.onnx_files import run_onnx_files  # noqa: E402

X = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)


def _model() -> onnx.ModelProto:
    """label, probs = LinearClassifier(x) -> ZipMap: probs a sequence of {class: probability} maps."""
    coefficients = np.random.default_rng(1).standard_normal(12).round(3).tolist()
    nodes = [helper.make_node("LinearClassifier", ["x"], ["label", "prob"], domain="ai.onnx.ml", name="linear",
                              classlabels_ints=[0, 1, 2], coefficients=coefficients, intercepts=[0.0, 0.1, 0.2],
                              post_transform="SOFTMAX"),
             helper.make_node("ZipMap", ["prob"], ["probs"], domain="ai.onnx.ml", name="zipmap",
                              classlabels_int64s=[0, 1, 2])]
    maps = helper.make_sequence_type_proto(helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(
        TensorProto.FLOAT, [])))
    graph = helper.make_graph(nodes, "ml", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 4])],
                              [helper.make_tensor_value_info("label", TensorProto.INT64, [5]),
                               helper.make_value_info("probs", maps)])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def _check(got: dict, want: list) -> None:
    np.testing.assert_array_equal(got["label"], want[0])
    assert len(got["probs"]) == len(want[1])
    for mine, theirs in zip(got["probs"], want[1], strict=True):
        assert mine.keys() == theirs.keys()
        np.testing.assert_allclose([mine[k] for k in mine], [theirs[k] for k in mine], rtol=1e-6)


@pytest.mark.parametrize("zipmap_on", ["/CPU:0", "/CPU:1"])
def test_sequence_of_maps_outputs_are_written_back_and_run(tmp_path, zipmap_on):
    """Was refused whatever the placement, every op on one device included: "tensor 'probs' cut between devices
    has no known type in the model"."""
    model = _model()
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": X})
    graph, cluster = from_onnx(model), uniform_cluster(2, kind="cpu")
    placement = Placement.from_names(graph, cluster, {"x": "/CPU:0", "linear": "/CPU:0", "zipmap": zipmap_on})
    np.testing.assert_array_equal(run_parts(split_onnx(graph, cluster, placement), {"x": X}, "label")["label"],
                                  want[0])
    write_back(graph, cluster, placement, tmp_path / "out")
    placed = ort.InferenceSession(str(tmp_path / "out" / "placed.onnx"), providers=["CPUExecutionProvider"])
    _check(dict(zip(["label", "probs"], placed.run(None, {"x": X}), strict=True)), want)
    _check(run_onnx_files(sorted((tmp_path / "out" / "parts").glob("*.onnx")), {"x": X}), want)
