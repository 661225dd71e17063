"""GDP's superposition network (Zhou et al. 2019): the placer's layers conditioned on an embedding of the graph."""

from __future__ import annotations

import torch
from torch import nn

from gplace.ir.errors import check_sizes
from gplace.policies.gdp import GDPPolicy


class SuperpositionPolicy(GDPPolicy):
    """:class:`GDPPolicy` whose every transformer layer is modulated feature-wise by the graph being placed.

    The graph's embedding is the mean of its groups' encoder states; a small network maps it to a scale and a
    shift per layer and feature, applied to that layer's output: ``x * (1 + scale) + shift`` (FiLM). One set of
    weights then holds a different placer per graph, a superposition: pretrain it on many graphs, and fine-tune
    either all weights or only the conditioning (:meth:`conditioning_parameters`) on a new one. The
    conditioning's last layer starts at zero, so an untrained superposition network places as GDPPolicy does.

    Args:
        num_devices: number of devices D.
        hidden_size: model width H (default: 128).
        num_heads: attention heads; must divide ``hidden_size`` (default: 4).
        num_layers: transformer layers L (default: 2).
        segment_size: groups per segment (default: 128).
        state_size: size S of the encoder states (default: ``hidden_size``).
        feedforward_size: width of each layer's feed-forward block (default: ``4 * hidden_size``).
        conditioning_size: width of the conditioning network's hidden layer (default: ``hidden_size``).

    Shapes:
        states (G, S) float, allowed (G, D) bool; devices (K, G) int64; log_prob and entropy (K,).
    """

    def __init__(self, num_devices: int, hidden_size: int = 128, num_heads: int = 4, num_layers: int = 2,
                 segment_size: int = 128, *, state_size: int | None = None, feedforward_size: int | None = None,
                 conditioning_size: int | None = None) -> None:
        if conditioning_size is not None:
            check_sizes("SuperpositionPolicy", conditioning_size=conditioning_size)
        super().__init__(num_devices, hidden_size, num_heads, num_layers, segment_size, state_size=state_size,
                         feedforward_size=feedforward_size)
        width = hidden_size if conditioning_size is None else conditioning_size
        last = nn.Linear(width, 2 * num_layers * hidden_size)
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)
        self.conditioning = nn.Sequential(nn.Linear(self.state_size, width), nn.Tanh(), last)
        self.num_layers, self.hidden_size = num_layers, hidden_size

    def conditioning_parameters(self) -> list[nn.Parameter]:
        """The weights that map a graph to its modulation (to fine-tune alone)."""
        return list(self.conditioning.parameters())

    def _modulate(self, x: torch.Tensor, layer: int, states: torch.Tensor) -> torch.Tensor:
        """``x * (1 + scale) + shift`` with this graph's scale and shift for ``layer``.

        Shapes: x (B, L, H); states (G, S); returns (B, L, H).
        """
        film = self.conditioning(states.mean(0)).view(self.num_layers, 2, self.hidden_size)
        scale, shift = film[layer]
        return x * (1 + scale) + shift
