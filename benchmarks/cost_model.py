"""The analytic cost model's error against per-op times profiled on this machine; writes ``cost_model.md``.

Run: ``OMP_NUM_THREADS=1 python benchmarks/cost_model.py [--passes 3] [--repeats 20]``. Three torch models
(``from_torch``, times from ``gplace.profiling.torch_op_times``: the ``torch-v1`` executor, one thread) and
three ONNX model-zoo networks from the ``onnx`` package's backend test data, ``light/`` (``from_onnx``, batch 1,
times from ``gplace.profiling.onnx_op_times``: onnxruntime's profiler, one thread, graph optimisations off).
Each model is profiled ``passes`` times; an op's profiled time is the median of its passes.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import torch
from torch import nn

from gplace.importers.onnx import from_onnx
from gplace.importers.torch_export import from_torch
from gplace.ir import OpGraph
from gplace.profiling import GROUPS, cost_error, fit_speed_factor, onnx_op_times, op_group, torch_op_times

OUT = Path(__file__).with_name("cost_model.md")
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ONNX_MODELS = {"ResNet-50 (onnx light)": "light_resnet50", "Inception-v1 (onnx light)": "light_inception_v1",
               "DenseNet-121 (onnx light)": "light_densenet121"}


# ---------------------------------------------------------------------- torch models
from report_notes import write_report  # noqa: E402  (benchmarks/ is on sys.path)
from torch_models import Block, convnet, mlp, transformer  # noqa: E402,F401  (benchmarks/ is on sys.path)

TORCH_MODELS: dict[str, Callable[[], tuple[nn.Module, torch.Tensor]]] = {
    "MLP 4x1024, batch 256 (torch)": mlp, "conv net 3 conv, 8x3x64x64 (torch)": convnet,
    "transformer block d=256, 8x128 tokens (torch)": transformer,
}


# ---------------------------------------------------------------------- measuring
@dataclass
class Case:
    name: str
    runtime: str
    graph: OpGraph
    analytic: np.ndarray
    """(N,) the importer's analytic "cpu" seconds (Haswell reference); 0 where it has none."""
    passes: np.ndarray
    """(P, N) profiled seconds per pass; NaN for ops no kernel ran."""
    seconds: float
    """Wall time of all passes."""

    @property
    def measured(self) -> np.ndarray:
        """(N,) the median of the passes; NaN for ops no kernel ran."""
        return np.median(self.passes, axis=0)

    @property
    def ran(self) -> np.ndarray:
        return ~np.isnan(self.passes).any(axis=0)

    def noise(self) -> float:
        """Median over ops of exp(median over passes of |log(pass / median of passes)|)."""
        p, m = self.passes[:, self.ran], self.measured[self.ran]
        return float(np.median(np.exp(np.median(np.abs(np.log(p / m)), axis=0))))


def as_array(graph: OpGraph, times: dict[str, float]) -> np.ndarray:
    out = np.full(graph.num_ops, np.nan)
    for name, seconds in times.items():
        out[graph.op_index[name]] = seconds
    return out


def run_torch(name: str, build: Callable[[], tuple[nn.Module, torch.Tensor]], passes: int, repeats: int) -> Case:
    torch.manual_seed(0)
    model, x = build()
    graph = from_torch(model, (x,))
    start = time.perf_counter()
    rows = [as_array(graph, torch_op_times(graph, repeats=repeats)) for _ in range(passes)]
    return Case(name, "torch-v1", graph, analytic(graph), np.array(rows), time.perf_counter() - start)


def run_onnx(name: str, stem: str, passes: int, repeats: int) -> Case:
    path = LIGHT / f"{stem}.onnx"
    graph = from_onnx(path)
    start = time.perf_counter()
    rows = [as_array(graph, onnx_op_times(graph, path, repeats=repeats)) for _ in range(passes)]
    return Case(name, "onnxruntime", graph, analytic(graph), np.array(rows), time.perf_counter() - start)


def analytic(graph: OpGraph) -> np.ndarray:
    return np.nan_to_num(np.asarray(graph.kind_cost["cpu"]), nan=0.0)


# ---------------------------------------------------------------------- report
def cpu_model() -> str:
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or platform.machine()
    flags = set(fields.get("flags", "").split())
    simd = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return (f"{fields.get('model name', '?')} (family {fields.get('cpu family', '?')}, model "
            f"{fields.get('model', '?')}), {simd}")


def fmt(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{x:.2f}x"


def group_rows(case: Case, speed: float) -> list[str]:
    a, m, ran = case.analytic, case.measured, case.ran
    groups = np.array([op_group(t) for t in case.graph.op_types])
    rows = []
    for group in (*GROUPS, "all"):
        mask = ran & ((groups == group) if group != "all" else True)
        if not mask.any():
            continue
        raw, scaled = cost_error(a[mask], m[mask]), cost_error(a[mask], m[mask], speed=speed)
        if raw.ops == 0:
            continue
        share = m[mask].sum() / m[ran].sum()
        label = f"**{group}**" if group == "all" else group
        rows.append(f"| {case.name} | {label} | {raw.ops} | {100 * share:.0f} % | {fmt(raw.median)} | "
                    f"{fmt(raw.p90)} | {fmt(scaled.median)} | {fmt(scaled.p90)} |")
    return rows


def type_rows(case: Case, top: int = 6) -> list[str]:
    a, m, ran = case.analytic, case.measured, case.ran
    by: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(case.graph.op_types):
        if ran[i]:
            by[t].append(i)
    ranked = sorted(by.items(), key=lambda kv: -m[kv[1]].sum())[:top]
    rows = []
    for t, idx in ranked:
        idx_arr = np.array(idx)
        both = idx_arr[(a[idx_arr] > 0) & (m[idx_arr] > 0)]
        ratio = np.median(m[both] / a[both]) if both.size else np.nan
        rows.append(f"| {case.name} | `{t}` | {len(idx)} | {a[idx_arr].sum() * 1e3:.3f} | "
                    f"{m[idx_arr].sum() * 1e3:.3f} | {fmt(ratio)} |")
    return rows


def report(cases: list[Case], speed: float, args: argparse.Namespace, load: tuple[float, float]) -> str:
    per_model = {c.name: fit_speed_factor(c.analytic[c.ran], c.measured[c.ran]) for c in cases}
    per_runtime = {}
    for runtime in dict.fromkeys(c.runtime for c in cases):
        chosen = [c for c in cases if c.runtime == runtime]
        per_runtime[runtime] = fit_speed_factor(np.concatenate([c.analytic[c.ran] for c in chosen]),
                                                np.concatenate([c.measured[c.ran] for c in chosen]))
    lines = [
        "# Analytic cost model vs profiled op times",
        "",
        f"Made by `OMP_NUM_THREADS=1 python benchmarks/cost_model.py --passes {args.passes} --repeats "
        f"{args.repeats}`.",
        "The analytic model (`gplace.costmodel`, what the importers store as `kind_cost[\"cpu\"]`) is a roofline",
        "for the paper's **18-core Haswell reference** (0.6 TFLOP/s, 50 GB/s, 2 us per op), not for this machine.",
        "It is compared with per-op times measured here on **one thread**:",
        "",
        "- torch models: `gplace.profiling.torch_op_times` (`runtime.calibration.time_ops`: each FX call of the",
        f"  `torch-v1` executor timed in sequence, median of {args.repeats} steps after 3 warm-up ones; includes",
        "  the executor's per-call work: argument lookup, dispatch, releasing values after their last use; the",
        "  metadata-only ops in the last table, which do no work, show its size);",
        "- ONNX models (`light/` networks of the `onnx` package's backend test data, batch 1):",
        "  `gplace.profiling.onnx_op_times` (onnxruntime's profiler, kernel time of each node, mean of",
        f"  {args.repeats} runs after 2 warm-up ones; graph optimisations off, so every node is its own kernel; the",
        "  trace's resolution is 1 us). The `light/` models make their weights at run time with",
        "  `ConstantOfShape` nodes (the file stores only their shapes): those fills are real ops of the graph and",
        "  are counted (group *other*).",
        "",
        f"Each model was profiled in {args.passes} passes; an op's time is the median of its passes. *Noise* is the",
        "median over ops of how far one pass is from that median (as a factor). Ops no kernel runs (inputs,",
        "weights) are left out; ops with an analytic cost of 0 (reshapes, torch views: metadata only) are left out",
        "of the per-op figures (a log ratio needs both) but count in the sums.",
        "",
        "**Error measure.** Per op: `exp(|log(predicted / measured)|)`, a factor (1.00x is exact, 2.00x is off by",
        "2 either way); the tables give its median and 90th percentile over the ops of a group. Step: the sum of",
        "the predicted op times over the sum of the measured ones (a one-device step without overlap).",
        "",
        "**Machine model.** *raw* compares the Haswell-reference costs as they are. *scaled* divides them by one",
        "scalar speed factor `s` fitted by least squares in log space (`gplace.profiling.fit_speed_factor`:",
        "`s = exp(mean(log(analytic / measured)))`) over **every compared op of all six models at once**: "
        f"**s = {speed:.3f}**,",
        f"i.e. one thread of this machine runs the analytic model's ops at {speed:.2f}x the Haswell reference's",
        "speed, as a `Device(kind=\"cpu\", speed=s)` would state it. The single factor cannot remove per-op-type",
        "errors; the fitted `s` per model and per runtime (below) shows how far one factor is from fitting them",
        "all. The fit weighs every op equally, so models with many small ops (DenseNet's) weigh most and the",
        "step-level sums (dominated by the largest ops) need not come out right after scaling.",
        "",
        f"- machine: `nproc` = {os.cpu_count()}, {cpu_model()}, {platform.machine()}; shared, load average",
        f"  {load[0]:.2f} before and {load[1]:.2f} after the run",
        f"- torch {torch.__version__} ({torch.get_num_threads()} thread), onnxruntime {onnxruntime.__version__} "
        f"(1 intra-op thread), onnx {onnx.__version__}",
        "- fitted s per runtime: " + ", ".join(f"{r} {s:.3f}" for r, s in per_runtime.items()),
        "",
        "## Per-op error by op group",
        "",
        "Groups (`gplace.profiling.op_group`): *matmul* (MatMul, Gemm, linear, addmm, attention, einsum), *conv*,",
        "*elementwise* (arithmetic, activations, normalisations, softmax, dropout), *other* (pooling, concat,",
        "copies, fills, reductions, ...). *time* is the group's share of the model's profiled time.",
        "",
        "| model | group | ops | time | raw median | raw p90 | scaled median | scaled p90 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in cases:
        lines += group_rows(c, speed)
    every_a = np.concatenate([c.analytic[c.ran] for c in cases])
    every_m = np.concatenate([c.measured[c.ran] for c in cases])
    every_g = np.concatenate([[op_group(t) for t, r in zip(c.graph.op_types, c.ran, strict=True) if r]
                              for c in cases])
    lines += ["", "Over all six models:", "",
              "| group | ops | raw median | raw p90 | scaled median | scaled p90 |", "|---|---:|---:|---:|---:|---:|"]
    for group in (*GROUPS, "all"):
        mask = every_g == group if group != "all" else np.ones(every_g.size, dtype=bool)
        raw, scaled = cost_error(every_a[mask], every_m[mask]), cost_error(every_a[mask], every_m[mask], speed=speed)
        lines.append(f"| {group} | {raw.ops} | {fmt(raw.median)} | {fmt(raw.p90)} | {fmt(scaled.median)} | "
                     f"{fmt(scaled.p90)} |")
    lines += [
        "", "## Step-level error", "",
        "Sum over the ops a kernel ran. *ratio* = predicted sum / measured sum (1.00 is exact; < 1: the model",
        f"predicts too fast). *scaled* uses the one factor s = {speed:.3f}; *own s* is the factor fitted on this",
        "model alone (per-op, log space), and the step ratio it would give.",
        "",
        "| model | runtime | ops (compared) | analytic sum | profiled sum | ratio raw | ratio scaled | own s "
        "| ratio with own s | noise | profiling time |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in cases:
        a, m = c.analytic[c.ran], c.measured[c.ran]
        raw, scaled, own = cost_error(a, m), cost_error(a, m, speed=speed), cost_error(a, m, speed=per_model[c.name])
        lines.append(f"| {c.name} | {c.runtime} | {int(c.ran.sum())} ({raw.ops}) | "
                     f"{raw.predicted_total * 1e3:.2f} ms | {raw.measured_total * 1e3:.2f} ms | "
                     f"{raw.step_ratio:.2f} | {scaled.step_ratio:.2f} | {per_model[c.name]:.3f} | "
                     f"{own.step_ratio:.2f} | {fmt(c.noise())} | {c.seconds:.1f} s |")
    lines += [
        "", "## Largest op types", "",
        "Per model, the op types with the most profiled time: summed analytic (Haswell reference) and profiled",
        "milliseconds, and the median over their ops of profiled / analytic (raw; divide by s for scaled).",
        "",
        "| model | op type | ops | analytic ms | profiled ms | median profiled / analytic |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for c in cases:
        lines += type_rows(c)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=3, help="profiling passes per model (default: 3)")
    parser.add_argument("--repeats", type=int, default=20, help="profiled steps per pass (default: 20)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    before = os.getloadavg()[0]
    cases = [run_torch(name, build, args.passes, args.repeats) for name, build in TORCH_MODELS.items()]
    cases += [run_onnx(name, stem, args.passes, args.repeats) for name, stem in ONNX_MODELS.items()]
    speed = fit_speed_factor(np.concatenate([c.analytic[c.ran] for c in cases]),
                             np.concatenate([c.measured[c.ran] for c in cases]))
    write_report(OUT, report(cases, speed, args, (before, os.getloadavg()[0])))
    for c in cases:
        e = cost_error(c.analytic[c.ran], c.measured[c.ran], speed=speed)
        print(f"{c.name}: scaled per-op median {e.median:.2f}x, p90 {e.p90:.2f}x, step ratio {e.step_ratio:.2f}")
    print(f"s = {speed:.3f}; wrote {OUT}")


if __name__ == "__main__":
    main()
