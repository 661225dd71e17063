"""Speed of the ``pipe-v3`` pipeline simulator's batch API against a plain Python event loop of the same model.

Run from the repository root: ``python benchmarks/pipeline_simulator_speed.py [--placements 20]``; writes
``benchmarks/pipeline_simulator_speed.json`` (its figures in ``simulator.md``, the section on pipe-v3 with
micro-batches).

The yardstick, :func:`plain_minibatch_time`, is the event loop of ``pipe-v3`` written the way Python simulators
are (``heapq``, lists, a deque per channel), over the same instance arrays ``PipelineSimulator`` prepares once
per graph (the expansion into micro-batch instances is not timed on either side). It is checked to give the
kernel's mini-batch time, to the bit, on every placement before anything is timed. The issue's target: the
batch API (``PipelineSimulator.minibatch_times``) at least 30x the plain loop on 256 and 5,000 ops.
"""

from __future__ import annotations

import argparse
import heapq
import json
import platform
import time
from collections import deque
from pathlib import Path

import numpy as np

from gplace.ir import Cluster, Device, Edge, Op, OpGraph
from gplace.pipeline import PipelineSimulator
from gplace.pipeline.simulator import prepare_instances

TARGET = 30.0
OUT = Path(__file__).with_suffix(".json")


def training_dag(num_ops: int, seed: int = 0, fan_in: int = 2) -> OpGraph:
    """``num_ops / 2`` forward ops (each reads 1..``fan_in`` earlier ones, mostly recent), a backward op per
    forward op (the reverse edges, plus the forward activations), 1 update op per 16 layers (so ``num_ops``
    ops in all, rounded)."""
    rng = np.random.default_rng(seed)
    layers = num_ops * 16 // 33
    ops, edges = [], []
    for i in range(layers):
        ops.append(Op(f"f{i}", "F", float(rng.uniform(1e-4, 2e-3)), output_bytes=int(rng.integers(1e5, 1e7)),
                      persistent_memory=int(rng.integers(0, 4e6)), phase="forward"))
        ops.append(Op(f"b{i}", "B", float(rng.uniform(2e-4, 4e-3)), output_bytes=int(rng.integers(1e5, 1e7)),
                      phase="backward", grad_of=f"f{i}"))
        edges.append(Edge(f"f{i}", f"b{i}"))
        if i:
            for j in {int(max(0, i - 1 - rng.geometric(0.5) + 1)) for _ in range(int(rng.integers(1, fan_in + 1)))}:
                edges += [Edge(f"f{j}", f"f{i}"), Edge(f"b{i}", f"b{j}")]
    for u in range(0, layers, 16):
        ops.append(Op(f"u{u}", "U", 1e-4, phase="update"))
        edges += [Edge(f"b{i}", f"u{u}", int(1e6)) for i in range(u, min(layers, u + 16))]
    return OpGraph.from_ops(ops, edges, name=f"train{len(ops)}")


def four_gpus() -> Cluster:
    devices = [Device(f"/GPU:{i}", "gpu", 1.0, 10**12) for i in range(4)]
    return Cluster.build(devices, default_bandwidth=1e10, default_latency=1e-5, name="4gpu")


def contiguous_placements(graph: OpGraph, num_devices: int, count: int, seed: int) -> np.ndarray:
    """Random contiguous splits of the layers (what pipeline placers produce), update ops with their layers.

    Shapes: returns (count, N) int64.
    """
    rng = np.random.default_rng(seed)
    layer = np.array([int(name[1:]) for name in graph.op_names])
    layers = layer.max() + 1
    out = np.empty((count, graph.num_ops), np.int64)
    for r in range(count):
        cuts = np.sort(rng.choice(np.arange(1, layers), num_devices - 1, replace=False))
        out[r] = np.searchsorted(cuts, layer, side="right")
    return out


def plain_minibatch_time(prep, devices) -> float:
    """The ``pipe-v3`` event loop in plain Python over the prepared instance arrays (see the module docstring)."""
    (ic, imb, dur, out_ptr, out_dst, out_eid, in_ptr, _, _, ebytes, inst_op, code, rank, runs, _, _, _, _, lat, bw,
     m_count, one_f_one_b) = prep.args  # grad_of and the memory arrays are not needed for the time
    ic, imb, inst_op = ic.tolist(), imb.tolist(), inst_op.tolist()
    out_ptr, out_dst, dur = out_ptr.tolist(), out_dst.tolist(), dur.tolist()
    ebytes = ebytes[out_eid].tolist()  # bytes of each out-edge, in CSR order
    lat, bw, devices = lat.tolist(), bw.tolist(), devices.tolist()
    k_count, nd = len(ic), len(lat)
    idev = [devices[op] for op in inst_op]
    limit = _limits(devices, code.tolist(), rank.tolist(), runs.tolist(), nd, m_count, one_f_one_b)
    prio = [k + k_count * _position(ic[k], imb[k], limit[idev[k]], m_count) if one_f_one_b else k
           for k in range(k_count)]  # priority, lowest first
    sends = []  # per instance: [(dst device, bytes)], one per other consumer device, in first-edge order
    for k in range(k_count):
        by_dev = {}
        for e in range(out_ptr[k], out_ptr[k + 1]):
            d = idev[out_dst[e]]
            if d != idev[k]:
                by_dev[d] = max(by_dev.get(d, 0), ebytes[e])
        sends.append(list(by_dev.items()))
    pending = [in_ptr[k + 1] - in_ptr[k] for k in range(k_count)]
    phase_left = [[0, 0] for _ in range(nd)]
    left = [[0] * m_count for _ in range(nd)]
    for k in range(k_count):
        if ic[k] < 2:
            phase_left[idev[k]][ic[k]] += 1
            left[idev[k]][imb[k]] += 1
    ready = [[] for _ in range(nd)]
    for k in range(k_count):
        if pending[k] == 0:
            heapq.heappush(ready[idev[k]], prio[k])
    busy = [False] * nd
    chan_busy, chan_q = {}, {}
    events, t, done, ended = [], 0.0, 0, [0.0] * k_count
    dirty_dev, dirty_ch = set(range(nd)), set()
    while True:
        for c in dirty_ch:
            if not chan_busy.get(c) and chan_q[c]:
                k, d, nbytes = chan_q[c].popleft()
                chan_busy[c] = True
                s = idev[k]
                heapq.heappush(events, (t + lat[s][d] + nbytes / bw[s][d], k_count + k * nd + d))
        for d in dirty_dev:
            if busy[d] or not ready[d]:
                continue
            k = ready[d][0] % k_count
            if _gated(k, d, ic, imb, phase_left, left, limit, one_f_one_b):
                continue
            heapq.heappop(ready[d])
            busy[d] = True
            heapq.heappush(events, (t + dur[k][d], k))
        dirty_dev, dirty_ch = set(), set()
        if not events:
            return t if done == k_count else float("nan")
        t = events[0][0]
        while events and events[0][0] == t:
            _, key = heapq.heappop(events)
            if key < k_count:
                k, d = key, idev[key]
                done += 1
                busy[d] = False
                dirty_dev.add(d)
                if ic[k] < 2:
                    phase_left[d][ic[k]] -= 1
                    left[d][imb[k]] -= 1
                for e in range(out_ptr[k], out_ptr[k + 1]):
                    j = out_dst[e]
                    if idev[j] == d:
                        pending[j] -= 1
                        if pending[j] == 0:
                            heapq.heappush(ready[d], prio[j])
                ended[k] = t
                for dst, nbytes in sends[k]:
                    queue = chan_q.setdefault((d, dst), deque())
                    at = len(queue)  # ties of end time go by priority
                    while at and ended[queue[at - 1][0]] == t and prio[queue[at - 1][0]] > prio[k]:
                        at -= 1
                    queue.insert(at, (k, dst, nbytes))
                    dirty_ch.add((d, dst))
            else:
                k, dst = divmod(key - k_count, nd)
                chan_busy[(idev[k], dst)] = False
                dirty_ch.add((idev[k], dst))
                for e in range(out_ptr[k], out_ptr[k + 1]):
                    j = out_dst[e]
                    if idev[j] == dst:
                        pending[j] -= 1
                        if pending[j] == 0:
                            heapq.heappush(ready[dst], prio[j])
                            dirty_dev.add(dst)


def _limits(devices, code, rank, runs, nd, m_count, one_f_one_b):
    """Each device's 1F1B in-flight limit: stages ranked by their first forward op that runs (``ops_that_run``: a
    source that takes no time, an input or a weight, decides no stage's place)."""
    first = {}
    for i, d in enumerate(devices):
        if code[i] == 0 and runs[i]:
            first[d] = min(first.get(d, len(devices)), rank[i])
    limit = [m_count] * nd
    if one_f_one_b:
        stages = sorted(first, key=lambda d: (first[d], d))
        for k, d in enumerate(stages):
            limit[d] = min(m_count, len(stages) - k)
    return limit


def _position(c, m, limit, m_count):
    """An instance's place in its device's 1F1B order (torch's ``Schedule1F1B`` sequence); updates last."""
    if c == 2:
        return 2 * m_count
    return m + max(0, m - limit + 1) if c == 0 else limit + m + min(m, m_count - limit)


def _gated(k, d, ic, imb, phase_left, left, limit, one_f_one_b):
    if ic[k] == 2:
        return phase_left[d][0] + phase_left[d][1] > 0
    if ic[k] == 1:
        return not one_f_one_b and phase_left[d][0] > 0
    m = imb[k]
    return m >= limit[d] and left[d][m - limit[d]] > 0


def measure(num_ops: int, placements: int, microbatches: int, schedule: str, threads: int = 1) -> dict:
    graph, cluster = training_dag(num_ops), four_gpus()
    sim = PipelineSimulator(microbatches, schedule, threads=threads)
    prep = prepare_instances(graph, cluster, microbatches, schedule)
    devices = contiguous_placements(graph, cluster.num_devices, placements, seed=num_ops)
    kernel = sim.minibatch_times(graph, cluster, devices)  # compiles and prepares
    t0 = time.perf_counter()
    plain = [plain_minibatch_time(prep, row) for row in devices]
    plain_s = (time.perf_counter() - t0) / placements
    if plain != kernel.tolist():
        raise AssertionError(f"plain loop and kernel disagree on {graph.name}: {plain} vs {kernel.tolist()}")
    reps = max(1, int(np.ceil(2.0 / max(plain_s, 1e-9) / placements)))  # ~ as many kernel runs as fit 2 s
    batch = np.tile(devices, (reps * 10, 1))
    t0 = time.perf_counter()
    sim.minibatch_times(graph, cluster, batch)
    kernel_s = (time.perf_counter() - t0) / batch.shape[0]
    return {"graph": graph.name, "ops": graph.num_ops, "instances": int(prep.inst_op.size),
            "microbatches": microbatches, "schedule": schedule, "placements": placements, "threads": threads,
            "plain_ms": plain_s * 1e3, "batch_ms": kernel_s * 1e3, "ratio": plain_s / kernel_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--placements", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="threads of the batch API (the target is one's)")
    args = parser.parse_args()
    rows = [measure(n, args.placements, m, s, args.threads) for n in (256, 5000)
            for m, s in ((4, "1f1b"), (16, "1f1b"), (16, "gpipe"))]
    for r in rows:
        print(f"{r['graph']:>10} M={r['microbatches']:<2} {r['schedule']:>5}: plain {r['plain_ms']:9.2f} ms, "
              f"batch {r['batch_ms']:8.3f} ms ({r['threads']} thread(s)), {r['ratio']:6.1f}x (target {TARGET:.0f}x)")
    OUT.write_text(json.dumps({"machine": platform.processor() or platform.machine(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
