"""Per-group input embedding shared by encoders: op types, output shapes, neighbour positions and numbers."""

from __future__ import annotations

import torch
from torch import nn

from gplace.features import NUMERIC_FEATURES, POSITION_FEATURES, SHAPE_FEATURES
from gplace.ir.errors import check_sizes


class GroupEmbedding(nn.Module):
    """Embeds each group from its features, the input layer of :class:`~gplace.encoders.LSTMEncoder`'s kind.

    A group's embedding is the sum of its ops' type embeddings (``nn.EmbeddingBag``) next to linear projections
    of its output shapes, neighbour positions and cost numbers (see :func:`gplace.features.featurize`), and,
    with ``use_position``, of its position and depth in the graph; the concatenation is layer-normalised.

    Args:
        type_embedding: size of the op-type embedding (default: 64).
        num_type_buckets: number of hashed op-type ids (default: 512).
        max_neighbours: width K of the adjacency features (default: 20).
        projection: size of each projection of shapes, adjacency, numbers and position (default: 32).
        use_position: also project ``features["position"]``; an order-blind encoder needs it (default: ``False``).

    Shapes:
        input: the dict of :meth:`gplace.features.GroupFeatures.to_tensors` for G groups;
        output: (G, :attr:`output_size`) float32.
    """

    def __init__(self, type_embedding: int = 64, num_type_buckets: int = 512, max_neighbours: int = 20,
                 projection: int = 32, *, use_position: bool = False) -> None:
        super().__init__()
        check_sizes("the group embedding", type_embedding=type_embedding, num_type_buckets=num_type_buckets,
                    max_neighbours=max_neighbours, projection=projection)
        self.num_type_buckets, self.max_neighbours = num_type_buckets, max_neighbours
        self.types = nn.EmbeddingBag(num_type_buckets, type_embedding, mode="sum")
        self.shapes = nn.Linear(2 * SHAPE_FEATURES, projection)
        self.adjacency = nn.Linear(max_neighbours, projection)
        self.numeric = nn.Linear(NUMERIC_FEATURES, projection)
        self.position = nn.Linear(POSITION_FEATURES, projection) if use_position else None
        self.output_size = type_embedding + (4 if use_position else 3) * projection
        """Width of the embedding."""
        self.norm = nn.LayerNorm(self.output_size)

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Layer-normalised concatenation of the type embedding and the feature projections.

        Raises:
            ValueError: the adjacency features have another width than ``max_neighbours``, or a type id is not below
                ``num_type_buckets`` (features made with another ``num_type_buckets``).

        Shapes:
            features as in the class docstring; returns (G, output_size).
        """
        adjacency = features["adjacency"]
        if adjacency.shape[-1] != self.max_neighbours:
            raise ValueError(f"adjacency has width {adjacency.shape[-1]}, encoder expects {self.max_neighbours}")
        type_ids = features["type_ids"]
        outside = type_ids[(type_ids < 0) | (type_ids >= self.num_type_buckets)]
        if len(outside):  # an embedding index out of range: a CUDA device-side assert that ends the process's CUDA
            raise ValueError(f"type id {int(outside[0])} is not in [0, num_type_buckets={self.num_type_buckets}) of "
                             f"the encoder: make the features with featurize(..., num_type_buckets="
                             f"{self.num_type_buckets}), or the encoder with the features' count")
        parts = [
            self.types(features["type_ids"], features["type_offsets"]),
            self.shapes(torch.cat([features["shapes"], features["shape_flags"]], -1)),
            self.adjacency(adjacency),
            self.numeric(features["numeric"]),
        ]
        if self.position is not None:
            parts.append(self.position(features["position"]))
        return self.norm(torch.cat(parts, -1))
