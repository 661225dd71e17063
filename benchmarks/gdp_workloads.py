"""GDP's workloads that the zoo lacked, placed on the paper's 4-K80 machine: size, build time, every baseline and
a GDP search (from scratch and warm-started from HEFT), measured by ``sim-v1``.

Run: ``OMP_NUM_THREADS=1 python benchmarks/gdp_workloads.py`` (writes ``benchmarks/gdp_workloads.md``; about 10
minutes with ``--seconds 60``). Graphs: ``graph=gnmt`` (GNMT-8 unrolled, fine-grained cells), ``graph=transformer_xl``,
``graph=nasnet`` (NASNet-A Mobile from Keras, AmoebaNet's nearest public relative; needs tensorflow the first time).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from pathlib import Path
from typing import Any

import torch
from report_notes import write_report

from gplace import place
from gplace.baselines import PlacementInfeasibleError, SingleDevice, expert_for
from gplace.methods import baselines
from gplace.runtime import Simulator

HERE = Path(__file__).resolve().parent
GRAPHS = ("gnmt", "transformer_xl", "nasnet")


def _config(group: str, name: str) -> Any:
    """A graph or cluster config of ``gplace/conf``, composed with its defaults and built as the main job builds it."""
    from hydra.utils import instantiate

    from gplace.conf import component_config

    return instantiate(component_config(group, name))


def _ms(t: float) -> str:
    return f"{t * 1e3:,.1f}" if math.isfinite(t) else "OOM"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="search budget of each GDP run")
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS), choices=GRAPHS)
    parser.add_argument("--out", default=str(HERE / "gdp_workloads.md"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    cluster, sim = _config("cluster", "paper_4gpu"), Simulator()
    rows = []
    for name in args.graphs:
        started = time.monotonic()
        graph = _config("graph", name)
        built = time.monotonic() - started
        times = {}
        for method in sorted(baselines()):
            if method == "random":
                continue
            try:
                m = place(graph, cluster, method=method, seed=0).measurement
            except PlacementInfeasibleError:  # its placement runs out of memory: OOM in the table
                times[method] = math.inf
                continue
            times[method] = m.step_time if m.ok else math.inf
        expert = sim.measure(graph, cluster, expert_for(graph.name).place(graph, cluster))
        times["expert"] = expert.step_time if expert.ok else math.inf
        one = sim.measure(graph, cluster, SingleDevice(kind="gpu").place(graph, cluster))
        single_gpu = one.step_time if one.ok else math.inf
        best = min(times, key=times.get)
        searches = {}
        for label, warm in (("gdp", None), ("gdp warm (heft)", "heft")):
            report = place(graph, cluster, method="gdp", budget=args.seconds, seed=0, warm_start=warm)
            searches[label] = (report.measurement.step_time, report.train.samples, report.train.seconds)
        rows.append((name, graph, built, single_gpu, times, best, searches))
        print(name, {k: _ms(v) for k, v in times.items()}, searches, flush=True)
    write_report(args.out, _markdown(rows, cluster, args))


def _markdown(rows: list, cluster: Any, args: argparse.Namespace) -> str:
    methods = list(rows[0][4])
    lines = [
        "# GDP's workloads on the paper's machine (4 K80s)",
        "",
        f"Made by `OMP_NUM_THREADS=1 python benchmarks/gdp_workloads.py --seconds {args.seconds:g}` on {cluster.name} "
        f"(`sim-v1`; {os.cpu_count()} shared cores, Python {platform.python_version()}, torch {torch.__version__}). "
        "Step times in ms; OOM: a device runs out of memory. `gdp`: `gplace.place(method=\"gdp\")` (GraphSAGE + "
        f"GDP policy, 256 groups, REINFORCE) for {args.seconds:g} s from scratch, and warm-started from HEFT "
        "(never slower than its start); samples and seconds in brackets.",
        "",
        "| graph | ops | edges | build s | one GPU | " + " | ".join(methods) + " | gdp | gdp warm (heft) |",
        "|---|---:|---:|---:|---:|" + "---:|" * (len(methods) + 2),
    ]
    for name, graph, built, single_gpu, times, best, searches in rows:
        cells = [f"**{_ms(times[m])}**" if m == best else _ms(times[m]) for m in methods]
        found = [f"{_ms(t)} ({n:,}, {s:.0f} s)" for t, n, s in searches.values()]
        lines.append(f"| {name} | {graph.num_ops:,} | {graph.num_edges:,} | {built:.1f} | {_ms(single_gpu)} | "
                     + " | ".join(cells + found) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
