"""``place()``: learn a placement for a graph on a cluster, and report it beside single-device baselines."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from gplace.interfaces import Trainer
from gplace.ir import Cluster, OpGraph, Placement, placement_to_dict, save_json
from gplace.loggers import Logger
from gplace.runtime.base import Measurement, Runtime
from gplace.training.trainer import ReinforceTrainer, TrainResult

log = logging.getLogger(__name__)


@dataclass
class PlacementReport:
    """A learned placement, its measurement, and each single-device baseline's."""

    graph: OpGraph
    cluster: Cluster
    placement: Placement
    measurement: Measurement
    baselines: dict[str, Measurement]
    """Device name -> measurement of every op on that device (pinned ops stay on their kind)."""
    train: TrainResult

    @property
    def best_baseline(self) -> float:
        """The fastest single-device step time (``inf`` when all fail)."""
        return min((m.step_time for m in self.baselines.values()), default=float("inf"))

    @property
    def speedup(self) -> float:
        """Best single-device step time over the learned one."""
        return self.best_baseline / self.measurement.step_time


def place(
    graph: OpGraph, cluster: Cluster, *, encoder: torch.nn.Module | None = None,
    policy: torch.nn.Module | Callable[..., torch.nn.Module] | None = None, runtime: Runtime | None = None,
    trainer: Trainer | None = None, max_groups: int = 256, run_dir: str | Path | None = None,
    logger: Logger | None = None, warm_start: Placement | None = None,
) -> PlacementReport:
    """Learn a placement of ``graph`` on ``cluster`` (defaults: the paper's LSTM policy, the simulator).

    Args:
        graph: the op graph.
        cluster: the devices.
        encoder: group encoder (default: :class:`~gplace.encoders.LSTMEncoder`).
        policy: a policy module, or a factory called with ``num_devices`` (default: the seq2seq policy).
        runtime: measures placements (default: :class:`~gplace.runtime.Simulator`).
        trainer: the search, any :class:`~gplace.interfaces.Trainer` (default:
            :class:`~gplace.training.ReinforceTrainer`; or a :class:`~gplace.training.PPOTrainer`).
        max_groups: coarsen the graph to at most this many groups (default: 256).
        run_dir: where metrics, checkpoints, ``placement.json`` and ``trace.json`` go; resumes from it.
        logger: metrics logger (default: none beyond ``run_dir/metrics.jsonl``).
        warm_start: a placement to start the search from (e.g. the best baseline's; see
            :meth:`~gplace.training.ReinforceTrainer.fit`).
    """
    from gplace.encoders import LSTMEncoder
    from gplace.placer import PolicyPlacer
    from gplace.policies import Seq2SeqPolicy
    from gplace.runtime import Simulator

    runtime = runtime or Simulator()
    runtime.check_cluster(cluster)  # a cluster this machine cannot run fails here, once
    trainer = trainer or ReinforceTrainer()
    encoder = encoder or LSTMEncoder()
    policy = policy or Seq2SeqPolicy
    if not isinstance(policy, torch.nn.Module):
        policy = policy(num_devices=cluster.num_devices)
    placer = PolicyPlacer(graph, cluster, encoder, policy, max_groups=max_groups)
    log.info("placing %s (%d ops, %d groups) on %s", graph.name, graph.num_ops, placer.num_groups, cluster.name)

    baselines = single_device_baselines(graph, cluster, runtime)
    result = trainer.fit(placer, runtime, graph, cluster, run_dir=run_dir, logger=logger, warm_start=warm_start)
    report = PlacementReport(graph, cluster, result.best_placement, result.best_measurement, baselines, result)
    if run_dir is not None:
        write_report(report, run_dir)
    return report


def single_device_baselines(graph: OpGraph, cluster: Cluster, runtime: Runtime) -> dict[str, Measurement]:
    """Measure every op on one device, for each device (ops pinned elsewhere stay on their kind)."""
    from gplace.baselines import SingleDevice

    out = {}
    for i, name in enumerate(cluster.device_names):
        placement = SingleDevice(device=i).place(graph, cluster)
        out[name] = runtime.measure(graph, cluster, placement)
    return out


def write_report(report: PlacementReport, run_dir: str | Path) -> None:
    """Write ``placement.json`` (the versioned placement format) and ``trace.json`` (Chrome trace)."""
    from gplace.pipeline.stages import placement_extras
    from gplace.runtime import schedule, write_chrome_trace

    run_dir = Path(run_dir)
    extra = {"runtime": report.measurement.runtime, "samples": report.train.samples,
             "search_seconds": report.train.seconds,
             "failed_baselines": {k: m.reason for k, m in report.baselines.items() if not m.ok}}
    extra.update(placement_extras(report.graph, report.cluster, report.placement))
    doc = placement_to_dict(report.placement, report.graph, report.cluster, step_time=report.measurement.step_time,
                            baselines={k: m.step_time for k, m in report.baselines.items()}, extra=extra)
    save_json(doc, run_dir / "placement.json")
    write_chrome_trace(run_dir / "trace.json", report.graph, report.cluster,
                       schedule(report.graph, report.cluster, report.placement))
