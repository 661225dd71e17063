"""Placements per second through the ``sim-v1`` simulator; writes ``benchmarks/simulator.md``.

Run: ``python benchmarks/simulator_throughput.py``. Single process, one thread, after a warm-up (JIT).
"""

from __future__ import annotations

import logging
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np

from gplace.ir import Cluster, Device, OpGraph, Placement
from gplace.runtime import Simulator
from gplace.runtime.simulator import _prepare, _run
from gplace.testing import layered_dag

logger = logging.getLogger(__name__)
OUT = Path(__file__).with_name("simulator.md")
MB = 1_000_000


def five_gpus() -> Cluster:
    """5 equal GPUs of 16 GB, 10 GB/s links with 10 us latency."""
    devices = [Device(f"/GPU:{i}", "gpu", 1.0, 16 * 10**9) for i in range(5)]
    return Cluster.build(devices, default_bandwidth=10e9, default_latency=1e-5, name="5xgpu")


def rate(fn: Callable[[int], None], count: int, min_seconds: float = 2.0) -> float:
    """Items per second of ``fn(i)`` over ``count`` items, repeated until ``min_seconds`` passed."""
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < min_seconds:
        for i in range(count):
            fn(i)
        done += count
    return done / (time.perf_counter() - t0)


def bench(graph: OpGraph, cluster: Cluster, k: int = 256) -> dict[str, float]:
    """Placements/s through measure, through its parts, and through step_times in batches of ``k``."""
    sim = Simulator()
    rng = np.random.default_rng(1)
    batch = rng.integers(0, cluster.num_devices, (k, graph.num_ops))
    placements = [Placement.for_graph(graph, row) for row in batch]
    prep = _prepare(graph, cluster)
    sim.measure(graph, cluster, placements[0])  # warm-up: JIT (or cache load) and prepared arrays
    sim.step_times(graph, cluster, batch[:2])
    out = {
        "measure": rate(lambda i: sim.measure(graph, cluster, placements[i]), k),
        "validate only": rate(lambda i: placements[i].validate(graph, cluster), k),
        "kernel only (schedule arrays)": rate(lambda i: _run(prep, placements[i].devices), k),
        f"step_times (batches of {k})": k * rate(lambda i: sim.step_times(graph, cluster, batch), 1),
    }
    ok = sum(sim.measure(graph, cluster, p).ok for p in placements)
    logger.info("%s: %d/%d placements fit in memory", graph.name, ok, k)
    return out


def cpu_model() -> str:
    """The CPU model line of /proc/cpuinfo, or platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def report(results: dict[str, dict[str, float]]) -> str:
    """The markdown written to ``simulator.md``."""
    lines = [
        "# sim-v1 throughput", "",
        "Made by `python benchmarks/simulator_throughput.py`: random placements (uniform over devices) of a",
        "layered random DAG (`gplace.testing.layered_dag`: each op reads 1-3 ops of the previous two layers)",
        "on 5 equal GPUs, single",
        "process, one thread, after warm-up. `measure` is `Simulator().measure` (validation + kernel +",
        "Measurement); `validate only` is `Placement.validate`; `kernel only` is the numba kernel plus",
        "building the `Schedule`; `step_times` is the batch API (no validation beyond shape and range).", "",
        f"- machine: `nproc` = {os.cpu_count()}, CPU: {cpu_model()}; load average while running: "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} (a shared machine: expect +-30 % between runs)",
        f"- Python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}", "",
        "| graph | path | placements/s | us/placement |", "|---|---|---:|---:|",
    ]
    for name, res in results.items():
        lines += [f"| {name} | {path} | {r:,.0f} | {1e6 / r:,.1f} |" for path, r in res.items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Benchmark a 256-op and a 5,000-op graph and write the report."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cluster = five_gpus()
    results = {}
    for n, width in ((256, 16), (5000, 50)):
        graph = layered_dag(n, width)
        results[f"{n} ops, {graph.num_edges} edges, 5 devices"] = bench(graph, cluster)
    text = report(results)
    OUT.write_text(text)
    logger.info("%s", text)


if __name__ == "__main__":
    main()
