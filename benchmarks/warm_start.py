"""Never behind the start: the two effects of warm-starting a search from a baseline, measured separately.

Run from the repository root: ``python benchmarks/warm_start.py [--updates 30]``; writes ``warm_start.json``
(the figures in ``warm_start.md``).

For each case the warm start is HEFT's placement (B, its step time). The search groups ops, so without help it
starts from B's *projection* onto its groups (P0: each group on the device holding most of its ops' cost):

- *keep*: the search measures B itself and keeps it as the best placement unless a sample beats it;
- *split*: the groups are split by B's devices (:func:`gplace.grouping.split_groups`), so the projection is B.

A REINFORCE search (the paper's LSTM encoder and seq2seq policy, simulator) runs twice per case, without and with
*split*; both keep B. The best of the projection and the samples (what a search without *keep* returns) is
reported beside the result (with *keep*).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch

from gplace.baselines import HEFT
from gplace.encoders import LSTMEncoder
from gplace.placer import PolicyPlacer
from gplace.policies import Seq2SeqPolicy
from gplace.runtime import Simulator
from gplace.training import ReinforceTrainer
from gplace.zoo import lstm_lm, paper_cluster, unrolled_nmt

OUT = Path(__file__).with_suffix(".json")
CASES = {
    "lstm_lm, 2 K80": (lstm_lm, 2),
    "rnnlm (unrolled), 4 K80": (lambda: lstm_lm(hidden=2048, steps=40, optimizer="adagrad"), 4),
    "nmt (unrolled), 2 K80": (unrolled_nmt, 2),
    "nmt (unrolled), 4 K80": (unrolled_nmt, 4),
}


def search(graph, cluster, warm, split: bool, updates: int) -> dict[str, float]:
    """One warm-started search: the projection's step time, the best sample, and the result."""
    runtime = Simulator()
    torch.manual_seed(0)
    placer = PolicyPlacer(graph, cluster, LSTMEncoder(), Seq2SeqPolicy(cluster.num_devices), max_groups=256,
                          express=warm if split else None)
    projection = runtime.measure(graph, cluster, placer.project(warm))
    result = ReinforceTrainer(updates=updates, samples_per_update=8, seed=0).fit(
        placer, runtime, graph, cluster, warm_start=warm)
    best_sample = min((h["rollout/min_step_time"] for h in result.history), default=math.inf)
    return {"groups": placer.num_groups, "projection": projection.step_time if projection.ok else math.inf,
            "best_sample": best_sample, "result": result.best_step_time}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--updates", type=int, default=30)
    args = parser.parse_args()
    rows = []
    for name, (make, gpus) in CASES.items():
        graph, cluster = make(), paper_cluster(num_gpus=gpus)
        warm = HEFT().place(graph, cluster)
        start = Simulator().measure(graph, cluster, warm).step_time
        row = {"case": name, "ops": graph.num_ops, "heft": start, "updates": args.updates}
        for split in (False, True):
            row["split" if split else "default"] = search(graph, cluster, warm, split, args.updates)
        rows.append(row)
        print(json.dumps(row))  # noqa: T201 - a script's progress
    OUT.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
