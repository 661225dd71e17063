"""Write a simulated mini-batch as a Chrome trace (open it in https://ui.perfetto.dev or chrome://tracing).

Layout: process 1 ("devices") has one thread per device with a slice per op instance, named
``<op> [mb <m>]`` (``[update]`` for update ops), category its phase, args op, micro-batch and phase;
process 2 ("channels") has one thread per used channel with a slice per transfer (args bytes, producer op and
micro-batch, as a step trace's). Times are in microseconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gplace.ir import Cluster, OpGraph
from gplace.ir.graph import PHASES
from gplace.ir.serialize import write_text_atomic
from gplace.pipeline.simulator import PipelineSchedule
from gplace.runtime.trace import check_schedule_of

__all__ = ["write_pipeline_trace"]

_DEVICES, _CHANNELS, _US = 1, 2, 1e6


def write_pipeline_trace(path: str | Path, graph: OpGraph, cluster: Cluster, schedule: PipelineSchedule) -> Path:
    """Write ``schedule`` (from :meth:`PipelineSimulator.simulate`) as Chrome trace JSON; return the path.

    The events are written as they are made (a mini-batch of a large graph has millions of op instances)."""
    if not isinstance(schedule, PipelineSchedule):
        raise TypeError(f"write_pipeline_trace takes a PipelineSchedule (PipelineSimulator.simulate), got "
                        f"{type(schedule).__name__}; write a step's schedule with gplace.runtime.write_chrome_trace")
    check_schedule_of(graph, cluster, schedule)
    other = {"displayTimeUnit": "ms",
             "otherData": {"graph": graph.name, "cluster": cluster.name, "schedule": schedule.schedule,
                           "microbatches": schedule.microbatches, "minibatch_time_s": schedule.minibatch_time,
                           "bubble": dict(zip(cluster.device_names, schedule.bubble.tolist(), strict=True))}}
    return write_text_atomic(path, _document(_events(graph, cluster, schedule), other))


def _document(events: Iterator[dict[str, Any]], other: dict[str, Any]) -> Iterator[str]:
    """The text of ``{"traceEvents": [*events], **other}`` as ``json.dumps`` writes it, one event at a time."""
    yield '{"traceEvents": ['
    for k, event in enumerate(events):
        yield (", " if k else "") + json.dumps(event)
    yield "], " + json.dumps(other)[1:]


def _events(graph: OpGraph, cluster: Cluster, schedule: PipelineSchedule) -> Iterator[dict[str, Any]]:
    """The trace's events: names of processes and device rows, op instances, channel rows, transfers."""
    names, nd = cluster.device_names, cluster.num_devices
    yield _meta("process_name", _DEVICES, 0, "devices")
    yield _meta("process_name", _CHANNELS, 0, "channels")
    yield from (_meta("thread_name", _DEVICES, d, name) for d, name in enumerate(names))
    codes = graph.phase_codes()
    for k, (i, m) in enumerate(zip(schedule.inst_op.tolist(), schedule.inst_microbatch.tolist(), strict=True)):
        phase = PHASES[codes[i]]
        start, end = float(schedule.inst_start[k]), float(schedule.inst_end[k])
        yield {"ph": "X", "name": f"{graph.op_names[i]} [{_label(m)}]", "cat": phase, "pid": _DEVICES,
               "tid": int(schedule.devices[i]), "ts": start * _US, "dur": (end - start) * _US,
               "args": {"op": graph.op_names[i], "microbatch": m, "phase": phase}}
    channels = sorted(set(zip(schedule.transfer_src.tolist(), schedule.transfer_dst.tolist(), strict=True)))
    yield from (_meta("thread_name", _CHANNELS, s * nd + d, f"{names[s]} -> {names[d]}") for s, d in channels)
    for x, k in enumerate(schedule.transfer_inst.tolist()):
        s, d = int(schedule.transfer_src[x]), int(schedule.transfer_dst[x])
        start, end = float(schedule.transfer_start[x]), float(schedule.transfer_end[x])
        m, op = int(schedule.inst_microbatch[k]), graph.op_names[schedule.inst_op[k]]
        yield {"ph": "X", "name": f"{op} -> {names[d]} [{_label(m)}]", "cat": "transfer", "pid": _CHANNELS,
               "tid": s * nd + d, "ts": start * _US, "dur": (end - start) * _US,
               "args": {"bytes": int(schedule.transfer_bytes[x]), "op": op, "microbatch": m}}


def _label(microbatch: int) -> str:
    """``mb <m>``, or ``update`` for an update op's instance (micro-batch -1) and its transfers."""
    return "update" if microbatch < 0 else f"mb {microbatch}"


def _meta(kind: str, pid: int, tid: int, name: str) -> dict[str, Any]:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name}}
