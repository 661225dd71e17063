"""Look at a placement: a per-device summary (written into ``placement.json``) and a drawing of the graph.

:func:`device_summary` simulates the placement (:func:`gplace.runtime.schedule`) and gives, per device, its ops,
compute seconds, peak memory and the bytes it receives and sends (for a pipeline, with the mini-batch's peak
memory, bubble and micro-batches in flight); :func:`draw_placement` draws the graph with each op coloured by its
device (Graphviz's ``dot`` where installed, else matplotlib).
"""

from __future__ import annotations

import logging
import math
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.serialize import atomic_path, write_error

if TYPE_CHECKING:
    from gplace.pipeline import PipelineSchedule

log = logging.getLogger(__name__)

SUMMARY_KEY = "per_device"
"""The ``placement.json`` key holding :func:`device_summary`."""
MODEL_KEY = "summary_model"
"""The ``placement.json`` key naming the runtime whose model the per-device summary and trace come from, where
another measured the step."""
SIM_V1 = "sim-v1"
"""The runtime id of the step-time simulator, the summary's model unless the file names another."""

_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
            "#bab0ac")


def device_summary(graph: OpGraph, cluster: Cluster, placement: Placement,
                   pipeline: PipelineSchedule | None = None) -> dict[str, dict[str, Any]]:
    """Device name -> ``{"ops", "compute_seconds", "peak_memory", "bytes_in", "bytes_out"}`` of one simulated
    step (seconds of compute at the device's speed, bytes). With ``pipeline`` (the placement's simulated
    mini-batch, :meth:`~gplace.pipeline.PipelineSimulator.simulate`), compute, peak memory and bytes are the
    mini-batch's, and each device also has its ``bubble`` (idle fraction) and ``in_flight`` (most micro-batches
    it held at once)."""
    from gplace.runtime import schedule

    timeline = schedule(graph, cluster, placement) if pipeline is None else pipeline
    ops = np.bincount(placement.devices, minlength=cluster.num_devices)
    bytes_in = np.bincount(timeline.transfer_dst, weights=timeline.transfer_bytes, minlength=cluster.num_devices)
    bytes_out = np.bincount(timeline.transfer_src, weights=timeline.transfer_bytes, minlength=cluster.num_devices)
    busy, peak = timeline.busy_time, timeline.peak_memory
    summary = {name: {"ops": int(ops[d]), "compute_seconds": float(busy[d]), "peak_memory": int(peak[d]),
                      "bytes_in": int(bytes_in[d]), "bytes_out": int(bytes_out[d])}
               for d, name in enumerate(cluster.device_names)}
    if pipeline is not None:
        for d, row in enumerate(summary.values()):
            row.update(bubble=float(pipeline.bubble[d]), in_flight=int(pipeline.in_flight[d]))
    return summary


_SUMMARY_NUMBERS = ("ops", "compute_seconds", "peak_memory", "bytes_in", "bytes_out")


def check_shown(doc: Any, where: str, *, with_summary: bool = True) -> None:
    """Raise ``ValueError`` naming the field when a ``placement.json`` document lacks what ``gplace show`` reads:
    ``placement`` (op -> device name, one of ``devices`` where that is given), ``devices`` (names), ``step_time`` (a
    number >= 0 or null) and, if present and ``with_summary``, the per-device summary (device -> numbers >= 0, as
    :func:`device_summary` writes, with as many ops per device as the placement puts there)."""
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    placement = doc.get("placement")
    if not isinstance(placement, dict) or not all(isinstance(d, str) for d in placement.values()):
        raise ValueError(f"{where}: 'placement' must be an object of op name -> device name")
    devices = doc.get("devices", [])
    if not isinstance(devices, list) or not all(isinstance(d, str) for d in devices):
        raise ValueError(f"{where}: 'devices' must be a list of device names")
    unknown = next(((op, d) for op, d in placement.items() if d not in devices), None) if devices else None
    if unknown is not None:
        raise ValueError(f"{where}: op {unknown[0]!r} is placed on {unknown[1]!r}, which is not among its 'devices' "
                         f"{devices}")
    step = doc.get("step_time")
    if step is not None and not (_is_number(step) and step >= 0):
        raise ValueError(f"{where}: 'step_time' must be a number >= 0 or null, got {_shown(step)}")
    stages = doc.get("stages")
    if stages is not None and not (isinstance(stages, dict) and all(isinstance(v, list) for v in stages.values())):
        raise ValueError(f"{where}: 'stages' must be an object of device name -> its ops, got {stages!r}")
    summary = doc.get(SUMMARY_KEY)
    if summary is None or not with_summary:
        return
    if not isinstance(summary, dict):
        raise ValueError(f"{where}: {SUMMARY_KEY!r} must be an object of device -> summary")
    counts = Counter(placement.values())
    for device, row in summary.items():
        wanted = _SUMMARY_NUMBERS + (("bubble", "in_flight") if isinstance(row, dict) and "bubble" in row else ())
        bad = [k for k in wanted if not isinstance(row, dict) or not (_is_number(row.get(k)) and row[k] >= 0)]
        if bad:
            raise ValueError(f"{where}: {SUMMARY_KEY}[{device!r}] needs a number >= 0 for {bad[0]!r}")
        if row["ops"] != counts[device]:
            raise ValueError(f"{where}: {SUMMARY_KEY}[{device!r}] counts {row['ops']} ops, the placement puts "
                             f"{counts[device]} there (the file was changed after it was written): give --graph and "
                             "--cluster to compute its figures again")


def _is_number(value: Any) -> bool:
    """Whether ``value`` is a JSON number a float holds, not NaN (an integer of 400 digits overflows a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return not math.isnan(float(value))
    except OverflowError:
        return False


def _shown(value: Any) -> str:
    """What :func:`_is_number` refused: ``value``'s repr, or the reason for an integer."""
    return "an integer too large for a float" if type(value) is int and not _is_number(value) else repr(value)


def draw_placement(graph: OpGraph, devices: list[str], assignment: dict[str, str], path: str | Path) -> Path:
    """Draw ``graph`` to an image at ``path`` (SVG or PDF where its suffix says so, else PNG), each op coloured by
    its device.

    Args:
        graph: the graph.
        devices: device names, in the cluster's order (each gets a colour).
        assignment: op name -> device name (a placement file's ``"placement"``).
        path: the image to write (at that name, whatever its suffix).

    Raises:
        InvalidPlacementError: ``assignment`` misses an op of ``graph`` or names an unknown device.
    """
    from gplace.ir import InvalidPlacementError

    for op in graph.op_names:
        if assignment.get(op) not in devices:
            raise InvalidPlacementError(f"op {op!r} has no device among {devices} in the placement "
                                        f"({assignment.get(op)!r}); is it for graph {graph.name!r}?")
    colour = {name: _COLOURS[i % len(_COLOURS)] for i, name in enumerate(devices)}
    path = Path(path)
    draw = _draw_dot if shutil.which("dot") else _draw_matplotlib
    try:
        with atomic_path(path) as tmp:  # a full disk or Ctrl-C leaves the earlier image whole, not half a new one
            draw(graph, assignment, colour, tmp, image_format(path))
    except OSError as err:
        raise write_error(path, err) from None
    return path


def _draw_dot(graph: OpGraph, assignment: dict[str, str], colour: dict[str, str], path: Path, fmt: str) -> None:
    lines = ["digraph placement {", "  node [style=filled, shape=box, fontsize=9];"]
    lines += [f'  n{i} [label="{_dot_text(op)}", fillcolor="{colour[assignment[op]]}"];'
              for i, op in enumerate(graph.op_names)]
    lines += [f"  n{u} -> n{v};" for u, v in graph.edge_index.T.tolist()]
    lines.append("}")
    subprocess.run(["dot", f"-T{fmt}", "-o", str(path)], input="\n".join(lines), text=True,
                   check=True)


def _dot_text(text: str) -> str:
    """``text`` inside a DOT double-quoted string, shown as it is: ``\\`` and ``"`` escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _draw_matplotlib(graph: OpGraph, assignment: dict[str, str], colour: dict[str, str], path: Path,
                     fmt: str) -> None:
    """Ops in columns by depth (longest path from a source), edges as lines, a legend of devices."""
    # a bare Figure, not pyplot: the caller's backend (a notebook's inline one) and open figures stay as they were
    from matplotlib import rc_context
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure

    depth = np.zeros(graph.num_ops, dtype=np.int64)
    ptr, src, _ = graph.in_csr
    for v in graph.topological_order.tolist():
        preds = src[ptr[v]:ptr[v + 1]]
        depth[v] = depth[preds].max() + 1 if preds.size else 0
    row = np.zeros(graph.num_ops)
    for d in np.unique(depth):
        members = np.flatnonzero(depth == d)
        row[members] = np.arange(members.size) - members.size / 2
    fig = Figure(figsize=(min(40, 2 + depth.max() * 0.6), min(40, 2 + np.abs(row).max() * 0.8)))
    ax = fig.subplots()
    src, dst = graph.edge_index  # one collection: a Line2D per edge took 202 s to draw 40,000 ops
    segments = np.stack([np.stack([depth[src], row[src]], 1), np.stack([depth[dst], row[dst]], 1)], 1)
    ax.add_collection(LineCollection(segments, colors="#999999", linewidths=0.5, zorder=1))
    handles = []
    for name, c in colour.items():
        ops = [i for i, op in enumerate(graph.op_names) if assignment[op] == name]
        handles.append(ax.scatter(depth[ops], row[ops], color=c, s=40, zorder=2))
    # names drawn as they are: matplotlib read '$...$' in them as math (a graph 'm_$\undefined$' failed to draw)
    ax.set_title(f"{graph.name}: {graph.num_ops} ops by device", parse_math=False)
    # labels given here, not on the artists: matplotlib leaves an artist's label starting with '_' (a device
    # '_gpu1') out of the legend
    for text in ax.legend(handles, list(colour), loc="best", fontsize=8).get_texts():
        text.set_parse_math(False)
    ax.axis("off")
    with rc_context({"svg.hashsalt": "gplace"}):  # SVG ids from a fixed salt, and no date: the same file every run
        # the format given: matplotlib added ".png" to a name without a suffix it knows (and the temporary's ".tmp")
        fig.savefig(path, format=fmt, dpi=100, bbox_inches="tight",
                    metadata={"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(fmt))


def image_format(path: Path) -> str:
    """The image format ``path``'s suffix names (``svg``, ``pdf``, ``png``), else ``png``.

    >>> image_format(Path("a.svg")), image_format(Path("drawing")), image_format(Path("a.txt"))
    ('svg', 'png', 'png')
    """
    suffix = path.suffix.lower().lstrip(".")
    return suffix if suffix in ("svg", "pdf", "png") else "png"
