"""Write bench results: ``results.json`` (one record per graph, cluster and method) and ``RESULTS.md``."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from gplace.bench.runner import BenchRecord
from gplace.ir.serialize import write_text_atomic


def write_results(records: Sequence[BenchRecord], out_dir: str | Path, *, learned: Sequence[str],
                  notes: str = "") -> None:
    """Write ``results.json`` and ``RESULTS.md`` (the paper's Table 1 shape) under ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / "results.json", json.dumps([r.to_json() for r in records], indent=1))
    write_text_atomic(out_dir / "RESULTS.md", results_table(records, learned=learned) + notes)


def results_table(records: Sequence[BenchRecord], *, learned: Sequence[str]) -> str:
    """A Markdown table: one row per (graph, cluster), one column per method (step time in ms, OOM/failed),
    then each learned method's speed-up over the best baseline, its ratio to the lower bound, its search time."""
    methods = list(dict.fromkeys(r.method for r in records))
    cases = list(dict.fromkeys((r.graph, r.cluster) for r in records))
    by_key = {(r.graph, r.cluster, r.method): r for r in records}
    head = ["graph", "cluster", *methods, "lower bound"]
    for name in learned:
        head += [f"{name} vs best baseline", f"{name} / bound", f"{name} search"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for graph, cluster in cases:
        row = {m: by_key.get((graph, cluster, m)) for m in methods}
        cells = [graph, cluster] + [_cell(row[m]) for m in methods]
        bound = next(r.lower_bound for r in row.values() if r is not None)
        cells.append(_ms(bound))
        baselines = [r.step_time for m, r in row.items() if r is not None and m not in learned and not r.failed]
        best = min(baselines, default=math.inf)
        for name in learned:
            r = row.get(name)
            ok = r is not None and not r.failed
            cells += [f"{best / r.step_time:.3f}x" if ok and math.isfinite(best) else "-",
                      f"{r.step_time / bound:.3f}" if ok and bound > 0 else "-",
                      f"{r.search_seconds:.0f} s" if r is not None else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(record: BenchRecord | None) -> str:
    if record is None:
        return "-"
    if record.failed:
        return "OOM" if "out of memory" in record.reason else "failed"
    return _ms(record.step_time)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms" if math.isfinite(seconds) else "inf"
