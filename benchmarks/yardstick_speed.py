"""gplace's simulators against the plain Python yardstick (``../shared/yardsticks/stepsim.py``), in one process.

Run from the repository root: ``python benchmarks/yardstick_speed.py``; writes ``yardstick_speed.json`` (the figures
in ``yardstick_speed.md``). The yardstick's own random DAG (256 and 5,000 ops) becomes a gplace graph (its costs in
ms as seconds / 1000, its output bytes), on 5 equal devices linked at the yardstick's bandwidth and latency; the same
random placements go to ``stepsim.simulate`` one at a time, to ``Simulator.measure`` one at a time, to
``Simulator.step_times`` as one batch, and to ``PipelineSimulator(4, "1f1b").minibatch_times`` as one batch. The
models differ in detail (the yardstick starts ready ops first-in first-out; sim-v1 by priority), so results are
not compared, only placements per second; the ratio is gplace's rate over the yardstick's, measured side by side
(the machine is shared: a ratio from one run is the figure that counts). Issue 11's target: >= 30x through the
batch APIs on both sizes.
"""

from __future__ import annotations

import json
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

from gplace.ir import Cluster, Device, Edge, Op, OpGraph, Placement
from gplace.pipeline import PipelineSimulator
from gplace.runtime import Simulator

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "shared" / "yardsticks"))
import stepsim  # noqa: E402

DEVICES, BW, LAT = 5, 1e7, 0.01  # bytes/ms, ms (the yardstick's bench)
OUT = HERE / "yardstick_speed.json"


def as_gplace(preds, cost, out_bytes) -> tuple[OpGraph, Cluster]:
    """The yardstick's graph and machine in gplace's IR (seconds and bytes/s)."""
    ops = [Op(f"n{i}", "T", c / 1000, output_bytes=int(b))
           for i, (c, b) in enumerate(zip(cost, out_bytes, strict=True))]
    edges = [Edge(f"n{i}", f"n{j}") for j, ps in enumerate(preds) for i in ps]
    devices = [Device(f"/GPU:{d}", "gpu", 1.0, 10**15) for d in range(DEVICES)]
    cluster = Cluster.build(devices, default_bandwidth=BW * 1000, default_latency=LAT / 1000, name="yardstick")
    return OpGraph.from_ops(ops, edges, name=f"yardstick_{len(ops)}"), cluster


def rate(fn, count: int, repeats: int = 5) -> float:
    """Placements per second: the median over ``repeats`` of ``count`` placements."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return count / float(np.median(times))


def measure(n: int, count: int) -> dict[str, float]:
    preds, succs, cost, out_bytes = stepsim.random_dag(n)
    graph, cluster = as_gplace(preds, cost, out_bytes)
    rng = random.Random(1)
    placements = np.array([[rng.randrange(DEVICES) for _ in range(n)] for _ in range(count)], dtype=np.int64)
    speed = [1.0] * DEVICES
    sim, pipe = Simulator(), PipelineSimulator(4, "1f1b")
    wrapped = [Placement.for_graph(graph, p) for p in placements]
    sim.step_times(graph, cluster, placements[:2])  # compile and prepare once, untimed
    pipe.minibatch_times(graph, cluster, placements[:2])
    sim.measure(graph, cluster, wrapped[0])
    plain = rate(lambda: [stepsim.simulate(n, preds, succs, cost, out_bytes, p, speed, BW, LAT)
                          for p in placements.tolist()], count)
    rates = {"yardstick": plain,
             "measure": rate(lambda: [sim.measure(graph, cluster, p) for p in wrapped], count),
             "step_times": rate(lambda: sim.step_times(graph, cluster, placements), count),
             "pipe_minibatch_times": rate(lambda: pipe.minibatch_times(graph, cluster, placements), count)}
    return {"ops": n, "placements": count, **{f"{k}_per_s": v for k, v in rates.items()},
            **{f"{k}_ratio": v / plain for k, v in rates.items() if k != "yardstick"}}


def main() -> None:
    rows = [measure(256, 200), measure(5000, 20)]
    for row in rows:
        print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}))  # noqa: T201
    OUT.write_text(json.dumps({"machine": platform.platform(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
