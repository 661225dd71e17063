"""Layered training graphs for the pipeline placers' tests: a forward and a backward op per layer, colocated."""

from __future__ import annotations

import numpy as np

from gplace.ir import Edge, Op, OpGraph

MB = 1_000_000


def layer_net(n: int, seed: int, pin_first: bool = False, weights: int = 0) -> OpGraph:
    """``n`` layers, each a forward and a backward op colocated (as PipeDream profiles import), edges to the next
    layer and at random to the one after; ``weights`` bytes of persistent memory per layer; the first layer
    optionally pinned to the CPU."""
    rng = np.random.default_rng(seed)
    ops, edges = [], []
    for i in range(n):
        cost, pin = float(rng.uniform(0.5, 2.0)), "cpu" if pin_first and i == 0 else None
        ops += [Op(f"f{i}", "F", cost, output_bytes=MB, persistent_memory=weights, colocation=f"l{i}",
                   phase="forward", pinned=pin),
                Op(f"b{i}", "B", 2 * cost, output_bytes=MB, colocation=f"l{i}", phase="backward", grad_of=f"f{i}",
                   pinned=pin)]
        edges.append(Edge(f"f{i}", f"b{i}"))
        edges += [e for j in (i + 1, i + 2) if j < n and (j == i + 1 or rng.random() < 0.5)
                  for e in (Edge(f"f{i}", f"f{j}"), Edge(f"b{j}", f"b{i}"))]
    return OpGraph.from_ops(ops, edges, name=f"layer_net{n}_{seed}")
