"""A sparse input through torch.export holds its values and indices (it counted its dense size: 4,000,000 bytes
for a 1000x1000 COO tensor of 10 non-zeros); where the program cannot be run on example inputs it counts dense,
with a warning naming the nodes."""

from __future__ import annotations

import copy
import logging
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from gplace.importers.torch_export import from_torch  # noqa: E402


class _Double(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def _coo() -> torch.Tensor:
    rows = torch.arange(10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note on sparse invariant checks
        return torch.sparse_coo_tensor(torch.stack([rows, 9 - rows]), torch.ones(10), (1000, 1000)).coalesce()


def test_a_sparse_coo_input_and_result_hold_values_and_indices(caplog):
    x = _coo()
    real = x.values().nbytes + x.indices().nbytes  # 40 + 160
    with caplog.at_level(logging.WARNING, logger="gplace"):
        graph = from_torch(_Double(), (x,))
    assert {op.name: op.output_bytes for op in graph.ops()} == {"x": real, "mul": real}
    assert [(e.src, e.dst, e.bytes) for e in graph.edges()] == [("x", "mul", real)]
    assert {op.name: op.output_shapes for op in graph.ops()}["x"] == ((1000, 1000),)
    assert "dense size" not in caplog.text


def test_a_sparse_value_not_run_counts_dense_with_a_warning(caplog):
    program = copy.copy(torch.export.export(_Double(), (_coo(),)))
    program.example_inputs = None
    with caplog.at_level(logging.WARNING, logger="gplace"):
        graph = from_torch(program)
    assert {op.name: op.output_bytes for op in graph.ops()} == {"x": 4_000_000, "mul": 4_000_000}
    assert "2 sparse value(s) count their dense size" in caplog.text
    assert "x, mul" in caplog.text
