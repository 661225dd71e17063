"""Time the list-scheduling policy's sampling with the compiled schedule rollout against the torch one it replaced.

Run from the repository root: ``python benchmarks/list_scheduling_speed.py [--repeats 7]``; writes
``benchmarks/list_scheduling_speed.md``. Both rollouts run in one process on the same placer, alternating, so
the ratio is measured under the same load: ``gplace.policies.list_scheduling._rollout`` (``ScheduleRollout``,
numba) and ``tests/policies/reference_schedule.py``'s (the torch code it replaced, one tensor operation per
feature column; the tests check that both give the same features and devices to the bit). Each figure is the
median of ``--repeats`` calls of ``PolicyPlacer.sample(8)`` with gradients, as a training update samples
(encoder, decoding group by group, then the batched scoring); ``greedy`` is one greedy decoding.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.policies.reference_schedule, the torch rollout

from report_notes import write_report  # noqa: E402  (benchmarks/ is on sys.path)

import gplace.policies.list_scheduling as list_scheduling  # noqa: E402
from gplace.encoders import GNNEncoder  # noqa: E402
from gplace.placer import PolicyPlacer  # noqa: E402
from gplace.policies import ListSchedulingPolicy  # noqa: E402
from gplace.zoo import lstm_lm, modern_cluster, paper_cluster  # noqa: E402
from tests.policies.reference_schedule import _rollout as torch_rollout  # noqa: E402

OUT = Path(__file__).with_suffix(".md")
SAMPLES = 8


def cases() -> list[tuple[str, Callable[[], PolicyPlacer]]]:
    """(name, placer factory): the default graph with the EFT prior, and pipeline placers with the stage prior."""
    def lm() -> PolicyPlacer:
        graph = lstm_lm(layers=2, hidden=1024, steps=20, batch=64, vocab=10000, training=True)
        return PolicyPlacer(graph, paper_cluster(num_gpus=2), GNNEncoder("sage"), ListSchedulingPolicy())

    def profile(name: str) -> Callable[[], PolicyPlacer]:
        def make() -> PolicyPlacer:
            from gplace.importers.profiles import load_pipedream

            shared = Path(os.environ.get("GPLACE_SHARED", ROOT.parent / "shared"))
            graph = load_pipedream(shared / "graphs/pipedream/profiles" / name / "graph.txt", phases=True)
            policy = ListSchedulingPolicy(stage_features=True, prior="stage", revisit=10.0)
            return PolicyPlacer(graph, modern_cluster(num_gpus=4), GNNEncoder("sage"), policy)
        return make

    return [("lstm_lm (default graph), 2 K80s, EFT prior", lm),
            ("resnet18 (PipeDream), 4 A100s, stage prior", profile("resnet18")),
            ("inception_v3 (PipeDream), 4 A100s, stage prior", profile("inception_v3"))]


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(placer: PolicyPlacer, repeats: int) -> dict[str, float]:
    """Median seconds of sample(8) and greedy() with each rollout, alternating per repeat."""
    compiled = list_scheduling._rollout
    out = {"compiled sample": [], "torch sample": [], "compiled greedy": [], "torch greedy": []}
    generator = torch.Generator().manual_seed(0)
    try:
        for _ in range(repeats + 1):  # the first round warms up (numba's cache, torch's allocator)
            for name, rollout in (("compiled", compiled), ("torch", torch_rollout)):
                list_scheduling._rollout = rollout
                out[f"{name} sample"].append(median_seconds(lambda: placer.sample(SAMPLES, generator=generator), 1))
                out[f"{name} greedy"].append(median_seconds(placer.greedy, 1))
    finally:
        list_scheduling._rollout = compiled
    return {k: statistics.median(v[1:]) for k, v in out.items()}


def report(rows: list[tuple[str, int, dict[str, float]]], repeats: int) -> str:
    lines = [
        "# List-scheduling policy: compiled schedule rollout against the torch one",
        "",
        f"Made by `python benchmarks/list_scheduling_speed.py --repeats {repeats}` (see its docstring): "
        f"`PolicyPlacer.sample({SAMPLES})` with gradients (what a training update samples) and `greedy()`, "
        "median seconds, both rollouts alternating in one process.",
        "",
        f"- machine: `nproc` = {os.cpu_count()}, torch threads {torch.get_num_threads()}, Python "
        f"{platform.python_version()}, torch {torch.__version__}; load average at the end: "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}",
        "",
        "| case | groups | sample(8), torch rollout | compiled | speed-up | greedy, torch | compiled | speed-up |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, groups, t in rows:
        lines.append(
            f"| {name} | {groups} | {t['torch sample'] * 1e3:.1f} ms | {t['compiled sample'] * 1e3:.1f} ms | "
            f"{t['torch sample'] / t['compiled sample']:.2f}x | {t['torch greedy'] * 1e3:.1f} ms | "
            f"{t['compiled greedy'] * 1e3:.1f} ms | {t['torch greedy'] / t['compiled greedy']:.2f}x |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = []
    for name, make in cases():
        placer = make()
        rows.append((name, placer.num_groups, measure(placer, args.repeats)))
        print(name, rows[-1][2], flush=True)
    text = report(rows, args.repeats)
    write_report(OUT, text)
    print(text)


if __name__ == "__main__":
    main()
