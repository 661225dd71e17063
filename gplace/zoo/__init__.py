"""Built-in graphs and clusters."""

from gplace.zoo.clusters import local_cpu_cluster, modern_cluster, paper_cluster
from gplace.zoo.keras_models import ZOO, load_zoo_model
from gplace.zoo.lstm_lm import lstm_lm
from gplace.zoo.nmt import unrolled_nmt

__all__ = ["ZOO", "load_zoo_model", "local_cpu_cluster", "lstm_lm", "modern_cluster", "paper_cluster", "unrolled_nmt"]
