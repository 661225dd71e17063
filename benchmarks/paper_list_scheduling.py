"""The list-scheduling policy on the paper's table, set against ``results.json``; writes ``paper_list_scheduling.md``.

Run from the repository root, with ``OMP_NUM_THREADS=1``, one bench per search (each runs the baselines too,
which are deterministic and must match ``results.json``'s)::

    gplace bench --config-name bench_paper '~learned.seq2seq' '~learned.seq2seq_warm' '~learned.gdp_warm' \\
        '~learned.list_scheduling_warm' '~learned.list_scheduling_no_prior' out_dir=/tmp/bench_ls
    # the same keeping only list_scheduling_warm (out_dir=/tmp/bench_lsw), then only _no_prior (/tmp/bench_lsn)
    python benchmarks/paper_list_scheduling.py /tmp/bench_ls /tmp/bench_lsw /tmp/bench_lsn \\
        --seq2seq-runs /tmp/gplace_sample_efficiency/sample_efficiency.json

``--seq2seq-runs`` (the raw JSON of ``sample_efficiency.py``) adds the samples the cold search took to reach each
seq2seq run's best on the paper's models, read from the bench's ``runs/*/metrics.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from annotate_results import Case, load_cases
from report_notes import write_report

HERE = Path(__file__).resolve().parent
NEW = ("list_scheduling", "list_scheduling_warm", "list_scheduling_no_prior")
OLD_LEARNED = ("seq2seq", "seq2seq_warm", "gdp_warm")
REFERENCES = ("single_gpu", "heft", "expert")
CLAIMS = (("nmt", "expert", 0.20, "2x"), ("nmt", "expert", 0.20, "4x"), ("inception_v3", "single_gpu", 0.15, "4x"),
          ("rnnlm", "single_gpu", 0.0, "2x"), ("rnnlm", "single_gpu", 0.0, "4x"))
"""The paper's model-level claims (issue 6, target 2): family, reference, gain needed (0: equal), cluster."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="+", help="out_dirs of the list-scheduling bench runs")
    parser.add_argument("--seq2seq-runs", type=Path, help="sample_efficiency.py's raw JSON (seq2seq curves)")
    args = parser.parse_args()
    old = {(c.graph, c.cluster): c for c in load_cases(HERE / "results.json")}
    merged: dict[tuple[str, str], dict[str, dict]] = {}
    for run in args.runs:
        for c in load_cases(run / "results.json"):
            merged.setdefault((c.graph, c.cluster), {}).update({m: r for m, r in c.records.items() if m in NEW})
    new = {key: Case(*key, records) for key, records in merged.items()}
    text = _markdown(old, new)
    if args.seq2seq_runs:
        text += _sample_section(json.loads(args.seq2seq_runs.read_text()), args.runs)
    write_report(HERE / "paper_list_scheduling.md", text)


def _ms(seconds: float) -> str:
    return "-" if math.isinf(seconds) else f"{seconds * 1e3:.1f} ms"


def _label(key: tuple[str, str]) -> str:
    graph = key[0]
    short = graph.split("_layers")[0].split("_batch")[0]
    return f"{short if short != graph else 'pipedream/' + graph} / {key[1]}"


def _markdown(old: dict, new: dict) -> str:
    methods = [m for m in NEW if any(m in case.records for case in new.values())]
    lines = [
        "# The list-scheduling policy on the paper's table",
        "",
        "Made by `python benchmarks/paper_list_scheduling.py DIR...` after one `gplace bench --config-name "
        "bench_paper` per search with only the list-scheduling searches (`encoder=gnn policy=list_scheduling`; "
        "`list_scheduling` from scratch, `list_scheduling_warm` warm-started from the best baseline's placement "
        "projected on its groups, as `seq2seq_warm`; `list_scheduling_no_prior` from scratch with the "
        "earliest-finish-time prior's weight starting at 0), the same 50 s budget per search as `RESULTS.md`, run "
        "after it on the same machine (other jobs running). Step times are simulated (`sim-v1`) on the paper's "
        "machine model. \"best before\" is the best of every baseline and of the seq2seq, seq2seq_warm and "
        "gdp_warm searches of `RESULTS.md`; x = best before / this search (above 1: this search is faster).",
        "",
        "| graph / cluster | single GPU | HEFT | expert | best baseline | best learned before | "
        + " | ".join(f"{m} | samples | x" for m in methods) + " | lower bound |",
        "|---|" + "---:|" * (5 + 3 * len(methods) + 1),
    ]
    tally = {m: [0, 0, [], 0] for m in methods}
    for key, case in old.items():
        fresh = new.get(key)
        if fresh is None:
            continue
        baselines = [m for m in case.records if m not in OLD_LEARNED]
        base = min(case.time(m) for m in baselines)
        learned = min(case.time(m) for m in OLD_LEARNED)
        best = min(base, learned)
        cells = []
        for m in methods:
            mine = fresh.time(m)
            cells += [f"**{_ms(mine)}**", f"{fresh.records[m]['samples']:,}" if m in fresh.records else "-",
                      f"{best / mine:.3f}x"]
            tally[m][0] += mine < best * (1 - 1e-3)
            tally[m][1] += abs(mine - best) <= best * 1e-3
            tally[m][2].append(best / mine)
            tally[m][3] += mine <= base * (1 + 1e-9)
        lines.append(f"| {_label(key)} | " + " | ".join(_ms(case.time(m)) for m in REFERENCES)
                     + f" | {_ms(base)} | {_ms(learned)} | " + " | ".join(cells) + f" | {_ms(case.bound)} |")
    lines.append("")
    for m, (wins, ties, gains, not_slower) in tally.items():
        geo = math.exp(sum(math.log(g) for g in gains) / len(gains))
        lines.append(f"- {m}: faster than everything in `RESULTS.md` on {wins} of {len(gains)} cases, within 0.1 % "
                     f"on {ties}, slower on {len(gains) - wins - ties}; geometric mean of best before / {m}: "
                     f"{geo:.3f}; never slower than the best baseline (issue 6, target 1): {not_slower} of "
                     f"{len(gains)} cases")
    return "\n".join([*lines, "", *_paper_targets(old, new, methods)]) + "\n"


def _paper_targets(old: dict, new: dict, methods: list[str]) -> list[str]:
    """The paper's model-level claims with the best list-scheduling result of each case."""
    out = ["The paper's model-level results with the better of these searches (a gain is the reference's step time "
           "/ this one - 1; 'equal' is within 1 %):", ""]
    for family, reference, need, gpus in CLAIMS:
        key = next((k for k in old if k[0].startswith(family + "_") and f"+{gpus}K80" in k[1]), None)
        if key is None or key not in new:
            continue
        name, mine = min(((m, new[key].time(m)) for m in methods), key=lambda x: x[1])
        gain = old[key].time(reference) / mine - 1
        if need == 0:
            target = "equal"
            verdict = "met" if abs(gain) <= 0.01 else ("not reproduced: faster" if gain > 0 else "missed: slower")
        else:
            target, verdict = f"at least {need:.0%} faster", "met" if gain >= need else "missed"
        out.append(f"- {_label(key)}: {reference} {_ms(old[key].time(reference))}, {name} {_ms(mine)}: "
                   f"{gain:+.1%} (target: {target}): **{verdict}**")
    return [*out, ""]


COLD = ("list_scheduling", "list_scheduling_no_prior")


def _sample_section(efficiency: dict, runs: list[Path]) -> str:
    """Samples each cold list-scheduling search took to reach each seq2seq run's best (``sample_efficiency.md``)."""
    lines = [
        "## Samples to reach the seq2seq policy's best",
        "",
        "Against the seq2seq runs of `sample_efficiency.md` (from scratch, 1,600 samples, seeds 0 and 1): S* is a "
        "seq2seq run's best step time, n_seq the samples it took to reach it, then for each cold search above (one "
        "run each, the bench's seed) the samples it took to first reach <= S* and the ratio n_seq / that.",
        "",
        "| model / cluster | seed | S* | n_seq | " + " | ".join(f"{m} | ratio" for m in COLD) + " |",
        "|---|---:|---:|---:|" + "---:|---:|" * len(COLD),
    ]
    tallies = {m: ([], 0) for m in COLD}
    for case in efficiency["cases"]:
        histories = {m: _bench_history(runs, case["model"], case["cluster_label"], m) for m in COLD}
        for run in (r for r in case["runs"] if r["method"] == "seq2seq"):
            target = run["best"]
            n_seq = next(n for n, b in zip(run["samples"], run["best_so_far"], strict=True) if b <= target)
            cells = []
            for m in COLD:
                if not histories[m]:
                    cells += ["-", "-"]
                    continue
                n = next((n for n, b in histories[m] if b <= target), None)
                ratios, missed = tallies[m]
                tallies[m] = (ratios + [n_seq / n], missed) if n else (ratios, missed + 1)
                cells += [f"{n:,}", f"{n_seq / n:.1f}x"] if n else ["not reached", "-"]
            lines.append(f"| {case['model']} / {case['cluster_label']} | {run['seed']} | {_ms(target)} | {n_seq:,} | "
                         + " | ".join(cells) + " |")
    lines.append("")
    for m, (ratios, missed) in tallies.items():
        if not ratios and not missed:
            continue
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else math.nan
        lines.append(f"- {m}: fewer samples than seq2seq on {sum(r > 1 for r in ratios)} of {len(ratios) + missed} "
                     f"runs, not reached on {missed}; geometric-mean ratio over the reached ones {geo:.1f}x")
    return "\n".join([*lines, ""]) + "\n"


def _bench_history(runs: list[Path], model: str, cluster: str, method: str) -> list[tuple[int, float]]:
    """(samples, best so far) after each update of ``method``'s search of ``model`` on ``cluster``."""
    for run in runs:
        for path in sorted((run / "runs").glob(f"{model}_*-{cluster}-{method}/metrics.jsonl")):
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            return [(int(r["charts/samples"]), r["charts/best_step_time"]) for r in rows
                    if "charts/best_step_time" in r]
    return []


if __name__ == "__main__":
    main()
