"""Compiled pieces both event simulators share (``sim-v1`` and ``pipe-v3``): the event heap ordered by
(time, key), the transfers a placement implies, a channel FIFO whose ties of end time go by priority, per-key
segments of a sorted array, and a dirty-list mark."""

from __future__ import annotations

import numpy as np

from gplace.runtime.jit import cached_njit

__all__ = ["U", "before", "enqueue_transfer", "heap_pop", "heap_push", "mark", "segments", "transfers"]

U = np.uint64
"""An index cast to it skips numba's wraparound of negative indices (only for indices that cannot be negative:
numba checks no bounds, so a negative one would read far outside the array)."""


@cached_njit()
def before(t1: float, k1: int, t2: float, k2: int) -> bool:
    return t1 < t2 or (t1 == t2 and k1 < k2)


@cached_njit()
def heap_push(ht, hk, base, size, t, k):
    """Push ``(t, k)`` onto the min-heap in ``ht/hk[base:base + size]``; return the new size."""
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if before(ht[U(base + parent)], hk[U(base + parent)], t, k):
            break
        ht[U(base + i)], hk[U(base + i)] = ht[U(base + parent)], hk[U(base + parent)]
        i = parent
    ht[U(base + i)], hk[U(base + i)] = t, k
    return size + 1


@cached_njit()
def heap_pop(ht, hk, base, size):
    """Remove the smallest entry of a non-empty heap and return its ``k``; the new size is ``size - 1``."""
    top = hk[U(base)]
    size -= 1
    t, k = ht[U(base + size)], hk[U(base + size)]
    i = 0
    while 2 * i + 1 < size:
        c = 2 * i + 1
        if c + 1 < size and before(ht[U(base + c + 1)], hk[U(base + c + 1)], ht[U(base + c)], hk[U(base + c)]):
            c += 1
        if before(t, k, ht[U(base + c)], hk[U(base + c)]):
            break
        ht[U(base + i)], hk[U(base + i)] = ht[U(base + c)], hk[U(base + c)]
        i = c
    ht[U(base + i)], hk[U(base + i)] = t, k
    return top


@cached_njit()
def sorted_insert(ht, hk, head, tail, t, k, limit):
    """Insert ``(t, k)`` into the run ``ht/hk[head:tail]`` sorted by :func:`before` if that moves at most
    ``limit`` entries; the new tail, or ``-1`` (nothing changed) if it would move more."""
    if tail - head > limit and before(t, k, ht[U(tail - limit - 1)], hk[U(tail - limit - 1)]):
        return -1
    q = tail
    while q > head and before(t, k, ht[U(q - 1)], hk[U(q - 1)]):
        ht[U(q)], hk[U(q)] = ht[U(q - 1)], hk[U(q - 1)]
        q -= 1
    ht[U(q)], hk[U(q)] = t, k
    return tail + 1


@cached_njit()
def move_front(ht, hk, head, tail):
    """Move the run ``ht/hk[head:tail]`` to the front (a sorted run is a valid heap); its size."""
    for p in range(tail - head):
        ht[U(p)], hk[U(p)] = ht[U(head + p)], hk[U(head + p)]
    return tail - head


@cached_njit()
def enqueue_transfer(ch_q, head, tail, x, producer, end, priority, t):
    """Append transfer ``x`` (its producer ``producer[x]`` ended at ``t``) to the channel FIFO ``ch_q[head:tail]``,
    ahead of the waiting transfers whose producers also ended at ``t`` but come later by ``priority`` (of the
    producer): a zero-length producer ends in a later round of the same instant than one started before it, yet
    ties go by priority."""
    q = tail
    while q > head and end[producer[ch_q[q - 1]]] == t and priority[producer[ch_q[q - 1]]] > priority[producer[x]]:
        ch_q[q] = ch_q[q - 1]
        q -= 1
    ch_q[q] = x


@cached_njit()
def transfers(dev, out_ptr, out_dst, out_eid, edge_bytes, nd):
    """One transfer per (producer, other device with a consumer); ids grouped by producer.

    Returns ``x_of_edge (E,)`` (-1 on same-device edges), ``x_op, x_dst, x_bytes (T,)``, ``x_ptr (N+1,)``.
    """
    n, ne = dev.shape[0], edge_bytes.shape[0]
    x_of_edge = np.empty(ne, np.int64)
    x_of_edge[:] = -1
    x_op, x_dst, x_bytes = np.empty(ne, np.int64), np.empty(ne, np.int64), np.zeros(ne, np.int64)
    x_ptr = np.zeros(n + 1, np.int64)
    last = np.empty(nd, np.int64)
    last[:] = -1
    nx = 0
    for i in range(n):
        x_ptr[i] = nx
        for k in range(out_ptr[i], out_ptr[i + 1]):
            d = dev[out_dst[k]]
            if d == dev[i]:
                continue
            x = last[d]
            if x < x_ptr[i]:
                x, last[d], x_op[nx], x_dst[nx] = nx, nx, i, d
                nx += 1
            x_of_edge[out_eid[k]] = x
            x_bytes[x] = max(x_bytes[x], edge_bytes[out_eid[k]])
    x_ptr[n] = nx
    return x_of_edge, x_op[:nx].copy(), x_dst[:nx].copy(), x_bytes[:nx].copy(), x_ptr


@cached_njit()
def segments(keys, nkeys):
    """``ptr (nkeys+1,)`` of a counting sort of ``keys``."""
    ptr = np.zeros(nkeys + 1, np.int64)
    for key in keys:
        ptr[key + 1] += 1
    for k in range(nkeys):
        ptr[k + 1] += ptr[k]
    return ptr


@cached_njit()
def mark(flags, stack, size, i):
    """Push ``i`` on the to-do ``stack`` unless ``flags[i]`` says it is there; return the new size."""
    if flags[i]:
        return size
    flags[i] = True
    stack[size] = i
    return size + 1
