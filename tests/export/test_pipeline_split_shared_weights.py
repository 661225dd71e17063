"""A weight tied between modules of different stages is copied by torch into each stage, each computing only
its part of the gradient: pipeline_split logs a WARNING naming it (sum or all-reduce the copies' gradients)."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

from gplace.export.torch import pipeline_split
from gplace.importers.torch_export import from_torch
from gplace.ir import Placement
from gplace.testing import uniform_cluster
from tests.export.module_placements import by_module

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning", "ignore::UserWarning")
torch.set_num_threads(1)


class TiedChain(nn.Module):
    """``c`` shares ``a``'s weight."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 8, bias=False), nn.Linear(8, 8), nn.Linear(8, 8, bias=False)
        self.c.weight = self.a.weight

    def forward(self, x):
        return self.c(self.b(self.a(x)))


def test_a_weight_two_stages_hold_is_warned_of(tmp_path, caplog) -> None:
    torch.manual_seed(0)
    model, x, cluster = TiedChain(), torch.randn(2, 8), uniform_cluster(2, kind="cpu")
    graph = from_torch(model, (x,), training=True)
    placement = by_module(graph, {"b": 1, "c": 1})
    with caplog.at_level(logging.WARNING, logger="gplace.export.torch"):
        split = pipeline_split(graph, cluster, placement, model, (x,))
    assert split.pipe.num_stages == 2
    shared = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(shared) == 1 and "'a.weight' is held by pipeline stages 0, 1" in shared[0]
    assert "sum or all-reduce" in shared[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gplace.export.torch"):  # all in one stage: nothing to say
        pipeline_split(graph, cluster, Placement.for_graph(graph, [0] * graph.num_ops), model, (x,))
    assert not caplog.records
