"""A plain-Python reading of the ``pipe-v3`` semantics (gplace/pipeline/simulator.py's docstring), written
independently of the kernel, to check it exactly on small graphs."""

from __future__ import annotations

import heapq
import math

PHASE = {None: 0, "forward": 0, "backward": 1, "update": 2}


def reference_minibatch(graph, cluster, devices, m_count, schedule):
    """``(minibatch_time, busy per device, most in flight per device, peak memory per device)``."""
    n, nd = graph.num_ops, cluster.num_devices
    code = [PHASE[graph.phase[i]] if graph.phase else 0 for i in range(n)]
    rank = {int(op): r for r, op in enumerate(graph.topological_order)}
    dur = graph.durations(cluster)
    insts = [(i, m) for i in range(n) if code[i] != 2 for m in range(m_count)]
    insts += [(i, -1) for i in range(n) if code[i] == 2]

    def klass(c):
        return c if schedule == "gpipe" else (1, 0, 2)[c]

    prio = {x: (klass(code[x[0]]), x[1], rank[x[0]]) for x in insts}
    inputs = {x: {} for x in insts}  # instance -> {producer instance: bytes}
    for (p, q), b in zip(graph.edge_index.T.tolist(), graph.edge_bytes.tolist(), strict=True):
        if code[p] == 2:
            pairs, nbytes = [((p, -1), (q, -1))], b
        elif code[q] == 2:
            pairs, nbytes = [((p, m), (q, -1)) for m in range(m_count)], -(-int(b) // m_count)
        else:
            pairs, nbytes = [((p, m), (q, m)) for m in range(m_count)], -(-int(b) // m_count)
        for a, c in pairs:
            inputs[c][a] = max(inputs[c].get(a, 0), nbytes)
    consumers = {x: [] for x in insts}
    for c, ins in inputs.items():
        for a in ins:
            consumers[a].append(c)

    def dev(x):
        return int(devices[x[0]])

    def time_of(x):
        return dur[x[0], dev(x)] / (1 if x[1] < 0 else m_count)

    # stages: devices of forward ops that run (not a source taking no time anywhere it may run)
    sources = set(range(n)) - set(graph.edge_index[1].tolist())
    idle = {i for i in sources if all(dur[i, d] == 0 or not math.isfinite(dur[i, d]) for d in range(nd))}
    first = {}
    for i in range(n):
        if code[i] == 0 and i not in idle:
            first[int(devices[i])] = min(first.get(int(devices[i]), n), rank[i])
    stages = sorted(first, key=lambda d: (first[d], d))
    limit = [m_count] * nd
    if schedule == "1f1b":
        for k, d in enumerate(stages):
            limit[d] = min(m_count, len(stages) - k)

    if schedule == "1f1b":  # torch's Schedule1F1B sequence on each device: warm-up forwards, then B and F in turn
        def position(x):
            c, m, warm = code[x[0]], x[1], limit[dev(x)]
            if c == 2:
                return 2 * m_count
            forwards = list(range(warm)) + [f for j in range(m_count - warm) for f in (None, warm + j)]
            sequence = [("F", f) if f is not None else None for f in forwards]
            backwards = iter(range(m_count))
            sequence = [s if s is not None else ("B", next(backwards)) for s in sequence]
            sequence += [("B", j) for j in backwards]
            return sequence.index(("F" if c == 0 else "B", m))

        prio.update({x: (position(x), 0, rank[x[0]]) for x in insts})
    waiting = {x: {a for a in inputs[x]} for x in insts}  # inputs not yet arrived, by producer
    ready = [[] for _ in range(nd)]
    left = {(d, m): 0 for d in range(nd) for m in range(m_count)}
    for x in insts:
        if x[1] >= 0:
            left[(dev(x), x[1])] += 1
    hold = dict(left)  # and a backward instance elsewhere holds its forward op's device's micro-batch

    def holder(x):
        f = int(graph.grad_of[x[0]]) if graph.grad_of else -1
        return int(devices[f]) if code[x[0]] == 1 and f >= 0 and int(devices[f]) != dev(x) else None

    for x in insts:
        if holder(x) is not None:
            hold[(holder(x), x[1])] += 1
    phase_left = [[0, 0] for _ in range(nd)]
    for x in insts:
        if code[x[0]] < 2:
            phase_left[dev(x)][code[x[0]]] += 1
    in_flight, most, started = [0] * nd, [0] * nd, set()
    busy, dev_free, chan_busy = [0.0] * nd, [True] * nd, {}
    chan_queue = {}
    events = []  # (time, order, kind, payload)
    t = 0.0
    for x in insts:
        if not waiting[x]:
            ready[dev(x)].append(x)

    def gated(x, d):
        c = code[x[0]]
        if c == 2:
            return sum(phase_left[d]) > 0
        if c == 1:
            return schedule == "gpipe" and phase_left[d][0] > 0
        m = x[1]
        return m >= limit[d] and left[(d, m - limit[d])] > 0

    def push(when, kind, payload, order):
        heapq.heappush(events, (when, order, kind, payload))

    sends = {}  # (producer instance, destination device) -> bytes
    ended = {}  # instance -> end time
    while True:
        for ch, queue in chan_queue.items():
            if not chan_busy.get(ch) and queue:
                a, dst = queue.pop(0)
                chan_busy[ch] = True
                s = dev(a)
                push(t + cluster.latency[s, dst] + sends[(a, dst)] / cluster.bandwidth[s, dst], "x", (a, dst),
                     (1, 0))
        for d in range(nd):
            if dev_free[d] and ready[d]:
                x = min(ready[d], key=prio.get)
                if gated(x, d):
                    continue
                ready[d].remove(x)
                dev_free[d] = False
                busy[d] += time_of(x)
                push(t + time_of(x), "op", x, (0, prio[x]))
                if code[x[0]] == 0 and (d, x[1]) not in started:  # a forward instance opens its micro-batch
                    started.add((d, x[1]))
                    in_flight[d] += 1
                    most[d] = max(most[d], in_flight[d])
        if not events:
            break
        t = events[0][0]
        while events and events[0][0] == t:
            _, _, kind, payload = heapq.heappop(events)
            if kind == "op":
                x, d = payload, dev(payload)
                ended[x] = t
                dev_free[d] = True
                if x[1] >= 0:
                    phase_left[d][code[x[0]]] -= 1
                    left[(d, x[1])] -= 1
                    for h in {d, holder(x)} - {None}:
                        hold[(h, x[1])] -= 1
                        if hold[(h, x[1])] == 0 and (h, x[1]) in started:
                            in_flight[h] -= 1
                for c in consumers[x]:
                    if dev(c) == d:
                        arrive(waiting, ready, c, x, d)
                    elif (x, dev(c)) not in sends:
                        sends[(x, dev(c))] = 0
                        queue = chan_queue.setdefault((d, dev(c)), [])
                        at = len(queue)  # after the producers that ended earlier or come first in priority order
                        while at and ended[queue[at - 1][0]] == t and prio[queue[at - 1][0]] > prio[x]:
                            at -= 1
                        queue.insert(at, (x, dev(c)))
                    if dev(c) != d:
                        sends[(x, dev(c))] = max(sends[(x, dev(c))], inputs[c][x])
            else:
                a, dst = payload
                chan_busy[(dev(a), dst)] = False
                for c in consumers[a]:
                    if dev(c) == dst:
                        arrive(waiting, ready, c, a, dst)
    peak = []
    for d in range(nd):
        ops = [i for i in range(n) if devices[i] == d]
        act = sum(-(-int(graph.output_bytes[i]) // m_count) for i in ops if code[i] == 0)
        peak.append(sum(int(graph.persistent_memory[i]) for i in ops) + most[d] * act
                    + max((int(graph.temporary_memory[i]) for i in ops), default=0))
    return t, busy, most, peak


def arrive(waiting, ready, consumer, producer, d):
    waiting[consumer].discard(producer)
    if not waiting[consumer]:
        ready[d].append(consumer)
