"""Importers: read graphs and clusters written by other tools into gplace's IR."""

from gplace.importers.load import detect_graph_format, load_cluster, load_graph
from gplace.importers.profiles import (
    load_doppler,
    load_giph_graph,
    load_giph_network,
    load_pipedream,
    pipedream_stage_ids,
)

__all__ = [
    "detect_graph_format", "load_cluster", "load_doppler", "load_giph_graph", "load_giph_network", "load_graph",
    "load_pipedream", "pipedream_stage_ids",
]
