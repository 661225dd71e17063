"""Measure the K placements of a batch in parallel, in a local pool of worker processes.

How it works
    :meth:`PoolRuntime.measure_many` validates every placement in the calling process (an invalid one raises
    there, as for any runtime), then sends each placement to a
    :class:`concurrent.futures.ProcessPoolExecutor` worker (``spawn`` or ``forkserver`` start method: torch
    and ``fork`` do not mix) and returns the measurements in the order of the placements.
What travels
    The inner runtime goes to each worker once, when the worker starts. It is re-created from its class and
    constructor arguments where its attributes name them (``Simulator(cache_size)``,
    ``TorchRuntime(steps, warmup, time_limit, device_map)``: a fresh copy without the caches of the caller's
    instance), else pickled as it is. A (graph, cluster) pair is pickled once into a file of the pool's
    temporary directory; a worker reads it the first time it meets the pair and keeps it, keyed by the two
    fingerprints (and for a graph with a ``source``, which its fingerprint leaves out, by that program object too);
    each task carries only the key and the placement's device array. A torch
    ``ExportedProgram`` (the ``source`` of an inference graph from ``from_torch``) travels through
    ``torch.export.save``/``load``.
What does not
    A joint training graph (``from_torch(..., training=True)``) holds an FX ``GraphModule``, which loses its
    node names when pickled: such a graph, and any whose pickling fails, is measured in the calling process,
    one placement after another, with a warning. So is every graph where the calling process is a daemonic
    process (a ``multiprocessing.Pool`` worker), which may not start worker processes.
Failures
    An exception escaping the inner runtime becomes a failed measurement with the exception in its reason. A
    worker that dies (a segfault, ``os._exit``, the kernel's OOM killer) breaks the pool; the placements it
    left without a result are then measured again one at a time in a fresh pool, so that the placement that
    kills a worker gets a failed measurement (``"worker process died ..."``) and the others their results.
    With ``timeout``, a placement still running that many seconds after a worker took it is a failed
    measurement (``"timed out ..."``; a worker's start-up, its reading of a graph and one warm-up measurement of it
    are not timed: see ``timeout`` below): a hung call cannot be cancelled, so the workers are killed and
    replaced, and the placements they were measuring are measured again one at a time. Threads may share a pool: at most
    ``workers`` placements of all of them are in flight, each timed from when it takes one of those slots, and the
    other threads' placements on workers replaced to end a hung one are measured again, not failed. Nothing here
    raises into the search except an invalid placement, and a pool that breaks in a script without the
    ``if __name__ == "__main__":`` guard (see below): a ``RuntimeError`` says so. A timeout, a dead worker or a pool
    error is ``transient`` (no fault of the placement, so a cache does not keep it, and the search measures it once
    more: a placement that hangs or kills a worker each time costs two timeouts or two new workers). An exception
    that ends a batch early (Ctrl-C) kills the workers, so the next batch does not queue behind calls nobody waits
    for; a pool inherited by a forked child starts workers of its own there. Workers ignore SIGINT (a terminal's
    Ctrl-C goes to the whole process group: the interrupted caller stops them, with no traceback from each); SIGTERM
    ends them.
    A worker whose runtime reports after a failed measurement that it can no longer run (``usable()`` is
    false: a sticky CUDA error, such as an illegal address, kills the CUDA context for the life of the process)
    exits when it gets its next placement, so that placement is measured again in a fresh worker.
Logs
    A worker's log records go to this process's loggers of the same names (their levels and handlers apply; gplace's
    DEBUG records are sent only if the ``gplace`` logger took DEBUG when the pool started).
GPUs
    With ``gpus_per_worker=g``, worker ``i`` sees only GPUs ``i*g`` to ``i*g + g - 1`` of ``gpus`` (by default the
    GPUs this process sees): ``CUDA_VISIBLE_DEVICES`` is set in the worker before anything touches CUDA, so its
    ``cuda:0`` is its own first GPU and a cluster's ``/GPU:0``..``/GPU:{g-1}`` are its own. ``workers`` defaults
    to ``len(gpus) // g``. Without it every worker sees every GPU, so concurrent measurements share (and slow)
    the same GPUs and each worker opens a CUDA context on each; the pool warns when a cluster has GPUs and
    more than one worker measures it that way.
Timing
    Workers share the machine: real measurements taken concurrently on the same CPU cores slow each other
    down (see ``benchmarks/parallel.md``). A pool pays off for real runtimes when each worker has devices of
    its own; for the simulator, which measures in microseconds, the pool's overhead dominates.

Scripts that create a pool must guard their entry point with ``if __name__ == "__main__":`` (``spawn``
re-imports the main module in every worker). A main module that is no file (a script read from stdin,
``python - < script.py``) is not re-run: the workers start as from an interactive session. There, in ``python -c`` and
in a package's ``__main__.py`` (``python -m pkg``), the workers cannot import what ``__main__`` defines: a runtime that
needs it is a ``TypeError`` when the pool is made.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import io
import logging
import logging.handlers
import multiprocessing
import numbers
import os
import pickle
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import weakref
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from queue import Empty
from typing import Any, Literal

import numpy as np

from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.errors import GraphError, check_sizes, error_summary
from gplace.ir.locks import ForkSafeLock
from gplace.runtime.base import Measurement, Runtime
from gplace.runtime.batch import available_threads
from gplace.runtime.wrapper import RuntimeWrapper, check_timeout

logger = logging.getLogger(__name__)

__all__ = ["PoolRuntime", "ProblemKeys", "Worker", "end_with_parent", "pickle_for_workers", "pickled_runtime"]

ProblemKey = tuple[str, str]
"""(graph fingerprint, cluster fingerprint); for a graph with a program, the first names the program too."""


class ProblemKeys:
    """The key a (graph, cluster) pair travels under (see :data:`ProblemKey`).

    The fingerprint leaves out ``graph.source``, the program a real runtime executes (two exports of one module
    with different example inputs share a fingerprint), so a graph with a source is keyed by its fingerprint and a
    token of that program object, never reused in this process; the program is not kept alive by it.
    """

    def __init__(self) -> None:
        self._tokens: dict[int, tuple[Callable[[], Any], int]] = {}
        self._count = 0

    def __call__(self, graph: OpGraph, cluster: Cluster) -> ProblemKey:
        if graph.source is None:
            return graph.fingerprint, cluster.fingerprint
        return f"{graph.fingerprint}-p{self._token(graph.source)}", cluster.fingerprint

    def _token(self, source: Any) -> int:
        held = self._tokens.get(id(source))
        if held is not None and held[0]() is source:
            return held[1]
        token = self._count = self._count + 1
        try:
            ref: Callable[[], Any] = weakref.ref(source)
        except TypeError:  # no weak references: held, so that its id is not reused
            ref = functools.partial(_same, source)
        self._tokens[id(source)] = (ref, token)
        return token

    def __getstate__(self) -> dict[str, Any]:
        """Pickles empty (a token means nothing in another process)."""
        return {**self.__dict__, "_tokens": {}}


def _same(obj: Any) -> Any:
    return obj


_POLL = 0.05
"""Seconds a batch with placements waiting for a slot waits for its own results before it looks for a free slot."""

PAYLOADS = 16
"""Problems (graph, cluster) whose pickled files a :class:`PoolRuntime` keeps: a compiler measuring many graphs
through one pool filled the temporary directory (a 0.5M-parameter program's file is 2 MB: its weights travel)."""

WARM_UP = 60.0
"""Seconds beyond ``timeout`` that the workers of a pool with a timeout may take to read a graph and warm up on it
(:meth:`Worker.warm_up`); past them the workers are replaced and that graph is measured without a warm-up."""

LOG_DRAIN = 5.0
"""Seconds a stopping pool waits for the log records its workers sent."""


class PoolRuntime(RuntimeWrapper):
    """Any picklable runtime, its ``measure_many`` spread over a local process pool (see the module docstring).

    Its ``id`` and ``deterministic`` are those of the runtime it wraps. The pool starts on the first
    measurement and stops with :meth:`close` (or when the object is collected, or at exit).

    Args:
        runtime: the runtime each worker runs; it must pickle (see the module docstring).
        workers: worker processes. (default: None: the CPUs this process may use; with ``gpus_per_worker``, the
            GPUs shared out // ``gpus_per_worker``)
        context: multiprocessing start method. (default: "spawn")
        threads_per_worker: when set, each worker limits torch's and OpenMP's intra-op threads to this many
            before it loads the runtime (e.g. cores // workers, so that workers do not oversubscribe the
            cores). (default: None: the libraries' defaults)
        timeout: seconds one placement may run in a worker before it is a failed measurement and the workers
            are replaced; worker start-up, reading a graph and one warm-up measurement of it (done on every worker
            first: a runtime's first call in a process sets it up, as sim-v1 loading numba's kernels for seconds) are
            not counted. Workers still reading or warming up :data:`WARM_UP` seconds past the timeout are replaced
            and that graph is measured without a warm-up.
            Placements go to the workers at most ``workers`` at a time (in all threads using the pool), so that
            each is timed from when a worker takes it. (default: None: no limit)
        gpus_per_worker: GPUs each worker gets to itself (see the module docstring). (default: None: all GPUs
            visible to every worker)
        gpus: the GPU ids (``CUDA_VISIBLE_DEVICES`` entries) to share out: indices (``0``), UUIDs
            (``"GPU-..."``), or torch's devices (``"cuda:0"``, ``torch.device("cuda", 0)``: under a set
            ``CUDA_VISIBLE_DEVICES``, its entry of that index), or one str of them separated by commas.
            (default: None: this process's ``CUDA_VISIBLE_DEVICES``, else every GPU torch sees)
    """

    def __init__(
        self, runtime: Runtime, workers: int | None = None, context: Literal["spawn", "forkserver"] = "spawn",
        threads_per_worker: int | None = None, timeout: float | None = None, gpus_per_worker: int | None = None,
        gpus: Sequence[Any] | str | None = None,
    ) -> None:
        timeout = check_timeout(timeout)
        for name, value in (("workers", workers), ("threads_per_worker", threads_per_worker)):
            if value is not None:
                check_sizes(type(self).__name__, 1, **{name: value})
        if context not in ("spawn", "forkserver"):
            raise ValueError(f"context must be 'spawn' or 'forkserver' (torch and fork do not mix), got {context!r}")
        super().__init__(runtime)
        self.gpus_per_worker, self.gpus = gpus_per_worker, None if gpus is None else _gpu_ids(gpus)
        self._gpu_sets = _gpu_sets(gpus_per_worker, self.gpus, workers)
        self.workers = workers or (len(self._gpu_sets) if self._gpu_sets else available_threads())
        self._warned_shared = False
        self._warned_daemon = False
        self.context = context
        self.threads_per_worker = threads_per_worker
        self.timeout = timeout
        self._runtime_blob = pickled_runtime(runtime)
        _check_unpickles_in_workers(self._runtime_blob, context)
        self._pool: ProcessPoolExecutor | None = None
        self._pool_pid = os.getpid()
        """The process that started :attr:`_pool` (a forked child starts its own)."""
        self._dir: Path | None = None
        self._keys = ProblemKeys()
        self._payloads: OrderedDict[ProblemKey, Path | None] = OrderedDict()
        """The last :data:`PAYLOADS` problems' files, least recently used dropped (and deleted) first, never one
        whose batch is still running."""
        self._in_flight: Counter[ProblemKey] = Counter()
        self._payload_lock = ForkSafeLock()
        self._loaded: set[ProblemKey] = set()
        """Problems every worker of the current pool has read (with a timeout only)."""
        self._cold: set[ProblemKey] = set()
        """Problems whose warm-up ran past :data:`WARM_UP`: measured without one."""
        self._logs: _WorkerLogs | None = None
        """Hands the current pool's workers' log records to this process's loggers."""
        self._finalizer: weakref.finalize | None = None
        self._lock = ForkSafeLock(reentrant=True)
        """Held to start, replace or stop the pool and to submit to it (threads may share a pool)."""
        self._slots = threading.Semaphore(self.workers)
        """One per placement in flight, in all threads: each is timed from when it takes a slot."""
        self._slots_pid = os.getpid()
        """The process :attr:`_slots` counts for (a forked child's are all free: the parent's threads are not
        there)."""
        self._killed: weakref.WeakSet[ProcessPoolExecutor] = weakref.WeakSet()
        """Pools whose workers were killed to end a hung placement: their other placements are measured again."""
        self._answered = False
        """Whether a worker ever returned a result (then they start: a broken pool is no unguarded script's)."""

    # ------------------------------------------------------------------ measuring
    def _measure_batch(self, graph: OpGraph, cluster: Cluster, placements: Sequence[Placement]) -> list[Measurement]:
        if not placements:
            return []
        if multiprocessing.current_process().daemon:  # a multiprocessing.Pool's worker may not start processes
            if not self._warned_daemon:
                logger.warning("this process is a daemonic worker (of a multiprocessing.Pool?), which may not "
                               "start processes: measuring in this process, one placement after another, without "
                               "the pool's timeout")
                self._warned_daemon = True
            return [_measured(self.runtime, graph, cluster, p) for p in placements]
        key = self._keys(graph, cluster)
        with self._payload_lock:
            path = self._payload(key, graph, cluster)
            self._in_flight[key] += 1  # its file stays while a batch of it runs (threads may share a pool)
        try:
            if path is None:
                return [self.runtime.measure(graph, cluster, p) for p in placements]
            self._warn_shared_gpus(cluster)
            task = (key, str(path))
            results = self._run(task, placements)
            broken = [i for i, r in enumerate(results) if isinstance(r, BrokenProcessPool)]
            if broken and not self._answered:
                _check_main_guard()
                logger.warning("a worker died; measuring the %d placement(s) it left one at a time", len(broken))
            for i in broken:
                results[i] = self._alone(task, placements[i])
            return [self._as_measurement(r) for r in results]
        finally:
            with self._payload_lock:
                self._in_flight[key] -= 1
                if not self._in_flight[key]:
                    del self._in_flight[key]

    def _run(self, task: tuple[ProblemKey, str], placements: Sequence[Placement]) -> list[Measurement | BaseException]:
        """Each placement's measurement, or the error that stopped it; at most ``workers`` in flight in the pool."""
        results: list[Measurement | BaseException | None] = [None] * len(placements)
        todo, running = deque(range(len(placements))), {}
        with self._lock:
            if self._slots_pid != os.getpid():
                self._slots, self._slots_pid = threading.Semaphore(self.workers), os.getpid()
        try:
            while todo or running:
                while todo and self._slots.acquire(blocking=not running):
                    i = todo.popleft()
                    future, pool = self._submit(task, placements[i])
                    running[future] = (i, time.monotonic(), pool)
                done, _ = wait(running, timeout=self._time_left(running, waiting=bool(todo)),
                               return_when=FIRST_COMPLETED)
                for future in done:
                    i, _, pool = self._pop(running, future)
                    results[i] = _outcome(future)
                    self._answered |= isinstance(results[i], Measurement)
                    if isinstance(results[i], BrokenProcessPool | CancelledError) and pool in self._killed:
                        todo.appendleft(i)  # another thread replaced the workers to end its hung placement
                    elif isinstance(results[i], BrokenProcessPool):
                        self._restart(pool)  # the rest go to fresh workers
                self._expire(running, results)
        except BaseException:  # Ctrl-C: the workers would go on with calls nobody waits for, ahead of the next batch
            if running:
                self._kill_workers(next(iter(running.values()))[2])
            for future in list(running):
                self._pop(running, future)
            raise
        return results

    def _pop(self, running: dict[Future, tuple[int, float, Any]], future: Future) -> tuple[int, float, Any]:
        """Stop tracking ``future`` and free its slot."""
        self._slots.release()
        return running.pop(future)

    def _time_left(self, running: dict[Future, tuple[int, float, Any]], waiting: bool) -> float | None:
        """How long to wait for a result: until the oldest placement times out, and briefly while one ``waiting``
        could take a slot that another thread frees."""
        left = None
        if self.timeout is not None:
            left = max(0.0, min(t for _, t, _ in running.values()) + self.timeout - time.monotonic())
        if waiting and len(running) < self.workers:
            left = _POLL if left is None else min(left, _POLL)
        return left

    def _expire(self, running: dict[Future, tuple[int, float, Any]], results: list) -> None:
        """Fail the placements past the timeout, kill the workers, and mark the others they held as broken."""
        if self.timeout is None or not running:
            return
        now = time.monotonic()
        late = [future for future, (_, t, _) in running.items() if now - t >= self.timeout]
        if not late:
            return
        pool = running[late[0]][2]
        logger.warning("%d measurement(s) ran past %g s; replacing the workers", len(late), self.timeout)
        self._kill_workers(pool)
        for future in list(running):
            i = self._pop(running, future)[0]
            results[i] = (TimeoutError(f"no result after {self.timeout:g} s") if future in late else
                          BrokenProcessPool("the workers were replaced to end a measurement that timed out"))

    def _submit(self, task: tuple[ProblemKey, str], placement: Placement) -> tuple[Future, Any]:
        """The placement's future (a slot is taken for it) and the pool it went to; the future holds a
        BrokenProcessPool if that pool broke or was shut down before it could be submitted."""
        try:
            if self.timeout is not None:
                self._load(*task)  # reading the graph is not timed
            with self._lock:
                pool = self._executor()
                try:
                    future = pool.submit(_measure_in_worker, *task, placement.devices)
                except RuntimeError as err:  # BrokenProcessPool, or "cannot schedule new futures after shutdown"
                    if not _pool_stopped(err):
                        raise  # e.g. a worker re-running an unguarded script must die of it
                    future = Future()
                    future.set_exception(err if isinstance(err, BrokenProcessPool) else BrokenProcessPool(str(err)))
        except BaseException:
            self._slots.release()
            raise
        return future, pool

    def _load(self, key: ProblemKey, path: str) -> None:
        """Have every worker of the current pool read the (graph, cluster) ``key`` and warm up on it (again if the
        pool was replaced meanwhile); replace workers that take :data:`WARM_UP` seconds past the timeout."""
        while True:
            with self._lock:
                if key in self._loaded:
                    return
                pool = self._executor()
            warm = key not in self._cold
            try:  # not under the lock: it may wait behind a hung call
                seen = _on_every_worker(pool, self.workers, key, path, warm,
                                        limit=self.timeout + WARM_UP if warm else None)
                if seen:
                    self._answered = True
                if warm and len(seen) < self.workers:  # the pool broke: a worker died or retired on its warm-up
                    logger.warning("a worker's warm-up on a graph broke the pool (it died or its runtime became "
                                   "unusable); measuring that graph without a warm-up")
                    self._cold.add(key)
            except TimeoutError:
                logger.warning("the workers took over %g s to read a graph and warm up on it; replacing them and "
                               "measuring it without a warm-up", self.timeout + WARM_UP)
                self._cold.add(key)
                self._kill_workers(pool)
                continue
            with self._lock:
                if pool is self._pool:
                    self._loaded.add(key)
                    return

    def _alone(self, task: tuple[ProblemKey, str], placement: Placement) -> Measurement | BaseException:
        """Measure one placement by itself after the pool broke; a second break means this one kills workers."""
        result = self._run(task, [placement])[0]
        if isinstance(result, BrokenProcessPool):  # its pool was restarted by _run
            return Measurement.failure(
                self.id, f"worker process died while measuring this placement ({error_summary(result)})",
                transient=True)
        return result

    def _warn_shared_gpus(self, cluster: Cluster) -> None:
        """Warn once when workers running on real devices share a cluster's GPUs (a model, deterministic, uses none)."""
        if self._warned_shared or self._gpu_sets or self.workers < 2 or self.runtime.deterministic:
            return
        if any(d.kind.lower() == "gpu" or "GPU" in d.name.upper() for d in cluster.devices):
            self._warned_shared = True
            logger.warning("%d workers measure a cluster with GPUs, each seeing every GPU: concurrent measurements "
                           "share them; give each its own with gpus_per_worker", self.workers)

    def _as_measurement(self, result: Measurement | BaseException) -> Measurement:
        if isinstance(result, Measurement):
            return result
        if isinstance(result, TimeoutError):
            return Measurement.failure(self.id, f"timed out: {result} in a worker (the workers were replaced)",
                                       transient=True)
        return Measurement.failure(self.id, f"worker pool error: {type(result).__name__}: {error_summary(result)}",
                                   transient=True)

    # ------------------------------------------------------------------ pool and payloads
    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            return self._started_pool()

    def _started_pool(self) -> ProcessPoolExecutor:
        if self._pool is not None and self._pool_pid != os.getpid():  # inherited by fork: the parent's workers
            self._pool, self._logs = None, None
            self._loaded.clear()
        if self._pool is None:
            self._pool_pid = os.getpid()
            context = _start_context(self.context)
            gpu_sets = context.Queue() if self._gpu_sets else None
            for ids in self._gpu_sets:
                gpu_sets.put(ids)
            self._logs = _WorkerLogs(context.Queue())
            self._logs.start()
            level = logging.getLogger("gplace").getEffectiveLevel()
            try:
                self._pool = ProcessPoolExecutor(
                    self.workers, mp_context=context, initializer=_start_worker,
                    initargs=(self._runtime_blob, self.threads_per_worker, gpu_sets, self._logs.queue, level),
                )
            except BaseException:
                self._logs.stop(wait=False)
                self._logs = None
                raise
            logger.debug("started a pool of %d %s workers for %s", self.workers, self.context, self.id)
            if self.timeout is not None and _on_every_worker(self._pool, self.workers):
                self._answered = True
        return self._pool

    def _kill_workers(self, pool: ProcessPoolExecutor) -> None:
        """Kill the worker processes of ``pool`` if it is still the current pool (a running call cannot be cancelled
        otherwise); the next call starts new ones."""
        with self._lock:
            if pool is not self._pool:
                return
            self._killed.add(pool)
            kill = getattr(pool, "kill_workers", None)  # Python >= 3.14
            if kill is not None:
                kill()
            else:
                for process in list((getattr(pool, "_processes", None) or {}).values()):
                    process.kill()
            self._restart(pool)

    def _restart(self, pool: ProcessPoolExecutor | None = None, wait: bool = True) -> None:
        """Stop the workers of ``pool`` (default: the current pool) unless another pool replaced it already; the next
        submission starts new ones. Without ``wait`` (collected), a thread waits for them (:func:`_stop_in_thread`)."""
        with self._lock:
            if pool is not None and pool is not self._pool:
                return
            if not wait and self._pool is not None and _stop_in_thread(self._pool, self._logs):
                self._pool, self._logs = None, None
            if self._pool is not None:
                self._pool.shutdown(wait=wait, cancel_futures=True)
                self._pool = None
            if self._logs is not None:
                self._logs.stop(wait)
                self._logs = None
            self._loaded.clear()

    def _payload(self, key: ProblemKey, graph: OpGraph, cluster: Cluster) -> Path | None:
        """The file holding the pickled (graph, cluster), written once while it is among the last :data:`PAYLOADS`
        problems measured; ``None`` if it cannot be pickled."""
        if key in self._payloads:
            self._payloads.move_to_end(key)
            return self._payloads[key]
        try:
            blob = pickle_for_workers((graph, cluster))
        except Exception as err:  # pickling can fail in many ways
            logger.warning("graph %r cannot be sent to worker processes (%s); measuring it in this process",
                           graph.name, error_summary(err))
            path = None
        else:
            path = self._tempdir() / f"{key[0]}-{key[1]}.pkl"
            path.write_bytes(blob)
        self._payloads[key] = path
        idle = [k for k in self._payloads if not self._in_flight[k]]  # oldest first
        for old_key in idle[:max(0, len(self._payloads) - PAYLOADS)]:
            old_path = self._payloads.pop(old_key)
            self._loaded.discard(old_key)
            self._cold.discard(old_key)
            if old_path is not None:
                old_path.unlink(missing_ok=True)
        return path

    def _tempdir(self) -> Path:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="gplace-pool-"))
            self._finalizer = weakref.finalize(self, _cleanup, self._dir)
        return self._dir

    def close(self) -> None:
        """Stop the workers and delete the payload files (a later measurement starts a new pool)."""
        self._restart()
        if self._finalizer is not None:
            self._finalizer()
        self._dir, self._finalizer = None, None
        self._payloads.clear()

    def __enter__(self) -> PoolRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._restart(wait=False)

    def __getstate__(self) -> dict[str, Any]:
        """Pickles the settings and the inner runtime, not the pool or its files."""
        return {**self.__dict__, "_pool": None, "_dir": None, "_payloads": OrderedDict(), "_loaded": set(),
                "_cold": set(), "_logs": None, "_finalizer": None, "_in_flight": Counter(), "_payload_lock": None,
                "_lock": None, "_slots": None, "_killed": None, "_answered": False}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _payload_lock=ForkSafeLock(), _lock=ForkSafeLock(reentrant=True),
                             _slots=threading.Semaphore(state["workers"]), _slots_pid=os.getpid(),
                             _killed=weakref.WeakSet())


def _stop_in_thread(pool: ProcessPoolExecutor, logs: _WorkerLogs | None) -> bool:
    """Start a daemon thread that shuts ``pool`` down, waiting for its workers, and then stops ``logs``; whether it
    started (not while the interpreter exits: there a thread never runs, and 3.11's ``start()`` waits for it forever).

    A collected pool stopped its log listener at once, and the log queue, dropped, unlinked its semaphores while a
    worker was still starting: unpickling them, that worker died with a traceback on the caller's stderr (the
    executor's own queues are held by its manager thread until its workers exit).
    """
    if sys.is_finalizing():
        return False
    try:
        threading.Thread(target=_stop_pool, args=(pool, logs), name="gplace-pool-stop", daemon=True).start()
    except RuntimeError:  # Python >= 3.12: "can't create new thread at interpreter shutdown"
        return False
    return True


def _stop_pool(pool: ProcessPoolExecutor, logs: _WorkerLogs | None) -> None:
    try:
        pool.shutdown(wait=True, cancel_futures=True)
    finally:
        if logs is not None:
            logs.stop()


def _gpu_sets(per_worker: int | None, gpus: list[str] | None, workers: int | None) -> list[str]:
    """The ``CUDA_VISIBLE_DEVICES`` value of each worker (empty without ``per_worker``), from ``gpus``
    (:func:`_gpu_ids`).

    Raises:
        ValueError: ``gpus`` without ``per_worker`` (they were ignored: every worker saw every GPU).
    """
    if per_worker is None:
        if gpus is not None:
            raise ValueError(f"PoolRuntime: gpus={gpus} are shared out by gpus_per_worker, which is not given (every "
                             "worker would see every GPU): give gpus_per_worker=1, say, or set CUDA_VISIBLE_DEVICES "
                             "for the whole pool")
        return []
    if per_worker < 1:
        raise ValueError(f"gpus_per_worker must be >= 1, got {per_worker}")
    ids = gpus if gpus is not None else _visible_gpus()
    count = workers if workers is not None else len(ids) // per_worker
    if count < 1 or count * per_worker > len(ids):
        raise ValueError(f"{count or 1} worker(s) x {per_worker} GPU(s) need {(count or 1) * per_worker} GPUs; "
                         f"there are {len(ids)}: {ids}")
    return [",".join(ids[i * per_worker:(i + 1) * per_worker]) for i in range(count)]


_GPU_ID = re.compile(r"(\d+)|((?:GPU|MIG)-[^,\s]+)")
"""A ``CUDA_VISIBLE_DEVICES`` entry: an index, or a GPU's or MIG instance's UUID."""


def _gpu_ids(gpus: Sequence[Any] | str) -> list[str]:
    """``PoolRuntime``'s ``gpus`` as ``CUDA_VISIBLE_DEVICES`` entries: a str is split at commas (it was taken letter
    by letter), ``"cuda:1"`` and ``torch.device("cuda", 1)`` are ``"1"`` (they were passed as they are).

    Raises:
        ValueError: an entry is not a GPU, naming it.
    """
    if isinstance(gpus, str):  # as CUDA_VISIBLE_DEVICES is read
        gpus = [g for g in gpus.split(",") if g.strip()]
    if not isinstance(gpus, Iterable):
        raise ValueError(f"PoolRuntime: gpus must be GPU ids such as [0, 1] or '0,1', got {gpus!r}")
    return [_gpu_id(k, entry) for k, entry in enumerate(gpus)]


def _gpu_id(k: int, entry: Any) -> str:
    """Entry ``k`` of ``gpus`` as a ``CUDA_VISIBLE_DEVICES`` entry (:func:`_gpu_ids`). Under a set
    ``CUDA_VISIBLE_DEVICES`` (a job's GPUs), torch's index (``"cuda:1"``, ``torch.device("cuda", 1)``) is read
    through it (its second entry: a worker's own value replaces the list, it does not narrow it), and an id must
    be one of its entries."""
    torch = sys.modules.get("torch")  # a torch.device is made with torch imported
    text, torch_index = entry, None
    if torch is not None and isinstance(entry, torch.device) and entry.type == "cuda" and entry.index is not None:
        torch_index = entry.index
    elif isinstance(entry, numbers.Integral) and not isinstance(entry, bool) and int(entry) >= 0:
        text = str(int(entry))
    elif isinstance(entry, str) and (index := re.fullmatch(r"\s*cuda:(\d+)\s*", entry)):
        torch_index = int(index[1])
    job = _job_gpus()
    if torch_index is not None:
        if job is None:
            return str(torch_index)
        if torch_index >= len(job):
            raise ValueError(f"PoolRuntime: gpus[{k}] = {entry!r} is not one of this process's {len(job)} GPUs "
                             f"(CUDA_VISIBLE_DEVICES={','.join(job)})")
        return job[torch_index]
    match = _GPU_ID.fullmatch(text.strip()) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"PoolRuntime: gpus[{k}] = {entry!r} is not a GPU (an index such as 0 or 'cuda:0', or a "
                         "GPU's UUID 'GPU-...')")
    found = match[1] or match[2]
    if job is not None and found not in job:
        raise ValueError(f"PoolRuntime: gpus[{k}] = {entry!r} is not one of this process's CUDA_VISIBLE_DEVICES "
                         f"({','.join(job)}): give its entries, or 'cuda:i' for torch's i-th GPU")
    return found


def _job_gpus() -> list[str] | None:
    """This process's ``CUDA_VISIBLE_DEVICES`` entries, or ``None`` where it is not set."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return None if visible is None else [g.strip() for g in visible.split(",") if g.strip()]


def _visible_gpus() -> list[str]:
    """This process's GPU ids: ``CUDA_VISIBLE_DEVICES``, else one per GPU torch sees."""
    job = _job_gpus()
    if job is not None:
        return job
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


# ---------------------------------------------------------------------- pickling
class _Pickler(pickle.Pickler):
    """Pickles a torch ``ExportedProgram`` through ``torch.export.save``; refuses an FX ``GraphModule``."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        torch = sys.modules.get("torch")
        self._torch = torch
        self._types = () if torch is None else (torch.export.ExportedProgram, torch.fx.GraphModule)
        sources = sys.modules.get("gplace.importers.torch_export")
        self._source = () if sources is None else sources.TorchSource

    def reducer_override(self, obj: Any) -> Any:
        if self._source and isinstance(obj, self._source):  # its own pickling leaves a GraphModule out
            return self.reducer_override(obj.program) if isinstance(obj.program, self._types[1]) else NotImplemented
        if not self._types or not isinstance(obj, self._types):
            return NotImplemented
        torch = self._torch
        if isinstance(obj, torch.export.ExportedProgram):
            buffer = io.BytesIO()
            torch.export.save(obj, buffer)
            return _load_program, (buffer.getvalue(),)
        raise pickle.PicklingError("an FX GraphModule loses its node names and metadata when pickled")


class _MainNames(pickle.Unpickler):
    """Unpickler noting the names it finds in ``__main__``."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file)
        self.found: set[str] = set()

    def find_class(self, module: str, name: str) -> Any:
        if module == "__main__":
            self.found.add(name)
        return super().find_class(module, name)


def _check_unpickles_in_workers(blob: bytes, method: str) -> None:
    """Unpickle the runtime ``blob`` here, so that one that cannot come back fails here and not in every worker.

    Raises:
        TypeError: it needs a class or function of a ``__main__`` that the workers do not import (an interactive
            session, ``python -c``, a script read from stdin): each worker would die of an AttributeError.
    """
    unpickler = _MainNames(io.BytesIO(blob))
    unpickler.load()
    if unpickler.found and not _workers_import_main(method):
        names = ", ".join(sorted(unpickler.found))
        raise TypeError(f"PoolRuntime: the runtime needs {names} from __main__, which the worker processes cannot "
                        "import (an interactive session, `python -c`, a script read from stdin, or a package's "
                        "__main__.py run with `python -m`); move it into an importable module and import it from there")


def _workers_import_main(method: str) -> bool:
    """Whether workers of start method ``method`` import the main module: a script file, or ``python -m module``
    (not a package's ``__main__``)."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name:
        return not name.endswith("__main__")
    return getattr(main, "__file__", None) is not None and type(_start_context(method)) not in _MAIN_NOT_RERUN.values()


def _load_program(blob: bytes) -> Any:
    import torch

    return torch.export.load(io.BytesIO(blob))


def pickle_for_workers(obj: Any) -> bytes:
    """Pickle ``obj`` as workers receive it (torch ``ExportedProgram``\\ s through ``torch.export.save``).

    Raises:
        pickle.PicklingError: ``obj`` holds an FX ``GraphModule`` (a joint training graph).
        Exception: anything else that does not pickle.
    """
    buffer = io.BytesIO()
    _Pickler(buffer).dump(obj)
    return buffer.getvalue()


def pickled_runtime(runtime: Runtime, dumps: Callable[[Any], bytes] = pickle_for_workers) -> bytes:
    """The pickled runtime workers start from: a fresh instance made from its constructor arguments where its
    attributes name them all (``steps`` or ``_steps`` for an argument ``steps``), else the instance itself.
    """
    kwargs = _constructor_args(runtime)
    if kwargs is not None:
        try:
            return dumps(type(runtime)(**kwargs))
        except Exception as err:  # a constructor that rejects its own attributes: fall back to the instance
            logger.debug("could not re-create %s from %s: %s", type(runtime).__name__, kwargs, err)
    return dumps(runtime)


def _constructor_args(obj: object) -> dict[str, Any] | None:
    """Keyword arguments re-creating ``obj`` from its attributes, or ``None`` if some argument has none."""
    attrs = vars(obj)
    kwargs = {}
    params = list(inspect.signature(type(obj).__init__).parameters.values())[1:]
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            return None
        name = next((a for a in (p.name, f"_{p.name}") if a in attrs), None)
        if name is None:
            return None
        kwargs[p.name] = attrs[name]
    return kwargs


# ---------------------------------------------------------------------- worker side
class Worker:
    """What a worker process (or a Ray actor) holds: the runtime, and the (graph, cluster) pairs it has met.

    Args:
        runtime_blob: the runtime, from :func:`pickled_runtime`.
        threads_per_worker: intra-op thread limit for torch and OpenMP, or None.
        max_problems: (graph, cluster) pairs kept. (default: 4)
    """

    def __init__(self, runtime_blob: bytes, threads_per_worker: int | None = None, max_problems: int = 4) -> None:
        _limit_threads(threads_per_worker)
        self.runtime: Runtime = pickle.loads(runtime_blob)
        _limit_threads(threads_per_worker)  # torch may have come with the runtime
        self.max_problems = max_problems
        self.problems: OrderedDict[ProblemKey, tuple[OpGraph, Cluster]] = OrderedDict()
        self.retired = False

    def measure(self, key: ProblemKey, source: Any, devices: np.ndarray) -> Measurement:
        """Measure one placement of the (graph, cluster) ``key``; ``source`` yields the pair if not yet held.

        Never raises: an exception from the runtime becomes a failed measurement naming it. After a failure that
        left the runtime unusable (its ``usable()`` is false), the next call ends the process instead, so that
        the pool or Ray replaces the worker and measures that placement again.
        """
        if self.retired:
            logger.warning("worker %d exits: its runtime became unusable", os.getpid())
            _flush_logs()
            os._exit(_RETIRED)
        try:
            graph, cluster = self._problem(key, source)
            m = self.runtime.measure(graph, cluster, Placement(devices, graph.fingerprint))
        except (Exception, SystemExit, KeyboardInterrupt) as err:  # a runtime that breaks the contract must not end
            # the search, nor the host: a sys.exit() in the runtime ended the caller's process, silently
            logger.debug("measurement raised in worker %d", os.getpid(), exc_info=True)
            m = _raised(self.runtime, err, " in a worker")
        usable = getattr(self.runtime, "usable", None)
        self.retired = not m.ok and usable is not None and not usable()
        return m

    def load(self, key: ProblemKey, source: Any, warm_up: bool = False) -> int:
        """Read the (graph, cluster) ``key`` now (before timed measurements), and with ``warm_up`` also
        :meth:`warm_up` on it if it was not held yet; returns this process's id."""
        fresh = key not in self.problems
        self._problem(key, source)
        if warm_up and fresh and not self.retired:
            self.warm_up(key, source)
        return os.getpid()

    def warm_up(self, key: ProblemKey, source: Any) -> None:
        """Measure one placement of ``key`` (every op on a device it allows) and drop the result: a runtime's first
        call in a process sets it up (sim-v1 loads numba's compiled kernels: seconds, against milliseconds for a
        measurement), which a timed call must not pay. A failure is ignored; one that leaves the runtime unusable
        retires the worker, as in :meth:`measure`."""
        graph, cluster = self._problem(key, source)
        try:
            devices = _warm_up_devices(graph, cluster)
        except GraphError:  # an op fits no device: no placement of this graph is ever sent
            return
        m = self.measure(key, source, devices)
        logger.debug("worker %d warmed up on %r: %s", os.getpid(), graph.name, m.reason or "ok")
        if self.retired:  # exit now: the pool then measures this graph without a warm-up (not fail each placement)
            logger.warning("worker %d exits: its runtime became unusable on its warm-up", os.getpid())
            _flush_logs()
            os._exit(_RETIRED)

    def _problem(self, key: ProblemKey, source: Any) -> tuple[OpGraph, Cluster]:
        problem = self.problems.get(key)
        if problem is None:
            problem = self.problems[key] = pickle.loads(self.fetch(source))
            if len(self.problems) > self.max_problems:
                self.problems.popitem(last=False)
        self.problems.move_to_end(key)
        return problem

    def fetch(self, source: Any) -> bytes:
        """The pickled (graph, cluster) from ``source``: here a file path."""
        return Path(source).read_bytes()


def _measured(runtime: Runtime, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
    """``runtime``'s measurement in this process; an exception it raises is a failed measurement (:func:`_raised`)."""
    try:
        return runtime.measure(graph, cluster, placement)
    except Exception as err:  # a runtime that breaks the contract must not end the search
        return _raised(runtime, err)


def _raised(runtime: Runtime, err: BaseException, where: str = "") -> Measurement:
    """The failed measurement naming the exception ``runtime`` raised ``where`` (``" in a worker"``)."""
    return Measurement.failure(runtime.id, f"{type(runtime).__name__} raised {type(err).__name__}{where}: "
                                           f"{error_summary(err)}")


def _warm_up_devices(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """Every op on the first device all of them allow, else each on the first device it allows."""
    allowed = graph.allowed_devices(cluster)
    common = np.flatnonzero(allowed.all(axis=0))
    if common.size:
        return np.full(graph.num_ops, common[0], dtype=np.int64)
    return allowed.argmax(axis=1)


_worker: Worker | None = None
"""The worker of this process (set by the pool's initializer; ``None`` in the calling process)."""

_log_queue: Any = None
"""The queue this worker's log records go to the pool's process through (``None`` elsewhere)."""


_RETIRED = 75
"""Exit status of a worker whose runtime became unusable."""


def _start_worker(runtime_blob: bytes, threads_per_worker: int | None, gpu_sets: Any = None, logs: Any = None,
                  level: int = logging.WARNING) -> None:
    """Ignore Ctrl-C (a terminal sends it to the whole process group: the caller, interrupted, stops the pool, where
    each idle worker printed a traceback; SIGTERM still ends a worker), end with the caller (:func:`end_with_parent`),
    send log records to ``logs``, take this worker's GPUs (before anything touches CUDA), then load the runtime."""
    global _worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    end_with_parent()
    if logs is not None:
        _send_logs(logs, level)
    if gpu_sets is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu_sets.get(timeout=60)
    _worker = Worker(runtime_blob, threads_per_worker)


def end_with_parent() -> None:
    """Exit this worker (a pool worker, a pipeline stage) once the process that started it is gone
    (``multiprocessing.parent_process()``'s sentinel, the caller's end of a pipe, for ``spawn`` and ``forkserver``
    alike): a caller killed with SIGKILL runs no cleanup, and a worker, which holds both ends of its own task pipe,
    never saw that pipe close; it lived on, holding the caller's stdout, its ports and its GPUs."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        os._exit(1)

    threading.Thread(target=watch, name="gplace-parent-watch", daemon=True).start()


def _send_logs(queue: Any, level: int) -> None:
    """Send this worker's log records to ``queue``, gplace's from ``level`` (the caller's gplace logger's level) up:
    a spawned worker has no handlers (its WARNINGs went to stderr unformatted, its DEBUG tracebacks nowhere)."""
    global _log_queue
    root = logging.getLogger()
    names = list(logging.Logger.manager.loggerDict)
    own = [logging.getLogger(name) for name in names if name.split(".")[0] == "gplace"]
    for log in (root, *own):  # a main module's top-level basicConfig (or handlers), run again here: the parent's write
        for handler in list(log.handlers):
            log.removeHandler(handler)
    root.addHandler(logging.handlers.QueueHandler(queue))
    logging.getLogger("gplace").setLevel(level)
    _log_queue = queue


def _flush_logs() -> None:
    """Deliver the log records this worker sent (before ``os._exit``, which skips the queue's own flush)."""
    if _log_queue is not None:
        _log_queue.close()
        _log_queue.join_thread()


class _WorkerLogs(logging.handlers.QueueListener):
    """Hands the records of a pool's workers to this process's loggers of their names (their levels and handlers
    apply), from when the pool starts until it stops.

    It stops on a flag, not on a sentinel put in the queue: putting starts the queue's feeder thread, which cannot
    start while the interpreter exits (a pool collected then hung its process).
    """

    def __init__(self, queue: Any) -> None:
        super().__init__(queue)
        self._stopping = threading.Event()

    def dequeue(self, block: bool) -> Any:
        """The next record; once stopping, ``Empty`` (which ends the listener) when none is left."""
        while not self._stopping.is_set():
            with contextlib.suppress(Empty):
                return self.queue.get(timeout=0.1)
        return self.queue.get(timeout=0)

    def handle(self, record: logging.LogRecord) -> None:
        target = logging.getLogger(record.name)
        if target.isEnabledFor(record.levelno):
            target.handle(record)

    def stop(self, wait: bool = True) -> None:
        """Stop after the records sent so far, waiting for them at most :data:`LOG_DRAIN` seconds with ``wait``
        (a worker killed while sending one leaves the queue unreadable)."""
        self._stopping.set()
        if wait:
            self._thread.join(timeout=LOG_DRAIN)
        self._thread = None


def _measure_in_worker(key: ProblemKey, path: str, devices: np.ndarray) -> Measurement:
    if _worker is None:
        raise RuntimeError("the worker was not initialised")
    return _worker.measure(key, path, devices)


def _worker_pid(key: ProblemKey | None = None, path: str | None = None, warm_up: bool = False) -> int:
    """This worker's process id, after reading the (graph, cluster) ``key`` from ``path`` (and warming up on it) if
    given (see :meth:`Worker.load`)."""
    time.sleep(0.05)  # long enough for the other workers to take the other calls
    if key is not None and _worker is not None:
        _worker.load(key, path, warm_up)
    return os.getpid()


def _on_every_worker(pool: ProcessPoolExecutor, workers: int, *args: Any, rounds: int = 20,
                     limit: float | None = None) -> set[int]:
    """Run :func:`_worker_pid` until ``workers`` distinct workers have (or the pool broke or was shut down by another
    thread), so that worker start-up and reading a graph are not timed; returns the ids of the workers that did.

    Raises:
        TimeoutError: they took over ``limit`` seconds (their calls go on: kill the workers).
    """
    seen: set[int] = set()
    deadline = None if limit is None else time.monotonic() + limit
    for _ in range(rounds):
        try:
            futures = [pool.submit(_worker_pid, *args) for _ in range(workers)]
            seen.update(f.result(None if deadline is None else max(0.0, deadline - time.monotonic()))
                        for f in futures)
        except (RuntimeError, CancelledError) as err:
            if not _pool_stopped(err):
                raise
            return seen  # the measurements (or _load, on the new pool) will find it broken and say why
        if len(seen) >= workers:
            return seen
    return seen


def _pool_stopped(err: BaseException) -> bool:
    """Whether ``err`` says the pool broke or was shut down (by another thread killing its workers to end a hung
    placement): ``BrokenProcessPool``, a cancelled call, or "cannot schedule new futures after shutdown"."""
    if isinstance(err, BrokenProcessPool | CancelledError):
        return True
    return isinstance(err, RuntimeError) and "shutdown" in str(err)


def _outcome(future: Future) -> Measurement | BaseException:
    """The future's result, or the exception it holds (BrokenProcessPool, or a result that did not travel back)."""
    try:
        return future.result()
    except Exception as err:
        return err


def _limit_threads(threads: int | None) -> None:
    if threads is None:
        return
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)


# ---------------------------------------------------------------------- helpers
def _check_main_guard() -> None:
    """After the pool broke: refuse a main module that workers re-run (``spawn`` and ``forkserver`` import it again
    in each) and that lacks the ``if __name__ == "__main__":`` guard, as the real cause (each worker re-ran the
    script, tried to start a pool of its own and died before it measured anything).

    Raises:
        RuntimeError: the main script has no guard (names the script).
    """
    main = sys.modules.get("__main__")
    spec_name = getattr(getattr(main, "__spec__", None), "name", None) or ""
    path = getattr(main, "__file__", None)
    if path is None or spec_name.endswith("__main__") or not str(path).endswith(".py"):
        return  # interactive, or a package's __main__ (which workers do not re-run)
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return
    if not _has_main_guard(tree):
        raise RuntimeError(f"PoolRuntime: the worker processes could not start: {path} creates the pool without an "
                           "`if __name__ == \"__main__\":` guard, and each worker re-runs it on start-up "
                           "(spawn/forkserver); put the script's code under that guard")


def _has_main_guard(tree: ast.Module) -> bool:
    """Whether the module runs an ``if __name__ ...`` at its top level, also inside ``try:``, ``with`` or another
    ``if`` (not in a function or class body)."""
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            return True
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            todo.extend(ast.iter_child_nodes(node))
    return False


_main_lock = ForkSafeLock()
"""Held while a worker starts with the main module's ``__file__`` hidden (pools may start in several threads)."""


class _MainNotRerun:
    """Process mixin: start with the main module's ``__file__`` hidden, so that the child does not re-run it."""

    def start(self) -> None:
        main = sys.modules["__main__"]
        with _main_lock:
            path = main.__dict__.pop("__file__", None)
            try:
                super().start()  # type: ignore[misc]
            finally:
                if path is not None:
                    main.__file__ = path


class _SpawnProcess(_MainNotRerun, multiprocessing.context.SpawnProcess):
    pass


class _SpawnContext(multiprocessing.context.SpawnContext):
    Process = _SpawnProcess


_MAIN_NOT_RERUN: dict[str, type[multiprocessing.context.BaseContext]] = {"spawn": _SpawnContext}
"""Start method -> its context whose processes do not re-run the main module."""

if sys.platform != "win32":
    class _ForkServerProcess(_MainNotRerun, multiprocessing.context.ForkServerProcess):
        pass

    class _ForkServerContext(multiprocessing.context.ForkServerContext):
        Process = _ForkServerProcess

    _MAIN_NOT_RERUN["forkserver"] = _ForkServerContext


def _start_context(method: str) -> multiprocessing.context.BaseContext:
    """The multiprocessing context of start method ``method``; where the main module is no file (``"<stdin>"``), one
    whose workers start without re-running it, as from an interactive session (each died of FileNotFoundError)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None or getattr(getattr(main, "__spec__", None), "name", None):
        return multiprocessing.get_context(method)  # interactive, or re-imported by its module name
    if os.path.isfile(os.path.join(multiprocessing.process.ORIGINAL_DIR or "", path)):
        return multiprocessing.get_context(method)
    return _MAIN_NOT_RERUN[method]()


def _cleanup(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


