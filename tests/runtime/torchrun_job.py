"""Run under ``torchrun`` by ``test_torch_pipeline_launch.py``: every rank measures the same placement of the MLP
on two devices with ``processes="torchrun"`` and writes what it got to ``OUT/rank<RANK>.json``. The placement is
two stages (modules 0-1 and 2-4), or with ``back`` three (modules 0-1 and 3-4 on device 0, module 2 on device 1).

Usage: torchrun --nproc-per-node N torchrun_job.py OUT [back]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from pipeline_models import mlp

from gplace.importers.torch_export import from_torch
from gplace.ir import Cluster, Device, Placement
from gplace.runtime.torch_pipeline import TorchPipelineRuntime

BATCH, M = 8, 4


def main(out: Path, back: bool) -> None:
    torch.manual_seed(0)
    model = mlp()
    x = torch.randn(BATCH, 8, generator=torch.Generator().manual_seed(1))
    y = torch.randn(BATCH, 4, generator=torch.Generator().manual_seed(2))
    graph = from_torch(model, (x[: BATCH // M],))
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)
    paths = graph.source.module_paths
    on_1 = {"2"} if back else {"2", "3", "4"}
    placement = Placement.for_graph(graph, [int(paths.get(op, "0").split(".")[0] in on_1) for op in graph.op_names])
    runtime = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=M, steps=2, warmup=1, time_limit=60,
                                   processes="torchrun", threads_per_stage=1)
    torch.set_num_threads(2)
    measurement = runtime.measure(graph, cluster, placement)
    report = {"ok": measurement.ok, "reason": measurement.reason, "step_time": measurement.step_time,
              "threads_after": torch.get_num_threads()}
    if measurement.ok:
        run = runtime.run(graph, cluster, placement)
        report.update(loss=run.loss, grads={k: v.tolist() for k, v in run.grads.items()})
    (out / f"rank{os.environ['RANK']}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:] == ["back"])
