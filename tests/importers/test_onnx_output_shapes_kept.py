"""The model ``from_onnx`` keeps (and the write-back writes) passes onnx's checker: a graph output whose shape only
gplace's loop inference learns gets that shape in the output itself (it went into a ``value_info`` entry beside
the output, leaving the output with no shape)."""

from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")

from onnx_control_flow import growing_loop_model, if_loop_model, loop_scan_output_model, scan_model  # noqa: E402

from gplace import from_onnx  # noqa: E402
from gplace.importers.onnx.tensors import tensor_spec  # noqa: E402


@pytest.mark.parametrize("build", [if_loop_model, lambda: if_loop_model(None), scan_model, growing_loop_model,
                                   loop_scan_output_model])
def test_kept_model_passes_the_checker_with_every_output_shaped(build):
    model = build()
    declared = {v.name: tensor_spec(v.type) for v in model.graph.output}
    kept = from_onnx(model).source.model
    onnx.checker.check_model(kept)
    for output in kept.graph.output:
        assert output.type.tensor_type.HasField("shape"), output.name
        assert tensor_spec(output.type) is not None, output.name
        assert output.name not in {v.name for v in kept.graph.value_info}
        if declared[output.name] is not None:
            assert tensor_spec(output.type).shape == declared[output.name].shape
