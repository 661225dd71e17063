"""A run directory belongs to one run: one process (and in it one thread) at a time, one graph.

:func:`claim_run_dir` holds an exclusive lock on ``<run_dir>/.lock`` (``fcntl.flock``, released by the operating
system when the process ends, killed or not) while a run writes there, so a second process started on the same
directory stops at once instead of interleaving its checkpoint, metrics and placement with the first's; a ``.lock``
that is no regular file (a symbolic link in a directory someone shared) is refused, never written through. It also
refuses a directory whose ``placement.json`` places another graph or uses another cluster, which a search or
placer would overwrite. :func:`hold_dir` is the lock alone (``gplace bench`` holds its ``out_dir`` with it). A
thread's holds nest (a trainer's inside ``place``'s); another thread of the process is refused as another process
is, so a search is run in the thread that holds its directory.

Example:
    >>> import tempfile
    >>> from gplace.testing import chain
    >>> with tempfile.TemporaryDirectory() as d, claim_run_dir(d, chain()):
    ...     pass
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from gplace.ir import Cluster, OpGraph
from gplace.ir.serialize import as_path, make_folder, write_error

__all__ = ["RunDirConflictError", "RunDirInUseError", "claim_run_dir", "hold_dir", "keep_previous", "previous_name"]

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"


class RunDirConflictError(ValueError):
    """The run directory belongs to another run (another process, graph or cluster, or a checkpoint that does not
    fit): nothing there may be overwritten, and a caller must not record it as a failed search."""


class RunDirInUseError(RunDirConflictError):
    """Another process, or another thread of this one, is running in the run directory."""

    path: Path | None = None
    """The directory in use (set where it is raised)."""


_HELD: dict[tuple[int, int, Path], int] = {}
"""(pid, thread, directory) held -> how many ``with`` blocks of that thread hold it (a trainer's inside
``place``'s)."""


@contextlib.contextmanager
def hold_dir(path: str | Path, what: str = "run directory") -> Iterator[Path]:
    """Hold an exclusive lock on ``path/.lock`` (``path`` made if missing) until the ``with`` block ends; a block
    inside another of the same thread on the same directory holds it too.

    Raises:
        RunDirInUseError: another process, or another thread of this one, holds it (names the pid).
    """
    path = as_path(path, what)
    make_folder(path)
    key = (os.getpid(), threading.get_ident(), path.resolve())  # a forked child holds nothing of its parent's
    if _HELD.get(key):
        _HELD[key] += 1
        try:
            yield path
        finally:
            if key in _HELD:  # the outer block may have ended first
                _HELD[key] -= 1
        return
    with _open_lock(path / LOCK_FILE) as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().decode(errors="replace").strip() or "unknown"
            who = "another thread of this process" if holder == str(os.getpid()) else "another process"
            err = RunDirInUseError(f"{what} {path} is in use by {who} (pid {holder}): two runs there "
                                   "would overwrite each other's checkpoint, metrics and results; wait for it to end "
                                   "or use another directory")
            err.path = path
            raise err from None
        _record_pid(lock, path / LOCK_FILE)
        _HELD[key] = 1
        try:
            yield path
        finally:
            _HELD.pop(key, None)
            fcntl.flock(lock, fcntl.LOCK_UN)


def _open_lock(path: Path) -> IO[bytes]:
    """``path`` opened (made if missing) to lock and to read and write the holder's pid (unbuffered: a write fails
    where it is made, and closing the file retries none); never through a symbolic link or into anything but a
    regular file (:func:`_refuse_no_file`): it is made and checked by an open that follows no link, and the file
    opened for use must be the one checked."""
    checked = _open_no_link(path)
    try:
        lock = path.open("a+b", buffering=0)
        same = os.path.samestat(os.fstat(lock.fileno()), os.fstat(checked))
    except OSError as err:  # a read-only disk: name the file
        raise write_error(path, err) from None
    finally:
        os.close(checked)
    if not same:  # replaced (by a link?) between the two opens: nothing written
        lock.close()
        raise RunDirConflictError(f"{path} was replaced while gplace opened it (by a symbolic link or another "
                                  "process): run again, or use another directory")
    return lock


def _open_no_link(path: Path) -> int:
    """A descriptor of the regular file ``path`` (made if missing), opened without following a link."""
    _refuse_no_file(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | _NOFOLLOW, 0o666)
    except OSError as err:  # a link made since the check (ELOOP); a read-only or full disk: name the file
        _refuse_no_file(path)
        raise write_error(path, err) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _no_lock_file(path, "a FIFO or a device")
    return fd


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
"""Makes ``os.open`` refuse a symbolic link (where the platform has it; the check before the open stands alone
elsewhere)."""


def _refuse_no_file(path: Path) -> None:
    """Refuse a ``path`` there that is no regular file: a run writes its pid into its lock file, and through a
    symbolic link (a directory someone shared) that emptied the file the link points to."""
    try:
        mode = path.lstat().st_mode
    except OSError:  # nothing there (made by the open), or unreadable (the open names it)
        return
    if stat.S_ISLNK(mode):
        raise _no_lock_file(path, "a symbolic link")
    if not stat.S_ISREG(mode):
        raise _no_lock_file(path, "a folder" if stat.S_ISDIR(mode) else "a FIFO or a device")


def _no_lock_file(path: Path, what: str) -> RunDirConflictError:
    """The error for a lock file ``path`` that is ``what``, not a regular file."""
    return RunDirConflictError(f"{path} is {what}, not a regular file: gplace writes its pid into the lock file, "
                               "never through a link or into anything else; remove it (the next run makes a new "
                               "one) or use another directory")


def _record_pid(lock: IO[bytes], path: Path) -> None:
    """Write this process's pid into the held ``lock`` (``path``), for a refused process to name."""
    try:
        lock.seek(0)
        lock.truncate(0)
        lock.write(str(os.getpid()).encode())
    except OSError as err:  # a full disk: name the file
        raise write_error(path, err) from None


@contextlib.contextmanager
def claim_run_dir(run_dir: str | Path, graph: OpGraph, cluster: Cluster | None = None) -> Iterator[Path]:
    """Hold ``run_dir`` (made if missing) for a run on ``graph`` (and ``cluster``) until the ``with`` block ends.

    Raises:
        RunDirInUseError: another process, or another thread of this one, holds the directory (names the pid).
        RunDirConflictError: the directory's ``placement.json`` is for another graph or cluster (names both).
    """
    with hold_dir(run_dir) as path:
        _check_placement(path, graph, cluster)
        yield path


def _check_placement(run_dir: Path, graph: OpGraph, cluster: Cluster | None) -> None:
    """Refuse a directory whose ``placement.json`` places another graph, or on another cluster (an unreadable one
    is left to be overwritten: it holds no result)."""
    from gplace.ir import load_json

    path = run_dir / "placement.json"
    if not path.is_file():
        return
    try:
        doc = load_json(path)
    except (OSError, ValueError):
        return
    if not isinstance(doc, dict):
        return
    found = doc.get("graph_fingerprint")
    if found is not None and found != graph.fingerprint:
        same_name = doc.get("graph") == graph.name
        raise RunDirConflictError(
            f"run directory {run_dir} holds the placement of graph {doc.get('graph')!r} ({found}), not of "
            f"{graph.name!r} ({graph.fingerprint})" + (
                ": the same name with other contents (costs, sizes or ops; e.g. a built-in graph a newer gplace "
                "changed); resume with the graph file it ran on, or use a new run directory (on the command line, "
                f"warm_start={run_dir / 'placement.json'} starts from its placement where the op names match)"
                if same_name else "; use a new run directory or delete it"))
    there = (doc.get("cluster"), doc.get("devices"))
    if cluster is not None and there[0] is not None and there != (cluster.name, list(cluster.device_names)):
        raise RunDirConflictError(f"run directory {run_dir} holds a placement on cluster {there[0]!r} "
                                  f"({there[1]}), not on {cluster.name!r} ({list(cluster.device_names)}); use a new "
                                  "run directory or delete it")


def previous_name(path: Path) -> Path:
    """Where a run directory keeps an earlier run's ``path`` (``placement.json`` -> ``placement.previous.json``)."""
    return path.with_name(f"{path.stem}.previous{path.suffix}")


def keep_previous(path: Path, held: str) -> None:
    """Move ``path``, which ``held`` (what an earlier run left there) and this run would replace, to
    :func:`previous_name`, with a WARNING; where it cannot be moved, say so, and it is replaced."""
    kept = previous_name(path)
    try:
        os.replace(path, kept)
    except OSError as err:
        log.warning("could not keep %s, which held %s (%s): it is replaced", path, held, err)
        return
    log.warning("%s held %s: kept as %s", path, held, kept.name)
