"""Append a "Targets" section to ``benchmarks/RESULTS.md``: each issue-6 target, met or missed, with numbers.

Run after ``gplace bench --config-name bench_paper`` (from the repository root, with ``OMP_NUM_THREADS=1``):
``python benchmarks/annotate_results.py [--long DIR]``. Reads ``results.json``, the search histories under
``runs/`` and ``baselines.md``; rebuilds the cases of ``gplace/conf/bench_paper.yaml`` for the lower bound's terms, the
best baseline's projection onto the policy's groups and NMT's memory on one K80. ``--long DIR`` adds the searches
of a second, longer run, e.g. ``gplace bench --config-name bench_paper "cases=[['graph=nmt','cluster=paper_4gpu']]"
'~learned.seq2seq_warm' '~learned.gdp_warm' search.seconds=300 out_dir=DIR``. Running it again replaces the section.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MARK = "\n## Targets (issue 6)\n"
LEARNED = ("seq2seq", "seq2seq_warm", "gdp_warm", "list_scheduling", "list_scheduling_warm", "list_scheduling_no_prior")
EXPERT, SINGLE_GPU = "expert", "single_gpu"
BUDGET_S = 15 * 60
TIGHT = 1.15


@dataclass(frozen=True)
class Case:
    """The records of one (graph, cluster)."""

    graph: str
    cluster: str
    records: dict[str, dict]

    @property
    def bound(self) -> float:
        return next(iter(self.records.values()))["lower_bound"]

    def time(self, method: str) -> float:
        r = self.records.get(method)
        return math.inf if r is None or r["failed"] else r["step_time"]

    def best(self, methods: Sequence[str]) -> tuple[str, float]:
        found = [(m, self.time(m)) for m in methods if m in self.records]
        return min(found, key=lambda x: x[1], default=("-", math.inf))

    @property
    def baselines(self) -> list[str]:
        return [m for m in self.records if m not in LEARNED]

    @property
    def learned(self) -> list[str]:
        return [m for m in LEARNED if m in self.records]

    @property
    def label(self) -> str:
        return f"{short(self.graph)} / {self.cluster}"


def short(graph: str) -> str:
    """``nmt_layers2_hidden1024_...`` (a zoo graph) -> ``nmt``; other graphs (PipeDream's) -> ``pipedream/<name>``."""
    for family in ("inception_v3", "rnnlm", "nmt"):
        if graph.startswith(family + "_"):
            return family
    return f"pipedream/{graph}"


def load_cases(path: Path) -> list[Case]:
    cases: dict[tuple[str, str], dict[str, dict]] = {}
    for r in json.loads(path.read_text()):
        cases.setdefault((r["graph"], r["cluster"]), {})[r["method"]] = r
    return [Case(g, c, recs) for (g, c), recs in cases.items()]


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if math.isfinite(seconds) else "failed"


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


# ---------------------------------------------------------------------- targets
def never_slower(cases: list[Case], projected: dict[tuple[str, str], float],
                 unplaced: dict[tuple[str, str], str] | None = None) -> tuple[list[str], str]:
    """Target 1's table; ``unplaced`` (graph, cluster) -> why the best baseline of ``results.json`` no longer places
    (its projection then reads "no longer places" and the reason follows the table)."""
    unplaced = unplaced or {}
    lines = ["### 1. The learned placement is never slower than the best baseline", "",
             "| graph / cluster | best baseline | its projection on 256 groups | best learned | "
             + " | ".join(LEARNED) + " | met |", "|---|---|---|---|" + "---|" * len(LEARNED) + "---|"]
    met_best = met_all = 0
    for c in cases:
        bname, btime = c.best(c.baselines)
        lname, ltime = c.best(c.learned)
        cells = [f"{ms(c.time(m))} ({btime / c.time(m):.3f}x)" if m in c.records else "-" for m in LEARNED]
        ok = ltime <= btime * (1 + 1e-9)
        met_best += ok
        met_all += all(c.time(m) <= btime * (1 + 1e-9) for m in c.learned)
        proj = "no longer places" if (c.graph, c.cluster) in unplaced else ms(
            projected.get((c.graph, c.cluster), math.nan))
        lines.append(f"| {c.label} | {bname} {ms(btime)} | {proj} | {lname} {ms(ltime)} | " + " | ".join(cells)
                     + f" | {'yes' if ok else 'no'} |")
    n = len(cases)
    lines += ["", f"The best learned search is at least as fast as the best baseline on {met_best} of {n} cases, "
              f"every learned search on {met_all} of {n}. (x = best baseline / learned: above 1 is faster.) "
              "The warm-started searches begin from the best baseline *projected onto the policy's groups* "
              "(each of at most 256 groups on the device holding most of its ops' cost), measured in the third "
              "column: where a baseline splits groups (the Inception expert puts sibling branches that share a "
              "group on different GPUs), the projection is much slower than the baseline, the search starts "
              "from there and does not find its way back within the budget. PipeDream's profiles carry GPU "
              "times only, so `single_cpu` (which sends ops that cannot run on the CPU to their fastest device) "
              "ties `single_gpu` there.", ""]
    for c in cases:
        if (c.graph, c.cluster) in unplaced:
            lines += [f"- {c.label}: its best baseline in `results.json`, `{c.best(c.baselines)[0]}`, no longer "
                      f"places with this code ({unplaced[(c.graph, c.cluster)]}), so it has no projection; its "
                      "time in the table is the recorded one, until the bench runs again."]
    if unplaced:
        lines.append("")
    summary = (f"1. Never slower than the best baseline: {verdict(met_best == n)} ({met_best} of {n} cases for the "
               f"best learned search, {met_all} of {n} for every search)")
    return lines, summary


def versus(cases: list[Case], family: str, reference: str, need: float, paper: str) -> list[str]:
    """One line per case of ``family``: the best learned placement against ``reference`` (``need`` 0: equal)."""
    lines = []
    for c in cases:
        if short(c.graph) != family:
            continue
        ref = c.time(reference)
        lname, ltime = c.best(c.learned)
        gain = ref / ltime - 1 if math.isfinite(ltime) else -math.inf
        if need > 0:
            what, state = f"target: at least {need:.0%} faster than {reference}", verdict(gain >= need)
        else:
            what = f"target: equal to {reference}"
            state = verdict(True) if abs(gain) <= 0.01 else (
                "**not reproduced: faster than the paper found possible**" if gain > 0 else verdict(False))
        lines.append(f"- {c.label}: {reference} {ms(ref)}, best learned ({lname}) {ms(ltime)}: "
                     f"{gain:+.1%} ({what}; the paper: {paper}): {state}")
    return lines


def family_targets(cases: list[Case]) -> tuple[list[str], str]:
    four = [c for c in cases if "4x" in c.cluster]
    found = [versus(cases, "nmt", EXPERT, 0.20, "+23.5 % / +20.6 % on 2 / 4 GPUs"),
             versus(four, "inception_v3", SINGLE_GPU, 0.15, "+19 % on 4 GPUs"),
             versus(cases, "rnnlm", SINGLE_GPU, 0.0, "equal, nothing better found")]
    lines = ["### 2. The paper's model-level results", "", *(line for group in found for line in group)]
    lines += ["", "A gain is the other method's step time / the best learned step time - 1 (the paper's "
              "convention: 4.99 / 4.04 = +23.5 %); 'equal' is within 1 %. For reference, the expert against one "
              "GPU (single GPU / expert - 1): "
              + "; ".join(f"{c.label} {c.time(SINGLE_GPU) / c.time(EXPERT) - 1:+.1%}" for c in cases
                          if short(c.graph) in ("rnnlm", "nmt", "inception_v3")) + ".", "",
              "What limits these: (a) the Keras graphs are not the paper's TF1 graphs: each Keras LSTM layer "
              "reads the previous layer's whole stacked sequence (layer 2's first step waits for layer 1's 40th) "
              "and NMT's decoder is a chain through the attention at every step, so the layer-per-GPU experts "
              "cannot pipeline and are no faster than one GPU, which here fits in memory (target 6) and is the "
              "strongest baseline; '20 % faster than the expert' would mean 20 % faster than one GPU. (b) The "
              "policies place at most 256 groups of 3,263-12,538 ops; the Inception expert, which spreads sibling"
              " branches over GPUs and is the fastest placement found for the Keras Inception-V3, is not "
              "expressible on those groups (see its projection under target 1), so the searches, warm-started or "
              "not, stay near one GPU. (c) Each search had 50 s; the longer runs under target 4 show where more "
              "time helped.", ""]
    gains = [", ".join(line.split(": ")[2].split(" (")[0] for line in group) for group in found]
    summary = (f"2. NMT >= 20 % faster than the expert: {_all_met(found[0])} ({gains[0]}); Inception-V3 on 4 GPUs "
               f">= 15 % faster than one GPU: {_all_met(found[1])} ({gains[1]}); RNNLM equal to one GPU: "
               f"{_all_met(found[2])} ({gains[2]})")
    return lines, summary


def _all_met(lines: list[str]) -> str:
    if all(line.endswith(verdict(True)) for line in lines):
        return verdict(True)
    return "**not reproduced (faster)**" if all("not reproduced" in line for line in lines) else verdict(False)


def bound_target(cases: list[Case], terms: dict[tuple[str, str], tuple[float, float, float]]
                 ) -> tuple[list[str], str]:
    lines = ["### 3. Within 1.15x of the lower bound where the bound is tight", "",
             "| graph / cluster | lower bound | critical path | work / speed | single GPU / bound | transfer / op "
             "| best found | best / bound | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    tight = loose = 0
    for c in cases:
        name, best = c.best(list(c.records))
        cp, work, comm = terms.get((c.graph, c.cluster), (math.nan, math.nan, math.nan))
        ratio = best / c.bound
        if ratio <= TIGHT:
            tight += 1
            state = f"tight, reached: {verdict(True)}"
        else:
            loose += 1
            state = "not shown tight (" + ("critical path" if cp >= work * 0.999 else "work") + " term)"
        lines.append(f"| {c.label} | {ms(c.bound)} | {ms(cp)} | {ms(work)} | {c.time(SINGLE_GPU) / c.bound:.2f} "
                     f"| {comm:.1f} | {name} {ms(best)} | {ratio:.3f} | {state} |")
    paper = [c.time(SINGLE_GPU) / c.bound for c in cases if short(c.graph) in ("rnnlm", "nmt", "inception_v3")]
    span = f"1/{min(paper):.1f} to 1/{max(paper):.1f}" if paper else "a fraction"
    lines += ["", f"Met on the {tight} cases where some placement comes within 1.15x of the bound (there the bound "
              f"is tight: the best placement reaches it); on the other {loose} no method, learned or not, comes "
              "within 1.15x, and the bound is not tight enough to say the placements are at fault. The bound is "
              "the larger of the critical path (every op on its fastest device, transfers free) and the total "
              "work spread over the CPU and every GPU in proportion to speed. On the paper's training steps the "
              f"critical path decides it, at {span} of the single-GPU time: reaching it would need all "
              "the work off the forward-backward chain (weight gradients, optimiser updates, the LSTM gates "
              "beside the recurrent chain, Inception's sibling branches) to run on other devices at once, with "
              "every tensor it needs moved for free; at the K80 model's 6 GB/s a 67 MB LSTM-kernel gradient "
              "alone takes 11 ms, and Keras' LSTMs are whole-sequence layers (layer 2 starts after layer 1 has "
              "finished all 40 steps), so layers do not pipeline. 'transfer / op' is the median edge's "
              "GPU-to-GPU transfer time over the median GPU time of an op that takes any: well above 1 on every "
              "graph here but PipeDream's gnmt, so moving a branch to another GPU mostly costs more in copies "
              "than it saves, which the bound does not see. A tighter bound would need communication and device "
              "contention in it (an LP or a relaxation of the schedule), not done here.", ""]
    summary = (f"3. Within 1.15x of the lower bound where it is tight: {verdict(True) if tight else verdict(False)} "
               f"on the {tight} cases where the bound is reached; not shown tight on {loose} (best found "
               f"{_ratios(cases, loose)} x the bound)")
    return lines, summary


def _ratios(cases: list[Case], loose: int) -> str:
    ratios = [c.best(list(c.records))[1] / c.bound for c in cases]
    ratios = [r for r in ratios if r > TIGHT]
    return f"{min(ratios):.2f}-{max(ratios):.2f}" if loose else "-"


def convergence_target(cases: list[Case], runs: Path, long_dir: Path | None = None) -> tuple[list[str], str]:
    lines = ["### 4. Each learned search converges within 15 minutes", "",
             "| graph / cluster | search | wall time | updates | last improvement (update, ~s) "
             "| improving at the end |",
             "|---|---|---|---|---|---|"]
    within = improving = total = 0
    for c in cases:
        for m in c.learned:
            r = c.records[m]
            history = read_history(runs / f"{c.graph}-{c.cluster}-{m}" / "metrics.jsonl")
            if not history:
                continue
            last = last_improvement(history)
            at = r["search_seconds"] * (last + 1) / len(history)
            late = last + 1 > 0.75 * len(history) and last > 0
            total += 1
            within += r["search_seconds"] <= BUDGET_S
            improving += late
            lines.append(f"| {c.label} | {m} | {r['search_seconds']:.0f} s | {len(history)} | {last} (~{at:.0f} s) "
                         f"| {'yes' if late else 'no'} |")
    lines += ["", f"All {total} searches stopped within the 15-minute budget ({within} of {total} under "
              f"{BUDGET_S} s): {verdict(within == total)} as a time limit. {improving} of {total} still found a "
              "better placement in the last quarter of their updates, so those are not shown to have converged; "
              "the others had flattened out.", ""]
    notes: list[str] = []
    if long_dir is not None:
        more, notes = longer_searches(long_dir, cases)
        lines += more
    longest = max((c.records[m]["search_seconds"] for c in cases for m in c.learned), default=0.0)
    summary = (f"4. Searches converge within 15 minutes: {verdict(within == total)} as a budget (every search "
               f"ran {longest:.0f} s or less); {total - improving} of {total} had stopped improving before the "
               "last quarter" + (f"; longer: {'; '.join(notes)}" if notes else ""))
    return lines, summary


def longer_searches(long_dir: Path, cases: list[Case]) -> tuple[list[str], list[str]]:
    """Rows for a second bench run with a longer budget (``--long``), set against the main run's references."""
    ref = {(c.graph, c.cluster): c for c in cases}
    lines = ["Longer searches (a second run: same code and config, cold seq2seq only, a longer `search.seconds`, "
             "on the cases whose cold search was still improving):", "",
             "| graph / cluster | search | wall time | step time | vs expert | vs single GPU | last improvement "
             "(update, ~s) | improving at the end |", "|---|---|---|---|---|---|---|---|"]
    notes = []
    for c in load_cases(long_dir / "results.json"):
        main = ref.get((c.graph, c.cluster), c)
        for m in c.learned:
            r, t = c.records[m], c.time(m)
            history = read_history(long_dir / "runs" / f"{c.graph}-{c.cluster}-{m}" / "metrics.jsonl")
            last = last_improvement(history) if history else 0
            at = r["search_seconds"] * (last + 1) / max(len(history), 1)
            late = last + 1 > 0.75 * len(history) and last > 0
            lines.append(f"| {c.label} | {m} | {r['search_seconds']:.0f} s | {ms(t)} | "
                         f"{main.time(EXPERT) / t - 1:+.1%} | {main.time(SINGLE_GPU) / t - 1:+.1%} | "
                         f"{last} (~{at:.0f} s) | {'yes' if late else 'no'} |")
            notes.append(f"{c.label} {m} for {r['search_seconds']:.0f} s: {ms(t)}, "
                         + ("still improving" if late else f"no better after ~{at:.0f} s"))
    return lines + [""], notes


def read_history(path: Path) -> list[float]:
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r["charts/best_step_time"] for r in rows if "charts/best_step_time" in r]  # not the imitation steps


def last_improvement(history: list[float], rel: float = 1e-3) -> int:
    """Index of the last update whose best step time beat the previous best by more than ``rel``."""
    last, best = 0, history[0]
    for i, value in enumerate(history):
        if value < best * (1 - rel):
            last, best = i, value
    return last


def speed_target(cases: list[Case], baselines_md: Path) -> tuple[list[str], str]:
    lines = ["### 5. HEFT and m-ETF place a 10,000-op graph in under 2 seconds", ""]
    rows = {m.group(1): float(m.group(2)) for m in
            re.finditer(r"^\| (heft|m_etf) \| [\d.]+ \| ([\d.]+) \|", baselines_md.read_text(), re.M)}
    for name in ("heft", "m_etf"):
        med = rows.get(name, math.nan)
        lines.append(f"- {name}: median {med:.3f} s on the 10,000-op random layered DAG of `baselines.md`: "
                     f"{verdict(med < 2)}")
    big = [c for c in cases if c.graph.startswith(("nmt_", "inception_v3_", "rnnlm_"))]
    for name in ("heft", "m_etf"):
        secs = [c.records[name]["search_seconds"] for c in big if name in c.records]
        if secs:
            lines.append(f"- {name} in this run, on the paper's graphs (3,263-12,538 ops): at most {max(secs):.2f} s")
    ok = all(rows.get(name, math.inf) < 2 for name in ("heft", "m_etf"))
    summary = (f"5. HEFT and m-ETF under 2 s on 10,000 ops: {verdict(ok)} (medians {rows.get('heft', math.nan):.3f} s "
               f"and {rows.get('m_etf', math.nan):.3f} s)")
    return lines + [""], summary


def nmt_memory(nmt_single_k80: tuple[float, float] | None, cases: list[Case]) -> tuple[list[str], str]:
    lines = ["### 6. Is NMT out of memory on one K80 (the paper's finding)?", ""]
    oom = []
    for c in cases:
        if c.graph.startswith("nmt_"):
            r = c.records.get(SINGLE_GPU)
            oom.append(bool(r and r["failed"]))
            state = "out of memory" if oom[-1] else f"fits, {ms(c.time(SINGLE_GPU))}"
            lines.append(f"- {c.label}: single GPU {state}")
    if nmt_single_k80 is not None:
        peak, cap = nmt_single_k80
        lines.append(f"- simulated peak on the K80: {peak / 1e9:.2f} GB of {cap / 1e9:.0f} GB")
    lines += ["", "Not reproduced: the Keras NMT at the paper's sizes fits a 12 GB K80 in the simulator (whose "
              "memory model frees a tensor after its last consumer), so the single GPU is a valid, and strong, "
              "baseline here, unlike in the paper (see benchmarks/importers.md).", ""]
    peak = f", simulated peak {nmt_single_k80[0] / 1e9:.2f} GB of 12 GB" if nmt_single_k80 else ""
    summary = f"6. NMT out of memory on one K80: {'yes' if oom and all(oom) else '**no, not reproduced**'}{peak}"
    return lines, summary


# ---------------------------------------------------------------------- graph-derived numbers
@dataclass
class Facts:
    """Numbers recomputed from the bench's graphs."""

    terms: dict[tuple[str, str], tuple[float, float, float]] = field(default_factory=dict)
    """(graph, cluster) -> the lower bound's critical-path and work-over-speed terms, and the median transfer over
    the median op time (see :func:`bound_terms`)."""
    projected: dict[tuple[str, str], float] = field(default_factory=dict)
    """(graph, cluster) -> step time of the best baseline projected onto the policy's groups."""
    nmt_peak: tuple[float, float] | None = None
    """NMT all on one K80: (simulated peak bytes, device memory)."""
    unplaced: dict[tuple[str, str], str] = field(default_factory=dict)
    """(graph, cluster) -> why its best baseline (in ``results.json``) no longer places (the error's message)."""


def graph_facts(config: str, cases: list[Case]) -> Facts:
    """Rebuild every case of the bench config (``gplace.conf/<config>.yaml``) and compute :class:`Facts`."""
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate

    from gplace.baselines import PlacementInfeasibleError
    from gplace.runtime import Simulator

    best = {(c.graph, c.cluster): c.best(c.baselines)[0] for c in cases}
    facts, sim = Facts(), Simulator()
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        bench = compose(config_name=config)
        for case in bench.cases:
            cfg = compose(config_name="config", overrides=list(case))
            graph, cluster = instantiate(cfg.graph), instantiate(cfg.cluster)
            key = (graph.name, cluster.name)
            facts.terms[key] = bound_terms(graph, cluster)
            if best.get(key) in bench.baselines:
                try:
                    placement = instantiate(bench.baselines[best[key]]).place(graph, cluster)
                except PlacementInfeasibleError as err:  # e.g. single_cpu on a graph of GPU-only ops, since 15a95fa
                    facts.unplaced[key] = str(err)
                    print(f"annotate_results: {best[key]} no longer places {graph.name} on {cluster.name}: {err}",
                          file=sys.stderr)
                else:
                    facts.projected[key] = sim.measure(graph, cluster, project(graph, cluster, placement)).step_time
            if graph.name.startswith("nmt_") and facts.nmt_peak is None:
                facts.nmt_peak = single_gpu_peak(graph, cluster, sim)
    return facts


def bound_terms(graph, cluster) -> tuple[float, float, float]:
    """The lower bound's critical-path term and work-over-speed term (all ops), in seconds, and the median edge's
    transfer time between two GPUs over the median time of an op that takes any time on a GPU."""
    from gplace.baselines.lower_bound import critical_path

    dur = np.where(graph.allowed_devices(cluster), graph.durations(cluster), np.inf)
    work = float((dur * cluster.speeds[None, :]).min(1).sum() / cluster.speeds.sum())
    gpus = [d for d, k in enumerate(cluster.kinds) if k == "gpu"][:2]
    ratio = math.nan
    busy = dur[:, gpus[0]][dur[:, gpus[0]] > 0] if gpus else []
    if len(gpus) == 2 and graph.num_edges and len(busy):
        ratio = cluster.transfer_time(float(np.median(graph.edge_bytes)), *gpus) / float(np.median(busy))
    return critical_path(graph, dur.min(1)), work, ratio


def project(graph, cluster, placement, max_groups: int = 256):
    """``placement`` as the policy's warm start sees it: each group of :func:`gplace.grouping.group_ops` on the
    allowed device holding most of its ops' cost (what :meth:`gplace.placer.PolicyPlacer.project` does)."""
    from gplace.grouping import group_ops, op_cost
    from gplace.ir import Placement

    grouping = group_ops(graph, max_groups)
    weight = np.nan_to_num(op_cost(graph), nan=0.0) + 1e-12
    votes = np.zeros((grouping.num_groups, cluster.num_devices))
    np.add.at(votes, (grouping.op_group, placement.devices), weight)
    votes[~grouping.graph.allowed_devices(cluster)] = -1.0
    return Placement.for_graph(graph, votes.argmax(1)[grouping.op_group])


def single_gpu_peak(graph, cluster, sim) -> tuple[float, float]:
    """Simulated peak bytes with every op on one GPU, and that GPU's memory."""
    from gplace.baselines import SingleDevice

    m = sim.measure(graph, cluster, SingleDevice(kind="gpu").place(graph, cluster))
    gpu = int(np.argmax(m.peak_memory))
    return float(m.peak_memory[gpu]), float(cluster.memory[gpu])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=HERE)
    parser.add_argument("--config", default="bench_paper")
    parser.add_argument("--long", type=Path, default=None,
                        help="out_dir of a second bench run with a longer search.seconds, reported in target 4")
    args = parser.parse_args()
    cases = load_cases(args.out_dir / "results.json")
    facts = graph_facts(args.config, cases)
    sections = [never_slower(cases, facts.projected, facts.unplaced), family_targets(cases),
                bound_target(cases, facts.terms), convergence_target(cases, args.out_dir / "runs", args.long),
                speed_target(cases, HERE / "baselines.md"), nmt_memory(facts.nmt_peak, cases)]
    lines = [MARK.strip(), "", "Written by `benchmarks/annotate_results.py` from `results.json` and the searches' "
             "`metrics.jsonl`. Step times are simulated (`sim-v1`) on the paper's machine model; nothing was "
             "tuned to meet a target.", "", *(summary for _, summary in sections), ""]
    lines += [line for body, _ in sections for line in body]
    path = args.out_dir / "RESULTS.md"
    text = path.read_text().split(MARK)[0].rstrip("\n") + "\n"
    path.write_text(text + "\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
