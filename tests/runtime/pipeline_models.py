"""Small models for the torch-pipeline-v1 tests (importable by the stage processes): an MLP, a CNN and a
Transformer, each a sequence of top-level modules the pipeline can split between."""

from __future__ import annotations

import torch
from torch import nn


class ConvNet(nn.Module):
    """Four convolution blocks and a linear head: (B, 3, 16, 16) -> (B, 10)."""

    def __init__(self) -> None:
        super().__init__()
        self.c0 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.c1 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.c2 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(8 * 16 * 16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.c2(self.c1(self.c0(x))))


class Block(nn.Module):
    """A pre-norm Transformer block (attention, then an MLP), both residual."""

    def __init__(self, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyTransformer(nn.Module):
    """Embedding projection, three blocks and a head: (B, 6, 8) -> (B, 6, 4)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.b0, self.b1, self.b2 = Block(), Block(), Block()
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.b2(self.b1(self.b0(self.embed(x)))))


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))


MODELS = {  # name -> (build, input shape, target shape, top-level modules in order)
    "mlp": (mlp, (8, 8), (8, 4), ["0", "1", "2", "3", "4"]),
    "cnn": (ConvNet, (8, 3, 16, 16), (8, 10), ["c0", "c1", "c2", "head"]),
    "transformer": (TinyTransformer, (8, 6, 8), (8, 6, 4), ["embed", "b0", "b1", "b2", "head"]),
}


def dying_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """A loss whose process dies (as a segfault would)."""
    import os

    os._exit(3)


def hanging_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """A loss that never returns."""
    import time

    time.sleep(3600)
    return output.sum()


class Tied(nn.Module):
    """Three linear layers, the first and last sharing one weight (as a language model ties its embedding and
    output): (B, 8) -> (B, 8)."""

    def __init__(self) -> None:
        super().__init__()
        self.inp, self.mid, self.out = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
        self.out.weight = self.inp.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.mid(torch.relu(self.inp(x)))))


class Normed(nn.Module):
    """A linear layer, BatchNorm (train mode: its running statistics change with every forward) and a head:
    (B, 8) -> (B, 4)."""

    def __init__(self) -> None:
        super().__init__()
        self.inp, self.norm, self.out = nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.norm(self.inp(x))))


class CalledTwice(nn.Module):
    """Module ``s`` called twice, around ``b``: (B, 8) -> (B, 8)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.s, self.b = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.s(torch.relu(self.b(self.s(self.a(x)))))


class Counter(nn.Module):
    """A root buffer written in place on every call and read after its layers: (B, 8) -> (B, 8). torch's pipelining
    traces it but cannot run it split between ``a`` and ``b``."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count += 1
        return self.b(self.a(x)) * self.count


class Branching(nn.Module):
    """A ``torch.cond`` between two layers, which torch's pipelining cannot trace: (B, 8) -> (B, 8)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        return self.c(torch.cond(h.sum() > 0, lambda t: self.b(t), lambda t: t * 2, (h,)))


@torch.library.custom_op("gplace_tests::fails_when_run", mutates_args=())
def fails_when_run(x: torch.Tensor) -> torch.Tensor:
    """An op torch.export traces (by its fake) that raises when a stage runs it."""
    raise RuntimeError("stage op exploded")


fails_when_run.register_fake(lambda x: torch.empty_like(x))
fails_when_run.register_autograd(lambda ctx, grad: grad)


class _Fails(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fails_when_run(x)


class FailsInStage(nn.Module):
    """(B, 8) -> (B, 4), whose module ``b`` raises "stage op exploded" when run."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 16), _Fails(), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(self.b(self.a(x)))
