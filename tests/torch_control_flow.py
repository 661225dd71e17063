"""Tiny PyTorch modules with control flow (``torch.cond``, ``torch.while_loop``) or in-place updates: one place
for the importer, runtime and write-back tests."""

from __future__ import annotations

import torch
from torch import nn


class Branchy(nn.Module):
    """A layer, then ``torch.cond`` on its output: another layer and a product, or a difference."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.first(x))
        return torch.cond(h.sum() > 0, lambda t: self.second(t) * 2, lambda t: t - 1, (h,)) + 1


class Looping(nn.Module):
    """``torch.while_loop`` ``trips`` times (default 3) over y -> 2 y + 1."""

    def __init__(self, trips: int = 3) -> None:
        super().__init__()
        self.trips = trips

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        start, trips = torch.zeros((), dtype=torch.int64), self.trips
        return torch._higher_order_ops.while_loop(lambda i, y: i < trips, lambda i, y: (i + 1, y * 2 + 1),
                                                  (start, x))[1]


class Nested(nn.Module):
    """A ``torch.cond`` whose first branch is another ``torch.cond`` (a product either way), the other a
    difference."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def inner(y: torch.Tensor) -> torch.Tensor:
            return torch.cond(y.sum() > 1, lambda z: z * 2, lambda z: z * 3, (y,))

        return torch.cond(x.sum() > 0, inner, lambda y: y - 1, (x,))


class NoGradInside(nn.Module):
    """A gate computed under ``torch.no_grad()`` inside ``forward`` (torch.export: ``wrap_with_set_grad_enabled``)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            gate = self.layer(x).sigmoid()
        return self.layer(x) * gate


class AutocastOff(nn.Module):
    """Rotary-style frequencies under ``torch.autocast(enabled=False)``, as Llama's rotary embedding computes them
    (torch.export: ``wrap_with_autocast``)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(8, 8)
        self.register_buffer("inv_freq", torch.arange(1.0, 9.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", enabled=False):
            angles = (x.float() * self.inv_freq).cos()
        return self.layer(x) + angles


class Counter(nn.Module):
    """Counts its calls in a buffer, updated in place."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 4)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return self.layer(x) * self.calls


class MutatesInput(nn.Module):
    """Doubles its input in place."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return x + 1
