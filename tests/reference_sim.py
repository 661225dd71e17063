"""A plain-Python ``sim-v1``, written from the semantics in ``gplace/runtime/simulator.py``'s docstring.

Slow and simple on purpose: an oracle for the compiled kernel in the tests (exact equality), never used by the
library. Two details the docstring did not say until this oracle found them, now written there: a transfer ends at
``(start + latency) + bytes / bandwidth`` (floating point, left to right), and the events of one instant are
handled in rounds, every end (with its frees) before every start (with its allocations), so a zero-duration op's
end and frees fall in the round after its start.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from gplace.ir import Cluster, OpGraph, Placement


@dataclass
class Reference:
    """What the reference computes: step time, per-op start and end, per-device peak and final memory."""

    step_time: float
    op_start: np.ndarray
    op_end: np.ndarray
    peak_memory: np.ndarray
    final_memory: np.ndarray


def simulate(graph: OpGraph, cluster: Cluster, placement: Placement) -> Reference:
    n, num_devices = graph.num_ops, cluster.num_devices
    durations, dev = graph.durations(cluster), placement.devices
    topo_pos = np.empty(n, dtype=np.int64)
    topo_pos[graph.topological_order] = np.arange(n)
    src, dst = graph.edge_index
    consumers = [[] for _ in range(n)]
    for e in range(graph.num_edges):
        consumers[src[e]].append((int(dst[e]), int(graph.edge_bytes[e])))
    inputs = [[] for _ in range(n)]
    for e in range(graph.num_edges):
        inputs[dst[e]].append(int(src[e]))

    # one transfer per (producer, other device with a consumer), carrying the largest edge's bytes
    transfers: dict[tuple[int, int], int] = {}
    for i in range(n):
        for j, nbytes in consumers[i]:
            if dev[j] != dev[i]:
                transfers[(i, int(dev[j]))] = max(transfers.get((i, int(dev[j])), 0), nbytes)

    start, end = np.full(n, np.nan), np.full(n, np.nan)
    persistent = np.zeros(num_devices, dtype=np.int64)
    np.add.at(persistent, dev, graph.persistent_memory)
    now, peak = persistent.copy(), persistent.copy()

    def change(device: int, delta: int) -> None:
        now[device] += delta
        peak[device] = max(peak[device], now[device])

    # what keeps each output alive: local consumers not yet ended, transfers not yet finished, remote readers
    local_left = {i: len({j for j, _ in consumers[i] if dev[j] == dev[i]}) for i in range(n)}
    sent_left = {i: sum(1 for (op, _) in transfers if op == i) for i in range(n)}
    copy_left = {(i, d): len({j for j, _ in consumers[i] if dev[j] == d}) for (i, d) in transfers}

    def release_output(i: int) -> None:
        if local_left[i] == 0 and sent_left[i] == 0:
            change(int(dev[i]), -int(graph.output_bytes[i]))
    device_free = np.zeros(num_devices)
    channel_free: dict[tuple[int, int], float] = {}
    channel_queue: dict[tuple[int, int], list] = {}
    waiting = {i: {p for p in inputs[i]} for i in range(n)}  # producers whose output has not arrived yet
    ready: list[list] = [[] for _ in range(num_devices)]  # heaps of (ready time, topo position, op)
    for i in range(n):
        if not waiting[i]:
            heapq.heappush(ready[dev[i]], (0.0, int(topo_pos[i]), i))
    clock: list[tuple[float, int, int, tuple]] = []  # (time, kind, order, payload): kind 0 op end, 1 transfer end
    transfer_start: dict[tuple[int, int], float] = {}
    transfer_end: dict[tuple[int, int], float] = {}
    done_ops = 0
    t = 0.0

    def arrive(op: int, device: int, when: float) -> None:
        for j, _ in consumers[op]:
            if dev[j] == device and op in waiting[j]:
                waiting[j].discard(op)
                if not waiting[j]:
                    heapq.heappush(ready[device], (when, int(topo_pos[j]), j))

    while done_ops < n or clock:
        # start transfers on idle channels, then ops on idle devices, at time t
        for channel, queue in channel_queue.items():  # one transfer a round: a free one ends in the next round
            if queue and channel_free.get(channel, 0.0) <= t:
                prod_end, _, op = heapq.heappop(queue)
                begin = max(prod_end, channel_free.get(channel, 0.0))
                s, d = channel
                finish = begin + cluster.latency[s, d] + transfers[(op, d)] / cluster.bandwidth[s, d]
                channel_free[channel] = finish
                transfer_start[(op, d)], transfer_end[(op, d)] = begin, finish
                change(d, transfers[(op, d)])
                heapq.heappush(clock, (finish, 1, int(topo_pos[op]), (op, d)))
        for d in range(num_devices):
            if device_free[d] <= t and ready[d] and ready[d][0][0] <= t:
                _, _, i = heapq.heappop(ready[d])
                start[i], end[i] = t, t + durations[i, d]
                device_free[d] = end[i]
                change(d, int(graph.output_bytes[i]) + int(graph.temporary_memory[i]))
                heapq.heappush(clock, (end[i], 0, int(topo_pos[i]), (i,)))
        if not clock:
            break
        t = clock[0][0]
        while clock and clock[0][0] == t:  # everything that ends at t
            _, kind, _, payload = heapq.heappop(clock)
            if kind == 0:  # op i ended: its workspace, and inputs it was the last reader of, are freed
                (i,) = payload
                done_ops += 1
                change(int(dev[i]), -int(graph.temporary_memory[i]))
                for p in set(inputs[i]):
                    if dev[p] == dev[i]:
                        local_left[p] -= 1
                        release_output(p)
                    else:
                        copy_left[(p, int(dev[i]))] -= 1
                        if copy_left[(p, int(dev[i]))] == 0:
                            change(int(dev[i]), -transfers[(p, int(dev[i]))])
                arrive(i, int(dev[i]), t)
                for (op, d) in transfers:
                    if op == i:
                        channel_queue.setdefault((int(dev[i]), d), [])
                        heapq.heappush(channel_queue[(int(dev[i]), d)], (t, int(topo_pos[i]), i))
            else:  # a transfer ended
                op, d = payload
                sent_left[op] -= 1
                release_output(op)
                arrive(op, d, t)

    step = max([*end.tolist(), *transfer_end.values()], default=0.0)
    return Reference(float(step), start, end, peak, now)
