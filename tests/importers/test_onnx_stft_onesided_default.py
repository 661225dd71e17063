"""ONNX import: an STFT without ``onesided`` is one-sided by the spec (``n / 2 + 1`` bins, as onnxruntime and
onnx.reference give); onnx's shape inference took it as two-sided, so gplace sized its output n bins."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import from_onnx  # noqa: E402

pytestmark = pytest.mark.onnx


@pytest.mark.parametrize(("attrs", "bins"), [({}, 5), ({"onesided": 1}, 5), ({"onesided": 0}, 8)])
def test_stft_output_has_the_bins_of_its_onesided(attrs, bins):
    """signal[1, 16, 1], step 4, window of 8: 3 frames of ``bins`` complex values."""
    node = helper.make_node("STFT", ["audio", "step", "window"], ["y"], name="stft", **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("audio", TensorProto.FLOAT, [1, 16, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(4, np.int64), "step"),
         numpy_helper.from_array(np.ones(8, np.float32), "window")])
    g = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    op = g.ops()[g.op_index["stft"]]
    assert op.output_shapes == ((1, 3, bins, 2),)
    assert op.output_bytes == 4 * 3 * bins * 2
