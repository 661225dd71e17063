"""Run baselines and learned searches on one graph and cluster, as comparable records."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.errors import format_seconds
from gplace.ir.serialize import JsonTextError, read_json
from gplace.runtime.base import Runtime

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BenchRecord:
    """One method's result on one graph and cluster (a row of ``results.json``)."""

    graph: str
    cluster: str
    method: str
    step_time: float
    """Seconds per step; ``inf`` when the placement failed."""
    lower_bound: float
    """:func:`~gplace.baselines.step_time_lower_bound` of the graph on the cluster."""
    search_seconds: float
    """Wall time to produce the placement."""
    failed: bool
    reason: str = ""
    samples: int = 0
    """Placements measured by a learned search (0 for heuristics)."""
    learned: bool | None = None
    """Whether a learned search made the placement (not a baseline); ``None`` in records written before they said
    (see :meth:`is_learned`)."""
    graph_fingerprint: str | None = None
    """:attr:`OpGraph.fingerprint <gplace.ir.OpGraph.fingerprint>` of the graph measured; ``None`` in records written
    before they said (a resumed bench measures those again, see :func:`stale_reason`)."""
    cluster_fingerprint: str | None = None
    """:attr:`Cluster.fingerprint <gplace.ir.Cluster.fingerprint>` of the cluster measured on; ``None`` likewise."""
    missing_module: str | None = None
    """The optional package a baseline failed for want of (its ``ImportError``'s module, e.g. ``"pymetis"``;
    ``"unknown"`` when the error names none), which a resumed bench runs again; ``None`` otherwise, and in records
    written before they said."""
    settings: str | None = None
    """A digest of the method's settings when it was measured (a baseline's config; a search's overrides, warm
    start and budget): a resumed bench measures a case again whose methods are set otherwise now; ``None`` where the
    caller gave none, and in records written before they said."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``inf`` as ``null``)."""
        doc = asdict(self)
        doc["step_time"] = None if math.isinf(self.step_time) else self.step_time
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> BenchRecord:
        """The record :meth:`to_json` wrote (``null`` step time as ``inf``)."""
        return cls(**{**doc, "step_time": math.inf if doc["step_time"] is None else float(doc["step_time"])})

    def is_learned(self, names: Collection[str] = ()) -> bool:
        """:attr:`learned`; for a record that does not say (``results.json`` written before records did), whether its
        method is one of ``names`` (the bench's learned searches) or measured placements (baselines measure none)."""
        return self.learned if self.learned is not None else self.method in names or self.samples > 0


def stale_reason(records: Iterable[Any], graph: OpGraph, cluster: Cluster) -> str | None:
    """Why ``records`` (bench or pipeline records of ``graph`` and ``cluster``'s names) are not of their current
    contents, so are to be measured again: written before records kept fingerprints, or of another graph or cluster
    of that name; ``None`` when every one fits."""
    found = {(r.graph_fingerprint, r.cluster_fingerprint) for r in records}
    if any(None in pair for pair in found):
        return "its records were written before records kept the graph's and cluster's fingerprints"
    for what, at, now in (("graph", 0, graph.fingerprint), ("cluster", 1, cluster.fingerprint)):
        other = sorted({pair[at] for pair in found} - {now})
        if other:
            return f"its records are of another {what} of that name (fingerprint {', '.join(other)}, now {now})"
    return None


def settings_digest(*parts: Any) -> str:
    """A short digest of config nodes (OmegaConf or plain data), unresolved: what a bench record keeps of the
    settings it was measured with, so a resumed bench measures again what is set otherwise now."""
    import hashlib
    import json

    from omegaconf import OmegaConf

    plain = [OmegaConf.to_container(p, resolve=False) if OmegaConf.is_config(p) else p for p in parts]
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:12]


def shown_pairs(pairs: Sequence[tuple[str, str]], shown: int = 3) -> str:
    """The first ``shown`` (graph, cluster) pairs as ``"g on c, ..."``, and ``" ..."`` where there are more."""
    return ", ".join(f"{g} on {c}" for g, c in pairs[:shown]) + (" ..." if len(pairs) > shown else "")


def load_records(path: str | Path) -> list[BenchRecord]:
    """The records of a ``results.json``; none if the file is missing.

    Raises:
        ValueError: the file is not a list of bench records (naming the file).
    """
    return read_records(path, BenchRecord.from_json, "bench results")


def read_records(path: str | Path, parse: Callable[[Any], Any], what: str) -> list:
    """``parse`` of each entry of the JSON list at ``path`` (none if the file is missing).

    Raises:
        ValueError: the file is not such a list (names the file and ``what`` it should hold).
    """
    path = Path(path)
    if not path.is_file():
        return []
    try:
        docs = read_json(path)
    except JsonTextError as err:
        raise ValueError(f"{path}: not a gplace {what} file ({err})") from None
    try:
        return [parse(doc) for doc in docs]
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise ValueError(f"{path}: not a gplace {what} file ({type(err).__name__}: {err})") from None


def run_baselines(
    graph: OpGraph, cluster: Cluster, placers: Mapping[str, Any], runtime: Runtime, lower_bound: float
) -> tuple[list[BenchRecord], dict[str, Placement]]:
    """Place with every baseline and measure; a placer that cannot place gives a failed record."""
    records, placements = [], {}
    for name, placer in placers.items():
        started = time.perf_counter()
        try:
            placement = placer.place(graph, cluster)
        except (ValueError, ImportError) as err:  # infeasible placement, missing optional dependency
            missing = _missing_module(err)
            again = f" (a resumed bench runs it again once {err.name or 'it'} is installed)" if missing else ""
            _warn_failed(graph, cluster, f"baseline {name!r}", f"{type(err).__name__}: {err}{again}")
            records.append(_record(graph, cluster, name, math.inf, lower_bound, time.perf_counter() - started,
                                   f"{type(err).__name__}: {err}", learned=False, missing_module=missing))
            continue
        seconds = time.perf_counter() - started
        m = runtime.measure(graph, cluster, placement)
        records.append(_record(graph, cluster, name, m.step_time, lower_bound, seconds, m.reason, learned=False))
        placements[name] = placement
        if not m.ok:
            _warn_failed(graph, cluster, f"baseline {name!r}", f"its placement failed: {m.reason}")
            continue
        log.info("%s on %s: %s %s (placed in %.2f s)", graph.name, cluster.name, name, format_seconds(m.step_time),
                 seconds)
    return records, placements


def _missing_module(err: Exception) -> str | None:
    """The module ``err`` says is missing, or ``None`` if it is no ImportError."""
    if not isinstance(err, ImportError):
        return None
    return err.name or "unknown"


def _warn_failed(graph: OpGraph, cluster: Cluster, what: str, reason: str) -> None:
    """A WARNING that ``what`` (a baseline, a search) failed on ``graph`` and ``cluster``, and why."""
    log.warning("%s on %s: %s failed: %s", graph.name, cluster.name, what, reason)


def run_learned(
    graph: OpGraph, cluster: Cluster, name: str, search: Callable[[Path | None], Any], lower_bound: float,
    run_dir: Path | None = None,
) -> tuple[BenchRecord, Any]:
    """Run a learned search (``search(run_dir) -> PlacementReport``) and record its best placement and its seconds
    (over every process of a resumed search).

    Raises:
        RunDirConflictError: ``run_dir`` is another run's (another process in it, a checkpoint that does not fit):
            that is no result of the search, so it is not recorded as a failed one.
        ContractError: the search's encoder or policy broke its contract: a defect to mend, not a result (recorded,
            a resumed bench would skip the search mended).
    """
    from gplace.placer import ContractError
    from gplace.run_dir import RunDirConflictError

    log.info("%s on %s: learned search %r started", graph.name, cluster.name, name)
    started = time.perf_counter()
    try:
        report = search(run_dir)
    except (RunDirConflictError, ContractError):
        raise
    except (RuntimeError, ValueError) as err:
        _warn_failed(graph, cluster, f"learned search {name!r}", f"{type(err).__name__}: {err}")
        done = getattr(err, "result", None)  # a search that measured placements, none of which ran, says how many
        seconds = done.seconds if done is not None else time.perf_counter() - started
        return _record(graph, cluster, name, math.inf, lower_bound, seconds, str(err),
                       samples=done.samples if done is not None else 0, learned=True), None
    m, train = report.measurement, report.train
    if m.ok:
        log.info("%s on %s: learned search %r: %s (%d samples in %.1f s)", graph.name, cluster.name, name,
                 format_seconds(m.step_time), train.samples, train.seconds)
    else:
        _warn_failed(graph, cluster, f"learned search {name!r}", f"its placement failed: {m.reason}")
    record = _record(graph, cluster, name, m.step_time, lower_bound, train.seconds, m.reason, samples=train.samples,
                     learned=True)
    return record, report


def _record(graph: OpGraph, cluster: Cluster, method: str, step_time: float, lower_bound: float, seconds: float,
            reason: str, samples: int = 0, *, learned: bool, missing_module: str | None = None) -> BenchRecord:
    failed = not math.isfinite(step_time)
    return BenchRecord(graph.name, cluster.name, method, float(step_time), float(lower_bound), float(seconds),
                       failed, reason if failed else "", samples, learned, graph.fingerprint, cluster.fingerprint,
                       missing_module)
