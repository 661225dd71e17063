"""Probe a cold learned search on the pipeline objective against the best placer of ``pipeline_results.json``.

Run from the repository root with the shared graphs reachable (``GPLACE_SHARED``)::

    python benchmarks/pipeline_search_probe.py resnet18 vgg16 --schedules 1f1b -o trainer.lr=0.003

Each (graph, schedule) runs one cold search as ``bench_pipeline`` runs its learned search ``--method``
(default ``list_scheduling_stage``: GNN encoder, list-scheduling policy with the stage prior and the revisit
charge, risk-seeking REINFORCE; the overrides are read from ``bench_pipeline.yaml``), for ``--seconds``,
rewarded by pipe-v3 on ``--cluster`` with M = ``--microbatches``, with ``-o`` overrides of the main config after
the bench's own, from ``torch.manual_seed(--seed)``. Probes quoted in the notes before 2026-11-26 13:00 UTC ran
from the stage prior alone (``policy.revisit=0``, no risk seeking): add ``-o policy.revisit=0 -o
trainer.risk_seeking=null`` to repeat them. It prints the mini-batch time and its ratio to the fastest
non-learned method of the same case in ``benchmarks/pipeline_results.json``, then how many cases end within 5 %
and the geometric mean of the ratios. Check a difference with other ``--seed`` values (with the stage prior
alone, seeds 0-2 ended at the same times on most profile cases; with the bench's settings of 2026-11-27, 31 of 32
within 5 % on each of seeds 0-2, and with ``risk_seeking`` 0.5 30, 31 and 29). The
notes of ``benchmarks/PIPELINE.md`` quote such probes (trainer settings, ``STAGE_SWITCH``). With
``--polish S``, :class:`PipelineLocalSearch` then descends from the search's placement for S seconds (the
bench's local search descends from the DP's split for 10 s), and its time and ratio are printed too. With
``--from-one-gpu``, no search runs: the descent starts from every op on one GPU and runs for ``--seconds`` (the
control of the refined search's note in ``benchmarks/PIPELINE.md``: ``--from-one-gpu --seconds 6`` on its 16
graphs).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch
from hydra import compose, initialize_config_module
from hydra.utils import instantiate

from gplace.baselines import SingleDevice
from gplace.baselines.pipeline import PipelineLocalSearch
from gplace.experiment import place
from gplace.pipeline import PipelineSimulator

RESULTS = Path(__file__).with_name("pipeline_results.json")
LEARNED = ("list_scheduling",)  # method names starting with it are learned searches


def best_placer(rows: list[dict], graph: str, cluster: str, schedule: str, microbatches: int) -> float:
    """The fastest non-learned mini-batch time (s) of a case."""
    times = [r["minibatch_time"] for r in rows
             if (r["graph"], r["cluster"], r["schedule"], r["microbatches"]) == (graph, cluster, schedule, microbatches)
             and not r["failed"] and not r["method"].startswith(LEARNED)]
    if not times:
        raise SystemExit(f"no placer row for {graph} on {cluster}, {schedule}, M = {microbatches} in {RESULTS}")
    return min(times)


def search(graph, cluster, runtime, seconds: float, overrides: list[str]):
    """A cold search's placement, as ``bench_pipeline`` runs it with ``overrides`` (the method's, then the user's)."""
    cfg = compose(config_name="config", overrides=["logger=none", "trainer.progress=false", "trainer.updates=100000",
                                                    f"trainer.max_seconds={seconds}", *overrides])
    return place(graph, cluster, encoder=instantiate(cfg.encoder), policy=instantiate(cfg.policy), runtime=runtime,
                 trainer=instantiate(cfg.trainer), max_groups=cfg.max_groups).placement


def summary(label: str, ratios: list[float]) -> str:
    """How many ratios are within 5 % (as the bench counts: at most 1.05) and their geometric mean."""
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    return f"{label}within 5 %: {sum(r <= 1.05 for r in ratios)} of {len(ratios)}; geometric mean {mean:.3f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graphs", nargs="+", help="graph names of bench_pipeline.yaml")
    parser.add_argument("--schedules", nargs="+", default=["gpipe", "1f1b"])
    parser.add_argument("--method", default="list_scheduling_stage", help="a learned search of bench_pipeline.yaml")
    parser.add_argument("--cluster", default="a100x4", help="a cluster name of bench_pipeline.yaml")
    parser.add_argument("--microbatches", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--polish", type=float, default=0.0, help="seconds of local search from the result")
    parser.add_argument("-o", "--override", action="append", default=[], help="override of the main config")
    parser.add_argument("--from-one-gpu", action="store_true",
                        help="no search: the local search's descent from every op on one GPU for --seconds")
    args = parser.parse_args()
    rows = json.loads(RESULTS.read_text())
    ratios, polished = [], []
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        bench = compose(config_name="bench_pipeline")
        cluster = instantiate(bench.clusters[args.cluster])
        if args.method not in bench.learned:
            parser.error(f"--method {args.method!r} is not a learned search of bench_pipeline.yaml: "
                         f"{', '.join(bench.learned)}")
        overrides = [*bench.learned[args.method].overrides, *args.override]
        for name in args.graphs:
            graph = instantiate(bench.graphs[name])
            for schedule in args.schedules:
                runtime = PipelineSimulator(microbatches=args.microbatches, schedule=schedule)
                best = best_placer(rows, name, cluster.name, schedule, args.microbatches)
                torch.manual_seed(args.seed)
                if args.from_one_gpu:
                    placement = PipelineLocalSearch(args.microbatches, schedule, time_limit=args.seconds,
                                                    start=SingleDevice(kind="gpu").place(graph, cluster)
                                                    ).place(graph, cluster)
                else:
                    placement = search(graph, cluster, runtime, args.seconds, overrides)
                got = runtime.measure(graph, cluster, placement).step_time
                ratios.append(got / best)
                line = f"{name} {schedule}: {got * 1e3:.4g} ms, {got / best:.3f}x the best placer"
                if args.polish > 0:
                    local = PipelineLocalSearch(args.microbatches, schedule, start=placement,
                                                time_limit=args.polish)
                    then = runtime.measure(graph, cluster, local.place(graph, cluster)).step_time
                    polished.append(then / best)
                    line += f"; polished {then * 1e3:.4g} ms, {then / best:.3f}x"
                print(line, flush=True)
    print(summary("", ratios))
    if polished:
        print(summary("polished: ", polished))


if __name__ == "__main__":
    main()
