"""Conversion of an op graph to a PyTorch Geometric ``Data`` object."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from gplace.ir.graph import OpGraph

if TYPE_CHECKING:
    from torch_geometric.data import Data


def to_pyg(graph: OpGraph, x: np.ndarray | None = None) -> Data:
    """The graph as ``Data(x, edge_index, edge_attr)``.

    Args:
        graph: the op graph.
        x: (N, F) node features; default: log1p of cost (s * 1e6; an op with per-kind costs only takes their
            mean, as the grouping ranks it), persistent, temporary and output bytes.

    Shapes:
        x (N, F) float32, edge_index (2, E) int64, edge_attr (E, 1) float32 = log1p(edge bytes).
    """
    import torch

    with warnings.catch_warnings():  # torch_geometric's own deprecations at import: not the caller's to see
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        from torch_geometric.data import Data

    from gplace.grouping import op_cost  # here: gplace.grouping imports the IR

    if x is None:
        cost = op_cost(graph) * 1e6
        x = np.log1p(np.stack([cost, graph.persistent_memory, graph.temporary_memory, graph.output_bytes], 1))
    elif np.ndim(x) != 2 or np.shape(x)[0] != graph.num_ops:
        raise ValueError(f"x must be (N, F) node features with N = {graph.num_ops} (the ops of graph {graph.name!r}), "
                         f"got shape {np.shape(x)}")
    data = Data(
        x=torch.as_tensor(np.asarray(x, dtype=np.float32)),
        edge_index=torch.as_tensor(np.array(graph.edge_index)),
        edge_attr=torch.as_tensor(np.log1p(graph.edge_bytes.astype(np.float32))[:, None]),
        num_nodes=graph.num_ops,
    )
    data.validate(raise_on_error=True)
    return data
