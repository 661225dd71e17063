"""Batches of placements split over threads: the simulators' batch APIs run their compiled kernels (which release
the GIL) on chunks of rows at once.

Results do not depend on the number of threads: each row is simulated alone, and the chunks' results are joined
in row order. A batch is split only where each chunk gets at least :data:`MIN_CHUNK_OPS` op-rows (rows x ops),
so small batches stay on the calling thread. The pool is made on first use, one per process (a process forked
from one that had a pool makes its own), and shared by every simulator and calling thread.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gplace.ir import Cluster, InvalidPlacementError, OpGraph
from gplace.ir.placement import check_graph_and_cluster

MIN_CHUNK_OPS = 16_384
"""Fewest op-rows (rows x ops) worth a thread: about 0.7 ms of sim-v1 at 256 ops, far above a hand-off's cost."""

_pool: tuple[int, ThreadPoolExecutor] | None = None  # (threads, pool)
_pool_lock = threading.Lock()


def available_threads() -> int:
    """Cores this process may run on (its CPU affinity where the system has one), at least 1."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def check_threads(threads: int | None, where: str = "runtime") -> int | None:
    """``threads`` if it is ``None`` or an int >= 1; raise ``ValueError`` naming it as ``where``'s otherwise (the
    runtime's, ``runtime.threads`` on the command line, not the top-level ``threads``)."""
    whole = not isinstance(threads, bool) and (isinstance(threads, int | np.integer)
                                               or isinstance(threads, float) and threads.is_integer())
    if threads is not None and (not whole or threads < 1):
        raise ValueError(f"{where}: threads must be an integer >= 1 or None (every core), got {threads!r}")
    return None if threads is None else int(threads)


def check_device_batch(graph: OpGraph, cluster: Cluster, devices: np.ndarray) -> np.ndarray:
    """``devices`` as a C-contiguous (K, N) int64 array; raise :class:`InvalidPlacementError` otherwise (and a
    ``TypeError`` if ``graph`` or ``cluster`` is not gplace's)."""
    check_graph_and_cluster(graph, cluster)
    devices = np.ascontiguousarray(devices)
    n, d = graph.num_ops, cluster.num_devices
    if devices.ndim != 2 or devices.shape[1] != n or not np.issubdtype(devices.dtype, np.integer):
        raise InvalidPlacementError(
            f"devices must be an integer (K, {n}) array, got shape {devices.shape} {devices.dtype}"
        )
    if devices.size and (devices.min() < 0 or devices.max() >= d):
        raise InvalidPlacementError(f"device index out of range [0, {d}) in devices for cluster {cluster.name!r}")
    return devices.astype(np.int64, copy=False)


def run_rows(kernel: Callable[..., np.ndarray], devices: np.ndarray, args: tuple, threads: int | None) -> np.ndarray:
    """``kernel(devices, *args)`` for a (K, N) batch, run on up to ``threads`` chunks of rows at once.

    Args:
        kernel: a compiled function (``nogil=True``) of a (k, N) C-contiguous int64 array and ``args`` that
            returns a (k,) array, one value per row, each row independent of the others.
        devices: (K, N) C-contiguous int64 device per op per placement.
        args: the kernel's other arguments (shared by every chunk, only read).
        threads: most chunks at once; ``None``: every core this process may use.

    Returns:
        (K,) the kernel's values in row order.
    """
    rows, ops = devices.shape
    chunks = min(threads or available_threads(), rows * max(ops, 1) // MIN_CHUNK_OPS, rows)
    if chunks <= 1:
        return kernel(devices, *args)
    bounds = np.linspace(0, rows, chunks + 1).astype(int)
    parts = [devices[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    return np.concatenate(list(_executor(chunks).map(lambda part: kernel(part, *args), parts)))


def _executor(threads: int) -> ThreadPoolExecutor:
    """This process's pool, with at least ``threads`` threads (a pool outgrown is dropped; its threads end once
    the calls using it return)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] < threads:
            size = max(threads, available_threads())
            _pool = (size, ThreadPoolExecutor(max_workers=size, thread_name_prefix="gplace-batch"))
        return _pool[1]


def _forget_pool() -> None:
    """In a forked child: the parent's threads are not there, so make a new pool (and lock) when needed."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)
