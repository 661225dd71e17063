"""A cache of measured placements in front of any runtime, optionally kept in a sqlite file.

Key
    ``(graph.fingerprint, cluster.fingerprint, placement device bytes, inner runtime id)``. The runtime id is
    versioned (``sim-v1``, ``torch-v1``), so a changed runtime never reads another version's results. The
    runtime's *settings* are not in the key (a ``TorchRuntime`` with ``steps=5`` and one with ``steps=20``
    share entries): give each configuration a file of its own. Memory holds a 16-byte digest of the placement in
    its place (BLAKE2b), the file the placement itself.
What is cached
    Results of deterministic runtimes (the simulator). Results of real runtimes are measured anew every time
    unless ``cache_nondeterministic=True``: then the first measurement of a placement stands for all later
    ones (a search on a real machine then pays once per distinct placement, at the price of keeping that one
    sample's noise). A transient failure (``Measurement.transient``: a pool's timeout, a worker that died) is
    returned but never kept: the placement is measured again next time.
What a cached measurement holds
    ``ok``, ``step_time``, ``runtime``, ``reason``, ``spread``, ``bytes_moved`` and the per-device arrays
    ``busy_time`` and ``peak_memory`` (D values each). The per-op arrays ``op_start`` and ``op_end``
    (N values each: 160 kB per entry on a 10,000-op graph) are dropped unless ``keep_op_times=True``. A miss
    returns the same trimmed measurement a later hit will, so repeated measurements are identical.
Persistence
    With ``path``, every new entry is written to a sqlite file (stdlib ``sqlite3``; one table, committed after
    each ``measure``/``measure_many``), and a lookup that misses memory reads the file: a resumed search
    reuses the measurements of the run before it. The file keeps every entry; ``max_entries`` bounds the
    in-memory LRU only. One process should write a file at a time; threads may share one ``CachedRuntime`` (a lock
    guards its memory and file; the inner runtime measures outside it). A file that is not such a cache (not a sqlite
    database, a damaged one, another program's, another layout) is a ``ValueError`` naming it, one that cannot be
    opened (a directory, no permission) an ``OSError``; the file is left as it is.
"""

from __future__ import annotations

import hashlib
import logging
import math
import sqlite3
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.errors import check_flags, check_sizes
from gplace.ir.locks import ForkSafeLock
from gplace.ir.serialize import make_folder
from gplace.runtime.base import Measurement, Runtime
from gplace.runtime.wrapper import RuntimeWrapper

logger = logging.getLogger(__name__)

__all__ = ["CachedRuntime"]

Key = tuple[str, str, bytes, str]
"""(graph fingerprint, cluster fingerprint, placement devices as int64 bytes, runtime id)."""

_ARRAYS = {"busy_time": np.float64, "peak_memory": np.int64, "op_start": np.float64, "op_end": np.float64}
_KEY_COLUMNS = ("graph", "cluster", "placement", "runtime_id")
_COLUMNS = ("ok", "step_time", "runtime", "reason", "spread", "bytes_moved", *_ARRAYS)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS measurements (graph TEXT NOT NULL, cluster TEXT NOT NULL, placement BLOB NOT NULL, "
    "runtime_id TEXT NOT NULL, ok INTEGER NOT NULL, step_time REAL NOT NULL, runtime TEXT NOT NULL, "
    "reason TEXT NOT NULL, spread REAL NOT NULL, bytes_moved INTEGER NOT NULL, busy_time BLOB, peak_memory BLOB, "
    "op_start BLOB, op_end BLOB, PRIMARY KEY (graph, cluster, placement, runtime_id))"
)


def _short(key: Key) -> tuple[str, str, bytes, str]:
    """``key`` as memory holds it: the placement's bytes (8 per op: 16 kB on a 2,000-op graph, 1.6 GB over
    100,000 entries) replaced by their 16-byte BLAKE2b digest; the file keeps the placement itself."""
    graph, cluster, placement, runtime_id = key
    return graph, cluster, hashlib.blake2b(placement, digest_size=16).digest(), runtime_id


class CachedRuntime(RuntimeWrapper):
    """Measures each placement once and answers repeats from memory or a sqlite file (see the module docstring).

    Its ``id`` and ``deterministic`` are those of the runtime it wraps, so its measurements are
    indistinguishable from the inner runtime's (which is what a resumed search needs).

    Args:
        runtime: the runtime that measures misses; its ``measure_many`` gets every batch of misses (so a
            :class:`~gplace.runtime.parallel.PoolRuntime` inside still measures them in parallel).
        path: sqlite file to read and extend; created if missing. (default: None: memory only)
        max_entries: measurements kept in memory, least recently used dropped first. (default: 100_000)
        cache_nondeterministic: cache a non-deterministic runtime's measurements too. (default: False) A
            measurement is keyed by the graph's fingerprint, which leaves out the program a real runtime runs
            (``graph.source``): two exports of one module with other example input values share it, and with
            data-dependent control flow (``torch.cond``) they run different code; give such graphs a cache each.
        keep_op_times: keep ``op_start`` and ``op_end`` in cached measurements; a row a cache without it wrote
            to the same file still answers, without op times (``None``): give a new file where they matter.
            (default: False)

    Attributes:
        hits: lookups answered from memory or the file.
        misses: placements the inner runtime measured because the cache lacked them (a placement repeated
            within one batch is measured once: one miss, then hits; pass-through measurements of a runtime that
            is not cached count in neither).
    """

    def __init__(
        self, runtime: Runtime, path: str | Path | None = None, max_entries: int = 100_000,
        cache_nondeterministic: bool = False, keep_op_times: bool = False,
    ) -> None:
        check_sizes(type(self).__name__, 1, max_entries=max_entries)
        check_flags(type(self).__name__, cache_nondeterministic=cache_nondeterministic, keep_op_times=keep_op_times)
        if path is not None and not str(path):
            raise ValueError("path must name a file for the cache (None: in memory only), got ''")
        if path is not None and getattr(runtime, "id", None) == Runtime.id:
            raise ValueError(f"{type(runtime).__name__} keeps Runtime's default id {Runtime.id!r}: a cache file keys "
                             "measurements by runtime id, so another runtime that kept it would read this one's; "
                             "give it a versioned id of its own (id = 'mine-v1')")
        super().__init__(runtime)
        self.path = None if path is None else Path(path)
        self.max_entries = max_entries
        self.cache_nondeterministic = cache_nondeterministic
        self.keep_op_times = keep_op_times
        self.hits = self.misses = 0
        self._memory: OrderedDict[tuple[str, str, bytes, str], Measurement] = OrderedDict()
        """Keyed by :func:`_short`: a 16-byte digest of the placement, not its 8 bytes per op."""
        self._db: sqlite3.Connection | None = None
        self._lock = ForkSafeLock()  # a child forked while another thread holds it makes its own

    @property
    def caching(self) -> bool:
        """Whether measurements are cached (a deterministic inner runtime, or ``cache_nondeterministic``)."""
        return self.runtime.deterministic or self.cache_nondeterministic

    @property
    def size(self) -> int:
        """Measurements held in memory (not ``__len__``: an empty cache must not be falsy)."""
        return len(self._memory)

    # ------------------------------------------------------------------ measuring
    def _measure_batch(
        self, graph: OpGraph, cluster: Cluster, placements: Sequence[Placement]
    ) -> list[Measurement]:
        if not self.caching:
            return self.runtime.measure_many(graph, cluster, placements)
        keys = [self.key(graph, cluster, p) for p in placements]
        sizes = {"busy_time": cluster.num_devices, "peak_memory": cluster.num_devices, "op_start": graph.num_ops,
                 "op_end": graph.num_ops}
        with self._lock:
            found = {key: m for key in dict.fromkeys(keys) if (m := self._get(key, sizes)) is not None}
            todo = {key: p for key, p in zip(keys, placements, strict=True) if key not in found}
            self.misses += len(todo)
            self.hits += len(keys) - len(todo)
        if todo:
            measured = self.runtime.measure_many(graph, cluster, list(todo.values()))
            with self._lock:
                for key, m in zip(todo, measured, strict=True):
                    found[key] = m if m.transient else self._put(key, m)
                self._commit()
        return [found[key] for key in keys]

    def key(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Key:
        """The cache key of a placement."""
        devices = np.ascontiguousarray(placement.devices, dtype=np.int64).tobytes()
        return graph.fingerprint, cluster.fingerprint, devices, self.runtime.id

    # ------------------------------------------------------------------ memory and file
    def _get(self, key: Key, sizes: dict[str, int]) -> Measurement | None:
        """The measurement of ``key`` from memory or the file (whose arrays must have ``sizes`` entries)."""
        short = _short(key)
        m = self._memory.get(short)
        if m is not None:
            self._memory.move_to_end(short)
            return m
        m = self._read(key, sizes)
        if m is not None:
            self._remember(key, m)
        return m

    def _put(self, key: Key, m: Measurement) -> Measurement:
        m = self._trim(m)
        self._remember(key, m)
        self._write(key, m)
        return m

    def _remember(self, key: Key, m: Measurement) -> None:
        short = _short(key)
        self._memory[short] = m
        self._memory.move_to_end(short)
        if len(self._memory) > self.max_entries:
            self._memory.popitem(last=False)

    def _trim(self, m: Measurement) -> Measurement:
        """The measurement as the cache keeps it: arrays copied read-only, op times dropped unless kept, a reason
        that UTF-8 cannot hold (a file name's surrogates) with backslash escapes."""
        fields = {name: _frozen(getattr(m, name), dtype) for name, dtype in _ARRAYS.items()}
        if not self.keep_op_times:
            fields["op_start"] = fields["op_end"] = None
        reason = m.reason  # sqlite's text is UTF-8: a file name's surrogates are escaped
        reason = reason.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(reason, str) else reason
        return Measurement(ok=m.ok, step_time=m.step_time, runtime=m.runtime, reason=reason,
                           bytes_moved=int(m.bytes_moved), spread=float(m.spread), **fields)

    def _connection(self) -> sqlite3.Connection | None:
        if self.path is None:
            return None
        if self._db is None:
            make_folder(self.path.parent)
            self._db = _open(self.path)
            logger.debug("measurement cache %s opened", self.path)
        return self._db

    def _read(self, key: Key, sizes: dict[str, int]) -> Measurement | None:
        db = self._connection()
        if db is None:
            return None
        with _naming(self.path):
            row = db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM measurements "
                "WHERE graph = ? AND cluster = ? AND placement = ? AND runtime_id = ?", key,
            ).fetchone()
        return None if row is None else self._trim(_from_row(row, sizes, self.path))

    def _write(self, key: Key, m: Measurement) -> None:
        db = self._connection()
        if db is not None:
            with _naming(self.path):
                db.execute(f"INSERT OR REPLACE INTO measurements VALUES ({', '.join('?' * (4 + len(_COLUMNS)))})",
                           (*key, *_to_row(m)))

    def _commit(self) -> None:
        if self._db is not None:
            with _naming(self.path):
                self._db.commit()

    def close(self) -> None:
        """Commit and close the sqlite file (reopened on the next use). The runtime it wraps stays open (a pool may
        serve other caches and threads): close it too where it is this cache's alone."""
        with self._lock:
            if self._db is not None:
                try:
                    self._commit()
                finally:
                    self._db.close()
                    self._db = None

    def __enter__(self) -> CachedRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        """Pickles without the open sqlite connection and the lock."""
        with self._lock:
            self._commit()
            return {**self.__dict__, "_memory": self._memory.copy(), "_db": None, "_lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=ForkSafeLock())


# ---------------------------------------------------------------------- file
def _open(path: Path) -> sqlite3.Connection:
    """The sqlite file, checked to be a cache (or a new or empty database, where the table is created).

    Raises:
        ValueError: the file is not a sqlite database, is damaged, or holds other tables than a cache's.
        OSError: the file cannot be opened (a directory, no permission, locked).
    """
    db = None
    try:
        with _naming(path):
            db = sqlite3.connect(path, check_same_thread=False)  # used from any thread, under the cache's lock
            _check_layout(path, db)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(_SCHEMA)
    except BaseException:
        if db is not None:
            db.close()
        raise
    return db


def _check_layout(path: Path, db: sqlite3.Connection) -> None:
    """Refuses a database whose tables are not a cache's (another program's file, another layout)."""
    rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    tables = sorted(name for (name,) in rows if not name.startswith("sqlite_"))  # sqlite's own: sqlite_stat1
    if not tables:
        return
    columns = [row[1] for row in db.execute("PRAGMA table_info(measurements)")]
    if tables != ["measurements"] or columns != [*_KEY_COLUMNS, *_COLUMNS]:
        raise ValueError(f"measurement cache {path} is not a cache of this gplace (tables {tables}, columns of "
                         f"'measurements' {columns}); delete it or pass another path")


@contextmanager
def _naming(path: Path | None) -> Iterator[None]:
    """Turns sqlite's errors into ones naming the file."""
    try:
        yield
    except sqlite3.ProgrammingError:  # a misuse (a closed connection), not a damaged file
        raise
    except sqlite3.OperationalError as err:  # cannot open it, read-only, locked
        raise OSError(f"measurement cache {path} cannot be used: {err}") from err
    except sqlite3.DatabaseError as err:  # not a database, or a damaged one
        raise ValueError(f"measurement cache {path} is not a readable cache ({err}); delete it or pass another "
                         "path") from err


# ---------------------------------------------------------------------- rows
def _frozen(value: np.ndarray | None, dtype: type) -> np.ndarray | None:
    if value is None:
        return None
    arr = np.array(value, dtype=dtype)
    arr.setflags(write=False)
    return arr


def _to_row(m: Measurement) -> tuple:
    arrays = [None if getattr(m, name) is None else np.ascontiguousarray(getattr(m, name), dtype).tobytes()
              for name, dtype in _ARRAYS.items()]
    return (int(m.ok), float(m.step_time), m.runtime, m.reason, float(m.spread), int(m.bytes_moved), *arrays)


def _from_row(row: Sequence[Any], sizes: dict[str, int], path: Path | None) -> Measurement:
    """A measurement from a file's row, whose arrays hold ``sizes`` entries (D per device, N per op) of 8 bytes."""
    ok, step_time, runtime, reason, spread, bytes_moved, *blobs = row
    for name, blob in zip(_ARRAYS, blobs, strict=True):
        if blob is not None and (not isinstance(blob, bytes) or len(blob) != 8 * sizes[name]):
            got = f"{len(blob)} bytes" if isinstance(blob, bytes) else f"a {type(blob).__name__}"
            raise ValueError(f"measurement cache {path} is damaged: a row's {name} holds {got}, not 8 x "
                             f"{sizes[name]}; delete it or pass another path")
    arrays = {name: None if blob is None else np.frombuffer(blob, dtype=dtype)
              for (name, dtype), blob in zip(_ARRAYS.items(), blobs, strict=True)}
    return Measurement(ok=bool(ok), step_time=math.inf if not ok else float(step_time), runtime=runtime,
                       reason=reason, spread=float(spread), bytes_moved=int(bytes_moved), **arrays)
