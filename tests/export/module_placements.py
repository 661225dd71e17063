"""Placements of a torch training graph by module, for the pipeline-split tests."""

from __future__ import annotations

from gplace.ir import Placement


def by_module(graph, stage_of: dict[str, int], root: int = 0) -> Placement:
    """Each op on its top-level module's device (0 for other modules, ``root`` for the root module's ops); a
    backward op with its forward op."""
    paths = graph.source.module_paths
    devices = [stage_of.get(paths.get(op, "").split(".")[0], 0) if paths.get(op) else root for op in graph.op_names]
    devices = [devices[f] if f >= 0 else d for d, f in zip(devices, graph.grad_of or [-1] * len(devices), strict=True)]
    first: dict[str, int] = {}  # a colocation group (a tied weight's inputs) on its first op's device
    devices = [d if g is None else devices[first.setdefault(g, i)]
               for i, (d, g) in enumerate(zip(devices, graph.colocation or [None] * len(devices), strict=True))]
    return Placement.for_graph(graph, devices)
