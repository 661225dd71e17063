"""Small training graphs with phases for the pipeline tests."""

from __future__ import annotations

import numpy as np

from gplace.ir import Edge, Op, OpGraph

MB = 1_000_000


def training_chain(costs=(1.0, 2.0, 3.0), nbytes: int = MB, weights: int = 0) -> OpGraph:
    """Layers ``f0 -> f1 -> ...``, their backward ops in reverse (twice the cost), one update op per layer."""
    n = len(costs)
    ops = [Op(f"f{i}", "Layer", c, output_bytes=nbytes, persistent_memory=weights, phase="forward")
           for i, c in enumerate(costs)]
    ops += [Op(f"b{i}", "LayerGrad", 2 * c, output_bytes=nbytes, phase="backward", grad_of=f"f{i}")
            for i, c in enumerate(costs)]
    ops += [Op(f"u{i}", "Apply", 0.1, phase="update") for i in range(n)]
    edges = [Edge(f"f{i}", f"f{i + 1}") for i in range(n - 1)] + [Edge(f"f{n - 1}", f"b{n - 1}")]
    edges += [Edge(f"b{i + 1}", f"b{i}") for i in range(n - 1)] + [Edge(f"f{i}", f"b{i}") for i in range(n - 1)]
    edges += [Edge(f"b{i}", f"u{i}", nbytes // 10) for i in range(n)]
    return OpGraph.from_ops(ops, edges, name=f"train_chain{n}")


def random_training_dag(n: int, seed: int) -> OpGraph:
    """A random forward DAG, a backward op per forward op (reverse edges), an update op per 3 layers."""
    rng = np.random.default_rng(seed)
    ops, edges = [], []
    for i in range(n):
        ops.append(Op(f"f{i}", "F", float(rng.uniform(0.1, 2.0)), output_bytes=int(rng.integers(1, 8) * MB),
                      persistent_memory=int(rng.integers(0, 3) * MB), phase="forward"))
        ops.append(Op(f"b{i}", "B", float(rng.uniform(0.1, 3.0)), output_bytes=int(rng.integers(1, 8) * MB),
                      phase="backward", grad_of=f"f{i}"))
        edges.append(Edge(f"f{i}", f"b{i}"))
    for i in range(n):
        for j in range(i + 1, n):
            if rng.random() < 0.3:
                edges += [Edge(f"f{i}", f"f{j}"), Edge(f"b{j}", f"b{i}")]
    for u in range(0, n, 3):
        ops.append(Op(f"u{u}", "U", float(rng.uniform(0.05, 0.5)), phase="update"))
        edges += [Edge(f"b{i}", f"u{u}", int(rng.integers(1, 4) * MB)) for i in range(u, min(n, u + 3))]
    return OpGraph.from_ops(ops, edges, name=f"random_train{n}_{seed}")
