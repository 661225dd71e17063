"""Interpolating resizes counted 0 FLOPs in inference graphs: torch's ``upsample_bilinear2d`` (and bicubic) and
ONNX's ``Resize`` (linear, cubic). Now 3 FLOPs per lerp, one axis after another: bilinear 9 per output element,
bicubic 35; nearest stays 0 (a gather). The torch joint graph's decomposition of a bilinear upsample counts about
9 per output element too."""

from __future__ import annotations

import numpy as np
import pytest

from tests.flops_device import add_flops_kind

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _by_type(g, kind: str) -> dict[str, float]:
    return {t: float(f) for t, f in zip(g.op_types, g.kind_cost[kind], strict=True)}


def test_torch_upsample_counts_its_interpolation(monkeypatch):
    """x[2, 4, 8, 8] upsampled 2x (2,048 output elements): bilinear 9 per element, bicubic 35, nearest 0."""
    torch = pytest.importorskip("torch")
    from torch import nn

    from gplace.importers.torch_export import from_torch

    class Upsamples(nn.Module):
        def forward(self, x):
            return tuple(nn.functional.interpolate(x, scale_factor=2, mode=m) for m in ("bilinear", "bicubic"))

    kind = add_flops_kind(monkeypatch)
    flops = _by_type(from_torch(Upsamples(), (torch.randn(2, 4, 8, 8),)), kind)
    assert flops["aten.upsample_bilinear2d.vec"] == 9 * 2048
    assert flops["aten.upsample_bicubic2d.vec"] == 35 * 2048


@pytest.mark.onnx
def test_onnx_resize_counts_its_mode_over_the_axes_it_resizes(monkeypatch):
    """Resize of x[1, 2, 4, 4] to [1, 2, 8, 8] (128 output elements): linear 9 per element, cubic 35, nearest 0;
    linear to [1, 2, 4, 8] (one axis resized, 64 elements) 3 per element."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from gplace import from_onnx

    sizes = {"big": [1, 2, 8, 8], "wide": [1, 2, 4, 8]}
    inits = [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in sizes.items()]
    nodes = [helper.make_node("Resize", ["x", "", "", size], [name], name=name, mode=mode)
             for name, size, mode in (("linear", "big", "linear"), ("cubic", "big", "cubic"),
                                      ("nearest", "big", "nearest"), ("linear_w", "wide", "linear"))]
    outputs = [helper.make_tensor_value_info(n.output[0], TensorProto.FLOAT, None) for n in nodes]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    kind = add_flops_kind(monkeypatch)
    g = from_onnx(model)
    flops = {name: float(g.kind_cost[kind][g.op_index[name]]) for name in ("linear", "cubic", "nearest", "linear_w")}
    assert flops == {"linear": 9 * 128, "cubic": 35 * 128, "nearest": 0.0, "linear_w": 3 * 64}
