"""gplace's simulators against a plain Python event loop, same graphs and placements, one process.

Run from the repository root: ``python benchmarks/simulator_throughput.py [--repeats 5]``; writes
``benchmarks/simulator.md`` and ``benchmarks/simulator.json``.

The yardstick is ``shared/yardsticks/stepsim.py`` (found in a parent folder of the repository, or in
``$GPLACE_YARDSTICKS``): each device one op at a time, FIFO by readiness, one send channel per device. On
2 devices its model is ``sim-v1``'s (one channel per device is then one per device pair; edges carry their
producer's ``output_bytes``; ties go to the lower op index, which is the topological rank of a layered DAG)
and ``pipe-v3``'s with one micro-batch, so the step times are checked to agree to the bit on every placement
before anything is timed. On 5 devices the models differ (``sim-v1`` has a channel per device pair), so those
rows are timed only. ``pipe-v3`` (one micro-batch) starts the ready op of highest priority rather than the
first ready, so it is checked against its own plain loop (``pipeline_simulator_speed.plain_minibatch_time``)
on every placement and timed against both. Every figure is the median over ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np

from gplace.ir import Cluster, Device, OpGraph, Placement
from gplace.pipeline import PipelineSimulator
from gplace.runtime import Simulator
from gplace.runtime.batch import available_threads
from gplace.testing import layered_dag

sys.path.insert(0, str(Path(__file__).parent))
from pipeline_simulator_speed import plain_minibatch_time  # noqa: E402  (pipe-v3's own plain loop)
from report_notes import write_report

OUT = Path(__file__).with_name("simulator.md")
BEFORE = OUT.with_name("simulator_before.json")  # the figures before the step_times fast path
NOTES = """
## The same script on another machine (2026-11-27, Intel Xeon, 2 cores; the AMD run of 2026-11-26 is at the end)

Re-run at 2a74aca (the kernels of that day), machine otherwise idle; not written over the table. Everything was
slower than on the AMD machine, the plain Python loop most: 814 against 224 us a placement at 256 ops on 2 devices
(3.6x), 13,947 against 5,260 us at 5,000 (2.7x); sim-v1's `step_times` 29.3 against 11.1 us (2.6x). So most ratios moved
up: sim-v1 `step_times` 27.8x and 34.8x at 256 ops (2 and 5 devices), 19.3x, 25.0x and 22.7x at 5,000 (the last
with 80 GB devices; AMD: 20.1, 22.9, 20.5, 20.8, 19.1), one thread (30.2-62.6x on 2); pipe-v2 `minibatch_times`
(M = 1) 6.6-7.3x on one thread, 9.3-13.1x on 2; `measure` 4.0-4.5x. The 30x target still holds for sim-v1 only by
counting both cores (one of five one-thread rows, 256 ops on 5 devices, passes it), and not for pipe-v2; the ratio
depends on the CPU as much as on the kernels.

## Threads (2026-11-26)

Both batch APIs now split a large batch into chunks of rows on a thread pool (`gplace.runtime.batch.run_rows`;
the compiled batch kernels release the GIL): `Simulator(threads=None)` and `PipelineSimulator(threads=None)` use
every core the process may run on, and only for chunks of at least 16,384 op-rows (rows x ops), so small
batches stay on the calling thread. Each row is simulated alone and the chunks are joined in row order, so the
results are the same to the bit on any number of threads (`tests/runtime/test_batch.py`: 1, 2, 3 and every
core, ample and tight memory, and a forked child that makes its own pool). The table's one-thread rows are
`threads=1`. On this machine's 2 cores, that day: sim-v1's `step_times` 36-42x the one-thread yardstick (19-23x on one
thread), so the target is met there only by counting both cores; pipe-v2's `minibatch_times` 9-12x (4.7-6.3x on one
thread), short of 30x on any count of cores this machine has. The trainers measure through `measure_many`
(one `Measurement` per placement, 3-4.6x), not through these batch APIs; `PipelineLocalSearch` does use
`minibatch_times`, so its batches of large graphs now use the cores: 1,024 evaluations on a 5,000-op training
DAG (`pipeline_simulator_speed.training_dag`, 4 GPUs, M = 16, 1F1B) took 10.1-10.3 s on one thread and 5.4-5.5 s
on 2, ending at the same placement.

## What was done (issue 11 item 6)

Profile before (5,000 ops, 2 devices, through `step_times`, about 1,000 us a placement): Python overhead of the
batch call under 1 %; per-placement set-up of the full kernel (transfer table, counters, queues, memory arrays:
about 35 allocations and 4 passes) about 20 %; memory tracking and its log about 12 %; the rest the event loop
(an event heap, a ready heap per device, a FIFO per channel, lists of devices and channels to revisit).

`Simulator.step_times` now first runs a one-pass kernel (`_fast_step_time`) on every placement that cannot run out
of memory (checked per placement: per device, persistent memory + outputs of its ops + every edge it receives + its
largest temporary memory <= its memory; or once per graph and cluster when even the whole graph fits). While no op
or transfer takes zero time, each instant of sim-v1 is one round and its queues are FIFO, so a single pass in
(ready time, topological rank) order gives the same schedule: an op starts at max(ready, device free), its
transfers at max(end, channel free). Any zero-length op or transfer makes it give up (`nan`) and that placement
runs the full kernel, as does every placement that might run out of memory. Its arrays are renumbered by
topological rank once per graph and cluster (no `order`/`rank`/edge-id indirection; ops whose out-edges carry equal
bytes take one pass over them), and its scratch arrays are allocated once per batch. Results are unchanged:
`test_batch_step_times_equal_the_reference_simulator` (in `tests/reliability/test_properties.py`) checks
`step_times` against the plain-Python reference on 150 random graphs x 20 placements (ties from costs of a few
values, tight and ample memory), and `tests/runtime/test_simulator.py` has a golden case where the rounds of one
instant decide the order (it fails if the zero-length check is dropped).

Its ready queue is a sorted run while it can be: ready times only grow, so a newly ready op usually lands
near the tail, and an insertion that would move more than `SHIFT_LIMIT` = 64 entries turns the run into a heap
(a sorted run already is one) for the rest of the pass. Measured alone (same loaded machine, min over repeats):
256 ops 16.4 to 14.0 us, 5,000 ops 400 to 330 us a placement; a 2,500-way fan-out (the heap case) 466 vs 464 us.
`test_wide_graphs_take_the_heap_path_and_still_equal_the_reference` checks both paths against the reference.

Its indices are cast to unsigned (2026-12-06, b0e4dde), as pipe-v3's one-pass kernel's were: numba otherwise
adds a wraparound for negative indices to every array access. Same step times to the bit, 1.3-1.4x faster: 256 ops
17.3 to 13.3 us, 5,000 ops 415 to 295 us a placement (2 devices, min of 40 runs interleaved with the old kernel in
one process, machine shared with other jobs); the heap and sorted-run helpers in `gplace.runtime.kernels`, which
pipe-v3's event loop shares, take the same casts. sim-v1's kernel had been slower than pipe-v3's M = 1 path on the
same rows (19.0 against 15.7 us at 256 ops in the run noted below); that was the whole difference.

Tried and dropped (no gain beyond the noise here): Floyd's bottom-up heap pop, a 4-ary heap; slower than the
sorted run: a radix heap on the ready times' bits with an int heap for ties (13.9 vs 11.6 us at 256 ops, 302 vs
274 us at 5,000, same results); a binary search for the place and moving the shorter side
(14.5 vs 12.2 us at 256 ops).

## What is left

- (Written before the unsigned indices.)
  The ready queue was half of the fast pass: in the pass before the equal-bytes shortcut, replacing the heap by
  a stack (wrong results, timing only) took 16.3 to 8.9 us at 256 ops and 383 to 203 us at 5,000 (2 devices).
  Even then the pass would be about 29x and 28x, so 30x needs less per-edge work as well as the cheaper queue
  (the sorted run above gets part of the stack's gain); not done in the time given. Timing-only variants of
  the current pass (wrong results; 256 ops, 2 devices, min of 7 repeats, the machine otherwise idle): 11.0 us
  as it is; 6.3 us with a FIFO in place of the ordered queue; 1.5 us with the FIFO and no transfers (an edge
  across devices adds a constant instead). A branch-free transfer step (a bit per device with a consumer, then
  one transfer per set bit) took the FIFO variant to 4.3 us, but the real pass (ordered queue) from 11.0 to
  11.2 us on 2 devices and from 11.4 to 12.9 us on 5: the queue's and the transfers' costs do not add up, and
  without hardware counters on this machine (`perf` reports none) it was left there.
- Tried on 2026-12-05 and not kept, for `step_times`' fast pass (variants of the pass in a `/tmp` script,
  min of 5, machine otherwise quiet; on this day's machine the yardstick took 431 us a placement at 256 ops on 2
  devices and `step_times` 17.3 us, 24.9x): two or four placements interleaved in one loop, so that their
  dependency chains could overlap (15.7 and 16.7 against 16.4 us at 256 ops, 2 devices: no gain, so the pass is not
  bound by one chain's latency); the transfers of an op whose out-edges carry equal bytes found from a bit mask of
  its consumers' devices, one per set bit (17.0 against 17.9 us, 20.6 against 18.7 on 5 devices: noise); a
  branch-free insertion into the last 8 entries of the sorted run (18.3 against 15.6 us: slower); one ready queue
  per device, the next op the least of their heads (14.2 against 15.6 us on 2 devices, but 25.6 against 19.5 on
  5 and 450 against 385 us at 5,000 ops). Timing-only ablations in the same script: a FIFO in place of the sorted
  run 8.2 us, and the sorted run's comparisons kept but every op appended at the tail 11.6 us, so of the run's
  7-8 us about half is its comparisons and half its moves and the order they make, at 2.5 entries moved per
  insertion on average (628 per placement at 256 ops, 43,000 at 5,000 ops, 8.6 per insertion).
- Placements whose memory bound does not fit still run the full event kernel (about 6x, as before), after
  a wasted fast pass. In the 80 GB rows the bound fits every placement (a separate bound pass cost about
  100 us at 5,000 ops, so the fast pass adds it up as it goes).
- pipe-v2 `minibatch_times` is unchanged (5-7x against the yardstick; against its own plain loop, which
  also runs the gates and priorities, see the last table): its devices start the ready instance
  of highest priority, held by gates, not the first ready one, so the one-pass FIFO argument does not hold and
  it needs the event loop; its kernel could share the scratch-reuse and rank-layout work, still well short of
  30x. Measured on 2026-11-26 (M = 1, 200 random placements, min of 7, machine otherwise idle): its per-placement
  set-up (device per instance, admission limits, the transfer table, static memory, with their allocations)
  takes 5.5 of 39.9 us a placement at 256 ops on 2 devices, 5.2 of 55.9 on 5, 112 of 799 us at 5,000 ops on 2 and
  99 of 1,122 on 5; so even free set-up would leave the event loop at 34-51 us at 256 ops, 5.2-6.6x against the
  yardstick's 226-265 us there, where 30x needs under 7.6-8.8 us.
  Tried on 2026-11-27 and not kept: a pass without the event queue (each device keeps its arrived instances by
  priority and the ones still to arrive by arrival time; the device whose next start or next arrival is
  earliest decides next, which is exact while every instance and transfer takes time, since nothing placed
  later can arrive earlier; a channel carries only its source device's transfers, placed in order). It gave
  the event loop's start and end times, transfers and in-flight counts to the bit on 12,000 random placements
  (random DAGs and training DAGs with integer costs, so many ties; 2-5 devices, M = 1-5, both schedules), but
  was slower: 30.5 against 26.3 us a placement (256 ops, 2 devices, M = 1, kernels called directly, min of
  2,000 calls), and 2x slower through `minibatch_times` in a first version whose decision step was a numba
  function of 17 arguments (about 200 ns a call). The event heap it removes is small (at most one entry per
  device and channel), so it was never the cost: per instance both do a ready-heap push and pop, the
  out-edges and the transfers.
  Tried on 2026-11-27 (08:00 UTC) and not kept: the batch allocating the kernel's arrays once and every
  placement reusing them (about 35 arrays: per instance, per instance edge, per device and channel; the
  transfer table filled in place), as `step_times` does. No gain beyond the noise, slower if anything (min of 7,
  machine otherwise idle, `/tmp` script): 256 ops M = 1, 2 devices 31.8 -> 33.0 us, 5 devices 42.7 -> 43.5 us;
  the 4-GPU training DAGs 86.7 -> 91.3 us (256 ops, M = 4, 1F1B), 415 -> 427 us (M = 16, GPipe), 1,572 ->
  1,661 us (5,000 ops, M = 4), 8,680 -> 9,022 us (M = 16), the same times to the bit. So the set-up's cost
  measured before is its work (the transfer table, the counters), not its allocations.
- Tried on 2026-11-27 (09:50 UTC) and not kept, for `step_times`' fast pass: the ready ops in an unsorted pool,
  each pop the smallest (ready time, rank) found by two min-reductions over the pool (time, then rank among equal
  times) and a swap with the last entry; a push appends. The same step times to the bit on 256 and 32 placements
  of the four benchmark cases, but slower than the sorted run (min of 9, beside two other benchmark processes):
  256 ops 14.8 -> 17.6 us (2 devices), 15.8 -> 15.2 us (5); 5,000 ops 367 -> 525 us (2), 490 -> 556 us (5).
  numba compiles the reductions as one serial chain of scalar `vminsd` (no vector code, with or without
  `fastmath`), and unrolled by hand into four chains it was slower still (0.64-0.72x), so the pool pays about
  one compare per queued op per pop where the sorted run pays a short shift per push.
- `Simulator.measure` (3-4.5x) is a per-placement API: validation, the full kernel (it reports memory and the
  timeline) and the `Schedule`/`Measurement` objects; the target is for the batch APIs.
"""
HEADER = ("| graph | devices | GB each | equal to yardstick | plain us/placement | pipe-v3 plain | path | us/placement "
          "| ratio |", "|---|---:|---:|---|---:|---:|---|---:|---:|")
TARGET = 30.0
SIZES = ((256, 16), (5000, 50))  # ops, layer width


def stepsim():
    """The yardstick module ``stepsim``."""
    where = [Path(os.environ["GPLACE_YARDSTICKS"])] if "GPLACE_YARDSTICKS" in os.environ else []
    where += [p / "shared" / "yardsticks" for p in Path(__file__).resolve().parents]
    for folder in where:
        if (folder / "stepsim.py").exists():
            sys.path.insert(0, str(folder))
            import stepsim as module

            return module
    raise FileNotFoundError("shared/yardsticks/stepsim.py not found; set GPLACE_YARDSTICKS")


def gpus(count: int, memory: int = 10**15) -> Cluster:
    """``count`` equal GPUs (default: memory to spare, no placement runs out), 10 GB/s links, 10 us latency."""
    devices = [Device(f"/GPU:{i}", "gpu", 1.0, memory) for i in range(count)]
    return Cluster.build(devices, default_bandwidth=10e9, default_latency=1e-5, name=f"{count}xgpu")


def plain_inputs(graph: OpGraph, cluster: Cluster) -> tuple:
    """The yardstick's arguments but the placement: ``(n, preds, succs, cost, out_bytes)`` and ``(speed, bw, lat)``."""
    src, dst = graph.edge_index.tolist()
    preds, succs = [[] for _ in range(graph.num_ops)], [[] for _ in range(graph.num_ops)]
    for s, d in zip(src, dst, strict=True):
        preds[d].append(s)
        succs[s].append(d)
    cost = graph.durations(cluster)[:, 0].tolist()
    out_bytes = [float(b) for b in graph.output_bytes]
    link = (float(cluster.bandwidth[0, 1]), float(cluster.latency[0, 1]))
    return (graph.num_ops, preds, succs, cost, out_bytes), ([1.0] * cluster.num_devices, *link)


def median_seconds(fn: Callable[[], object], repeats: int, min_seconds: float = 0.2) -> float:
    """Median over ``repeats`` of the seconds one call of ``fn`` takes (each repeat loops for ``min_seconds``)."""
    times = []
    for _ in range(repeats):
        calls, t0 = 0, time.perf_counter()
        while calls == 0 or time.perf_counter() - t0 < min_seconds:
            fn()
            calls += 1
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times)


def compare(graph: OpGraph, cluster: Cluster, k: int, repeats: int) -> dict:
    """Microseconds per placement of the yardstick and of each gplace path, and their ratios."""
    plain = stepsim()
    (n, preds, succs, cost, out_bytes), (speed, bw, lat) = plain_inputs(graph, cluster)
    batch = np.random.default_rng(graph.num_ops).integers(0, cluster.num_devices, (k, graph.num_ops))
    rows = batch.tolist()
    placements = [Placement.for_graph(graph, row) for row in batch]
    sim, pipe = Simulator(threads=1), PipelineSimulator(microbatches=1, schedule="1f1b", threads=1)
    cores = available_threads()
    sim_t, pipe_t = Simulator(threads=cores), PipelineSimulator(microbatches=1, schedule="1f1b", threads=cores)
    reference = [plain.simulate(n, preds, succs, cost, out_bytes, row, speed, bw, lat) for row in rows]
    gplace_paths = {
        "Simulator.measure": lambda: [sim.measure(graph, cluster, p).step_time for p in placements],
        "Simulator.step_times": lambda: sim.step_times(graph, cluster, batch).tolist(),
        "PipelineSimulator.minibatch_times (M=1)": lambda: pipe.minibatch_times(graph, cluster, batch).tolist(),
        f"Simulator.step_times, {cores} threads": lambda: sim_t.step_times(graph, cluster, batch).tolist(),
        f"PipelineSimulator.minibatch_times (M=1), {cores} threads":
            lambda: pipe_t.minibatch_times(graph, cluster, batch).tolist(),
    }
    checked = cluster.num_devices == 2
    pipe_plain = [plain_minibatch_time(pipe._prepared(graph, cluster), row) for row in batch]
    for name, fn in gplace_paths.items():  # also the warm-up (JIT, prepared arrays)
        got = fn()
        want = pipe_plain if name.startswith("Pipeline") else reference
        if (checked or want is pipe_plain) and got != want:
            bad = next(i for i in range(k) if got[i] != want[i])
            raise AssertionError(f"{name} disagrees with the yardstick on {graph.name} placement {bad}: "
                                 f"{got[bad]!r} vs {want[bad]!r}")
    plain_us = 1e6 / k * median_seconds(
        lambda: [plain.simulate(n, preds, succs, cost, out_bytes, row, speed, bw, lat) for row in rows], repeats)
    prep = pipe._prepared(graph, cluster)
    pipe_plain_us = 1e6 / k * median_seconds(lambda: [plain_minibatch_time(prep, row) for row in batch], repeats)
    out = {"graph": graph.name, "ops": graph.num_ops, "edges": graph.num_edges, "devices": cluster.num_devices,
           "memory_gb": int(cluster.memory.min()) / 1e9, "fast_path": sim._prepared(graph, cluster).fits,
           "placements": k, "checked_equal": checked, "plain_us": plain_us, "pipe_plain_us": pipe_plain_us}
    for name, fn in gplace_paths.items():
        us = 1e6 / k * median_seconds(fn, repeats)
        out[name] = {"us": us, "ratio": plain_us / us}
    return out


def cpu_model() -> str:
    """The CPU model line of /proc/cpuinfo, or platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict:
    """What ran the benchmark."""
    return {"nproc": os.cpu_count(), "cpu": cpu_model(), "loadavg": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__}


def report(results: list[dict], info: dict, repeats: int) -> str:
    """The markdown written to ``simulator.md``."""
    lines = [
        "# Simulator speed against a plain Python event loop", "",
        "Made by `python benchmarks/simulator_throughput.py` (see its docstring): random placements (uniform over",
        "devices) of `gplace.testing.layered_dag` graphs, the yardstick `shared/yardsticks/stepsim.py` and gplace's",
        "simulators on the same graph and placements in one process, after warm-up, on one thread except the rows",
        "named `N threads` (the batch split over N threads, `gplace.runtime.batch`; the yardstick is one thread",
        "in every row, so those ratios count the cores too). `measure` is",
        "`Simulator().measure` per `Placement` (validation + kernel + `Measurement`); `step_times` and",
        "`minibatch_times` are the batch APIs (one call for all placements; pipe-v3 with one micro-batch, the",
        "step-time model). On 2 devices every placement's time is checked equal to the yardstick's (to the bit)",
        "before timing; on 5 devices the models differ (the yardstick shares one send channel per device), so",
        "those rows are timed only. pipe-v3 starts the ready op of highest priority (not the first ready), so it",
        "is checked equal to its own plain loop (`pipeline_simulator_speed.plain_minibatch_time`, column",
        "`pipe-v3 plain`) on every placement, and its ratio is against the yardstick (same ops and transfers).",
        f"Each figure: median of {repeats} repeats. Target (issue 11 item 6): the",
        f"batch APIs >= {TARGET:.0f}x the plain loop.", "",
        f"- machine: `nproc` = {info['nproc']}, CPU: {info['cpu']}; load average at the end: "
        f"{', '.join(map(str, info['loadavg']))} (other jobs may share the cores: ratios are measured in one run,",
        "  both sides under the same load).",
        f"- Python {info['python']}, numpy {info['numpy']}, numba {info['numba']}", "",
        *HEADER, *table(results), NOTES,
    ]
    if BEFORE.exists():
        before = json.loads(BEFORE.read_text())
        lines += ["", f"## Before (commit ad3e960: the same script on the kernels of main b52b047; load average "
                  f"{', '.join(map(str, before['machine']['loadavg']))}, {before['repeats']} repeats)", "",
                  *HEADER, *table(before["rows"])]
    return "\n".join(lines) + "\n"


def table(results: list[dict]) -> list[str]:
    """One markdown row per (case, path)."""
    lines = []
    for r in results:
        paths = [k for k, v in r.items() if isinstance(v, dict)]
        for path in paths:
            equal = "yes" if r["checked_equal"] and not path.startswith("Pipeline") else "no"
            lines.append(f"| {r['ops']} ops, {r['edges']} edges | {r['devices']} | {r.get('memory_gb', 1e6):,.0f}"
                         f" | {equal} | {r['plain_us']:,.1f} | {r['pipe_plain_us']:,.1f} | {path}"
                         f" | {r[path]['us']:,.2f} | {r[path]['ratio']:.1f}x |")
    return lines


def main() -> None:
    """Benchmark a 256-op and a 5,000-op graph on 2 and 5 devices; write the report and the json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    results = []
    for n, width in SIZES:
        graph = layered_dag(n, width)
        clusters = [gpus(2), gpus(5)] + ([gpus(2, memory=80 * 10**9)] if n > 1000 else [])
        for cluster in clusters:
            results.append(compare(graph, cluster, 256 if n < 1000 else 32, args.repeats))
            print(json.dumps(results[-1]), flush=True)
    info = machine()
    write_report(OUT, report(results, info, args.repeats))
    OUT.with_suffix(".json").write_text(json.dumps({"machine": info, "repeats": args.repeats, "rows": results},
                                                   indent=1) + "\n")


if __name__ == "__main__":
    main()
