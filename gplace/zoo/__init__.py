"""Built-in graphs and clusters."""

from gplace.zoo.clusters import paper_cluster
from gplace.zoo.lstm_lm import lstm_lm

__all__ = ["lstm_lm", "paper_cluster"]
