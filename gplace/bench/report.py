"""Write bench results: ``results.json`` (one record per graph, cluster and method) and ``RESULTS.md``."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gplace.bench.runner import BenchRecord
from gplace.ir.serialize import write_text_atomic


def write_results(records: Sequence[BenchRecord], out_dir: str | Path, *, learned: Sequence[str] = (),
                  notes: str = "") -> None:
    """Write ``results.json`` and ``RESULTS.md`` (the paper's Table 1 shape) under ``out_dir``; ``learned`` names the
    learned searches among records that do not say (:meth:`~gplace.bench.runner.BenchRecord.is_learned`), and the
    records are written saying."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_dir / "results.json", json.dumps(_docs(records, learned), indent=1))
    write_text_atomic(out_dir / "RESULTS.md", results_table(records, learned=learned) + notes)


def refresh_results(records: Sequence[BenchRecord], out_dir: str | Path, *, learned: Sequence[str] = ()) -> None:
    """Bring ``results.json`` and the first table of ``RESULTS.md`` up to date with ``records`` (as
    :func:`write_results` writes them), rewriting neither where it is; what precedes the table (a heading) and what
    follows it (notes such as benchmarks/annotate_results.py's targets) is kept, and a file without a table gets
    it at its end."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    docs = json.dumps(_docs(records, learned), indent=1)
    if _read(out_dir / "results.json") != docs:
        write_text_atomic(out_dir / "results.json", docs)
    held = _read(out_dir / "RESULTS.md")
    lines = held.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    table = results_table(records, learned=learned)
    if start is None:  # no table (a new file, or the table removed): it goes after what is there
        report = table if not held.strip() else held.rstrip("\n") + "\n\n" + table
    else:
        end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
        report = "".join(lines[:start]) + table + "".join(lines[end:])
    if report != held:
        write_text_atomic(out_dir / "RESULTS.md", report)


def _read(path: Path) -> str:
    """The text of ``path``; empty if it cannot be read (missing, not text)."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return ""


def _docs(records: Sequence[BenchRecord], learned: Sequence[str]) -> list[dict[str, Any]]:
    return [dataclasses.replace(r, learned=r.is_learned(learned)).to_json() for r in records]


def results_table(records: Sequence[BenchRecord], *, learned: Sequence[str] = ()) -> str:
    """A Markdown table: one row per (graph, cluster), one column per method (step time in ms, OOM/failed),
    then each learned method's speed-up over the best baseline, its ratio to the lower bound, its search time.

    A record is a learned search's or a baseline's as it says; ``learned`` names the learned searches among
    records that do not say (:meth:`~gplace.bench.runner.BenchRecord.is_learned`)."""
    methods = list(dict.fromkeys(r.method for r in records))
    searches = list(dict.fromkeys(r.method for r in records if r.is_learned(learned)))
    cases = list(dict.fromkeys((r.graph, r.cluster) for r in records))
    by_key = {(r.graph, r.cluster, r.method): r for r in records}
    head = ["graph", "cluster", *methods, "lower bound"]
    for name in searches:
        head += [f"{name} vs best baseline", f"{name} / bound", f"{name} search"]
    lines = ["| " + " | ".join(map(markdown_cell, head)) + " |", "|" + "---|" * len(head)]
    for graph, cluster in cases:
        row = {m: by_key.get((graph, cluster, m)) for m in methods}
        cells = [markdown_cell(graph), markdown_cell(cluster)] + [_cell(row[m]) for m in methods]
        bound = next(r.lower_bound for r in row.values() if r is not None)
        cells.append(_ms(bound))
        best = min((r.step_time for r in row.values() if r is not None and not r.failed and not r.is_learned(learned)),
                   default=math.inf)
        for name in searches:
            r = row.get(name)
            ok = r is not None and not r.failed
            cells += [_ratio(best, r.step_time, "x") if ok else "-", _ratio(r.step_time, bound) if ok else "-",
                      f"{r.search_seconds:.0f} s" if r is not None else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown_cell(name: str) -> str:
    """``name`` as the text of a Markdown table cell: ``\\`` and ``|`` escaped, line breaks made spaces."""
    return " ".join(str(name).splitlines()).replace("\\", "\\\\").replace("|", "\\|")


def _ratio(top: float, bottom: float, unit: str = "") -> str:
    """``top / bottom`` to 3 decimals, or ``-`` where it has no value (no baseline placed, a 0 s step or bound)."""
    return f"{top / bottom:.3f}{unit}" if math.isfinite(top) and bottom > 0 else "-"


def _cell(record: BenchRecord | None) -> str:
    if record is None:
        return "-"
    if record.failed:
        return "OOM" if "out of memory" in record.reason else "failed"
    return _ms(record.step_time)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms" if math.isfinite(seconds) else "inf"
