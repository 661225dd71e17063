"""Encoders: group features to one state per group."""

from __future__ import annotations

from gplace.encoders.embedding import GroupEmbedding
from gplace.encoders.gnn import GNNEncoder
from gplace.encoders.lstm import LSTMEncoder

__all__ = ["GNNEncoder", "GroupEmbedding", "LSTMEncoder"]
