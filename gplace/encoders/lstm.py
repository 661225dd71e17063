"""The paper's encoder: a bidirectional LSTM over groups in topological order (Mirhoseini et al. 2017)."""

from __future__ import annotations

from typing import Final

import torch
from torch import nn

from gplace.configurable import Configurable
from gplace.encoders.embedding import GroupEmbedding
from gplace.ir.errors import check_sizes


class LSTMEncoder(Configurable, nn.Module):
    """Embeds each group from its features, then reads the sequence with a bidirectional LSTM.

    A group's input is the sum of its ops' type embeddings (``nn.EmbeddingBag``) next to linear projections of
    its output shapes, neighbour positions and cost numbers (see :func:`gplace.features.featurize`).

    Args:
        hidden_size: size H of each output state; each direction has H / 2 (default: 256).
        type_embedding: size of the op-type embedding (default: 64).
        num_type_buckets: number of hashed op-type ids (default: 512).
        max_neighbours: width K of the adjacency features (default: 20).
        projection: size of each projection of shapes, adjacency and numbers (default: 32).

    Shapes:
        input: the dict of :meth:`gplace.features.GroupFeatures.to_tensors` for G groups;
        output: (G, H) float32, row ``i`` for the group at position ``i`` of ``features["order"]``.
    """

    order_sensitive: Final[bool] = True
    """The states depend on the order the groups are read in."""
    uses_edge_features: Final[bool] = False
    """Edges enter only as neighbour positions, not as per-edge features."""

    def __init__(self, hidden_size: int = 256, type_embedding: int = 64, num_type_buckets: int = 512,
                 max_neighbours: int = 20, projection: int = 32) -> None:
        super().__init__()
        check_sizes("LSTMEncoder", hidden_size=hidden_size)
        if hidden_size < 2 or hidden_size % 2:
            raise ValueError(f"hidden_size must be even and >= 2 (two directions), got {hidden_size}")
        self.hidden_size, self.num_type_buckets, self.max_neighbours = hidden_size, num_type_buckets, max_neighbours
        self.embedding = GroupEmbedding(type_embedding, num_type_buckets, max_neighbours, projection)
        self.lstm = nn.LSTM(self.embedding.output_size, hidden_size // 2, batch_first=True, bidirectional=True)

    def embed(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Per-group LSTM inputs (:class:`~gplace.encoders.embedding.GroupEmbedding`).

        Shapes:
            features as in the class docstring; returns (G, type_embedding + 3 * projection).
        """
        return self.embedding(features)

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Encoder states of the groups in feature order.

        Shapes:
            features as in the class docstring; returns (G, H).
        """
        states, _ = self.lstm(self.embed(features).unsqueeze(0))
        return states.squeeze(0)
