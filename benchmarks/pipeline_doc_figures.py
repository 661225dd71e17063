"""docs/pipeline.md's worked figures, rebuilt as its text describes them and measured by today's simulator.

Run from the repository root: ``python benchmarks/pipeline_doc_figures.py [--skip-zoo] [--out PATH]``; writes
``benchmarks/pipeline_doc_figures.md`` (keeping its hand-written notes). The zoo's Keras training steps need
TensorFlow the first time (built once into gplace's cache, under a minute each); ``--skip-zoo`` leaves them out.

The examples, as docs/pipeline.md gives them:

- *unfolded vs joined*: a backward op that only names its forward op (``grad_of``) may go to another stage
  (``join_gradients=False``) or stay on its forward op's (``True``). The zoo's Keras Transformer (exact DP) and
  ResNet-50 (GPipe's split) on ``modern_cluster(4)``, M = 16, under each schedule (the text's figures are
  ``gpipe``'s, on the graphs of ``ZOO_VERSION`` 4, before the Keras importer's phase fixes); a 40-layer chain of 1 KB
  activations (``gplace.testing.layered_training_chain``) on ``uniform_cluster(4)``,
  M = 4, 1F1B.
- *cost model*: ``layered_dag(200, width=10)`` on ``uniform_cluster(D, memory=10**12, bandwidth=1e10)``, M = 8,
  1F1B: the partitioners' bottleneck times M against ``PipelineSimulator(8, "1f1b")``; a fan-out of one op into
  1,000 (1 ms and 10 KB each) on 2 GPUs over 1 MB/s, M = 4, 1F1B.
- *memory*: 4 layers (a forward and a backward op, colocated) of 600 MB activations on two 1 GB GPUs, M = 8, split
  with ``schedule="1f1b"``: each GPU's peak.
- *unmeasured splits*: the chain of 1, 2, 3 and 1 s on two GPUs at 1 MB/s, M = 1, and on three GPUs of speeds 1, 2
  and 0.5 with links that differ between pairs (0 <-> 2 with 0.1 s latency, as the text's order reads; on every
  link the exact DP's split takes 7.03 s, not the text's 6.9), M = 4, 1F1B.
- *walk-through*: the page's 12-layer graph (its first code block, run here), the exact DP's split and the
  local search's, M = 16, 1F1B.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from gplace.baselines import SingleDevice
from gplace.baselines.pipeline import (
    GPipePartitioner,
    IdealDPPartitioner,
    PipeDreamPartitioner,
    PipelineLocalSearch,
)
from gplace.baselines.pipeline.stages import StageProblem
from gplace.ir import Cluster, Device, Edge, Link, Op, OpGraph
from gplace.pipeline import PipelineSimulator
from gplace.testing import chain, layered_dag, layered_training_chain, uniform_cluster

sys.path.insert(0, str(Path(__file__).parent))
from report_notes import write_report  # noqa: E402

OUT = Path(__file__).with_suffix(".md")
KB, MB = 1_000, 1_000_000
DPS = {"PipeDream": PipeDreamPartitioner, "exact DP": IdealDPPartitioner}


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def step(sim: PipelineSimulator, graph: OpGraph, cluster: Cluster, placement) -> float:
    measurement = sim.measure(graph, cluster, placement)
    return measurement.step_time if measurement.ok else float("inf")


def unfolded_vs_joined(skip_zoo: bool) -> list[tuple[str, str, str]]:
    rows = []
    if not skip_zoo:
        from gplace.zoo import load_zoo_model, modern_cluster

        cluster = modern_cluster(num_gpus=4)
        for model, placer, name, doc in (("transformer", IdealDPPartitioner, "exact DP", ("38.2", "53.2")),
                                         ("resnet50", GPipePartitioner, "GPipe's split", ("62.7", "98.9"))):
            graph = load_zoo_model(model)
            for schedule in ("gpipe", "1f1b"):
                sim = PipelineSimulator(16, schedule)
                got = [step(sim, graph, cluster, placer(microbatches=16, join_gradients=join).place(graph, cluster))
                       for join in (False, True)]
                said = f"{doc[0]} / {doc[1]} ms (ZOO_VERSION 4's graph)" if schedule == "gpipe" else "not given"
                rows.append((f"Keras {model}, 4 A100s, M = 16, {schedule}, {name}: unfolded / joined", said,
                             f"{got[0] * 1e3:.1f} / {got[1] * 1e3:.1f} ms"))
    graph, cluster, sim = layered_training_chain(40), uniform_cluster(4), PipelineSimulator(4, "1f1b")
    joined = step(sim, graph, cluster, IdealDPPartitioner(microbatches=4, join_gradients=True).place(graph, cluster))
    rows.append(("40-layer chain, uniform_cluster(4), M = 4, 1f1b: joined", "7.75 ms", ms(joined)))
    for name, placer in (*DPS.items(), ("GPipe's split", GPipePartitioner)):
        got = step(sim, graph, cluster, placer(microbatches=4).place(graph, cluster))
        rows.append((f"40-layer chain: unfolded, {name}", "17.2 ms" if name.startswith("GPipe") else "10.1 ms",
                     ms(got)))
    return rows


def model_time(placer, graph: OpGraph, cluster: Cluster, microbatches: int) -> float:
    """The partitioners' cost model: the split's bottleneck times M (one order: the devices are alike)."""
    problem = StageProblem(graph, cluster, microbatches=microbatches)
    return problem.bottleneck(placer.stages(problem)) * microbatches


def cost_model() -> list[tuple[str, str, str]]:
    graph, sim, rows = layered_dag(200, width=10), PipelineSimulator(8, "1f1b"), []
    docs = {16: ("19.43", "16.73"), 64: ("9.73", "9.04"), 256: ("9.73 (55 stages)", "5.45 ms (186 stages)")}
    for devices, (doc_dp, doc_gpipe) in docs.items():
        cluster = uniform_cluster(devices, memory=10**12, bandwidth=1e10)
        got = {}
        for name, placer in (("exact DP", IdealDPPartitioner(microbatches=8)),
                             ("GPipe", GPipePartitioner(microbatches=8))):
            placement = placer.place(graph, cluster)
            got[name] = (step(sim, graph, cluster, placement), len(set(placement.devices.tolist())),
                         model_time(placer, graph, cluster, 8))
        if devices == 16:
            rows.append(("layered_dag(200), 16 devices: GPipe's split, model / simulator", "34.1 / 16.7 ms",
                         f"{got['GPipe'][2] * 1e3:.1f} / {got['GPipe'][0] * 1e3:.1f} ms"))
        stages = f" ({got['exact DP'][1]} stages) / {ms(got['GPipe'][0])} ({got['GPipe'][1]} stages)"
        rows.append((f"layered_dag(200), {devices} devices, M = 8, 1f1b: exact DP / GPipe",
                     f"{doc_dp} / {doc_gpipe}" + ("" if devices == 256 else " ms"), ms(got["exact DP"][0]) + stages))
    return rows


def fan_out() -> list[tuple[str, str, str]]:
    ops = [Op("src", "T", 1e-3, output_bytes=10 * KB)]
    ops += [Op(f"leaf{i}", "T", 1e-3, output_bytes=10 * KB) for i in range(1000)]
    graph = OpGraph.from_ops(ops, [Edge("src", f"leaf{i}") for i in range(1000)], name="fan_out")
    cluster, sim, rows = uniform_cluster(2, bandwidth=1e6), PipelineSimulator(4, "1f1b"), []
    for name, placer in (*DPS.items(), ("GPipe's split", GPipePartitioner),
                         ("local_search", PipelineLocalSearch(4, "1f1b", time_limit=None))):
        placement = placer(microbatches=4).place(graph, cluster) if isinstance(placer, type) else placer.place(
            graph, cluster)
        split = "/".join(str(c) for c in np.bincount(placement.devices, minlength=2))
        doc = {"GPipe's split": "500/501, 0.504 s", "local_search": "0.583 s"}.get(name, "910/91, 0.910 s")
        rows.append((f"fan-out 1 -> 1,000, 2 GPUs at 1 MB/s, M = 4, 1f1b: {name}", doc,
                     f"{split}, {step(sim, graph, cluster, placement):.3f} s"))
    return rows


def memory() -> list[tuple[str, str, str]]:
    ops, edges = [], []
    for i in range(4):
        ops += [Op(f"f{i}", "F", 1.0, output_bytes=600 * MB, colocation=f"layer{i}", phase="forward"),
                Op(f"b{i}", "B", 2.0, output_bytes=600 * MB, colocation=f"layer{i}", phase="backward",
                   grad_of=f"f{i}")]
        edges += [Edge(f"f{i}", f"b{i}")] + ([Edge(f"f{i}", f"f{i + 1}"), Edge(f"b{i + 1}", f"b{i}")] if i < 3 else [])
    graph = OpGraph.from_ops(ops, edges, name="layers600")
    cluster = uniform_cluster(2, memory=10**9)
    try:
        GPipePartitioner(microbatches=8).place(graph, cluster)
        refused = "found"
    except Exception as err:  # PlacementInfeasibleError
        refused = f"refused ({type(err).__name__})"
    timeline = PipelineSimulator(8, "1f1b").simulate(
        graph, cluster, GPipePartitioner(microbatches=8, schedule="1f1b").place(graph, cluster))
    peaks = " and ".join(f"{p / MB:.0f}" for p in timeline.peak_memory)
    return [("4 layers of 600 MB, two 1 GB GPUs, M = 8: gpipe's memory", "refused", refused),
            ("the same, split with 1f1b's memory: peak per GPU", "300 and 150 MB", f"{peaks} MB")]


def unmeasured_splits() -> list[tuple[str, str, str]]:
    graph, two = chain((1.0, 2.0, 3.0, 1.0)), uniform_cluster(2)
    sim, rows = PipelineSimulator(1, "1f1b"), []
    placers = {"GPipe": GPipePartitioner(microbatches=1), "PipeDream": PipeDreamPartitioner(microbatches=1),
               "exact DP": IdealDPPartitioner(microbatches=1), "one GPU": SingleDevice(kind="gpu"),
               "local_search": PipelineLocalSearch(1, "1f1b", time_limit=None)}
    for name, placer in placers.items():
        rows.append((f"chain 1, 2, 3, 1 s, 2 GPUs at 1 MB/s, M = 1: {name}", "7 s" if name in ("one GPU",
                     "local_search") else "8 s", f"{step(sim, graph, two, placer.place(graph, two)):.2f} s"))
    devices = [Device(f"/GPU:{i}", "gpu", speed, 10**12) for i, speed in enumerate((1.0, 2.0, 0.5))]
    links = [Link("/GPU:0", "/GPU:1", 1e7, reverse_bandwidth=1e5), Link("/GPU:1", "/GPU:2", 1e6),
             Link("/GPU:0", "/GPU:2", 2e5, 0.1)]
    three, sim = Cluster.build(devices, links, name="3gpu"), PipelineSimulator(4, "1f1b")
    dp = IdealDPPartitioner(microbatches=4, schedule="1f1b").place(graph, three)
    fast = step(sim, graph, three, SingleDevice(kind="gpu").place(graph, three))
    search = PipelineLocalSearch(4, "1f1b", time_limit=None).place(graph, three)
    rows += [("chain on 3 GPUs (speeds 1, 2, 0.5, unlike links), M = 4, 1f1b: exact DP", "6.9 s",
              f"{step(sim, graph, three, dp):.2f} s"),
             ("the same: the fast GPU alone", "3.5 s", f"{fast:.2f} s"),
             ("the same: local_search", "not given", f"{step(sim, graph, three, search):.2f} s")]
    return rows


def walk_through() -> list[tuple[str, str, str]]:
    """The 12-layer graph of docs/pipeline.md's first code block, run as the page runs it."""
    doc = (Path(__file__).parents[1] / "docs" / "pipeline.md").read_text()
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):  # the block prints its graph's size
        exec(doc.split("```python\n")[1].split("```")[0], namespace)  # noqa: S102 (the page's own code)
    graph, cluster, sim = namespace["graph"], namespace["cluster"], PipelineSimulator(16, "1f1b")
    search = PipelineLocalSearch(16, "1f1b", time_limit=None)
    dp = step(sim, graph, cluster, IdealDPPartitioner(microbatches=16).place(graph, cluster))
    found = step(sim, graph, cluster, search.place(graph, cluster))
    return [("walk-through graph, modern_cluster(4), M = 16, 1f1b: exact DP", "4.26 ms (pipe-v2: 4.93)", ms(dp)),
            ("the same: local_search, placements measured", "4.26 ms, 337 (pipe-v2: 4.43 ms)",
             f"{ms(found)}, {search.evaluations}")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skip-zoo", action="store_true", help="leave out the zoo's Keras training steps")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    os.environ.setdefault("WANDB_MODE", "disabled")
    torch.set_num_threads(1)
    semantics = getattr(PipelineSimulator, "semantics", "pipe-v2")
    rows = []
    for section in (lambda: unfolded_vs_joined(args.skip_zoo), cost_model, fan_out, memory, unmeasured_splits,
                    walk_through):
        start = time.perf_counter()
        rows += section()
        print(f"{len(rows)} rows, {time.perf_counter() - start:.0f} s", flush=True)
    lines = ["# docs/pipeline.md's figures, re-measured", "",
             f"Made by `python benchmarks/pipeline_doc_figures.py{' --skip-zoo' * args.skip_zoo}` on "
             f"{time.strftime('%Y-%m-%d', time.gmtime())} with `{semantics}` (the examples are its docstring). "
             "`docs said` is the figure as docs/pipeline.md gave it before this re-measurement (`pipe-v2`'s where "
             "it named `pipe-v2`).", "",
             f"| example | docs said | {semantics} now |", "|---|---|---|"]
    lines += [f"| {example} | {doc} | {now} |" for example, doc, now in rows]
    write_report(args.out, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
