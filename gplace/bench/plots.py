"""PNG plots for bench results: a learning curve and a per-device timeline (matplotlib, imported lazily)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.serialize import atomic_path


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None, **kwargs):
    """``(figure, axes)`` as ``pyplot.subplots`` gives them, on a bare :class:`matplotlib.figure.Figure`: neither the
    caller's backend nor pyplot's open figures are touched (``matplotlib.use("Agg")`` switched a notebook's inline
    backend for the rest of its session); ``Figure.savefig`` renders with Agg by itself, and nothing needs closing."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kwargs)


def save_png(fig, path: str | Path, dpi: int) -> Path:
    """``fig`` written to ``path`` as a PNG, atomically (:func:`~gplace.ir.serialize.atomic_path`): a killed bench
    leaves the plot before whole, and a symbolic link at ``path`` is replaced, never written through."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)  # the format given: the temporary's suffix is ".tmp"
    return Path(path)


def plot_learning_curve(history: Sequence[Mapping[str, float]], path: str | Path, *, title: str = "",
                        baseline: float | None = None) -> Path:
    """Best and batch-mean step time (ms) per update; ``baseline`` (s) as a dashed line (:func:`learning_curve`)."""
    return save_png(learning_curve(history, title=title, baseline=baseline), path, dpi=110)


def learning_curve(history: Sequence[Mapping[str, float]], *, title: str = "", baseline: float | None = None):
    """The :class:`~matplotlib.figure.Figure` of :func:`plot_learning_curve`: the batch mean is over the samples that
    ran, and an update whose samples all failed (no mean: the line broke there unmarked) is an ``x`` at the top."""
    from matplotlib.ticker import MaxNLocator

    fig, ax = subplots(figsize=(6, 3.5))
    updates = np.array([h["update"] for h in history])
    best = np.array([h["charts/best_step_time"] for h in history]) * 1e3
    mean = np.array([h["rollout/mean_step_time"] for h in history]) * 1e3
    ax.plot(updates, best, label="best so far")
    ax.plot(updates, mean, alpha=0.5, label="batch mean (samples that ran)")
    if baseline is not None and np.isfinite(baseline):
        ax.axhline(baseline * 1e3, ls="--", color="gray", label="best baseline")
    failed = ~np.isfinite(mean)
    if failed.any():
        ax.plot(updates[failed], np.full(failed.sum(), 1.0), "x", color="C3", transform=ax.get_xaxis_transform(),
                clip_on=False, label="every sample failed")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="update", ylabel="step time (ms)", title=title)
    ax.legend()
    fig.tight_layout()
    return fig


def plot_timeline(graph: OpGraph, cluster: Cluster, placement: Placement, path: str | Path, *,
                  title: str = "") -> Path:
    """One row per device: each op as a bar from its simulated (``sim-v1``) start to end, edged so that ops back to
    back stay apart (on devices of at most 100 ops: more, and white edges washed the bars out)."""
    from gplace.runtime import schedule

    sched = schedule(graph, cluster, placement)
    fig, ax = subplots(figsize=(8, 0.5 + 0.45 * cluster.num_devices))
    for d in range(cluster.num_devices):
        ops = np.flatnonzero(sched.devices == d)
        spans = [(sched.op_start[i] * 1e3, (sched.op_end[i] - sched.op_start[i]) * 1e3) for i in ops]
        edge = 0.5 if len(ops) <= 100 else 0.0  # ops apart, where they are wide enough for the edges to leave colour
        ax.broken_barh(spans, (d - 0.4, 0.8), facecolors=f"C{d % 10}", edgecolor="white", linewidth=edge)
    ax.set(yticks=range(cluster.num_devices), yticklabels=cluster.device_names, xlabel="time (ms, sim-v1)",
           title=title or f"{graph.name}: {sched.step_time * 1e3:.2f} ms")
    ax.invert_yaxis()
    fig.tight_layout()
    return save_png(fig, path, dpi=110)
