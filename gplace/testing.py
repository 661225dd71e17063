"""Tiny graphs and clusters for tests, shipped so downstream compilers can test with them too.

Costs are in seconds at speed 1.0 and bytes are chosen so step times can be computed by hand.
"""

from __future__ import annotations

import operator

import numpy as np

from gplace.ir import Cluster, Device, Edge, Op, OpGraph, Placement

MB = 1_000_000


def chain(costs: tuple[float, ...] = (1.0, 2.0, 3.0), nbytes: int = MB) -> OpGraph:
    """``a0 -> a1 -> ...`` with the given costs; every edge carries ``nbytes``."""
    ops = [Op(f"a{i}", "MatMul", c, output_bytes=nbytes) for i, c in enumerate(costs)]
    edges = [Edge(f"a{i}", f"a{i + 1}") for i in range(len(costs) - 1)]
    return OpGraph.from_ops(ops, edges, name="chain")


def diamond(nbytes: int = MB) -> OpGraph:
    """``src -> (left, right) -> sink`` with costs 1, 2, 3, 1."""
    ops = [Op("src", "Input", 1.0, output_bytes=nbytes), Op("left", "MatMul", 2.0, output_bytes=nbytes),
           Op("right", "MatMul", 3.0, output_bytes=nbytes), Op("sink", "Add", 1.0, output_bytes=nbytes)]
    edges = [Edge("src", "left"), Edge("src", "right"), Edge("left", "sink"), Edge("right", "sink")]
    return OpGraph.from_ops(ops, edges, name="diamond")


def heavy_edge_diamond() -> OpGraph:
    """``s -> (l, r) -> t``, cost 1 each (4 s on one device); ``s -> l`` carries 5 MB (5 s at 1 MB/s), the others
    1 MB: at 1 MB/s, cutting ``s -> l`` is slower than the whole graph on one device."""
    ops = [Op(name, "T", 1.0, output_bytes=MB) for name in ("s", "l", "r", "t")]
    edges = [Edge("s", "l", 5 * MB), Edge("s", "r"), Edge("l", "t"), Edge("r", "t")]
    return OpGraph.from_ops(ops, edges, name="heavy_edge_diamond")


def fork_join(k: int = 3, cost: float = 1.0, nbytes: int = MB) -> OpGraph:
    """``src -> k parallel ops -> sink``; src and sink cost 0."""
    ops = [Op("src", "Input", 0.0, output_bytes=nbytes)]
    ops += [Op(f"b{i}", "MatMul", cost, output_bytes=nbytes) for i in range(k)]
    ops.append(Op("sink", "Add", 0.0, output_bytes=nbytes))
    edges = [Edge("src", f"b{i}") for i in range(k)] + [Edge(f"b{i}", "sink") for i in range(k)]
    return OpGraph.from_ops(ops, edges, name=f"fork_join{k}")


def layered_training_chain(n: int, colocated: bool = False) -> OpGraph:
    """A training step of ``n`` layers: forward ops ``f0 -> f1 -> ...`` (1e-4 s, 1 KB each), then backward ops ``b_i``
    (2e-4 s, ``grad_of`` ``f_i``) in reverse, each ``f_i``'s output read by ``b_i``; ``colocated`` puts ``f_i`` and
    ``b_i`` in a colocation group ``layer<i>``."""
    group = (lambda i: f"layer{i}") if colocated else (lambda i: None)
    ops = [Op(f"f{i}", "F", 1e-4, output_bytes=1000, phase="forward", colocation=group(i)) for i in range(n)]
    ops += [Op(f"b{i}", "B", 2e-4, output_bytes=1000, phase="backward", grad_of=f"f{i}", colocation=group(i))
            for i in range(n)]
    edges = [Edge(f"f{i}", f"f{i + 1}") for i in range(n - 1)] + [Edge(f"f{n - 1}", f"b{n - 1}")]
    edges += [Edge(f"b{i + 1}", f"b{i}") for i in range(n - 1)] + [Edge(f"f{i}", f"b{i}") for i in range(n - 1)]
    return OpGraph.from_ops(ops, edges, name=f"train{n}")


def two_branches(length: int = 4, cost: float = 1.0, nbytes: int = 1000) -> OpGraph:
    """Two independent chains of ``length`` heavy ops between a cheap source and sink.

    On two equal devices the best placement puts one branch on each, about 2x faster than one device.
    """
    ops = [Op("src", "Input", 0.01, output_bytes=nbytes)]
    edges = []
    for b in "LR":
        prev = "src"
        for i in range(length):
            ops.append(Op(f"{b}{i}", "MatMul", cost, output_bytes=nbytes))
            edges.append(Edge(prev, f"{b}{i}"))
            prev = f"{b}{i}"
        edges.append(Edge(prev, "sink"))
    ops.append(Op("sink", "Add", 0.01, output_bytes=nbytes))
    return OpGraph.from_ops(ops, edges, name="two_branches")


def random_dag(n: int = 20, edge_prob: float = 0.15, seed: int = 0) -> OpGraph:
    """A random DAG over ``n`` ops (edges only from lower to higher index), random costs and bytes."""
    rng = np.random.default_rng(seed)
    ops = [Op(f"n{i}", f"T{rng.integers(4)}", float(rng.uniform(0.1, 2.0)),
              persistent_memory=int(rng.integers(0, 4) * MB), output_bytes=int(rng.integers(1, 8) * MB))
           for i in range(n)]
    edges = [Edge(f"n{i}", f"n{i + 1 + j}") for i in range(n)  # a row of draws at once: as many, in the same order
             for j in np.flatnonzero(rng.random(n - i - 1) < edge_prob)]
    return OpGraph.from_ops(ops, edges, name=f"random_dag{n}_{seed}")


def uniform_cluster(
    num_devices: int = 2, kind: str = "gpu", memory: int = 10**12, bandwidth: float = 1e6, latency: float = 0.0
) -> Cluster:
    """``num_devices`` equal devices, every pair linked at ``bandwidth`` bytes/s and ``latency`` s."""
    devices = [Device(f"/{kind.upper()}:{i}", kind, 1.0, memory) for i in range(num_devices)]
    return Cluster.build(devices, default_bandwidth=bandwidth, default_latency=latency, name=f"{num_devices}x{kind}")


def cpu_gpu_cluster(num_gpus: int = 2, gpu_memory: int = 10**12) -> Cluster:
    """One CPU (speed 1) and ``num_gpus`` GPUs (speed 1), all linked at 1 MB/s."""
    devices = [Device("/CPU:0", "cpu", 1.0, 10**12)]
    devices += [Device(f"/GPU:{i}", "gpu", 1.0, gpu_memory) for i in range(num_gpus)]
    return Cluster.build(devices, default_bandwidth=1e6, name=f"cpu+{num_gpus}gpu")


def layered_dag(num_ops: int, width: int = 100, max_inputs: int = 3, num_types: int = 8, seed: int = 0,
                memory_unit: int = MB) -> OpGraph:
    """The benchmarks' large random graph: ``num_ops`` ops in layers of ``width``; each op after the first layer
    reads 1..``max_inputs`` distinct ops of the previous two layers.

    Per op, drawn in this order: a type ``T<k>`` of ``num_types``, a cost uniform in [0.1, 1) ms, 0-9 units of
    persistent, 0-19 of temporary and 1-15 of output memory (a unit is ``memory_unit`` bytes, default 1 MB), and an
    output shape ``(32, 1..4095)``.

    >>> g = layered_dag(300, width=100, seed=1)
    >>> inputs = np.bincount([g.op_index[e.dst] for e in g.edges()], minlength=300)
    >>> g.num_ops, g.name, bool((inputs[:100] == 0).all() and ((inputs[100:] >= 1) & (inputs[100:] <= 3)).all())
    (300, 'layered300', True)
    """
    memory_unit = operator.index(memory_unit)  # a Python int: an np.uint16 unit wrapped around (5000 * 19)
    rng = np.random.default_rng(seed)
    ops = [Op(f"op{i}", f"T{rng.integers(num_types)}", float(rng.uniform(1e-4, 1e-3)),
              persistent_memory=int(rng.integers(0, 10)) * memory_unit,
              temporary_memory=int(rng.integers(0, 20)) * memory_unit,
              output_bytes=int(rng.integers(1, 16)) * memory_unit, output_shapes=((32, int(rng.integers(1, 4096))),))
           for i in range(num_ops)]
    edges = []
    for i in range(width, num_ops):
        layer = i // width
        sources = np.arange(max(0, (layer - 2) * width), layer * width)
        for j in rng.choice(sources, size=int(rng.integers(1, max_inputs + 1)), replace=False):
            edges.append(Edge(f"op{j}", f"op{i}"))
    return OpGraph.from_ops(ops, edges, name=f"layered{num_ops}")


def alternating(graph: OpGraph) -> Placement:
    """A placement that cuts nearly every edge: op ``i`` on device ``i % 2``, except that a colocation group stays
    on one device and an op pinned to ``"cpu"`` (and its group) goes to device 0, which must then be a CPU."""
    devices, groups = [i % 2 for i in range(graph.num_ops)], {}
    for i, group in enumerate(graph.colocation):
        if graph.pinned[i] == "cpu":
            devices[i] = 0
        if group is not None:
            groups[group] = min(groups.get(group, devices[i]), 0 if graph.pinned[i] == "cpu" else devices[i])
    return Placement.for_graph(graph, [groups.get(c, d) if c else d
                                       for c, d in zip(graph.colocation, devices, strict=True)])
