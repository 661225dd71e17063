"""Samples to reach the seq2seq policy's best: GNN + GDP vs the paper's LSTM + seq2seq; writes ``sample_efficiency.md``.

Run: ``OMP_NUM_THREADS=1 python benchmarks/sample_efficiency.py`` (30-40 minutes on 2 shared cores with the default
200 updates x 8 samples and seeds 0 and 1; ``--updates 5 --seeds 0`` for a smoke run), then optionally
``--resume --extra-gdp-seeds 2 3 4 5 6 7 8 9`` (about 8 minutes: GDP-only runs, compared against every seq2seq
run). Issue 5's must-show: on the paper's three models (``gplace/conf/bench_paper.yaml``'s RNNLM, NMT and Inception-V3
training steps, on the paper's machine with 2 and 4 K80s), the GNN + GDP-style policy reaches the seq2seq policy's
best step time in fewer sampled placements.

Each (model, cluster, seed) trains two placers from scratch (no warm start) with the same budget of sampled
placements, measured by the ``sim-v1`` simulator:

- ``seq2seq``: ``LSTMEncoder`` + ``Seq2SeqPolicy`` (``encoder/lstm.yaml``, ``policy/seq2seq.yaml`` in ``gplace/conf``);
- ``gdp``: ``GNNEncoder("sage")`` + ``GDPPolicy`` (``gplace/conf/encoder/gnn.yaml``, ``gplace/conf/policy/gdp.yaml``);

both with ``ReinforceTrainer`` at ``gplace/conf/trainer/reinforce.yaml``'s defaults (only ``updates`` changes) and
``PolicyPlacer``'s default grouping (``max_groups`` 256, as ``gplace/conf/config.yaml``). Hyper-parameters are read from
those YAML files, so the run uses what ``python -m gplace`` would.

Per run the best-so-far step time is recorded after every update against the placements measured so far (failed
ones included); the trainer's final greedy placement counts as one more sample. For each seed, S* is that seed's
seq2seq best, n_seq the samples seq2seq took to first reach it, and n_gdp the samples GDP (same seed) took to
first reach <= S*; the ratio is n_seq / n_gdp.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from report_notes import write_report

from gplace.baselines import SingleDevice
from gplace.conf import component_config
from gplace.encoders import GNNEncoder, LSTMEncoder
from gplace.ir import Cluster, OpGraph
from gplace.placer import PolicyPlacer
from gplace.policies import GDPPolicy, Seq2SeqPolicy
from gplace.runtime import Simulator
from gplace.training import ReinforceTrainer

HERE = Path(__file__).resolve().parent
MODELS = ("rnnlm", "nmt", "inception_v3")
CLUSTERS = ("paper_2gpu", "paper_4gpu")
METHODS = {"seq2seq": ("lstm", "seq2seq"), "gdp": ("gnn", "gdp")}
"""Method -> (encoder config, policy config)."""
CLASSES = {"lstm": LSTMEncoder, "gnn": GNNEncoder, "seq2seq": Seq2SeqPolicy, "gdp": GDPPolicy}
MAX_GROUPS = 256


def main() -> None:
    """Run every (model, cluster, seed, method), keep the raw curves in ``--work``, write the report."""
    args = _parse()
    raw_path = Path(args.work) / "sample_efficiency.json"
    if args.report_only:
        report = json.loads(raw_path.read_text())
    else:
        torch.set_num_threads(1)
        report = _run_all(args, raw_path)
    write_report(args.out, _markdown(report))
    if args.plot:
        _plot(report, Path(args.plot))


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=200, help="updates per run (x 8 samples each)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="seeds of both methods")
    parser.add_argument("--extra-gdp-seeds", type=int, nargs="*", default=[],
                        help="more GDP-only seeds (cheap), compared against each seq2seq run's best")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--clusters", nargs="+", default=list(CLUSTERS), choices=CLUSTERS)
    parser.add_argument("--out", default=str(HERE / "sample_efficiency.md"), help="the Markdown report")
    parser.add_argument("--plot", default=str(HERE / "plots" / "sample_efficiency_curves.png"),
                        help="best-so-far vs samples figure ('' for none)")
    parser.add_argument("--work", default="/tmp/gplace_sample_efficiency", help="raw curves (JSON)")
    parser.add_argument("--report-only", action="store_true", help="rewrite the report from --work's JSON")
    parser.add_argument("--resume", action="store_true", help="keep the runs already in --work's JSON")
    return parser.parse_args()


# ---------------------------------------------------------------------- configuration
def _resolved(method: str, seed: int, updates: int) -> dict[str, dict[str, Any]]:
    """The encoder, policy and trainer configs of ``method``, resolved as the main job would resolve them."""
    from hydra import compose, initialize_config_module

    encoder, policy = METHODS[method]
    overrides = [f"encoder={encoder}", f"policy={policy}", "trainer=reinforce", f"seed={seed}",
                 f"trainer.updates={updates}", "trainer.progress=false"]
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    out = {group: OmegaConf.to_container(cfg[group], resolve=True) for group in ("encoder", "policy", "trainer")}
    return {group: _kwargs_of(out[group]) for group in ("encoder", "policy", "trainer")}


def _kwargs_of(node: dict[str, Any]) -> dict[str, Any]:
    """A config node's constructor arguments (without ``_target_`` and ``_partial_``)."""
    return {k: v for k, v in node.items() if not k.startswith("_")}


def _graph(model: str) -> OpGraph:
    """The graph config ``model`` of ``gplace/conf``, composed with its defaults and built as the main job builds it."""
    return instantiate(component_config("graph", model))


def _cluster(name: str) -> Cluster:
    """The cluster config ``name`` of ``gplace/conf``, composed with its defaults, built as the main job builds it."""
    return instantiate(component_config("cluster", name))


# ---------------------------------------------------------------------- runs
def _run_all(args: argparse.Namespace, raw_path: Path) -> dict:
    """Every run, in order; the raw JSON is rewritten after each so an interrupted run keeps what it has.

    With ``--resume``, runs already in the raw JSON (same budget) are kept and not run again.
    """
    raw_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    report = json.loads(raw_path.read_text()) if args.resume and raw_path.exists() else {"cases": [], "seconds": 0.0}
    if report.get("updates", args.updates) != args.updates:
        raise ValueError(f"{raw_path} holds runs of {report['updates']} updates, not {args.updates}")
    prior = report["seconds"]
    report.setdefault("commands", []).append(sys.argv[1:])
    report.update(updates=args.updates, seeds=args.seeds, extra_gdp_seeds=args.extra_gdp_seeds,
                  configs={m: _resolved(m, 0, args.updates) for m in METHODS})
    report.setdefault("machine", _machine())
    jobs = [(seed, m) for seed in args.seeds for m in METHODS] + [(seed, "gdp") for seed in args.extra_gdp_seeds]
    sim = Simulator()
    for model in args.models:
        graph = _graph(model)
        for cluster_name in args.clusters:
            cluster = _cluster(cluster_name)
            case = _case(report, graph, model, cluster, cluster_name, sim)
            done = {(r["seed"], r["method"]) for r in case["runs"]}
            for seed, method in (job for job in jobs if job not in done):
                run = _run(graph, cluster, method, seed, args.updates, sim)
                case["runs"].append(run)
                print(f"{model} {cluster_name} seed {seed} {method}: best {run['best'] * 1e3:.1f} ms in "
                      f"{run['seconds']:.0f} s", flush=True)
                report["seconds"] = prior + time.monotonic() - started
                raw_path.write_text(json.dumps(report, indent=1))
    return report


def _case(report: dict, graph: OpGraph, model: str, cluster: Cluster, cluster_name: str, sim: Simulator) -> dict:
    """The report's entry for (model, cluster), added with the best single-GPU step time if new."""
    for case in report["cases"]:
        if (case["model"], case["cluster"]) == (model, cluster_name):
            return case
    single = sim.measure(graph, cluster, SingleDevice(kind="gpu").place(graph, cluster))
    case = {"model": model, "cluster": cluster_name, "cluster_label": cluster.name, "ops": graph.num_ops,
            "single_gpu": single.step_time if single.ok else math.inf, "runs": []}
    report["cases"].append(case)
    return case


def _run(graph: OpGraph, cluster: Cluster, method: str, seed: int, updates: int, sim: Simulator) -> dict:
    """One search from scratch; its best-so-far curve against samples measured."""
    cfg = _resolved(method, seed, updates)
    encoder_name, policy_name = METHODS[method]
    torch.manual_seed(seed)  # initial weights, as the CLI seeds before building the modules
    encoder = CLASSES[encoder_name](**cfg["encoder"])
    policy = CLASSES[policy_name](num_devices=cluster.num_devices, **cfg["policy"])
    placer = PolicyPlacer(graph, cluster, encoder, policy, max_groups=MAX_GROUPS)
    result = ReinforceTrainer(**cfg["trainer"]).fit(placer, sim, graph, cluster)
    samples, best = (a.tolist() for a in result.best_so_far())  # sample by sample (by update before 2026-11-27)
    return {"method": method, "seed": seed, "groups": placer.num_groups, "samples": samples, "best_so_far": best,
            "best": result.best_step_time, "total_samples": result.samples + 1, "seconds": result.seconds}


def _machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "processor": platform.processor() or platform.machine(),
            "load_average_at_start": os.getloadavg()[0]}


# ---------------------------------------------------------------------- analysis
def samples_to_reach(run: dict, target: float) -> int | None:
    """Samples measured until the best-so-far step time was <= ``target``; ``None`` if never."""
    for n, best in zip(run["samples"], run["best_so_far"], strict=True):
        if best <= target:
            return n
    return None


def _pairs(case: dict) -> list[dict]:
    """Per seed: S*, n_seq, GDP's best, n_gdp and the ratio."""
    out = []
    for seed in sorted({r["seed"] for r in case["runs"]}):
        runs = {r["method"]: r for r in case["runs"] if r["seed"] == seed}
        if set(runs) != set(METHODS):
            continue
        target = runs["seq2seq"]["best"]
        n_seq, n_gdp = samples_to_reach(runs["seq2seq"], target), samples_to_reach(runs["gdp"], target)
        out.append({"seed": seed, "target": target, "n_seq": n_seq, "gdp_best": runs["gdp"]["best"], "n_gdp": n_gdp,
                    "ratio": n_seq / n_gdp if n_gdp else None, "last": runs["seq2seq"]["total_samples"]})
    return out


def _cross(report: dict) -> list[dict]:
    """Each paired seq2seq run's S* and n_seq, with the samples every GDP run of its case took to reach S*."""
    rows = []
    for case in report["cases"]:
        gdp = [r for r in case["runs"] if r["method"] == "gdp"]
        for run in (r for r in _main_runs(report, case) if r["method"] == "seq2seq"):
            reach = [samples_to_reach(r, run["best"]) for r in gdp]
            rows.append({"case": case, "seed": run["seed"], "target": run["best"],
                         "n_seq": samples_to_reach(run, run["best"]), "hits": [n for n in reach if n is not None],
                         "gdp_runs": len(gdp)})
    return rows


def _gmean(xs: list[float]) -> float:
    return float(np.exp(np.mean(np.log(xs)))) if xs else math.nan


# ---------------------------------------------------------------------- report
def _markdown(report: dict) -> str:
    budget = report["updates"] * report["configs"]["seq2seq"]["trainer"]["samples_per_update"]
    lines = [
        "# Sample efficiency: GNN + GDP vs the paper's seq2seq policy on the paper's models",
        "",
        f"Made by {_commands(report)} (issue 5's must-show: GNN + GDP reaches "
        "the seq2seq policy's best step time in fewer sampled placements). Graphs: `gplace/conf/bench_paper.yaml`'s "
        "RNNLM, NMT and Inception-V3 training steps (`gplace.zoo`, Keras-built, the paper's sizes) on the paper's "
        "machine with 2 and 4 K80s (`paper_2gpu`, `paper_4gpu`), measured by the `sim-v1` simulator. Both "
        "placers start from scratch (no warm start, no pre-training).",
        "",
        *_setup(report, budget),
        "",
        *_verdict(report),
        "",
        *_table(report),
        "",
        *_extra_section(report),
        *_runs_table(report),
    ]
    return "\n".join(lines) + "\n"


def _commands(report: dict) -> str:
    """The command lines that made the raw JSON, in order."""
    calls = [" ".join(["`OMP_NUM_THREADS=1 python benchmarks/sample_efficiency.py", *argv]).rstrip() + "`"
             for argv in report.get("commands", [[]])]
    return ", then ".join(calls)


def _main_runs(report: dict, case: dict) -> list[dict]:
    """The runs of the seeds both methods ran (not the extra GDP seeds)."""
    return [r for r in case["runs"] if r["seed"] in report["seeds"]]


def _setup(report: dict, budget: int) -> list[str]:
    cfg, m = report["configs"], report["machine"]
    trainer = {k: v for k, v in cfg["seq2seq"]["trainer"].items() if k not in ("seed", "progress")}
    return [
        f"- budget: {report['updates']} updates x {trainer['samples_per_update']} samples = {budget:,} sampled "
        f"placements per run (+ the trainer's final greedy placement, counted as one more sample); seeds "
        f"{', '.join(map(str, report['seeds']))} for each (model, cluster, method); the seed sets the initial "
        "weights and the sampling",
        f"- seq2seq: `LSTMEncoder({_kwargs(cfg['seq2seq']['encoder'])})` + "
        f"`Seq2SeqPolicy({_kwargs(cfg['seq2seq']['policy'])})`",
        f"- gdp: `GNNEncoder({_kwargs(cfg['gdp']['encoder'])})` + `GDPPolicy({_kwargs(cfg['gdp']['policy'])})`",
        f"- trainer (both): `ReinforceTrainer({_kwargs(trainer)})`, the defaults of "
        "`gplace/conf/trainer/reinforce.yaml` "
        "(reward -sqrt(step time), EMA baseline, failed placements charged 100 s); grouping: "
        f"`PolicyPlacer(max_groups={MAX_GROUPS})`, every graph here coarsened to {MAX_GROUPS} groups",
        "- S*: a seed's seq2seq best step time; n_seq: samples seq2seq took to first reach S*; n_gdp: samples GDP "
        "(same seed) took to first reach <= S*; ratio n_seq / n_gdp (above 1: GDP needed fewer). Samples count "
        "every placement measured, failed ones included",
        f"- machine: {m['cpus']} cores (shared with other jobs; load average {m['load_average_at_start']:.1f} at "
        f"start), no GPU, torch threads {m['torch_threads']}, Python {m['python']}, torch {m['torch']}; "
        f"total wall time {report['seconds'] / 60:.0f} min ({_minutes(report, report['seeds'])} min for the paired "
        f"seeds, {_minutes(report, report.get('extra_gdp_seeds', []))} min for the extra GDP seeds)",
        "- figure: [plots/sample_efficiency_curves.png](plots/sample_efficiency_curves.png) (best-so-far step time "
        "against samples, every run)",
    ]


def _minutes(report: dict, seeds: list[int]) -> str:
    """Wall time of the searches of ``seeds``, in minutes."""
    return f"{sum(r['seconds'] for c in report['cases'] for r in c['runs'] if r['seed'] in seeds) / 60:.0f}"


def _kwargs(d: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in d.items())


def _verdict(report: dict) -> list[str]:
    cases = [(c, _pairs(c)) for c in report["cases"]]
    pairs = [p for _, ps in cases for p in ps]
    reached = [p for p in pairs if p["ratio"] is not None]
    fewer = [p for p in reached if p["ratio"] > 1]
    all_seeds = sum(1 for _, ps in cases if ps and all(p["ratio"] is not None and p["ratio"] > 1 for p in ps))
    case_ratio = [_gmean([p["ratio"] for p in ps]) for _, ps in cases if ps and all(p["ratio"] for p in ps)]
    strong = [p for c, ps in cases for p in ps if p["target"] < c["single_gpu"]]
    strong_reached = [p for p in strong if p["ratio"] is not None]
    return [
        "## Verdict",
        "",
        f"- GNN + GDP reached the seq2seq best S* in fewer samples on **{all_seeds} of {len(cases)}** (model, cluster) "
        f"cases on every seed ({sum(r > 1 for r in case_ratio)} of {len(cases)} by the geometric mean over seeds), "
        f"and on {len(fewer)} of {len(pairs)} (case, seed) pairs; it did not reach S* within the budget on "
        f"{len(pairs) - len(reached)} of {len(pairs)} pairs.",
        f"- Geometric-mean ratio n_seq / n_gdp over the {len(reached)} pairs where GDP reached S*: "
        f"**{_gmean([p['ratio'] for p in reached]):.1f}x**.",
        f"- S* beat the best single GPU on {len(strong)} of {len(pairs)} pairs (elsewhere the seq2seq search ended "
        f"no faster than one GPU, a weak target); over those, GDP reached S* on "
        f"{len(strong_reached)}, in fewer samples on {sum(p['ratio'] > 1 for p in strong_reached)}, geometric-mean "
        f"ratio {_gmean([p['ratio'] for p in strong_reached]):.1f}x.",
        *_single_gpu_lines(report),
        *_pooled_line(report),
        *_best_found_line(report),
    ]


def _pooled_line(report: dict) -> list[str]:
    """One line on every GDP run (extra seeds included) against each seq2seq run."""
    if not report.get("extra_gdp_seeds"):
        return []
    rows = _cross(report)
    fewer, total = sum(_fewer(row) for row in rows), sum(row["gdp_runs"] for row in rows)
    return [f"- With the extra GDP seeds (below): over all {total} (seq2seq run, GDP run) pairs of the same case, "
            f"GDP reached S* in fewer samples in **{fewer} ({fewer / total:.0%})**."]


def _fewer(row: dict) -> int:
    """GDP runs that reached the row's S* in fewer samples than its seq2seq run."""
    return sum(n < row["n_seq"] for n in row["hits"])


def _best_found_line(report: dict) -> list[str]:
    """The fastest placement each method found per case, as a speed-up over one GPU, with GDP's seed range."""
    parts = []
    for case in report["cases"]:
        speedup = {m: [case["single_gpu"] / r["best"] for r in case["runs"] if r["method"] == m] for m in METHODS}
        parts.append(f"{case['model']} / {case['cluster_label']} {max(speedup['seq2seq']):.2f}x vs "
                     f"{max(speedup['gdp']):.2f}x ({min(speedup['gdp']):.2f}-{max(speedup['gdp']):.2f}x)")
    n_gdp = len(report.get("extra_gdp_seeds", [])) + len(report["seeds"])
    return [f"- Fastest placement found, as a speed-up over the best single GPU (seq2seq best of "
            f"{len(report['seeds'])} seeds vs GDP best of {n_gdp}, not like for like; GDP's range over its seeds "
            f"in brackets): {'; '.join(parts)}. Every S* is within {_max_speedup(report):.2f}x of one GPU, so "
            "reaching it means finding a placement a few per cent faster than one GPU."]


def _max_speedup(report: dict) -> float:
    return max(c["single_gpu"] / r["best"] for c in report["cases"] for r in _main_runs(report, c)
               if r["method"] == "seq2seq")


def _single_gpu_lines(report: dict) -> list[str]:
    """How often, and after how many samples, each method first beat the best single GPU; cost per update."""
    lines = []
    for method in METHODS:
        runs = [(c, r) for c in report["cases"] for r in _main_runs(report, c) if r["method"] == method]
        hits = [samples_to_reach(r, float(np.nextafter(c["single_gpu"], 0))) for c, r in runs]
        hits = [n for n in hits if n is not None]
        per_update = np.median([r["seconds"] / report["updates"] for _, r in runs])
        median = f", median {int(np.median(hits)):,} samples to do so" if hits else ""
        k = report["configs"][method]["trainer"]["samples_per_update"]
        lines.append(f"- {method}: beat the best single GPU in {len(hits)} of {len(runs)} runs{median}; median "
                     f"{per_update:.2f} s of wall time per update of {k} samples on this machine")
    return lines


def _table(report: dict) -> list[str]:
    lines = [
        "## Per (model, cluster, seed)",
        "",
        "Step times with their speed-up over the best single GPU in brackets. \"(greedy)\": reached only by the "
        "trainer's final greedy placement, the sample after the last update.",
        "",
        "| model | cluster | ops | best single GPU | seed | seq2seq best S* | n_seq | GDP best | n_gdp (<= S*) | "
        "ratio n_seq / n_gdp |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in report["cases"]:
        for p in _pairs(case):
            lines.append(
                f"| {case['model']} | {case['cluster_label']} | {case['ops']:,} | {_ms(case['single_gpu'])} | "
                f"{p['seed']} | {_ms(p['target'])} ({case['single_gpu'] / p['target']:.3f}x) | "
                f"{_reach(p['n_seq'], p['last'])} | {_ms(p['gdp_best'])} ({case['single_gpu'] / p['gdp_best']:.3f}x) | "
                f"{_reach(p['n_gdp'], p['last'])} | {_or(p['ratio'], '{:.1f}x', '-')} |")
    return lines


def _extra_section(report: dict) -> list[str]:
    """Each seq2seq run's S* against every GDP run of its case, the extra GDP seeds included."""
    if not report.get("extra_gdp_seeds"):
        return []
    lines = [
        "## Every GDP seed against each seq2seq run",
        "",
        f"GDP is cheap per update, so it also ran from scratch with seeds {_seed_list(report['extra_gdp_seeds'])} "
        "(same configuration and budget). Each seq2seq run's S* is compared with every GDP run of its case: how "
        "many reach S* at all, how many in fewer samples than n_seq, and the median n_gdp of those that reach it.",
        "",
        "| model | cluster | seq2seq seed | S* | n_seq | GDP runs reaching S* | in fewer samples | median n_gdp |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    rows = _cross(report)
    for row in rows:
        case, hits, n = row["case"], row["hits"], row["gdp_runs"]
        median = f"{int(np.median(hits)):,}" if hits else "-"
        lines.append(f"| {case['model']} | {case['cluster_label']} | {row['seed']} | {_ms(row['target'])} | "
                     f"{row['n_seq']:,} | {len(hits)} of {n} | {_fewer(row)} of {n} | {median} |")
    fewer, total = sum(_fewer(row) for row in rows), sum(row["gdp_runs"] for row in rows)
    seconds = sum(r["seconds"] for c in report["cases"] for r in c["runs"] if r["seed"] in report["extra_gdp_seeds"])
    return [*lines, "", f"In all, {fewer} of {total} pairs ({fewer / total:.0%}). The extra GDP runs took "
            f"{seconds / 60:.0f} min of wall time.", ""]


def _seed_list(seeds: list[int]) -> str:
    return f"{seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) else ", ".join(map(str, seeds))


def _runs_table(report: dict) -> list[str]:
    lines = [
        "## Runs: wall time",
        "",
        "Wall time of each search of the paired seeds on the shared machine (sampling, simulating, updating; the "
        "simulator's time is included), for context only: the comparison above is in samples.",
        "",
        "| model | cluster | seed | method | groups | samples | best | wall s | s per update |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for case in report["cases"]:
        for r in _main_runs(report, case):
            lines.append(f"| {case['model']} | {case['cluster_label']} | {r['seed']} | {r['method']} | {r['groups']} "
                         f"| {r['total_samples']:,} | {_ms(r['best'])} | {r['seconds']:.0f} | "
                         f"{r['seconds'] / report['updates']:.2f} |")
    return lines


def _reach(n: int | None, last: int) -> str:
    """Samples to reach, marking the trainer's final greedy placement (sample ``last``)."""
    return "not reached" if n is None else f"{n:,}" + (" (greedy)" if n == last else "")


def _or(value: float | None, fmt: str, missing: str) -> str:
    return missing if value is None else fmt.format(value)


def _ms(seconds: float) -> str:
    return "failed" if not math.isfinite(seconds) else f"{seconds * 1e3:.1f} ms"


# ---------------------------------------------------------------------- plot
def _plot(report: dict, path: Path) -> None:
    """Best-so-far step time against samples: one panel per (model, cluster), every run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = report["cases"]
    fig, axes = plt.subplots(len(CLUSTERS), len(MODELS), figsize=(13, 7), squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    colours = {"seq2seq": "tab:blue", "gdp": "tab:orange"}
    for case in cases:
        ax = axes[CLUSTERS.index(case["cluster"]), MODELS.index(case["model"])]
        ax.set_visible(True)
        extra = [r for r in case["runs"] if r["seed"] not in report["seeds"]]
        for r in case["runs"]:
            paired = r["seed"] in report["seeds"]
            label = f"{r['method']} seed {r['seed']}" if paired else None
            if extra and r is extra[0]:
                label = f"gdp seeds {_seed_list(report['extra_gdp_seeds'])}"
            ax.step(r["samples"], np.array(r["best_so_far"]) * 1e3, where="post", color=colours[r["method"]],
                    linestyle="-" if r["seed"] == report["seeds"][0] or not paired else "--",
                    linewidth=1.5 if paired else 0.6, alpha=1.0 if paired else 0.35,
                    label=label)
        ax.axhline(case["single_gpu"] * 1e3, color="grey", linestyle=":", label="single GPU")
        ax.set_title(f"{case['model']} / {case['cluster_label']}", fontsize=10)
        ax.set_xlabel("sampled placements")
        ax.set_ylabel("best step time (ms)")
        ax.set_ylim(top=case["single_gpu"] * 1e3 * 1.6)
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
