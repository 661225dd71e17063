"""GDP's placer (Zhou et al. 2019): a transformer over node embeddings in segments with recurrent memory."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gplace.ir.errors import check_sizes
from gplace.policies.base import IndependentPolicy


class GDPPolicy(IndependentPolicy):
    """Attends over the encoder states segment by segment and emits every group's device logits in one pass.

    The G states (in the encoder's order) are cut into segments of ``segment_size``. In each pre-LayerNorm
    transformer layer a segment attends to itself and to the previous segment's input to that layer, its
    memory, detached from the graph as in Transformer-XL: gradients do not cross segment boundaries, and
    attention costs ``O(G * segment_size)`` rather than ``O(G^2)``. Segments never wait for one another (a
    segment's memory is the previous layer's output), so all of them run as one batch. Groups are then placed
    independently given the outputs; logits are divided by :attr:`temperature` and barred devices get
    probability zero. There is no positional encoding: the encoder's states carry position (the GNN encoders
    read it as a feature, the LSTM reads the groups in order).

    Args:
        num_devices: number of devices D.
        hidden_size: model width H (default: 128).
        num_heads: attention heads; must divide ``hidden_size`` (default: 4).
        num_layers: transformer layers (default: 2).
        segment_size: groups per segment (default: 128).
        state_size: size S of the encoder states (default: ``hidden_size``).
        feedforward_size: width of each layer's feed-forward block (default: ``4 * hidden_size``).

    Shapes:
        states (G, S) float, allowed (G, D) bool; devices (K, G) int64; log_prob and entropy (K,).
    """

    def __init__(self, num_devices: int, hidden_size: int = 128, num_heads: int = 4, num_layers: int = 2,
                 segment_size: int = 128, *, state_size: int | None = None, feedforward_size: int | None = None
                 ) -> None:
        check_sizes(type(self).__name__, hidden_size=hidden_size, num_heads=num_heads, num_layers=num_layers,
                    segment_size=segment_size,
                    **({} if feedforward_size is None else {"feedforward_size": feedforward_size}))
        super().__init__(hidden_size if state_size is None else state_size, num_devices)
        if hidden_size % num_heads:
            raise ValueError(f"num_heads ({num_heads}) must divide hidden_size ({hidden_size})")
        self.num_devices, self.segment_size = num_devices, segment_size
        ff = 4 * hidden_size if feedforward_size is None else feedforward_size
        self.input = nn.Linear(self.state_size, hidden_size)
        self.attn = nn.ModuleList(nn.MultiheadAttention(hidden_size, num_heads, batch_first=True)
                                  for _ in range(num_layers))
        self.attn_norms = nn.ModuleList(nn.LayerNorm(hidden_size) for _ in range(num_layers))
        self.ff = nn.ModuleList(nn.Sequential(nn.Linear(hidden_size, ff), nn.GELU(), nn.Linear(ff, hidden_size))
                                for _ in range(num_layers))
        self.ff_norms = nn.ModuleList(nn.LayerNorm(hidden_size) for _ in range(num_layers))
        self.out_norm = nn.LayerNorm(hidden_size)
        self.out = nn.Linear(hidden_size, num_devices)

    def _logits(self, states: torch.Tensor, device_features: torch.Tensor | None) -> torch.Tensor:
        """Logits per group. Shapes: states (G, S); returns (G, D)."""
        g = states.shape[0]
        x, pad = self._segments(self.input(states))
        # memory of segment b is segment b - 1; the first segment has none
        mem_pad = torch.cat([torch.ones_like(pad[:1]), pad[:-1]], 0)
        key_pad = torch.cat([mem_pad, pad], 1)
        layers = zip(self.attn, self.attn_norms, self.ff, self.ff_norms, strict=True)
        for i, (attn, attn_norm, ff, ff_norm) in enumerate(layers):
            memory = torch.cat([torch.zeros_like(x[:1]), x[:-1]], 0).detach()
            q = attn_norm(x)
            kv = torch.cat([attn_norm(memory), q], 1)
            x = x + attn(q, kv, kv, key_padding_mask=key_pad, need_weights=False)[0]
            x = self._modulate(x + ff(ff_norm(x)), i, states)
        return self.out(self.out_norm(x)).flatten(0, 1)[:g]

    def _modulate(self, x: torch.Tensor, layer: int, states: torch.Tensor) -> torch.Tensor:
        """The output of transformer layer ``layer`` as the next layer reads it (here unchanged).

        Shapes: x (B, L, H); states (G, S); returns (B, L, H).
        """
        return x

    def _segments(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pad to whole segments, of ``segment_size`` or of all G groups where they are fewer (padding a few groups
        to a long segment cost its square). Shapes: x (G, H); returns (B, L, H) and a (B, L) bool mask, true on
        padding."""
        g = x.shape[0]
        size = min(self.segment_size, max(g, 1))
        n = max(-(-g // size), 1)
        pad = torch.arange(n * size, device=x.device) >= g
        return F.pad(x, (0, 0, 0, n * size - g)).view(n, size, -1), pad.view(n, size)
