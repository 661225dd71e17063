"""A program exported in train mode keeps nn.BatchNorm2d as aten.batch_norm(training=True), which computes batch
statistics, yet was costed as inference (2 FLOPs per element where _native_batch_norm_legit_functional, the same
work in a joint graph, counts 6): the flag was never read."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from gplace.costmodel import TensorSpec, op_flops  # noqa: E402
from gplace.importers.torch_export import from_torch  # noqa: E402
from tests.flops_device import add_flops_kind  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _batch_norm_flops(g, kind: str) -> float:
    (i,) = [i for i, t in enumerate(g.op_types) if t == "aten.batch_norm.default"]
    return float(g.kind_cost[kind][i])


def test_batch_norm_in_a_train_mode_program_counts_its_batch_statistics(monkeypatch):
    """BatchNorm2d(4) on x[2, 4, 8, 8] (512 elements): train mode 6 FLOPs per element, eval mode 2."""
    flops_kind = add_flops_kind(monkeypatch)
    torch.manual_seed(0)
    bn, x = nn.BatchNorm2d(4), torch.randn(2, 4, 8, 8)
    train = from_torch(torch.export.export(bn.train(), (x,)))
    assert _batch_norm_flops(train, flops_kind) == 6 * 512
    inference = from_torch(torch.export.export(bn.eval(), (x,)))
    assert _batch_norm_flops(inference, flops_kind) == 2 * 512


def test_the_training_attribute_picks_the_count():
    """op_flops: ``training`` (ATen) or ``training_mode`` (ONNX) set: 6 per element; unset or false: 2."""
    x = TensorSpec((2, 4, 8, 8), 2048)
    assert op_flops("aten.batch_norm.default", [x], [x], {"training": True}) == 6 * 512
    assert op_flops("BatchNormalization", [x], [x], {"training_mode": 1}) == 6 * 512
    assert op_flops("aten.batch_norm.default", [x], [x], {"training": False}) == 2 * 512
    assert op_flops("BatchNormalization", [x], [x]) == 2 * 512
