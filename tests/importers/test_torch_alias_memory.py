"""torch import: a view or an in-place op holds no bytes of its own; the storage it aliases stays allocated until
its readers have ended (``gplace.importers.aliases``). Each was charged as a fresh tensor: a training step's
simulated peak was 1.2x-3.4x what torch allocates."""

from __future__ import annotations

import numpy as np
import torch

from gplace.importers.torch_export import from_torch
from gplace.ir import Placement
from gplace.runtime import Simulator
from gplace.testing import uniform_cluster

KIB64 = 128 * 128 * 4


class TwoViews(torch.nn.Module):
    """``y`` (64 KiB) read through two views, one transposed into a matrix product with a 64 KiB weight."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(128, 128))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [1, 128]
        y = torch.exp(x.expand(128, 128))
        return (y.t() @ self.w).sum() + (y.view(-1, 64) * 2).sum()


class InPlaceChain(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(128, 128))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.w * x
        y.relu_()
        y.add_(1)
        return y.mul_(3).sum()


class CopyOrView(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.exp(x)
        return y.t().reshape(-1).sum(), y.view(-1)  # reshape of a transposed tensor copies; a returned view


def _ops(graph):
    return {op.name: op for op in graph.ops()}


def _edges(graph):
    return {(e.src, e.dst): e.bytes for e in graph.edges()}


def test_views_and_in_place_ops_hold_no_bytes_of_their_own():
    views = _ops(from_torch(TwoViews(), (torch.randn(1, 128),)))
    assert [views[n].output_bytes for n in ("expand", "t", "view")] == [0, 0, 0]
    assert views["exp"].output_bytes == KIB64
    chain = _ops(from_torch(InPlaceChain(), (torch.randn(128, 128),)))
    assert [chain[n].output_bytes for n in ("relu_", "add_", "mul_")] == [0, 0, 0]
    assert chain["mul"].output_bytes == KIB64


def test_a_copy_the_schema_calls_an_alias_and_a_returned_view_keep_their_bytes():
    """``reshape`` may alias (its schema) but copies a transposed tensor; a view the program returns is held to
    the end of the step as every output is."""
    ops = _ops(from_torch(CopyOrView(), (torch.randn(128, 128),)))
    assert ops["t"].output_bytes == 0
    assert ops["reshape"].output_bytes == ops["view"].output_bytes == KIB64


def test_a_view_s_readers_hold_its_storage_and_still_pay_to_move_it():
    edges = _edges(from_torch(TwoViews(), (torch.randn(1, 128),)))
    assert edges[("exp", "matmul")] == edges[("exp", "mul")] == 0  # y held until its views' readers end
    assert edges[("t", "matmul")] == edges[("view", "mul")] == KIB64  # the tensor's bytes, for a move


def test_the_simulated_peak_counts_the_storage_once_on_every_device_that_holds_it():
    """One device: the weight, y and one product at a time (+ a 4-byte sum); y's views were two more 64 KiB
    (262,144). The transpose and product on a second device: it holds the weight, the copy of y it received
    and the product."""
    graph = from_torch(TwoViews(), (torch.randn(1, 128),))
    one = Simulator().measure(graph, uniform_cluster(1), Placement.single(graph, 0))
    assert one.peak_memory.tolist() == [3 * KIB64 + 4]
    second = np.array([int(op.name in ("t", "matmul")) for op in graph.ops()])
    two = Simulator().measure(graph, uniform_cluster(2), Placement(second))
    assert two.ok and two.peak_memory[1] == 3 * KIB64
