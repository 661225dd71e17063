"""A split program's own submodules (``_input_check``, ``_transfers``) beside a model's root attributes of those
names: the model's parameter or buffer stays, the helper takes a free name (found by a name-collision probe: a
parameter ``_transfers`` was a TypeError, a buffer ``_input_check`` was replaced and the split failed at run time)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from gplace import Placement, from_torch
from gplace.export.torch import split_program
from gplace.testing import uniform_cluster


class Colliding(nn.Module):
    """A root parameter ``_transfers`` (and ``_transfers_1``) and a root buffer ``_input_check``."""

    def __init__(self) -> None:
        super().__init__()
        self._transfers = nn.Parameter(torch.full((4,), 3.0))
        self._transfers_1 = nn.Parameter(torch.full((4,), -1.0))
        self.register_buffer("_input_check", torch.arange(4.0))

    def forward(self, x):
        return torch.relu(x * self._transfers) + self._input_check * self._transfers_1


X = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def split_and_model():
    model = Colliding().eval()
    graph = from_torch(model, (X,))
    placement = Placement.for_graph(graph, np.arange(graph.num_ops) % 2)
    return split_program(graph, uniform_cluster(2, kind="cpu"), placement), model


def test_root_attributes_named_like_the_helpers_split_and_run_like_the_model(split_and_model):
    split, model = split_and_model
    assert sum(name.startswith("submod_") for name, _ in split.named_children()) >= 2
    with torch.no_grad():
        torch.testing.assert_close(split(X), model(X))


def test_the_models_tensors_keep_their_names_and_the_helpers_take_free_ones(split_and_model):
    split, model = split_and_model
    torch.testing.assert_close(split._transfers, model._transfers)
    torch.testing.assert_close(split._input_check, model._input_check)
    helpers = {node.target for node in split.graph.nodes if node.op == "call_module"
               and not node.target.startswith("submod_")}
    assert helpers == {"_input_check_1", "_transfers_2"}


def test_the_renamed_input_check_still_checks(split_and_model):
    split, _ = split_and_model
    with pytest.raises(ValueError, match="dtype torch.float64, expected torch.float32"):
        split(X.double())
