"""A run directory belongs to one run: one process at a time, one graph.

:func:`claim_run_dir` holds an exclusive lock on ``<run_dir>/.lock`` (``fcntl.flock``, released by the operating
system when the process ends, killed or not) while a run writes there, so a second process started on the same
directory stops at once instead of interleaving its checkpoint, metrics and placement with the first's. It also
refuses a directory whose ``placement.json`` places another graph, which a search or placer would overwrite.

Example:
    >>> import tempfile
    >>> from gplace.testing import chain
    >>> with tempfile.TemporaryDirectory() as d, claim_run_dir(d, chain()):
    ...     pass
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from gplace.ir import OpGraph

__all__ = ["RunDirInUseError", "claim_run_dir"]

LOCK_FILE = ".lock"


class RunDirInUseError(ValueError):
    """Another process is running in the run directory."""


@contextlib.contextmanager
def claim_run_dir(run_dir: str | Path, graph: OpGraph) -> Iterator[Path]:
    """Hold ``run_dir`` (made if missing) for a run on ``graph`` until the ``with`` block ends.

    Raises:
        RunDirInUseError: another process holds the directory (names its pid).
        ValueError: the directory's ``placement.json`` is for another graph (names both).
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / LOCK_FILE).open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "unknown"
            raise RunDirInUseError(f"run directory {run_dir} is in use by another process (pid {holder}): two runs "
                                   "there would overwrite each other's checkpoint, metrics and placement; wait for "
                                   "it to end or use another directory") from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        _check_graph(run_dir, graph)
        try:
            yield run_dir
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _check_graph(run_dir: Path, graph: OpGraph) -> None:
    """Refuse a directory whose ``placement.json`` places another graph (an unreadable one is left to be
    overwritten: it holds no result)."""
    from gplace.ir import load_json

    path = run_dir / "placement.json"
    if not path.is_file():
        return
    try:
        doc = load_json(path)
    except (OSError, ValueError):
        return
    found = doc.get("graph_fingerprint") if isinstance(doc, dict) else None
    if found is not None and found != graph.fingerprint:
        raise ValueError(f"run directory {run_dir} holds the placement of graph {doc.get('graph')!r} ({found}), not "
                         f"of {graph.name!r} ({graph.fingerprint}); use a new run directory or delete it")
