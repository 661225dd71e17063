"""An ONNX BatchNormalization with training_mode=1 computes batch statistics (6 FLOPs per element, as torch's
native_batch_norm counts) but was costed as inference (2): the importer never passed the attribute on."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import from_onnx  # noqa: E402
from tests.flops_device import add_flops_kind  # noqa: E402


@pytest.mark.parametrize("training_mode, per_element", [(1, 6), (0, 2), (None, 2)])
def test_batch_normalization_in_training_mode_counts_its_batch_statistics(monkeypatch, training_mode, per_element):
    flops_kind = add_flops_kind(monkeypatch)
    params = [numpy_helper.from_array(np.ones(4, np.float32), name) for name in ("s", "b", "m", "v")]
    outputs = ["y", "rm", "rv"] if training_mode else ["y"]
    attrs = {} if training_mode is None else {"training_mode": training_mode}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], outputs, name="bn", **attrs)
    graph = helper.make_graph([node], "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 8, 8])], params)
    imported = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]))
    bn = imported.op_names.index("bn")
    assert imported.kind_cost[flops_kind][bn] == per_element * 2 * 4 * 8 * 8
