"""One GraphSAGE layer of GNNEncoder computed by hand: the residual ``x + relu(conv(x))``, mean aggregation (not
max or sum) and messages in both directions."""

from __future__ import annotations

import torch
from torch import nn

from gplace.encoders import GNNEncoder


class _Fixed(nn.Module):
    """Ignores its input and returns ``value``: fixes the states the layers start from."""

    def __init__(self, value: torch.Tensor) -> None:
        super().__init__()
        self.value = value

    def forward(self, _: object) -> torch.Tensor:
        return self.value


def _one_sage_layer(x: torch.Tensor) -> GNNEncoder:
    """A 2-wide, 1-layer SAGE encoder starting from states ``x``, whose conv is the neighbours' aggregate itself
    (``lin_l`` the identity, ``lin_r`` zero) and whose LayerNorm is left out."""
    enc = GNNEncoder("sage", hidden_size=2, num_layers=1, type_embedding=4, projection=4, max_neighbours=2)
    enc.embedding, enc.input, enc.norms = nn.Identity(), _Fixed(x), nn.ModuleList([nn.Identity()])
    conv = enc.convs[0]
    with torch.no_grad():
        conv.lin_l.weight.copy_(torch.eye(2))
        conv.lin_l.bias.zero_()
        conv.lin_r.weight.zero_()
    return enc


def test_a_sage_layer_adds_the_relu_of_the_mean_of_both_way_neighbours_to_the_state() -> None:
    """Path g0 -> g1 -> g2 with states x0 = (1, 4), x1 = (-2, 0), x2 = (3, 2). g1 hears g0 and g2 (its producer and
    its consumer): mean (2, 3), so (-2, 0) + (2, 3) = (0, 3) (max would give (3, 4) and (1, 4); sum (4, 6), (2, 6);
    only its producer (1, 4), (-1, 4)). g0 and g2 hear g1 only: relu(-2, 0) = 0 keeps them at x0 and x2
    (without the residual they would be 0; without the relu x0 would be (-1, 4))."""
    x = torch.tensor([[1.0, 4.0], [-2.0, 0.0], [3.0, 2.0]])
    features = {"edge_index": torch.tensor([[0, 1], [1, 2]]), "edge_attr": torch.zeros(2, 1)}
    out = _one_sage_layer(x)(features)
    torch.testing.assert_close(out, torch.tensor([[1.0, 4.0], [0.0, 3.0], [3.0, 2.0]]))
