"""How far ``pipe-v3``'s 1F1B is from torch's ``Schedule1F1B`` order on chains of unequal stages.

Run from the repository root: ``python benchmarks/pipeline_torch_order.py [--chains 1000] [--seeds 0 1 2 3 4]``;
writes ``benchmarks/pipeline_torch_order.md`` (keeping its hand-written notes).

Each chain has 2-5 stages, one a device (a forward and a backward op each, colocated), M 1-9 micro-batches, random
forward and backward costs and edge bytes. ``pipe-v3`` simulates it (``PipelineSimulator(M, "1f1b")``); beside it,
:func:`strict_minibatch_time` runs every device's passes in exactly torch's order, each waiting for its inputs, with
``pipe-v3``'s transfers (one channel per ordered device pair, first come first served, ``latency + bytes /
bandwidth``, ``ceil(bytes / M)`` a micro-batch). Reported per seed: the chains whose every device ran torch's order
in ``pipe-v3``, those whose mini-batch time equals the strict one, and the range of ``pipe-v3 / strict``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from gplace.ir import Edge, Op, OpGraph, Placement
from gplace.pipeline import PipelineSimulator, stage_orders
from gplace.testing import uniform_cluster

sys.path.insert(0, str(Path(__file__).parent))
from report_notes import write_report  # noqa: E402

OUT = Path(__file__).with_suffix(".md")
BANDWIDTH = 1e7


def torch_orders(stages: int, microbatches: int) -> list[list[tuple[str, int]]]:
    """Torch's ``Schedule1F1B`` passes of each stage, one a device (``stage_orders`` gives torch's order there):
    warm-up forwards, then a backward and a forward in turn."""
    orders = stage_orders(list(range(stages)), microbatches, "1f1b")
    return [[("B" if p.backward else "F", p.microbatch) for p in orders[k]] for k in range(stages)]


def random_chain(rng: np.random.Generator, index: int) -> tuple[OpGraph, int, np.ndarray]:
    """A chain of 2-5 stages (ops ``f{k}``, ``b{k}``), its M, and the device of each op (stage ``k`` on ``k``)."""
    stages, microbatches = int(rng.integers(2, 6)), int(rng.integers(1, 10))
    forward, backward = rng.uniform(0.1, 2.0, stages), rng.uniform(0.1, 4.0, stages)
    sent, returned = rng.integers(0, 2_000_000, stages), rng.integers(0, 2_000_000, stages)
    ops = [Op(f"f{k}", "F", float(forward[k]), phase="forward") for k in range(stages)]
    ops += [Op(f"b{k}", "B", float(backward[k]), phase="backward", grad_of=f"f{k}") for k in range(stages)]
    edges = [Edge(f"f{k}", f"b{k}", 0) for k in range(stages)]
    edges += [Edge(f"f{k}", f"f{k + 1}", int(sent[k])) for k in range(stages - 1)]
    edges += [Edge(f"b{k + 1}", f"b{k}", int(returned[k])) for k in range(stages - 1)]
    graph = OpGraph.from_ops(ops, edges, name=f"chain{index}")
    return graph, microbatches, np.array([int(name[1:]) for name in graph.op_names])


def strict_minibatch_time(graph: OpGraph, microbatches: int, devices: np.ndarray) -> float:
    """The mini-batch time of a chain whose every device runs its passes in torch's order, each in turn."""
    stages = int(devices.max()) + 1
    cost = {name: float(graph.compute_cost[i]) / microbatches for i, name in enumerate(graph.op_names)}
    bytes_to = {(s, d): -(-int(b) // microbatches) for (s, d), b in
                zip(graph.edge_index.T.tolist(), graph.edge_bytes.tolist(), strict=True)}
    index = {name: i for i, name in enumerate(graph.op_names)}
    orders = torch_orders(stages, microbatches)
    done, free, channel, arrival, end = [0] * stages, [0.0] * stages, {}, {}, 0.0
    while any(done[k] < len(orders[k]) for k in range(stages)):
        moved = False
        for k in range(stages):
            while done[k] < len(orders[k]):
                kind, m = orders[k][done[k]]
                ready = _ready(kind, k, m, stages, arrival)
                if ready is None:
                    break
                finish = max(free[k], ready) + cost[f"{kind.lower()}{k}"]
                free[k], done[k], moved = finish, done[k] + 1, True
                arrival[(kind, k, m)] = finish  # its own backward reads it here
                peer = k + 1 if kind == "F" else k - 1
                if 0 <= peer < stages:  # sent on the (k, peer) channel, in the order produced
                    nbytes = bytes_to[(index[f"{kind.lower()}{k}"], index[f"{kind.lower()}{peer}"])]
                    start = max(finish, channel.get((k, peer), 0.0))
                    channel[(k, peer)] = start + nbytes / BANDWIDTH
                    arrival[(kind, peer, m, "in")] = channel[(k, peer)]
                end = max(end, finish, *channel.values())
        if not moved:
            raise RuntimeError("torch's order stalled")  # cannot happen on a chain
    return end


def _ready(kind: str, stage: int, m: int, stages: int, arrival: dict) -> float | None:
    """When pass ``kind`` of ``stage`` for micro-batch ``m`` has its inputs, or ``None`` if one is still to come."""
    needs = [("F", stage, m, "in")] if kind == "F" and stage > 0 else []
    if kind == "B":
        needs = [("F", stage, m)] + ([("B", stage, m, "in")] if stage < stages - 1 else [])
    times = [arrival.get(need) for need in needs]
    return None if None in times else max(times, default=0.0)


def pipe_v3_order(graph: OpGraph, microbatches: int, devices: np.ndarray) -> tuple[float, bool]:
    """``pipe-v3``'s mini-batch time and whether every device ran its passes in torch's order."""
    stages = int(devices.max()) + 1
    cluster = uniform_cluster(stages, bandwidth=BANDWIDTH, latency=0.0)
    placement = Placement.for_graph(graph, devices.tolist())
    sched = PipelineSimulator(microbatches, "1f1b").simulate(graph, cluster, placement)
    ran: list[list[tuple[str, int]]] = [[] for _ in range(stages)]
    for k in np.lexsort((np.arange(sched.inst_start.size), sched.inst_start)):
        name = graph.op_names[sched.inst_op[k]]
        ran[int(name[1:])].append((name[0].upper(), int(sched.inst_microbatch[k])))
    return sched.minibatch_time, ran == torch_orders(stages, microbatches)


def measure(seed: int, chains: int) -> dict:
    """One seed's chains: counts and the range of pipe-v3 / strict."""
    rng = np.random.default_rng(seed)
    same_order = same_time = 0
    ratios = []
    for index in range(chains):
        graph, microbatches, devices = random_chain(rng, index)
        time_v3, in_order = pipe_v3_order(graph, microbatches, devices)
        ratio = time_v3 / strict_minibatch_time(graph, microbatches, devices)
        same_order += in_order
        same_time += abs(ratio - 1.0) < 1e-9
        ratios.append(ratio)
    return {"seed": seed, "chains": chains, "same_order": same_order, "same_time": same_time,
            "low": min(ratios), "high": max(ratios), "slower": sum(r > 1 + 1e-9 for r in ratios)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, default=1000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = parser.parse_args()
    rows = [measure(seed, args.chains) for seed in args.seeds]
    lines = ["# pipe-v3's 1F1B against torch's Schedule1F1B order", "",
             f"Made by `python benchmarks/pipeline_torch_order.py --chains {args.chains}` on "
             f"{time.strftime('%Y-%m-%d', time.gmtime())} (the method is its docstring). `pipe-v3 / torch` is the "
             "mini-batch time pipe-v3 gives over that of torch's order run strictly, with the same costs and "
             "transfers.", "",
             "| seed | chains | torch's order | torch's time | pipe-v3 / torch | slower than torch's order |",
             "|---:|---:|---:|---:|---|---:|"]
    lines += [f"| {r['seed']} | {r['chains']} | {r['same_order']} | {r['same_time']} | "
              f"{r['low']:.3f}x-{r['high']:.3f}x | {r['slower']} |" for r in rows]
    write_report(OUT, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
