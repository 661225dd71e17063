"""torch import: an inference program's dropout with train=True (F.dropout(x, training=True)) counts 2 FLOPs per
element; the torch importer passes dropout's p and train to the cost model (without them it is the identity)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from gplace.importers.torch_export import from_torch  # noqa: E402
from tests.flops_device import add_flops_kind  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


class _Forced(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return nn.functional.dropout(x, 0.5, training=True), nn.functional.dropout(x, 0.0, training=True)


def test_training_dropout_in_an_inference_program_is_counted(monkeypatch):
    """x[4, 8]: dropout(x, 0.5, train=True) 2 per element (was 0 with no train passed); p=0 stays 0."""
    kind = add_flops_kind(monkeypatch)
    g = from_torch(_Forced(), (torch.randn(4, 8),))
    flops = [float(f) for t, f in zip(g.op_types, g.kind_cost[kind], strict=True) if t == "aten.dropout.default"]
    assert flops == [64.0, 0.0]
