"""gplace's graph IR: op graphs, clusters, placements and their JSON formats."""

from gplace.ir.cluster import Cluster, Device, Link
from gplace.ir.errors import GraphError, InvalidPlacementError, OtherGraphError, UnsupportedGraphError, error_summary
from gplace.ir.graph import Edge, Op, OpGraph, Shape
from gplace.ir.placement import Placement
from gplace.ir.pyg import to_pyg
from gplace.ir.serialize import (
    cluster_from_dict,
    cluster_to_dict,
    graph_from_dict,
    graph_to_dict,
    load_json,
    placement_from_dict,
    placement_to_dict,
    save_json,
)

__all__ = [
    "Cluster", "Device", "Edge", "GraphError", "InvalidPlacementError", "Link", "Op", "OpGraph",
    "OtherGraphError", "Placement", "Shape", "UnsupportedGraphError", "cluster_from_dict", "cluster_to_dict",
    "error_summary", "graph_from_dict", "graph_to_dict", "load_json", "placement_from_dict", "placement_to_dict",
    "save_json", "to_pyg",
]
