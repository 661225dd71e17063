"""Seconds each placer for the pipeline objective takes on graphs of about 10,000 ops and more.

Run from the repository root: ``python benchmarks/pipeline_placer_speed.py``; writes
``benchmarks/pipeline_placer_speed.json`` (the figures in ``pipeline_placer_speed.md``).

Graphs: a synthetic 10,004-op training DAG (:func:`pipeline_simulator_speed.training_dag`: forward, backward
and update ops, no colocation, so 10,004 units for the partitioners), and the zoo's ResNet-50 (8,488 ops) and
GNMT-8 (35,754 ops) training steps. Clusters: 4 and 8 A100s (gplace.zoo.modern_cluster), M = 16. The issue's
target: every placer for this objective under 10 s on a 10,000-op graph. Each figure is the best of
``--repeats`` runs of ``placer.place`` (the learned search: building the policy placer, i.e. grouping and
features, then one update of REINFORCE with K = ``samples`` placements measured by pipe-v3, then the greedy
placement; its budget otherwise is what the user gives it). The local search (``PipelineLocalSearch``, 1F1B) is a
search too: ideal_dp's placement, then ``--local-seconds`` of descent; its row also gives the pipe-v3 time of the
DP's split and of the result.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from pipeline_simulator_speed import training_dag  # noqa: E402

from gplace.baselines.pipeline import (  # noqa: E402
    GPipePartitioner,
    IdealDPPartitioner,
    PipeDreamPartitioner,
    PipelineILPPlacer,
    PipelineLocalSearch,
    StageProblem,
)
from gplace.ir import OpGraph  # noqa: E402
from gplace.pipeline import PipelineSimulator  # noqa: E402

TARGET = 10.0
OUT = Path(__file__).with_suffix(".json")


def graphs() -> dict[str, OpGraph]:
    from gplace.zoo import load_zoo_model

    return {"train10004": training_dag(10_004), "zoo_resnet50": load_zoo_model("resnet50"),
            "zoo_gnmt8": load_zoo_model("gnmt8")}


def learned_search(samples: int):
    """One REINFORCE update of the list-scheduling policy (GNN encoder, stage features), rewarded by pipe-v3."""
    from gplace.encoders import GNNEncoder
    from gplace.experiment import place
    from gplace.policies import ListSchedulingPolicy
    from gplace.training import ReinforceTrainer

    class OneUpdate:
        name = "list_scheduling (1 update)"

        def place(self, graph, cluster):
            return place(graph, cluster, encoder=GNNEncoder("sage"), policy=ListSchedulingPolicy(stage_features=True),
                         runtime=PipelineSimulator(16, "1f1b"), max_groups=256,
                         trainer=ReinforceTrainer(updates=1, samples_per_update=samples, progress=False)).placement
    return OneUpdate()


def coarsening(graph: OpGraph, cluster) -> dict[str, int]:
    """How the DPs coarsened: units, the ideal DP's blocks and ideals, the chain DP's blocks."""
    problem = StageProblem(graph, cluster, microbatches=16)
    dp = IdealDPPartitioner(microbatches=16)
    blocks, ideals = dp._ideals(problem)  # noqa: SLF001 - the figure this benchmark reports
    return {"units": problem.num_units, "ideal_blocks": blocks.num_blocks, "ideals": int(ideals.shape[0]),
            "chain_blocks": problem.blocks(dp.chain_blocks).num_blocks}


def main() -> None:
    from gplace.zoo import modern_cluster

    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--local-seconds", type=float, default=5.0)
    args = parser.parse_args()
    local = PipelineLocalSearch(16, "1f1b", time_limit=args.local_seconds)
    placers = [GPipePartitioner(microbatches=16), PipeDreamPartitioner(microbatches=16),
               IdealDPPartitioner(microbatches=16), PipelineILPPlacer(microbatches=16, max_variables=3000),
               learned_search(args.samples), local]
    rows = []
    for name, graph in graphs().items():
        for gpus in (4, 8):
            cluster = modern_cluster(num_gpus=gpus)
            shape = coarsening(graph, cluster)
            sim = PipelineSimulator(16, "1f1b")
            placed_by: dict[str, object] = {}
            for placer in placers:
                best, outcome, placed = float("inf"), "ok", None
                for _ in range(args.repeats):
                    started = time.perf_counter()
                    try:
                        placed = placer.place(graph, cluster)
                    except ValueError as err:
                        outcome = type(err).__name__
                    best = min(best, time.perf_counter() - started)
                placed_by[placer.name], extra = placed, {}
                if placer is local:
                    extra = {"budget_seconds": args.local_seconds,
                             "dp_minibatch": sim.measure(graph, cluster, placed_by["ideal_dp"]).step_time,
                             "local_minibatch": sim.measure(graph, cluster, placed).step_time}
                rows.append({"graph": name, "ops": graph.num_ops, "gpus": gpus, "placer": placer.name,
                             "seconds": best, "outcome": outcome, **shape, **extra})
                print(f"{name} ({graph.num_ops} ops) {gpus} GPUs {placer.name}: {best:.3f} s {outcome}", flush=True)
    OUT.write_text(json.dumps({"machine": platform.processor() or platform.machine(), "target_seconds": TARGET,
                               "repeats": args.repeats, "samples": args.samples, "local_seconds": args.local_seconds,
                               "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
