"""What splitting only where a module begins costs a pipeline (``gplace.pipeline.stages.align_to_modules``).

Run from the repository root: ``python benchmarks/module_alignment.py``; writes ``benchmarks/module_alignment.md``.

``torch.distributed.pipelining`` splits a module only where a submodule begins. The pipeline placers cut
wherever their cost model says, so on a torch program their split may fall inside a module, and
``pipeline_split`` refuses it. ``align_to_modules`` colocates the ops so that every cut falls where a module
begins. For each model, GPU count and placer, this script places the plain graph and the aligned one and
reports both mini-batch times under ``pipe-v3`` (M = 16, 1F1B; op costs from the importer's cost model, the
``modern_cluster`` A100s with NVLink) and how many of the plain split's cuts fall inside a module.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from torch import nn

import gplace
from gplace.pipeline import PipelineSimulator
from gplace.pipeline.stages import align_to_modules, split_spec
from gplace.zoo import modern_cluster

sys.path.insert(0, str(Path(__file__).parent))
from report_notes import write_report  # noqa: E402  (benchmarks/ is on sys.path)
from torch_models import Block  # noqa: E402

OUT = Path(__file__).with_suffix(".md")
PLACERS = ("gpipe", "pipedream", "ideal_dp", "local_search")
GPUS = (2, 4, 8)
M, SCHEDULE = 16, "1f1b"


def models() -> dict[str, tuple[nn.Module, torch.Tensor, bool]]:
    """Name -> (module, one mini-batch of inputs, training graph)."""
    torch.manual_seed(0)
    encoder = nn.Sequential(*[nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, dropout=0.0)
                              for _ in range(6)]).eval()
    blocks = nn.Sequential(*[Block() for _ in range(4)]).eval()
    x = torch.randn(16, 128, 256)
    return {"6 x TransformerEncoderLayer": (encoder, x, False), "4 x pre-norm Block": (blocks, x, False),
            "4 x pre-norm Block, training step": (blocks, x, True)}


def measure(graph, cluster, placer: str) -> tuple[float, int, int, float]:
    """The placement's mini-batch time (ms), its cuts inside a module, its backward ops on another device than
    the forward op they differentiate, and the placer's seconds."""
    sim = PipelineSimulator(M, SCHEDULE)
    started = time.perf_counter()
    report = gplace.place(graph, cluster, method=placer, runtime=sim, budget="512 samples")
    seconds = time.perf_counter() - started
    devices = report.placement.devices
    away = sum(int(devices[i] != devices[f]) for i, f in enumerate(graph.grad_of) if f >= 0)
    return report.measurement.step_time * 1e3, len(split_spec(graph, report.placement).unaligned), away, seconds


def main() -> None:
    rows = []
    for name, (module, x, training) in models().items():
        graph = gplace.from_torch(module, (x,), training=training)
        aligned = align_to_modules(graph)
        groups = len({g for g in aligned.colocation if g is not None})
        for gpus in GPUS:
            cluster = modern_cluster(gpus)
            for placer in PLACERS:
                plain_ms, cuts, away, plain_s = measure(graph, cluster, placer)
                aligned_ms, aligned_cuts, aligned_away, aligned_s = measure(aligned, cluster, placer)
                assert aligned_cuts == aligned_away == 0, (name, gpus, placer)
                rows.append((name, graph.num_ops, groups, gpus, placer, plain_ms, cuts, away, aligned_ms, plain_s,
                             aligned_s))
                print(rows[-1], flush=True)
    lines = ["# Splitting only where a module begins: what it costs a pipeline", "",
             __doc__.split("\n\n", 2)[2].strip(), "",
             f"- torch {torch.__version__}; `budget=\"512 samples\"` (used by `local_search` only)", "",
             "| model | ops | aligned groups | GPUs | placer | plain ms | cuts inside a module | backward ops away "
             "from their forward op | aligned ms | aligned / plain | placer s (plain, aligned) |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for name, ops, groups, gpus, placer, plain, cuts, away, aligned, ps, as_ in rows:
        lines.append(f"| {name} | {ops} | {groups} | {gpus} | {placer} | {plain:.3f} | {cuts} | {away} | "
                     f"{aligned:.3f} | {aligned / plain:.3f} | {ps:.2f}, {as_:.2f} |")
    inside, away = [r for r in rows if r[6]], [r for r in rows if r[7]]
    worst = max(rows, key=lambda r: r[8] / r[5])
    lines += ["", f"- Plain splits with a cut inside a module: {len(inside)} of {len(rows)}; with backward ops away "
              f"from their forward op: {len(away)} of {len(rows)}.",
              f"- Aligned / plain mini-batch time: from {min(r[8] / r[5] for r in rows):.3f} to "
              f"{worst[8] / worst[5]:.3f} ({worst[0]}, {worst[3]} GPUs, {worst[4]}).", ""]
    write_report(OUT, "\n".join(lines))


if __name__ == "__main__":
    main()
