"""The pipeline bench: partitioners and learned searches on micro-batched training, measured by ``pipe-v3``.

Writes ``pipeline_results.json`` (one record per graph, cluster, schedule, M and method), ``PIPELINE.md`` (the
tables and the issue's targets, checked) and ``plots/pipeline_throughput.png`` under the output directory.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gplace.baselines.pipeline import PipelineLocalSearch, StageProblem, pipeline_lower_bound
from gplace.bench.plots import save_png
from gplace.bench.report import markdown_cell
from gplace.bench.runner import read_records, settings_digest, shown_pairs, stale_reason
from gplace.defaults import SCHEDULE
from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.errors import check_flags
from gplace.ir.serialize import write_text_atomic
from gplace.pipeline import PipelineSimulator
from gplace.runtime.base import time_ratio

log = logging.getLogger(__name__)

Search = Callable[[OpGraph, Cluster, Any, Placement | None], Placement]
"""``search(graph, cluster, runtime, warm_start) -> placement``: a learned search with ``runtime`` as its reward."""


@dataclass(frozen=True)
class PipelineRecord:
    """One method's mini-batch time on one graph, cluster, schedule and number of micro-batches."""

    graph: str
    cluster: str
    schedule: str
    microbatches: int
    method: str
    minibatch_time: float
    """Seconds per mini-batch by :attr:`model`; ``inf`` when the placement failed (out of memory, no placement)."""
    lower_bound: float
    """:func:`~gplace.baselines.pipeline.pipeline_lower_bound` of the graph on the cluster."""
    search_seconds: float
    """Wall time to produce the placement."""
    failed: bool
    reason: str = ""
    num_ops: int = 0
    stage_devices: int = 0
    contiguous: bool | None = None
    """Whether the placement's stages are contiguous (:func:`is_contiguous`); ``None`` when it failed."""
    model: str = "pipe-v1"
    """The pipeline simulator's semantics that measured it (records written before it was kept: ``pipe-v1``)."""
    graph_fingerprint: str | None = None
    """:attr:`OpGraph.fingerprint <gplace.ir.OpGraph.fingerprint>` of the graph measured; ``None`` in records written
    before they said (a resumed bench measures those again)."""
    cluster_fingerprint: str | None = None
    """:attr:`Cluster.fingerprint <gplace.ir.Cluster.fingerprint>` of the cluster measured on; ``None`` likewise."""
    settings: str | None = None
    """A digest of the bench settings its (graph, cluster) pair was measured with (placers, micro-batches,
    schedules, searches): a resumed bench measures the pair again where they are set otherwise now; ``None`` in
    records written before they said."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``inf`` as ``null``)."""
        doc = asdict(self)
        doc["minibatch_time"] = None if math.isinf(self.minibatch_time) else self.minibatch_time
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> PipelineRecord:
        """The record :meth:`to_json` wrote."""
        time = doc["minibatch_time"]
        return cls(**{**doc, "minibatch_time": math.inf if time is None else float(time)})


def models(records: Iterable[PipelineRecord]) -> str:
    """The simulator semantics that measured ``records``, e.g. ``"pipe-v3"`` (``"pipe-v1 and pipe-v3"`` if mixed)."""
    return " and ".join(sorted({r.model for r in records})) or PipelineSimulator.semantics


def is_contiguous(problem: StageProblem, placement: Placement) -> bool:
    """Whether ``placement`` splits ``problem``'s pipeline into contiguous stages in the contiguous partitioners'
    sense (a chain of ideals of the unit DAG): the edges that run forward in the pipeline order, between units
    on different devices, join the devices without a cycle; so do units joined only through units off the
    stages (:meth:`StageProblem.fixed_reach`). (A colocated forward and backward op is one unit; a backward op
    placed apart from its forward op makes the split non-contiguous.)"""
    unit_device = np.empty(problem.units.num_units, dtype=np.int64)
    unit_device[problem.units.unit_of] = placement.devices
    piped = unit_device[problem.order]
    a, b = piped[problem.unit_src], piped[problem.unit_dst]
    cross = (problem.unit_src < problem.unit_dst) & (a != b)
    succ = {(int(u), int(v)) for u, v in zip(a[cross], b[cross], strict=True)} | _forward_through_fixed(problem, piped)
    nodes = set(np.unique(piped).tolist())
    while nodes:  # peel devices without a predecessor; a cycle leaves some behind
        free = {n for n in nodes if not any(v == n and u in nodes for u, v in succ)}
        if not free:
            return False
        nodes -= free
    return True


def _forward_through_fixed(problem: StageProblem, piped: np.ndarray) -> set[tuple[int, int]]:
    """Device pairs ``(piped[a], piped[t])``, ``a < t`` joined through units off the stages, devices apart. Per
    set of reached units (a bitset over positions), the last position it reaches on each device, so no pair of
    units is built (a fixed unit between the two halves of an 8,000-op chain joins 16 million)."""
    src, reach = problem.fixed_reach(np.arange(problem.num_units))
    on = {int(d): int.from_bytes(np.packbits(piped == d, bitorder="little").tobytes(), "little")
          for d in np.unique(piped).tolist()}
    last: dict[int, list[tuple[int, int]]] = {}
    pairs = set()
    for a, r in zip(src.tolist(), reach, strict=True):
        if r not in last:
            last[r] = [(d, (r & bits).bit_length() - 1) for d, bits in on.items()]
        pairs.update((int(piped[a]), d) for d, t in last[r] if t > a and d != piped[a])
    return pairs


def run_pipeline_case(graph: OpGraph, cluster: Cluster, placers: Mapping[str, Any], *, microbatches: Sequence[int],
                      schedules: Sequence[str], searches: Mapping[str, Search] | None = None,
                      search_cases: Iterable[tuple[int, str]] = (), label: str | None = None) -> list[PipelineRecord]:
    """Place ``graph`` on ``cluster`` with every placer (once, for the largest M) and measure every placement
    with ``pipe-v3`` for every M and schedule; run each learned search on the ``(M, schedule)`` pairs of
    ``search_cases``, cold and warm-started from the fastest placer's placement of that M and schedule. The
    records name the graph ``label`` (default: ``graph.name``)."""
    bound = pipeline_lower_bound(graph, cluster)
    problem = StageProblem(graph, cluster)
    record = _recorder(graph, cluster, bound, problem, label or graph.name)
    placements: dict[str, Placement] = {}
    failures: dict[str, tuple[float, str]] = {}
    for name, placer in placers.items():
        started = time.perf_counter()
        try:
            placements[name] = placer.place(graph, cluster)
        except ValueError as err:  # infeasible, too large: a failed record, never a crash
            failures[name] = (time.perf_counter() - started, f"{type(err).__name__}: {err}")
            continue
        failures[name] = (time.perf_counter() - started, "")
    records = []
    for m in microbatches:
        for schedule in schedules:
            sim = PipelineSimulator(microbatches=m, schedule=schedule)
            mine = []
            for name in placers:
                seconds, reason = failures[name]
                if name in placements:
                    result = sim.measure(graph, cluster, placements[name])
                    mine.append(record(schedule, m, name, result.step_time, seconds, result.reason,
                                       placements[name]))
                else:
                    mine.append(record(schedule, m, name, math.inf, seconds, reason))
            records += mine
            if (m, schedule) in set(search_cases):
                fastest = min(mine, key=lambda r: r.minibatch_time)
                warm = placements.get(fastest.method) if not fastest.failed else None
                records += _searches(graph, cluster, sim, searches or {}, warm, record, schedule, m)
    return records


def _searches(graph, cluster, sim, searches, warm, record, schedule, m) -> list[PipelineRecord]:
    out = []
    for name, search in searches.items():
        for suffix, start in (("", None), ("_warm", warm)):
            if suffix and start is None:
                continue
            started = time.perf_counter()
            try:
                placement = search(graph, cluster, sim, start)
            except (RuntimeError, ValueError) as err:
                out.append(record(schedule, m, name + suffix, math.inf, time.perf_counter() - started, str(err)))
                continue
            seconds = time.perf_counter() - started
            result = sim.measure(graph, cluster, placement)
            out.append(record(schedule, m, name + suffix, result.step_time, seconds, result.reason, placement))
    return out


def _recorder(graph: OpGraph, cluster: Cluster, bound: float, problem: StageProblem, label: str):
    stages = int(problem.num_stages)

    def record(schedule: str, m: int, method: str, minibatch: float, seconds: float, reason: str,
               placement: Placement | None = None) -> PipelineRecord:
        failed = not math.isfinite(minibatch)
        contiguous = None if failed or placement is None else is_contiguous(problem, placement)
        return PipelineRecord(label, cluster.name, schedule, m, method, float(minibatch), bound, float(seconds),
                              failed, reason if failed else "", graph.num_ops, stages, contiguous,
                              PipelineSimulator.semantics, graph.fingerprint, cluster.fingerprint)
    return record


# ---------------------------------------------------------------------- report
def write_pipeline_results(records: Sequence[PipelineRecord], out_dir: str | Path, *, notes: str = "",
                           plot: bool = True) -> None:
    """Write ``pipeline_results.json``, ``PIPELINE.md`` and (with ``plot``) ``plots/pipeline_throughput.png``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / "pipeline_results.json", json.dumps([r.to_json() for r in records], indent=1))
    write_text_atomic(out_dir / "PIPELINE.md", pipeline_report(records) + notes)
    if plot and records:
        plot_throughput(records, out_dir / "plots" / "pipeline_throughput.png")


Case = tuple[str, str, str, int]
"""``(graph, cluster, schedule, M)``."""


def _case(r: PipelineRecord) -> Case:
    return r.graph, r.cluster, r.schedule, r.microbatches


def references(records: Sequence[PipelineRecord], baseline: str = "single_gpu") -> dict[Case, tuple[str, float]]:
    """``case -> (method, seconds)``: ``baseline``'s mini-batch time where it ran, else the fastest method's (a
    graph one GPU cannot hold is compared with the best placement found); cases where nothing ran are left out."""
    out: dict[Case, tuple[str, float]] = {}
    for r in records:
        if r.failed:
            continue
        held = out.get(_case(r))
        if held is None or (held[0] != baseline and (r.method == baseline or r.minibatch_time < held[1])):
            out[_case(r)] = (r.method, r.minibatch_time)
    return out


def speedups(records: Sequence[PipelineRecord], baseline: str = "single_gpu") -> dict[tuple, float]:
    """``(graph, cluster, schedule, M, method) -> baseline time / method time`` (throughput over one GPU), for
    the methods that ran in cases where ``baseline`` ran."""
    base = {k: t for k, (method, t) in references(records, baseline).items() if method == baseline}
    return {(*_case(r), r.method): time_ratio(base[_case(r)], r.minibatch_time) for r in records
            if not r.failed and _case(r) in base}


def pipeline_report(records: Sequence[PipelineRecord], baseline: str = "single_gpu") -> str:
    """Markdown: per (graph, cluster, schedule, M), each method's throughput over the case's reference (one GPU,
    or the fastest method where one GPU ran out of memory), and the lower bound's."""
    methods = list(dict.fromkeys(r.method for r in records))
    cases = list(dict.fromkeys(_case(r) for r in records))
    by_key = {(*_case(r), r.method): r for r in records}
    refs = references(records, baseline)
    head = ["graph", "ops", "cluster", "schedule", "M", "reference (ms)", *methods, "bound"]
    lines = [f"Throughput over the reference, higher is better: the reference is `{baseline}` (every op on one GPU) "
             "where it fits in memory; where it does not (`OOM` in its column), the fastest method of the row, "
             "named in the reference cell, is 1.00x. `OOM` = out of memory, `failed` = no placement (e.g. the ILP "
             "over its variable limit). `bound` = reference / pipeline_lower_bound (total work over every device some "
             "op may run on, the CPU included, or the largest op).", "",
             "| " + " | ".join(map(markdown_cell, head)) + " |", "|" + "---|" * len(head)]
    for case in cases:
        rows = [by_key.get((*case, m)) for m in methods]
        first = next(r for r in rows if r is not None)
        ref = refs.get(case)
        cells = [markdown_cell(case[0]), str(first.num_ops), markdown_cell(case[1]), case[2], str(case[3]),
                 _ref_cell(ref, baseline)]
        cells += [_cell(r, ref) for r in rows]
        cells.append(f"{ref[1] / first.lower_bound:.2f}x" if ref and first.lower_bound > 0 else "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Seconds to place (largest over all cases, and on the largest graph):", "",
              "| method | max seconds | largest graph (ops) | seconds there |", "|---|---|---|---|"]
    largest = max(records, key=lambda r: r.num_ops)
    for m in methods:
        mine = [r for r in records if r.method == m]
        there = [r.search_seconds for r in mine if r.graph == largest.graph]
        lines.append(f"| {markdown_cell(m)} | {max(r.search_seconds for r in mine):.2f} | "
                     f"{markdown_cell(largest.graph)} ({largest.num_ops}) | {f'{max(there):.2f}' if there else '-'} |")
    return "\n".join(lines) + "\n"


def _ref_cell(ref: tuple[str, float] | None, baseline: str) -> str:
    if ref is None:
        return "-"
    return f"{ref[1] * 1e3:.4g}" if ref[0] == baseline else f"{ref[1] * 1e3:.4g} ({markdown_cell(ref[0])})"


def _cell(record: PipelineRecord | None, ref: tuple[str, float] | None) -> str:
    """A method's throughput over the reference, or why it has none."""
    if record is None or record.failed or ref is None:
        return _ms(record) if record is not None and record.failed else "-"
    return f"{time_ratio(ref[1], record.minibatch_time):.2f}x"


def plot_throughput(records: Sequence[PipelineRecord], path: str | Path, *, schedule: str = SCHEDULE,
                    microbatches: int | None = None, baseline: str = "single_gpu") -> Path:
    """Throughput over one GPU against the number of stage devices, one panel per graph (:func:`throughput_figure`),
    written to ``path``."""
    return save_png(throughput_figure(records, schedule=schedule, microbatches=microbatches, baseline=baseline), path,
                    dpi=100)


def throughput_figure(records: Sequence[PipelineRecord], *, schedule: str = SCHEDULE, microbatches: int | None = None,
                      baseline: str = "single_gpu"):
    """The figure of :func:`plot_throughput`: per graph, the best method per count of stage devices, one line per GPU
    model (from one GPU); graphs one GPU cannot hold have no line and say so in their panel, and titles longer than
    24 characters are cut."""
    from gplace.bench.plots import subplots

    m = microbatches or max(r.microbatches for r in records)
    ratio = speedups(records, baseline)
    graphs = list(dict.fromkeys(r.graph for r in records))
    families: dict[str, dict[str, dict[int, float]]] = {}
    for r in records:
        if r.schedule != schedule or r.microbatches != m or r.method == baseline:
            continue
        speedup = ratio.get((*_case(r), r.method))
        if speedup is None:  # failed, or one GPU could not hold the graph
            continue
        family = r.cluster.split("x", 1)[-1]
        best = families.setdefault(family, {}).setdefault(r.graph, {1: 1.0})
        best[r.stage_devices] = max(best.get(r.stage_devices, 0.0), speedup)
    cols = min(4, len(graphs))
    rows = -(-len(graphs) // cols)
    fig, axes = subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    for ax, graph in zip(axes.ravel(), graphs, strict=False):
        for family, per_graph in families.items():
            points = sorted(per_graph.get(graph, {}).items())
            if len(points) >= 2:
                ax.plot(*zip(*points, strict=True), marker="o", label=family)
        top = max((d for f in families.values() for d in f.get(graph, {})), default=1)
        ax.plot([1, top], [1, top], ls="--", color="gray", lw=0.8)
        ax.set(xlabel="GPUs", ylabel="x one GPU")
        ax.set_title(graph if len(graph) <= 24 else graph[:23] + "…", fontsize=9)  # longer ran into the next panel's
        if ax.get_legend_handles_labels()[1]:
            ax.legend(fontsize=6)
        else:  # an empty panel said nothing
            why = f"no {schedule} M={m} speed-up:\none GPU cannot hold it,\nevery split failed,\nor not run"
            ax.text(0.5, 0.5, why, ha="center", va="center", fontsize=7, transform=ax.transAxes)
    for ax in axes.ravel()[len(graphs):]:
        ax.set_visible(False)
    fig.suptitle(f"Throughput, best placer, {schedule}, M={m} ({models(records)})")
    fig.tight_layout()
    return fig


def model_speedup(graph: OpGraph, cluster: Cluster, microbatches: int, *, bubble: bool = True) -> float:
    """One GPU's time over the pipeline time the exact DP's split on the stage devices in index order (the placer
    also tries other orders where the devices differ) reaches in the partitioners' own model:
    ``work / (M x bottleneck)``, with ``bubble`` scaled by the 1F1B/GPipe fill and drain ``M / (M + S - 1)``."""
    from gplace.baselines.pipeline import IdealDPPartitioner

    problem = StageProblem(graph, cluster, microbatches=microbatches)
    bottleneck = problem.bottleneck(IdealDPPartitioner().stages(problem))
    work = float(np.min(np.where(problem.allowed, problem.cost, np.inf), axis=1).sum())
    fill = microbatches / (microbatches + problem.num_stages - 1) if bubble else 1.0
    return work * fill / (microbatches * bottleneck) * microbatches if bottleneck > 0 else 0.0


def targets_section(records: Sequence[PipelineRecord], model: Mapping[str, tuple[float, float]], *, cluster: str,
                    microbatches: int, profiles: Sequence[str], searches: Sequence[str] = (),
                    gpus: int | None = None) -> str:
    """Markdown: the issue's targets for the pipeline placers and searches, checked on ``records``.

    ``model`` maps a profile to :func:`model_speedup` with and without the bubble; ``searches`` names the learned
    searches (their warm-started runs are ``<name>_warm``); ``gpus`` is ``cluster``'s GPU count, named in the 3x
    target's heading (left out where ``None``)."""
    lines = ["", "## Targets", ""]
    lines += _three_x(records, model, cluster, microbatches, profiles, gpus)
    lines += _dp_unbeaten(records)
    for name in searches:
        lines += _search_targets(records, name, searches)
    lines += _ten_thousand_ops(records, searches)
    lines += ["", "**Simulator speed (30x the plain loop)**: issue 11 item 6, not part of this bench (see "
              "benchmarks/simulator.md)."]
    lines += _ilp_against_dp(records)
    return "\n".join(lines) + "\n"


def _ilp_against_dp(records, methods: Sequence[str] = ("ilp", "ilp_overlap")) -> list[str]:
    """Per schedule and ILP variant: ideal_dp's time over the ILP's (median, range, how often above 1); nothing
    where no case has both (a bench without the ILP printed the table's header alone)."""
    by = {(*_case(r), r.method): r for r in records}
    rows = []
    for method in methods:
        for schedule in dict.fromkeys(r.schedule for r in records):
            ratios = [time_ratio(by[(*k[:4], "ideal_dp")].minibatch_time, r.minibatch_time) for k, r in by.items()
                      if k[4] == method and k[2] == schedule and not r.failed
                      and (*k[:4], "ideal_dp") in by and not by[(*k[:4], "ideal_dp")].failed]
            if ratios:
                rows.append(f"| {method} | {schedule} | {len(ratios)} | {np.median(ratios):.3f} | "
                            f"{min(ratios):.3f} | {max(ratios):.3f} | {sum(x > 1 + 1e-9 for x in ratios)} |")
    if not rows:
        return []
    return ["", f"**ILP against the exact DP, measured by {models(records)}** (ideal_dp time / ILP time over the "
            "cases where both placed; above 1 = the ILP's non-contiguous split is faster):", "",
            "| method | schedule | cases | median | min | max | ILP faster |", "|---|---|---|---|---|---|---|", *rows]


def _three_x(records, model, cluster, microbatches, profiles, gpus: int | None = None) -> list[str]:
    ratio = speedups(records)
    bound = {r.graph: r for r in records if r.cluster == cluster and r.method == "single_gpu" and not r.failed}
    on = "" if gpus is None else f" on {gpus} GPU{'s' if gpus != 1 else ''}"
    lines = [f"**3x{on}, M = {microbatches}** ({cluster}; best method and schedule measured by "
             f"{models(records)}; "
             "`DP model` = the exact DP's split in the partitioners' own model, `M x work / ((M + S - 1) x "
             "bottleneck)`, and without the fill/drain bubble (M -> inf), `work / bottleneck`; `bound` = one GPU / "
             "pipeline_lower_bound):", "",
             "| profile | best | method | schedule | ideal_dp | DP model | DP model, no bubble | bound | met |",
             "|---|---|---|---|---|---|---|---|---|"]
    for graph in profiles:
        mine = [(v, k[4], k[2]) for k, v in ratio.items() if k[0] == graph and k[1] == cluster
                and k[3] == microbatches and k[4] != "single_gpu"]
        if not mine:
            continue
        best, method, schedule = max(mine)
        dp = max((v for k, v in ratio.items() if k[:2] == (graph, cluster) and k[3] == microbatches
                  and k[4] == "ideal_dp"), default=math.nan)
        with_bubble, steady = model.get(graph, (math.nan, math.nan))
        one = bound.get(graph)
        limit = one.minibatch_time / one.lower_bound if one else math.nan
        if best >= 3:
            verdict = "met"
        elif limit < 3:
            verdict = f"missed: the bound allows {limit:.2f}x"
        elif with_bubble < 3:
            verdict = f"missed: the DP's optimum allows {with_bubble:.2f}x ({steady:.2f}x without bubble)"
        else:
            verdict = (f"missed: the DP's optimum allows {with_bubble:.2f}x in its model, {models(records)} "
                       "measures its "
                       f"split at {_times(dp)} (the schedule's stalls and link contention the model does not see)")
        lines.append(f"| {graph} | {best:.2f}x | {method} | {schedule} | {_times(dp)} | {_times(with_bubble)} | "
                     f"{_times(steady)} | {_times(limit)} | {verdict} |")
    return lines


def _times(ratio: float) -> str:
    """A speed-up as ``2.50x``; ``-`` where it was not measured (``nan``: no ``ideal_dp`` among the placers)."""
    return "-" if math.isnan(ratio) else f"{ratio:.2f}x"


def _dp_unbeaten(records) -> list[str]:
    ratio = speedups(records)
    contiguous = ("gpipe", "pipedream")
    beaten = [(k, v) for k, v in ratio.items() if k[4] in contiguous
              and v > ratio.get((*k[:4], "ideal_dp"), math.inf) * (1 + 1e-9)]
    cases = sum(1 for k in ratio if k[4] == "ideal_dp")
    lines = ["", "**The exact DP equals brute force and is never beaten by a contiguous placer**: met in the "
             "partitioners' own model (tests/baselines/pipeline: brute force on small DAGs, both other partitioners "
             f"never better). Measured by {models(records)}, whose schedule the model does not see, GPipe's or "
             "PipeDream's "
             f"split beat ideal_dp's in {len(beaten)} of {cases} (case, method) pairs"
             f"{'; the largest gaps:' if beaten else '.'}"]
    for k, v in sorted(beaten, key=lambda kv: kv[1] / ratio[(*kv[0][:4], 'ideal_dp')], reverse=True)[:8]:
        lines.append(f"- {k[0]} on {k[1]}, {k[2]} M={k[3]}: {k[4]} {v:.2f}x vs ideal_dp "
                     f"{ratio[(*k[:4], 'ideal_dp')]:.2f}x")
    return lines


def _search_targets(records, name: str, searches: Sequence[str]) -> list[str]:
    """Warm never worse than the DP; warm non-contiguous and faster than the DP on two graphs; cold within 5 %."""
    learned = {n for s in searches for n in (s, s + "_warm")}
    by = {(*_case(r), r.method): r for r in records}
    cases = [c for c in dict.fromkeys(_case(r) for r in records if r.method in (name, name + "_warm"))]
    rows = ["", f"**Learned search `{name}`** (rewarded by {models(records)} of the row; `_warm` starts from the "
            "fastest "
            "placer of the row; `best placer` = fastest non-learned method, `best partitioner` = the same without "
            "the budgeted local searches; times in ms):", "",
            "| graph | cluster | schedule | M | ideal_dp | best placer | best partitioner | cold | warm | "
            "warm contiguous | warm <= DP | cold / best placer | cold / best partitioner |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    worse, faster, within, within_partitioner, counted = [], set(), 0, 0, 0
    for case in cases:
        dp, cold, warm = (by.get((*case, m)) for m in ("ideal_dp", name, name + "_warm"))
        placers = [r for (*c, m), r in by.items() if tuple(c) == case and m not in learned and not r.failed]
        best = min(placers, key=lambda r: r.minibatch_time, default=None)
        partitioner = min((r for r in placers if not is_budgeted(r.method)), key=lambda r: r.minibatch_time,
                          default=None)
        dp_t = dp.minibatch_time if dp else math.inf
        warm_t = warm.minibatch_time if warm else math.inf
        ok = warm_t <= dp_t * (1 + 1e-9)  # no DP measured (ideal_dp not among the placers): not compared
        if warm and dp and not ok:
            worse.append(case)
        start_t = best.minibatch_time if best else math.inf  # the warm start: the row's fastest placer
        if dp and warm and not warm.failed and warm_t < min(dp_t, start_t) * (1 - 1e-9) and warm.contiguous is False:
            faster.add(case[0])
        ratio, to_partitioner = (time_ratio(cold.minibatch_time, r.minibatch_time) if cold and r and not cold.failed
                                 else math.inf
                                 for r in (best, partitioner))
        counted += cold is not None
        within += ratio <= 1.05
        within_partitioner += to_partitioner <= 1.05
        rows.append(f"| {' | '.join(map(str, case))} | {_ms(dp)} | {_ms(best)}{f' ({best.method})' if best else ''} "
                    f"| {_ms(partitioner)}{f' ({partitioner.method})' if partitioner else ''} | {_ms(cold)} | "
                    f"{_ms(warm)} | {'-' if warm is None else warm.contiguous} | "
                    f"{'-' if dp is None else 'yes' if ok else 'NO'} | "
                    f"{ratio:.3f} | {to_partitioner:.3f} |")
    n_warm = sum(1 for c in cases if by.get((*c, name + "_warm")) and by.get((*c, "ideal_dp")))
    rows += ["", f"- Warm-started search never worse than the DP: {'met' if not worse else 'missed'} "
             f"({n_warm - len(worse)} of {n_warm} cases{'; worse: ' + str(worse) if worse else ''}).",
             "- Warm finds a non-contiguous placement faster than the DP's optimum (and than its start, the "
             "fastest placer, so not the ILP's split handed back) on at least two graphs: "
             f"{'met' if len(faster) >= 2 else 'missed'} ({len(faster)}: {', '.join(sorted(faster)) or 'none'}).",
             f"- Cold ends within 5 % of the best placer: {'met' if within == counted else 'missed'} "
             f"({within} of {counted} cases; of the best partitioner, the local searches left out: "
             f"{within_partitioner} of {counted})."]
    return rows


def is_budgeted(method: str) -> bool:
    """A placer that searches for as long as it is given (:class:`PipelineLocalSearch`, whose bench names start
    with its ``name``), not a partitioner."""
    return method.startswith(PipelineLocalSearch.name)


def _ms(record: PipelineRecord | None) -> str:
    """A method's mini-batch time in ms, ``OOM`` or ``failed``."""
    if record is None:
        return "-"
    return ("OOM" if "out of memory" in record.reason else "failed") if record.failed \
        else f"{record.minibatch_time * 1e3:.4g}"


def _ten_thousand_ops(records, searches: Sequence[str]) -> list[str]:
    learned = {n for s in searches for n in (s, s + "_warm")}
    big = [r for r in records if r.num_ops >= 10_000]
    graphs = sorted({(r.num_ops, r.graph) for r in big}, reverse=True)
    placed = [r for r in big if r.method not in learned and not is_budgeted(r.method)
              and (not r.failed or "out of memory" in r.reason)]
    slowest = max((r.search_seconds for r in placed), default=math.nan)
    verdict = f"{'met' if slowest < 10 else 'missed'} (slowest non-learned placement {slowest:.2f} s)" if big \
        else "not measured here"
    listed = ", ".join(f"{g} ({n:,} ops)" for n, g in graphs) or "none"
    lines = ["", f"**Every placer under 10 s on a 10,000-op graph**: {verdict} (see "
             "benchmarks/pipeline_placer_speed.md for a synthetic 10,004-op training graph; the ILP is for small "
             "graphs and refuses larger ones at once; a learned search and the local search run for the budget "
             "they are given, ideal_dp's placement included for the latter). In this "
             f"bench, graphs of 10,000 ops or more: {listed}{'; slowest placement per method there:' if big else '.'}"]
    for method in dict.fromkeys(r.method for r in big):
        mine = [r for r in big if r.method == method]
        worst = max(mine, key=lambda r: r.search_seconds)
        note = f" ({worst.reason.split(':')[0]})" if worst.failed else ""
        lines.append(f"- {method}: {worst.search_seconds:.2f} s{note}")
    return lines


def bench_pipeline(cfg: Any) -> list[PipelineRecord]:
    """Run the pipeline bench described by ``cfg`` (gplace/conf/bench_pipeline.yaml) and write its results.

    With ``cfg.resume``, the records of ``out_dir/pipeline_results.json`` are kept and the (graph, cluster) pairs
    they cover are not run again (the results are written after every (graph, cluster) pair, with the config's
    notes and a line saying they are partial, so a killed run loses the pair it was running),
    unless they are of another graph or cluster of that name (their fingerprints differ, or they have none), or
    were measured with other placers, micro-batches, schedules or searches (a digest the records keep): those
    are measured again, with a WARNING.

    Raises:
        ValueError: before anything runs, a setting that cannot work (naming it): an empty list, two clusters of
            one name (records are keyed by it), a learned search that does not build or is named like a placer, a
            name in ``search`` or ``targets`` that is not a key of ``graphs`` or ``clusters``, a ``resume`` that is
            not true or false.
    """
    from hydra.utils import instantiate

    clusters = _check_pipeline_config(cfg)
    searches = _learned_searches(cfg, clusters)
    records = load_pipeline_records(Path(cfg.out_dir) / "pipeline_results.json") if cfg.get("resume") else []
    records = _current(records, {(g, c.name) for g in cfg.graphs for c in clusters.values()}, cfg.out_dir)
    model: dict[str, tuple[float, float]] = {}
    target = cfg.targets
    measured = settings_digest(cfg.placers, cfg.microbatches, cfg.schedules)
    searched = settings_digest(measured, *(cfg.search.get(k) for k in ("seconds", "updates", "microbatches",
                                                                        "schedules")), cfg.get("learned"))
    for graph_name, graph_spec in cfg.graphs.items():
        graph = instantiate(graph_spec)
        for cluster_name, cluster in clusters.items():
            if cluster_name == target.cluster and graph_name in target.profiles:
                m = int(target.microbatches)
                model[graph_name] = (model_speedup(graph, cluster, m), model_speedup(graph, cluster, m, bubble=False))
            pair = (graph_name, cluster.name)
            held = [r for r in records if (r.graph, r.cluster) == pair]
            on = graph_name in cfg.search.graphs and cluster_name in cfg.search.clusters
            settings = searched if on else measured  # a pair not searched keeps its records whatever the searches
            if held and _fits(held, graph_name, graph, cluster, settings):
                continue
            records = [r for r in records if (r.graph, r.cluster) != pair]
            cases = [(int(m), str(s)) for m in cfg.search.microbatches for s in cfg.search.schedules] if on else []
            placers = {name: instantiate(spec) for name, spec in cfg.placers.items()}
            ran = run_pipeline_case(graph, cluster, placers, microbatches=list(cfg.microbatches),
                                    schedules=list(cfg.schedules), searches=searches, search_cases=cases,
                                    label=graph_name)
            records += [dataclasses.replace(r, settings=settings) for r in ran]
            write_pipeline_results(records, cfg.out_dir, notes=_PARTIAL + str(cfg.notes), plot=False)
            log.info("pipeline bench: %s on %s done (%d records)", graph.name, cluster.name, len(records))
    aimed = clusters.get(target.cluster)
    notes = targets_section(records, model, cluster=aimed.name if aimed else target.cluster,
                            microbatches=int(target.microbatches), profiles=list(model), searches=list(searches),
                            gpus=aimed.kinds.count("gpu") if aimed else None) + str(cfg.notes)
    write_pipeline_results(records, cfg.out_dir, notes=notes, plot=True)
    return records


_PARTIAL = ("\n**Partial**: written while the bench ran, after its last finished (graph, cluster) pair; the same "
            "command with `resume=true` runs the others (the targets section is written at the end).\n")


def _current(records: list[PipelineRecord], pairs: set[tuple[str, str]], out_dir: Any) -> list[PipelineRecord]:
    """The records measured by the simulator this gplace has; those of another (older) semantics are measured
    again, with a WARNING, so no table mixes two simulators.

    Raises:
        ValueError: some of those are of (graph, cluster) pairs outside ``pairs``, the run's: this run would
            neither keep nor measure them (a resume dropped thousands without a word).
    """
    old = [r for r in records if r.model != PipelineSimulator.semantics]
    elsewhere = sorted({(r.graph, r.cluster) for r in old} - pairs)
    if elsewhere:
        raise ValueError(f"resume: {out_dir}/pipeline_results.json holds records measured by {models(old)} (an "
                         f"older simulator) of {len(elsewhere)} (graph, cluster) pairs this run does not measure "
                         f"({shown_pairs(elsewhere)}); a resume would drop them: list those graphs and clusters too, "
                         "or write to another out_dir, or resume=false")
    if old:
        log.warning("pipeline bench: %d records measured by %s are measured again by %s", len(old), models(old),
                    PipelineSimulator.semantics)
    return [r for r in records if r.model == PipelineSimulator.semantics]


def _fits(held: list[PipelineRecord], graph_name: str, graph: OpGraph, cluster: Cluster, settings: str) -> bool:
    """Whether the records ``held`` of a (graph, cluster) pair are of ``graph`` and ``cluster`` as they are now,
    measured with these ``settings`` (a digest; records without one are not compared); if not, says why with a
    WARNING (they are measured again)."""
    stale = stale_reason(held, graph, cluster)
    if stale is None and any(r.settings not in (None, settings) for r in held):
        stale = "the bench's placers, micro-batches, schedules or searches are set otherwise than when measured"
    if stale:
        log.warning("pipeline bench: %s on %s measured again: %s", graph_name, cluster.name, stale)
    return stale is None


def _check_pipeline_config(cfg: Any) -> dict[str, Cluster]:
    """``cfg.clusters`` built, once every list the bench needs is checked non-empty and the clusters' names
    distinct (records and PIPELINE.md's rows are keyed by graph and cluster name: one would hide the other)."""
    from hydra.utils import instantiate
    from omegaconf import ListConfig, OmegaConf

    from gplace.bench.searches import check_learned, check_search

    for key in ("graphs", "clusters", "placers", "microbatches", "schedules"):
        if not cfg.get(key):
            raise ValueError(f"{key} must list at least one entry, got {cfg.get(key)!r}")
    for key in ("microbatches", "schedules", "search.microbatches", "search.schedules"):  # 4: 'int' not iterable
        value = OmegaConf.select(cfg, key)
        if value is not None and not isinstance(value, ListConfig | list):
            raise ValueError(f"{key} must be a list, e.g. {key}=[{value}], got {value!r}")
    check_flags("bench_pipeline", resume=cfg.get("resume", False))
    check_search(cfg.search, ("updates", "seconds", "graphs", "clusters", "microbatches", "schedules"))
    _check_names(cfg)
    _check_cases_listed(cfg)
    check_learned(cfg.get("learned"), ("overrides",))
    taken = {key: f"placers.{key}" for key in cfg.placers}
    for name in cfg.learned:
        for method in (name, f"{name}_warm"):
            if method in taken:
                raise ValueError(f"learned.{name}: its records ({name}, {name}_warm) would be named like "
                                 f"{taken[method]} (records are keyed by method name); rename one")
            taken[method] = f"learned.{name}'s"
    clusters = {key: instantiate(spec) for key, spec in cfg.clusters.items()}
    named: dict[str, str] = {}
    for key, cluster in clusters.items():
        if cluster.name in named:
            raise ValueError(f"clusters.{named[cluster.name]} and clusters.{key} are both named {cluster.name!r}: "
                             "records and PIPELINE.md's rows are keyed by graph and cluster name, so one's results "
                             "would hide the other's; give one another name or run it with another out_dir")
        named[cluster.name] = key
    return clusters


def _check_cases_listed(cfg: Any) -> None:
    """Refuse a micro-batch count or schedule in ``search`` or ``targets`` that ``microbatches`` or ``schedules``
    lacks, naming both: the searches run on the bench's own cases, and the targets read them (either was turned
    off, or printed over an empty table, silently)."""
    searched = bool(cfg.search.get("graphs") and cfg.search.get("clusters") and cfg.get("learned"))
    aimed = bool(cfg.get("targets") and cfg.targets.get("profiles"))
    wanted = [("search.microbatches", list(cfg.search.get("microbatches") or []) if searched else [], "microbatches"),
              ("search.schedules", list(cfg.search.get("schedules") or []) if searched else [], "schedules"),
              ("targets.microbatches", [cfg.targets.microbatches] if aimed else [], "microbatches")]
    for key, values, among in wanted:
        outside = [v for v in values if v not in list(cfg[among])]
        if outside:
            raise ValueError(f"{key} lists {outside}, which {among}={list(cfg[among])} lacks: the bench measures only "
                             f"its own {among}, so it would measure none of them; add them to {among}")


def _check_names(cfg: Any) -> None:
    """Refuse a name in ``search.graphs``, ``search.clusters``, ``targets.cluster`` or ``targets.profiles`` that is
    not a key of ``graphs`` or ``clusters``, naming it and the known ones (it turned the learned searches or the
    targets off, silently)."""
    target = cfg.targets
    for where, names, known in (("search.graphs", cfg.search.graphs, "graphs"),
                                ("search.clusters", cfg.search.clusters, "clusters"),
                                ("targets.cluster", [target.cluster], "clusters"),
                                ("targets.profiles", target.profiles, "graphs")):
        keys = list(cfg[known])
        unknown = [name for name in names if name not in keys]
        if unknown:
            raise ValueError(f"{where} names {', '.join(map(str, unknown))}, not a key of {known} "
                             f"(its keys: {', '.join(keys)})")


def _learned_searches(cfg: Any, clusters: Mapping[str, Cluster]) -> dict[str, Search]:
    """``cfg.learned``'s searches, each built once for the clusters it searches on (a config error stops the
    bench here, before any placer runs)."""
    from gplace.bench.searches import prepare_search, search_overrides, searchpath_overrides

    sizes = [c.num_devices for key, c in clusters.items() if key in cfg.search.clusters]
    common = [*searchpath_overrides(), *search_overrides(cfg.search)]
    return {name: _learned_search(prepare_search(name, [*common, *spec.overrides], sizes))
            for name, spec in cfg.learned.items()}


def load_pipeline_records(path: str | Path) -> list[PipelineRecord]:
    """The records of a ``pipeline_results.json`` (none if the file does not exist).

    Raises:
        ValueError: the file is not a list of pipeline records (naming the file).
    """
    return read_records(path, PipelineRecord.from_json, "pipeline results")


def _learned_search(c: Any) -> Search:
    """A learned search (the main config ``c``, its networks seeded by :func:`~gplace.bench.searches.build_learner`)
    whose reward is the given ``pipe-v3`` runtime."""
    from gplace.bench.searches import place_with

    def search(graph: OpGraph, cluster: Cluster, runtime: Any, warm: Placement | None) -> Placement:
        return place_with(c, graph, cluster, runtime, warm_start=warm).placement
    return search
