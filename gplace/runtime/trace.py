"""Write a simulated step as a Chrome trace (open it in https://ui.perfetto.dev or chrome://tracing).

Layout: process 1 ("devices") has one thread per device with a slice per op (name: op name, category: op
type) and a ``memory <device>`` counter per device; process 2 ("channels") has one thread per used channel
``src -> dst`` with a slice per transfer (args: bytes, producer op). Times are in microseconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from gplace.ir import Cluster, OpGraph
from gplace.ir.serialize import write_text_atomic
from gplace.runtime.simulator import Schedule

__all__ = ["check_schedule_of", "write_chrome_trace"]

_DEVICES, _CHANNELS = 1, 2
_US = 1e6


def write_chrome_trace(path: str | Path, graph: OpGraph, cluster: Cluster, schedule: Schedule) -> Path:
    """Write ``schedule`` of ``graph`` on ``cluster`` as Chrome trace JSON.

    Args:
        path: output file; parent folders are created.
        graph: the graph that was scheduled.
        cluster: the cluster it was scheduled on.
        schedule: from :func:`gplace.runtime.schedule` or :meth:`gplace.runtime.Simulator.schedule`.

    Returns:
        The path written.
    """
    if not isinstance(schedule, Schedule):
        raise TypeError(f"write_chrome_trace takes a step's Schedule (Simulator.schedule), got "
                        f"{type(schedule).__name__}; write a pipeline's with gplace.pipeline.write_pipeline_trace")
    check_schedule_of(graph, cluster, schedule)
    events = _metadata(cluster, schedule) + _op_slices(graph, schedule)
    events += _transfer_slices(graph, cluster, schedule) + _memory_counters(cluster, schedule)
    doc = {"traceEvents": events, "displayTimeUnit": "ms",
           "otherData": {"graph": graph.name, "cluster": cluster.name, "step_time_s": schedule.step_time,
                         "model": "sim-v1"}}  # the simulator's schedule, whatever runtime measured the step
    return write_text_atomic(path, json.dumps(doc))


def check_schedule_of(graph: OpGraph, cluster: Cluster, schedule: Any) -> None:
    """Raise ``ValueError`` unless ``schedule`` (a step's or a pipeline's) was made for ``graph`` on ``cluster``."""
    devices = np.asarray(schedule.devices)
    if devices.shape != (graph.num_ops,) or np.asarray(schedule.busy_time).shape != (cluster.num_devices,):
        raise ValueError(f"the schedule places {devices.size} ops on {np.asarray(schedule.busy_time).size} devices, "
                         f"but graph {graph.name!r} has {graph.num_ops} ops and cluster {cluster.name!r} "
                         f"{cluster.num_devices} devices: was it made for another graph or cluster?")


def _channel_tid(cluster: Cluster, src: int, dst: int) -> int:
    return src * cluster.num_devices + dst


def _metadata(cluster: Cluster, schedule: Schedule) -> list[dict[str, Any]]:
    events = [_meta("process_name", _DEVICES, 0, "devices"), _meta("process_name", _CHANNELS, 0, "channels")]
    for d, name in enumerate(cluster.device_names):
        events.append(_meta("thread_name", _DEVICES, d, name))
    channels = sorted(set(zip(schedule.transfer_src.tolist(), schedule.transfer_dst.tolist(), strict=True)))
    names = cluster.device_names
    for s, d in channels:
        events.append(_meta("thread_name", _CHANNELS, _channel_tid(cluster, s, d), f"{names[s]} -> {names[d]}"))
    return events


def _meta(kind: str, pid: int, tid: int, name: str) -> dict[str, Any]:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name}}


def _op_slices(graph: OpGraph, schedule: Schedule) -> list[dict[str, Any]]:
    return [
        {"ph": "X", "name": graph.op_names[i], "cat": graph.op_types[i], "pid": _DEVICES, "tid": d,
         "ts": start * _US, "dur": (end - start) * _US,
         "args": {"op": graph.op_names[i], "index": i, "type": graph.op_types[i]}}
        for i, (d, start, end) in enumerate(
            zip(schedule.devices.tolist(), schedule.op_start.tolist(), schedule.op_end.tolist(), strict=True))
    ]


def _transfer_slices(graph: OpGraph, cluster: Cluster, schedule: Schedule) -> list[dict[str, Any]]:
    rows = zip(schedule.transfer_op.tolist(), schedule.transfer_src.tolist(), schedule.transfer_dst.tolist(),
               schedule.transfer_bytes.tolist(), schedule.transfer_start.tolist(), schedule.transfer_end.tolist(),
               strict=True)
    return [
        {"ph": "X", "name": f"{graph.op_names[p]} -> {cluster.device_names[d]}", "cat": "transfer",
         "pid": _CHANNELS, "tid": _channel_tid(cluster, s, d), "ts": start * _US, "dur": (end - start) * _US,
         "args": {"bytes": nbytes, "op": graph.op_names[p]}}
        for p, s, d, nbytes, start, end in rows
    ]


def _memory_counters(cluster: Cluster, schedule: Schedule) -> list[dict[str, Any]]:
    rows = zip(schedule.memory_time.tolist(), schedule.memory_device.tolist(), schedule.memory_bytes.tolist(),
               strict=True)
    return [
        {"ph": "C", "name": f"memory {cluster.device_names[d]}", "pid": _DEVICES, "ts": t * _US,
         "args": {"bytes": nbytes}}
        for t, d, nbytes in rows
    ]
