"""Message-passing encoders over the coarse graph: GraphSAGE (as GDP, Zhou et al. 2019), GAT and GIN.

The only module that imports ``torch_geometric``; it does so when an encoder is built, so importing
:mod:`gplace.encoders` stays light.
"""

from __future__ import annotations

import warnings
from typing import Final, Literal

import torch
from torch import nn

from gplace.configurable import Configurable
from gplace.encoders.embedding import GroupEmbedding
from gplace.ir.errors import check_sizes

Conv = Literal["sage", "gat", "gin"]
CONVS: Final[tuple[str, ...]] = ("sage", "gat", "gin")
_LOG_SCALE = 10.0


class GNNEncoder(Configurable, nn.Module):
    """Embeds each group as :class:`~gplace.encoders.LSTMEncoder` does, then passes messages along the edges.

    Each layer is ``x = LayerNorm(x + relu(conv(x)))`` over the coarse graph's edges in both directions (every
    edge is added reversed), so a group hears from its producers and its consumers. GAT also reads per-edge
    features: ``log1p(bytes) / 10`` and the direction (+1 along the edge, -1 reversed). The group's position
    and depth are part of its input, since message passing does not see the order.

    Args:
        conv: the layer, ``"sage"`` (``SAGEConv``, mean aggregation), ``"gat"`` (``GATConv`` with ``edge_dim``)
            or ``"gin"`` (``GINConv`` with a two-layer MLP) (default: ``"sage"``).
        hidden_size: size H of each output state (default: 128).
        num_layers: number of message-passing layers (default: 3).
        heads: attention heads of a GAT layer; must divide ``hidden_size`` (default: 4).
        type_embedding: size of the op-type embedding (default: 64).
        num_type_buckets: number of hashed op-type ids (default: 512).
        max_neighbours: width K of the adjacency features (default: 20).
        projection: size of each projection of shapes, adjacency, numbers and position (default: 32).

    Shapes:
        input: the dict of :meth:`gplace.features.GroupFeatures.to_tensors` for G groups, with
        ``edge_index (2, E) int64`` and ``edge_attr (E, 1)``;
        output: (G, H) float32, row ``i`` for the group at position ``i`` of ``features["order"]``.
    """

    order_sensitive: Final[bool] = False
    """Relabelling the groups permutes the states the same way, for the same feature tensors; the features
    themselves depend on the order the graph lists its ops (:mod:`gplace.features`)."""

    def __init__(self, conv: Conv = "sage", hidden_size: int = 128, num_layers: int = 3, *, heads: int = 4,
                 type_embedding: int = 64, num_type_buckets: int = 512, max_neighbours: int = 20,
                 projection: int = 32) -> None:
        super().__init__()
        _check_args(conv, hidden_size, num_layers, heads)
        self.conv, self.hidden_size = conv, hidden_size
        self.num_type_buckets, self.max_neighbours = num_type_buckets, max_neighbours
        self.uses_edge_features: Final[bool] = conv == "gat"
        """Whether the layers read ``edge_attr``."""
        self.embedding = GroupEmbedding(type_embedding, num_type_buckets, max_neighbours, projection,
                                        use_position=True)
        self.input = nn.Linear(self.embedding.output_size, hidden_size)
        self.convs = nn.ModuleList(_make_conv(conv, hidden_size, heads) for _ in range(num_layers))
        self.norms = nn.ModuleList(nn.LayerNorm(hidden_size) for _ in range(num_layers))

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Node states of the groups in feature order.

        Shapes:
            features as in the class docstring; returns (G, H).
        """
        x = self.input(self.embedding(features))
        edge_index, edge_attr = both_directions(features["edge_index"], features["edge_attr"])
        for conv, norm in zip(self.convs, self.norms, strict=True):
            h = conv(x, edge_index, edge_attr) if self.uses_edge_features else conv(x, edge_index)
            x = norm(x + torch.relu(h))
        return x


def both_directions(edge_index: torch.Tensor, edge_attr: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every edge forward and reversed, with ``log1p(bytes) / 10`` and a direction flag (+1, -1) per edge.

    Shapes:
        edge_index (2, E) int64, edge_attr (E, 1); returns (2, 2E) int64 and (2E, 2) in edge_attr's floating dtype
        (float32 for integer bytes).
    """
    scaled = (edge_attr if edge_attr.is_floating_point() else edge_attr.to(torch.float32)) / _LOG_SCALE
    ones = torch.ones_like(scaled)
    attr = torch.cat([torch.cat([scaled, ones], 1), torch.cat([scaled, -ones], 1)], 0)
    return torch.cat([edge_index, edge_index.flip(0)], 1), attr


def _check_args(conv: str, hidden_size: int, num_layers: int, heads: int) -> None:
    if conv not in CONVS:
        raise ValueError(f"conv must be one of {list(CONVS)}, got {conv!r}")
    check_sizes("GNNEncoder", hidden_size=hidden_size, num_layers=num_layers, heads=heads)
    if conv == "gat" and hidden_size % heads:
        raise ValueError(f"heads ({heads}) must divide hidden_size ({hidden_size}) for GAT")


def _make_conv(conv: str, size: int, heads: int) -> nn.Module:
    """One message-passing layer mapping (G, size) to (G, size)."""
    with warnings.catch_warnings():  # torch_geometric's own deprecations at import: not the caller's to see
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        from torch_geometric.nn import GATConv, GINConv, SAGEConv

    if conv == "sage":
        return SAGEConv(size, size, aggr="mean")
    if conv == "gat":
        return GATConv(size, size // heads, heads=heads, edge_dim=2, add_self_loops=False)
    mlp = nn.Sequential(nn.Linear(size, size), nn.ReLU(), nn.Linear(size, size))
    return GINConv(mlp, train_eps=True)
