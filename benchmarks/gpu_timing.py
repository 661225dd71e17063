"""GPU timing check: how far apart torch-v1's measurements of one placement are, within and between processes.

Run where a GPU is lent (``PYTHONPATH=.``; no Hydra needed), twice, to compare two processes::

    python benchmarks/gpu_timing.py --json run1.json
    python benchmarks/gpu_timing.py --json run2.json --out benchmarks/gpu_timing.md --previous run1.json

Exports ``torch.nn.Transformer`` (inputs ``--shape``, default 32 x 16 x 512, float32, eval), places every op on
``/GPU:0`` and measures it with :class:`~gplace.runtime.torch_runtime.TorchRuntime` ``--repeats`` times in a row
(``steps=5, warmup=2``, as the ``runtime=torch`` config), then once with ``steps=50, warmup=10``. Beside it: the
eager module on the GPU (synchronised after each step); the module ``torch.export`` makes of the same program
(its generated code runs the same aten ops in order, without torch-v1's executor); and the host's share: the
wall time of one torch-v1 step without synchronising (op launches only), against the whole step. A node-by-node
executor of hundreds of small ops is bound by the host CPU when launching takes as long as the step; then the
step time follows the host CPU's speed and load, not the GPU's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from gplace.importers.torch_export import from_torch
from gplace.ir import Cluster, Device, Placement
from gplace.runtime.torch_runtime import TorchRuntime

sys.path.insert(0, str(Path(__file__).parent))
from gpu_check import eager_seconds  # noqa: E402  (the same eager timing as gpu_check.md's)
from report_notes import write_report


def sync() -> None:
    """Wait for the GPU (nothing without CUDA)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def eager_ms(model: torch.nn.Module, inputs: tuple) -> float:
    """Median milliseconds of one synchronised eager forward (30 after 5 warm-up ones)."""
    return eager_seconds(model, inputs, steps=30, warmup=5) * 1e3


def exported_ms(model: torch.nn.Module, inputs: tuple, device: str) -> float | str:
    """Milliseconds of the module torch.export makes, on ``device``; the error where it fails there."""
    try:
        return eager_ms(torch.export.export(model, inputs).module().to(device), tuple(x.to(device) for x in inputs))
    except RuntimeError as err:
        return f"fails: {str(err).splitlines()[0][:60]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=3, default=[32, 16, 512])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--previous", type=Path, default=None, help="another process's --json, shown beside")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--label", default="this process", help="the row's name in --out")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Transformer().eval()
    inputs = (torch.randn(*args.shape), torch.randn(*args.shape))
    started = time.perf_counter()
    graph = from_torch(model, inputs)
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/GPU:0", "gpu", speed=10.0)], default_bandwidth=2.5e10)
    gpu = Placement.single(graph, 1)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    device_map = None if cuda else {"/GPU:0": "cpu"}
    runtime = TorchRuntime(steps=5, warmup=2, device_map=device_map)
    short = [runtime.measure(graph, cluster, gpu) for _ in range(args.repeats)]
    long = TorchRuntime(steps=50, warmup=10, device_map=device_map).measure(graph, cluster, gpu)
    launch = launch_ms(runtime, graph, cluster, gpu)
    result = {
        "gpu": torch.cuda.get_device_name(0) if cuda else "none (/GPU:0 mapped to the CPU)",
        "torch": torch.__version__, "ops": graph.num_ops,
        "short_ms": [m.step_time * 1e3 for m in short], "short_spread": [m.spread for m in short],
        "long_ms": long.step_time * 1e3, "long_spread": long.spread, "launch_ms": launch,
        "exported_ms": exported_ms(model, inputs, device),
        "eager_ms": eager_ms(model.to(device), tuple(x.to(device) for x in inputs)),
        "seconds": time.perf_counter() - started, "label": args.label,
    }
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result))
    if args.out:
        previous = json.loads(args.previous.read_text()) if args.previous else None
        write_report(args.out, report(result, previous, args.shape))


def launch_ms(runtime: TorchRuntime, graph, cluster, placement, steps: int = 20) -> list[float]:
    """Median milliseconds of a torch-v1 step's host side (no synchronisation), and of the whole step.

    Uses the runtime's own plan and executor, so the host work is exactly what a measurement's step does.
    """
    from gplace.runtime.torch_runtime import execute_step

    host, whole = [], []
    with torch.no_grad():
        plan = runtime.plan(graph, cluster, placement, None)
        for i in range(steps + 5):
            sync()
            start = time.perf_counter()
            execute_step(plan, time.perf_counter() + 60.0)
            enqueued = time.perf_counter()
            sync()
            if i >= 5:
                host.append(enqueued - start)
                whole.append(time.perf_counter() - start)
    return [statistics.median(host) * 1e3, statistics.median(whole) * 1e3]


def fmt(value: float | str) -> str:
    return f"{value:.2f}" if isinstance(value, float) else value


def report(result: dict, previous: dict | None, shape: list[int]) -> str:
    """Markdown for benchmarks/gpu_timing.md."""
    runs = [(result.get("label", "this process"), result)]
    runs += [(previous.get("label", "an earlier process"), previous)] if previous else []
    rows = [f"| {name} | {', '.join(f'{t:.2f}' for t in r['short_ms'])} | {r['long_ms']:.2f} "
            f"({r['long_spread']:.2f}) | {r['launch_ms'][0]:.2f} | {r['launch_ms'][1]:.2f} | "
            f"{fmt(r['exported_ms'])} | {r['eager_ms']:.2f} |"
            for name, r in runs]
    return "\n".join([
        f"# GPU timing check: one placement, repeated ({time.strftime('%Y-%m-%d', time.gmtime())})", "",
        "Made by `python benchmarks/gpu_timing.py` (see its docstring), in two processes one after the other.", "",
        f"- GPU: {result['gpu']}; torch {result['torch']}",
        f"- model: torch.nn.Transformer, inputs {' x '.join(map(str, shape))} float32, eval; {result['ops']} ops "
        "after torch.export; every op on /GPU:0", "",
        "| process | TorchRuntime(steps=5, warmup=2), each measurement, ms | steps=50, warmup=10, ms (spread) | "
        "host side of a step, ms | whole step, ms | exported module, ms | eager module, ms |",
        "|---|---|---:|---:|---:|---:|---:|", *rows, ""]) + "\n"


if __name__ == "__main__":
    main()
