"""torch import FLOP counts that were 0: in-place activations (``aten.hardtanh_``, ``silu_``, ... counted 0 while
their out-of-place forms were counted), ATen activations and normalisations with no rule (``leaky_relu``,
``log_sigmoid``, ``glu``, ``instance_norm``, ``_prelu_kernel``) and backward ops with no rule (the activations'
``*_backward``, adaptive pooling's backward)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from gplace.importers.torch_export import from_torch  # noqa: E402
from tests.flops_device import add_flops_kind  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _flops(g, kind: str) -> dict[str, float]:
    """FLOPs of ``g``'s ATen ops summed per op type."""
    total: dict[str, float] = {}
    for t, f in zip(g.op_types, g.kind_cost[kind], strict=True):
        if t.startswith("aten."):
            total[t] = total.get(t, 0.0) + float(f)
    return total


class _Branches(nn.Module):
    """Each layer applied to its own copy of the input; their results as a tuple."""

    def __init__(self, *layers: nn.Module) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(layer(x.clone()) for layer in self.layers)


def test_in_place_activations_count_as_their_out_of_place_forms(monkeypatch):
    """x[4, 8] (32 elements) through each in-place activation: its out-of-place count per element (ReLU6 2,
    Hardswish 4, Hardsigmoid 3, SiLU 6, LeakyReLU 2, ELU 5, Mish 10); each was 0."""
    kind = add_flops_kind(monkeypatch)
    net = _Branches(nn.ReLU6(inplace=True), nn.Hardswish(inplace=True), nn.Hardsigmoid(inplace=True),
                    nn.SiLU(inplace=True), nn.LeakyReLU(inplace=True), nn.ELU(inplace=True), nn.Mish(inplace=True))
    flops = _flops(from_torch(net, (torch.randn(4, 8),)), kind)
    per_element = {"hardtanh_": 2, "hardswish_": 4, "hardsigmoid_": 3, "silu_": 6, "leaky_relu_": 2, "elu_": 5,
                   "mish_": 10}
    assert {t: f for t, f in flops.items() if t != "aten.clone.default"} == {
        f"aten.{name}.default": 32.0 * n for name, n in per_element.items()}


def test_aten_activations_and_instance_norm_are_counted(monkeypatch):
    """x[2, 4, 4, 4] (128 elements): leaky_relu 2 per element (as ONNX's LeakyRelu), log_sigmoid 6 (as
    softplus), glu 6 per element of its 64-element output (a sigmoid and a product), instance_norm 8 (as
    InstanceNormalization); each was 0."""
    kind = add_flops_kind(monkeypatch)
    net = _Branches(nn.LeakyReLU(), nn.LogSigmoid(), nn.GLU(), nn.InstanceNorm2d(4))
    flops = _flops(from_torch(net, (torch.randn(2, 4, 4, 4),)), kind)
    assert flops["aten.leaky_relu.default"] == 2 * 128
    assert flops["aten.log_sigmoid.default"] == 6 * 128
    assert flops["aten.glu.default"] == 6 * 64
    assert flops["aten.instance_norm.default"] == 8 * 128


def test_backward_ops_of_activations_and_adaptive_pooling_are_counted(monkeypatch):
    """Training graph of Conv2d(4, 4, 1) then each layer on x[2, 4, 4, 4] (128 elements): a smooth activation's
    backward its forward's count + 2 per element (softplus 8, mish 12, log_sigmoid 8), a piecewise one's its
    forward's (hardswish 4, hardsigmoid 3); glu's backward 4 per element of its 128-element gradient (its forward's
    6 + 2 per pair); PReLU's forward 2 per element, its backward 4 (two gradients); adaptive pooling to 2x2 one
    2x2 window per element of its 32-element gradient, as its forward reads each input once. Each was 0."""
    kind = add_flops_kind(monkeypatch)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(4, 4, 1), _Branches(
        nn.Softplus(), nn.Mish(), nn.LogSigmoid(), nn.Hardswish(), nn.Hardsigmoid(), nn.GLU(), nn.PReLU(),
        nn.AdaptiveAvgPool2d(2), nn.AdaptiveMaxPool2d(2)))
    flops = _flops(from_torch(net, (torch.randn(2, 4, 4, 4),), training=True), kind)
    expected = {"softplus_backward": 8 * 128, "mish_backward": 12 * 128, "log_sigmoid_backward": 8 * 128,
                "log_sigmoid_forward": 6 * 128, "hardswish_backward": 4 * 128, "hardsigmoid_backward": 3 * 128,
                "glu_backward": 4 * 128, "_prelu_kernel": 2 * 128, "_prelu_kernel_backward": 4 * 128,
                "_adaptive_avg_pool2d_backward": 32 * 4, "adaptive_max_pool2d_backward": 32 * 4}
    assert {name: flops[f"aten.{name}.default"] for name in expected} == expected


def test_eval_mode_dropout_counts_nothing(monkeypatch):
    """An eval-mode export's aten.dropout(x, 0.5, train=False) on x[4, 8] is the identity: 0 FLOPs (was 2 per
    element, 64, while its in-place dropout_ counted 0); a training graph's native_dropout still counts 2 per
    element and its backward 1."""
    kind = add_flops_kind(monkeypatch)
    net = _Branches(nn.Dropout(0.5), nn.Dropout(0.5, inplace=True))
    flops = _flops(from_torch(net, (torch.randn(4, 8),)), kind)
    assert flops["aten.dropout.default"] == flops["aten.dropout_.default"] == 0
    train = _flops(from_torch(nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5)), (torch.randn(4, 8),),
                              training=True), kind)
    assert train["aten.native_dropout.default"] == 2 * 32 and train["aten.native_dropout_backward.default"] == 32
