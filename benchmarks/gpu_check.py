"""GPU check: real execution of placements with torch-v1 on a CPU and a CUDA GPU, end to end.

Run where a GPU is lent (``PYTHONPATH=.`` is enough; no Hydra or W&B needed)::

    python benchmarks/gpu_check.py --out benchmarks/gpu_check.md

Exports a small model with ``torch.export`` (two branches of ``--depth`` linear layers of width ``--width``, batch
``--batch``, float32), then on a cluster of ``/CPU:0`` and ``/GPU:0`` measures with
:class:`~gplace.runtime.torch_runtime.TorchRuntime` every op on the CPU, every op on the GPU, the left branch on
the CPU and the rest on the GPU, HEFT's placement (from the graph's cost model) and a learned placement (GNN
encoder, list-scheduling policy, ``--samples`` placements measured on the real devices), and checks that each
placement's outputs equal the CPU's. It also times the eager module on the GPU (``torch.cuda.synchronize``
around each step) against torch-v1's node-by-node execution of the same program on the GPU, and calibrates
sim-v1 on the two devices (:func:`~gplace.runtime.calibration.calibrate`: op times per device, link fits timed
with CUDA events) to compare its prediction of each placement with the measurement. Without CUDA it maps
``/GPU:0`` to the CPU (to check the script itself) and says so.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from report_notes import write_report
from torch import nn

import gplace
from gplace.encoders import GNNEncoder
from gplace.importers.torch_export import from_torch
from gplace.ir import Cluster, Device, Placement
from gplace.policies import ListSchedulingPolicy
from gplace.runtime import Simulator
from gplace.runtime.calibration import calibrate
from gplace.runtime.torch_runtime import TorchRuntime


class TwoBranches(nn.Module):
    """Two chains of ``depth`` linear layers with ReLU, summed."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.left = nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())])
        self.right = nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.left(x) + self.right(x)


def eager_seconds(model: nn.Module, inputs: tuple, steps: int = 20, warmup: int = 3) -> float:
    """Median seconds of one eager forward on the inputs' device, synchronised, after ``warmup`` forwards."""
    cuda = inputs[0].is_cuda
    times = []
    with torch.no_grad():
        for i in range(steps + warmup):
            torch.cuda.synchronize() if cuda else None
            start = time.perf_counter()
            model(*inputs)
            torch.cuda.synchronize() if cuda else None
            if i >= warmup:
                times.append(time.perf_counter() - start)
    return statistics.median(times)


def max_error(got, want) -> float:
    """Largest absolute difference over the outputs."""
    got, want = (got if isinstance(got, list | tuple) else [got]), (want if isinstance(want, list | tuple) else [want])
    return max(float((g.detach().cpu() - w.detach().cpu()).abs().max()) for g, w in zip(got, want, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    torch.manual_seed(0)
    model, x = TwoBranches(args.width, args.depth).eval(), torch.randn(args.batch, args.width)
    graph = from_torch(model, (x,))
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/GPU:0", "gpu", speed=10.0)], default_bandwidth=2.5e10)
    device_map = None if cuda else {"/GPU:0": "cpu"}
    runtime = TorchRuntime(steps=5, warmup=2, device_map=device_map)
    want = runtime.run(graph, cluster, Placement.single(graph, 0))
    rows, started, measured = [], time.perf_counter(), {}
    calibration = calibrate(graph, cluster, device_map=device_map)
    predict = Simulator()
    candidates = {"all on /CPU:0": Placement.single(graph, 0), "all on /GPU:0": Placement.single(graph, 1),
                  "left branch on /CPU:0, the rest on /GPU:0": Placement.for_graph(graph, [
                      0 if graph.source.module_paths.get(op, "").startswith("left") else 1 for op in graph.op_names]),
                  "HEFT (cost model)": gplace.place(graph, cluster, method="heft").placement}
    search = time.perf_counter()
    report = gplace.place(graph, cluster, encoder=GNNEncoder("sage"), policy=ListSchedulingPolicy,
                          runtime=runtime, budget=f"{args.samples} samples", seed=0)
    search = time.perf_counter() - search
    candidates[f"learned ({args.samples} samples measured, {search:.1f} s)"] = report.placement
    for name, placement in candidates.items():
        m = measured[name] = runtime.measure(graph, cluster, placement)
        on_gpu = int((placement.devices == 1).sum())
        error = max_error(runtime.run(graph, cluster, placement), want)
        same = Placement.for_graph(calibration.graph, placement.devices)
        sim = predict.measure(calibration.graph, calibration.cluster, same).step_time
        rows.append(f"| {name} | {on_gpu} of {graph.num_ops} | {m.step_time * 1e3:.3f} | {m.spread:.2f} | "
                    f"{sim * 1e3:.3f} | {error:.1e} | {m.ok} |")
    device = x.to("cuda") if cuda else x
    eager = eager_seconds(model.to(device.device), (device,))
    gpu_time = measured["all on /GPU:0"].step_time
    timer = "CUDA events" if cuda else "wall clock"
    name = torch.cuda.get_device_name(0) if cuda else "none (/GPU:0 mapped to the CPU)"
    lines = [f"# GPU check: torch-v1 on a CPU and a GPU ({time.strftime('%Y-%m-%d', time.gmtime())})", "",
             "Made by `python benchmarks/gpu_check.py` (see its docstring).", "",
             f"- GPU: {name}; torch {torch.__version__}; CUDA {torch.version.cuda}",
             f"- model: two branches of {args.depth} x Linear({args.width}, {args.width}) + ReLU, batch "
             f"{args.batch}, float32; {graph.num_ops} ops after torch.export",
             "- cluster: /CPU:0 and /GPU:0 (speed 10 in the cost model); TorchRuntime(steps=5, warmup=2): "
             "median of 5 timed steps", "",
             "| placement | ops on the GPU | step ms | spread | calibrated sim-v1 ms | max abs error vs CPU | ok |",
             "|---|---:|---:|---:|---:|---:|---|", *rows, "",
             *(f"- link {cluster.device_names[f.src]} -> {cluster.device_names[f.dst]} (fitted, {timer}): "
               f"{f.bandwidth / 1e9:.1f} GB/s, latency {f.latency * 1e6:.1f} us" for f in calibration.links),
             f"- eager module on the GPU: {eager * 1e3:.3f} ms a step; torch-v1 running the exported program on the "
             f"GPU: {gpu_time * 1e3:.3f} ms ({gpu_time / eager:.2f}x the eager module)",
             f"- whole check: {time.perf_counter() - started:.0f} s"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        write_report(args.out, text)  # keeps the page's notes (from report_notes.NOTES_MARK on)


if __name__ == "__main__":
    main()
