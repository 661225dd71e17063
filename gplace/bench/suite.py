"""A bench suite: every baseline and learned search on every case, results written after each case."""

from __future__ import annotations

import dataclasses
import logging
import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gplace.bench.report import refresh_results, write_results
from gplace.bench.runner import BenchRecord, run_baselines, run_learned, shown_pairs, stale_reason
from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.serialize import file_stem
from gplace.runtime.base import Runtime

log = logging.getLogger(__name__)

Search = Callable[[OpGraph, Cluster, Runtime, Path | None, Placement | None], Any]
"""``search(graph, cluster, runtime, run_dir, best_baseline) -> PlacementReport`` (e.g. a closure over
:func:`gplace.place`); ``best_baseline`` is the fastest baseline's placement, for searches that warm-start."""


@dataclass(frozen=True)
class BenchCase:
    """One graph on one cluster, measured by one runtime."""

    graph: OpGraph
    cluster: Cluster
    runtime: Runtime


def run_suite(
    cases: Sequence[Callable[[], BenchCase]], placers: Mapping[str, Any], searches: Mapping[str, Search],
    out_dir: str | Path, *, plots: bool = True, previous: Sequence[BenchRecord] = (), fresh: bool = False,
    seen: set[tuple[str, str]] | None = None, settings: Mapping[str, str] | None = None,
) -> list[BenchRecord]:
    """Run every placer and search on every case (built lazily, one at a time).

    Writes ``results.json`` and ``RESULTS.md`` under ``out_dir`` after each case, so a stopped run keeps what
    it finished (what follows the table in ``RESULTS.md``, notes and targets, is kept, but by a ``fresh`` bench's
    first write), and with ``plots`` a
    learning curve and a timeline of the best placement per learned search under ``out_dir/plots``. ``previous``
    records (of earlier cases, or of an earlier run being resumed) are kept in the written files; a case they
    already hold for every method is skipped, and an unfinished one runs again (its learned searches resume from
    their run directories). With ``fresh``, every learned search starts anew:
    the run directory an earlier bench left (``out_dir/runs/<graph>-<cluster>-<method>``, a name made safe by
    :func:`file_stem`) is removed first.

    Records and run directories are keyed by graph and cluster name, and records also keep their fingerprints: a
    case whose records are of another graph or cluster of that name (its costs changed since), or do not say
    (written before records kept fingerprints), is measured again with a WARNING and its learned searches start
    anew, as with ``fresh``. A method whose records were measured with other ``settings`` (method -> a digest of its
    settings, kept in its records) than given now is measured again, with a WARNING: a baseline alone, a learned
    search with the case's baselines (its warm start), its run directory removed (the others resume theirs).
    ``seen`` (updated here) holds the pairs this bench already ran, so a second case of one pair (another seed, say)
    is refused rather than skipped. A failed learned search is a result (out of memory, no placement found) and is
    not run again; a config error is not one, and ``gplace bench`` refuses it before anything runs. A baseline that
    failed for want of an optional package (its record's ``missing_module``) is run again, alone, by a resume of an
    otherwise finished case, so that once the package is installed it gets its result. Once every case is done, the
    files are written again if they do not hold these records yet (every case skipped, the report of an older
    version).

    Raises:
        ValueError: a case repeats a (graph, cluster) pair in ``seen``; a search is named like a baseline.
    """
    from gplace.baselines import step_time_lower_bound

    clash = sorted(set(placers) & set(searches))
    if clash:
        raise ValueError(f"{clash[0]!r} names both a baseline and a learned search: results are keyed by method name, "
                         "so one would hide the other; rename one")
    out_dir = Path(out_dir)
    records: list[BenchRecord] = list(previous)
    rewrite = fresh

    def save() -> None:  # a fresh bench's first write drops an earlier run's notes; a resume keeps them
        nonlocal rewrite
        (write_results if rewrite else refresh_results)(records, out_dir, learned=list(searches))
        rewrite = False

    for build in cases:
        case = build()
        graph, cluster, runtime = case.graph, case.cluster, case.runtime
        key = (graph.name, cluster.name)
        if seen is not None and key in seen:
            raise ValueError(f"two bench cases place graph {graph.name!r} on cluster {cluster.name!r}: results and run "
                             "directories are keyed by graph and cluster, so the second would be skipped; run it "
                             "with another out_dir")
        if seen is not None:
            seen.add(key)
        held = [r for r in records if (r.graph, r.cluster) == key]
        stale = stale_reason(held, graph, cluster)
        changed = [] if stale else _changed_settings(held, settings)
        if stale:
            log.warning("%s on %s: measured again, its learned searches started anew: %s", graph.name, cluster.name,
                        stale)
        elif changed and not set(changed) & set(searches):  # baselines alone: those measured again
            log.warning("%s on %s: %s set otherwise than when measured: measured again", graph.name, cluster.name,
                        ", ".join(changed))
            records = _rerun_baselines(records, case, {m: placers[m] for m in changed if m in placers},
                                       held[0].lower_bound, settings)
            save()
            continue
        elif changed:
            log.warning("%s on %s: measured again, the learned searches %s anew: %s set otherwise than when measured",
                        graph.name, cluster.name, ", ".join(m for m in changed if m in searches), ", ".join(changed))
        elif {r.method for r in held} >= {*placers, *searches}:
            again = {r.method: placers[r.method] for r in held if r.missing_module and r.method in placers}
            if again:
                log.info("%s on %s: running again %s, which failed for a missing package", graph.name, cluster.name,
                         ", ".join(again))
                records = _rerun_baselines(records, case, again, held[0].lower_bound, settings)
                save()
            else:
                log.info("%s on %s: already in the results, skipped", graph.name, cluster.name)
            continue
        records = [r for r in records if (r.graph, r.cluster) != key]
        bound = step_time_lower_bound(graph, cluster)
        found, placements = run_baselines(graph, cluster, placers, runtime, bound)
        best_record = min(found, key=lambda r: r.step_time, default=None)
        best = best_record.step_time if best_record is not None else math.inf
        best_placement = placements.get(best_record.method) if best_record is not None and not best_record.failed \
            else None
        for name, search in searches.items():
            stem = file_stem(graph.name, cluster.name, name)
            run_dir = out_dir / "runs" / stem  # one name in out_dir/runs: never a folder elsewhere
            if (fresh or stale or name in changed) and run_dir.exists():  # another search resumes its finished run
                shutil.rmtree(run_dir)
            def run(d: Path | None, s: Search = search, case: BenchCase = case,
                    warm: Placement | None = best_placement) -> Any:
                return s(case.graph, case.cluster, case.runtime, d, warm)

            record, report = run_learned(graph, cluster, name, run, bound, run_dir)
            found.append(record)
            if plots and report is not None:
                _plot(report, out_dir / "plots", stem, best)
        records += _with_settings(found, settings)
        save()
    refresh_results(records, out_dir, learned=list(searches))
    return records


def warn_unfingerprinted(records: Sequence[BenchRecord], ran: set[tuple[str, str]], out_dir: str | Path) -> None:
    """A WARNING naming the pairs a resumed bench kept but did not run (not in ``ran``) whose records say no
    fingerprints: of an older version of their graph, maybe, beside rows of today's (a table showed one K80 at
    87.56 ms in one row and 95.81 ms in the next)."""
    old = sorted({(r.graph, r.cluster) for r in records if (r.graph, r.cluster) not in ran
                  and None in (r.graph_fingerprint, r.cluster_fingerprint)})
    if old:
        log.warning("%s/results.json keeps the records of %d (graph, cluster) pairs this bench did not run, written "
                    "before records kept fingerprints (%s): their graph may have changed since; run those cases "
                    "again to measure them anew", out_dir, len(old), shown_pairs(old))


def _changed_settings(held: Sequence[BenchRecord], settings: Mapping[str, str] | None) -> list[str]:
    """The methods of the ``held`` records whose recorded settings differ from ``settings`` (a record or a method
    without a digest is not compared), sorted."""
    return sorted(r.method for r in held if settings and r.settings is not None
                  and settings.get(r.method, r.settings) != r.settings)


def _with_settings(records: Sequence[BenchRecord], settings: Mapping[str, str] | None) -> list[BenchRecord]:
    """``records`` with their method's digest of ``settings`` (those of methods it has none of as they were)."""
    return [dataclasses.replace(r, settings=settings[r.method]) if settings and r.method in settings else r
            for r in records]


def _rerun_baselines(records: Sequence[BenchRecord], case: BenchCase, placers: Mapping[str, Any],
                     bound: float, settings: Mapping[str, str] | None) -> list[BenchRecord]:
    """``records`` with those of ``placers`` on ``case`` replaced, in place, by a new run of them (``bound``: the
    case's step-time lower bound, as its records hold it; ``settings``: the digests the new records keep)."""
    graph, cluster = case.graph, case.cluster
    ran = run_baselines(graph, cluster, placers, case.runtime, bound)[0]
    found = {r.method: r for r in _with_settings(ran, settings)}
    key = (graph.name, cluster.name)
    return [found.get(r.method, r) if (r.graph, r.cluster) == key else r for r in records]


def _plot(report: Any, plot_dir: Path, stem: str, best_baseline: float) -> None:
    """The learning curve and timeline of ``report`` under ``plot_dir``; one that cannot be written (a full disk)
    is a WARNING, so the case's results are still written (a failed plot stopped the bench before them)."""
    from gplace.bench.plots import plot_learning_curve, plot_timeline

    try:
        plot_dir.mkdir(parents=True, exist_ok=True)
        plot_learning_curve(report.train.history, plot_dir / f"{stem}-curve.png", title=stem,
                            baseline=best_baseline)
        plot_timeline(report.graph, report.cluster, report.placement, plot_dir / f"{stem}-timeline.png")
    except OSError as err:
        log.warning("%s: plots not written under %s (%s)", stem, plot_dir, err)
