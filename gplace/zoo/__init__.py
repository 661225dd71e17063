"""Built-in graphs and clusters."""

from gplace.zoo.clusters import local_cpu_cluster, modern_cluster, paper_cluster
from gplace.zoo.gnmt import unrolled_gnmt
from gplace.zoo.keras_models import ZOO, load_zoo_model
from gplace.zoo.lstm_lm import lstm_lm
from gplace.zoo.nmt import unrolled_nmt
from gplace.zoo.transformer_xl import transformer_xl

__all__ = ["ZOO", "load_zoo_model", "local_cpu_cluster", "lstm_lm", "modern_cluster", "paper_cluster",
           "transformer_xl", "unrolled_gnmt", "unrolled_nmt"]
