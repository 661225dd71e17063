"""A per-group MLP placer: each group's device distribution depends only on that group's encoder state."""

from __future__ import annotations

import torch
from torch import nn

from gplace.ir.errors import check_sizes
from gplace.policies.base import IndependentPolicy


class MLPPolicy(IndependentPolicy):
    """Maps each encoder state through an MLP to device logits; groups are placed independently, in one pass.

    The simplest placer beside the seq2seq decoder: with a message-passing encoder the states already carry the
    graph's context, so this tests how much the decoder itself adds. Logits are divided by :attr:`temperature`
    and barred devices get probability zero.

    Args:
        num_devices: number of devices D.
        hidden_size: width of each hidden layer (default: 128).
        num_layers: number of hidden layers, each ``Linear`` + ReLU (default: 2).
        state_size: size S of the encoder states (default: ``hidden_size``).

    Shapes:
        states (G, S) float, allowed (G, D) bool; devices (K, G) int64; log_prob and entropy (K,).
    """

    def __init__(self, num_devices: int, hidden_size: int = 128, num_layers: int = 2, *,
                 state_size: int | None = None) -> None:
        check_sizes("MLPPolicy", hidden_size=hidden_size)
        check_sizes("MLPPolicy", 0, num_layers=num_layers)
        super().__init__(hidden_size if state_size is None else state_size, num_devices)
        self.num_devices = num_devices
        sizes = [self.state_size] + [hidden_size] * num_layers
        layers: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:], strict=True):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(sizes[-1], num_devices))

    def _logits(self, states: torch.Tensor, device_features: torch.Tensor | None) -> torch.Tensor:
        """Logits per group. Shapes: states (G, S); returns (G, D)."""
        return self.net(states)
