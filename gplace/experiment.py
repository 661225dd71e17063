"""``place()``: learn a placement for a graph on a cluster, and report it beside single-device baselines."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gplace.baselines._common import PlacementInfeasibleError
from gplace.defaults import MAX_GROUPS, SAMPLES
from gplace.interfaces import Placer, Trainer
from gplace.ir import Cluster, OpGraph, Placement, placement_to_dict, save_json
from gplace.ir.errors import format_bytes, format_seconds, is_finite, short_repr
from gplace.ir.placement import check_graph_and_cluster, check_has_ops
from gplace.ir.serialize import as_path
from gplace.loggers import HeldOpen, Logger, check_logger, close_as_failed
from gplace.methods import LEARNED, Budget, check_method, make_learner, make_placer, policy_file, unused_budget
from gplace.run_dir import claim_run_dir, keep_previous, previous_name
from gplace.runtime.base import Measurement, Runtime, check_runtime, time_ratio
from gplace.search_result import TrainResult
from gplace.torch_modes import float32_default, forked_rng

if TYPE_CHECKING:
    from torch.nn import Module
else:
    Module = Any  # annotations that resolve without torch (typing.get_type_hints, validators)

log = logging.getLogger(__name__)

_UNBOUNDED_UPDATES = 10**9
"""Updates of a search bounded by seconds only."""


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
    method: str = ""
    """What placed it: :func:`place`'s ``method`` (a name, a policy file's path, a placer's class name)."""

    def __repr__(self) -> str:
        """A summary: the graph and cluster by name (the graph's own repr is long), the result in figures."""
        return (f"PlacementReport(graph={self.graph.name!r}, cluster={self.cluster.name!r}, method={self.method!r}, "
                f"step_time={self.measurement.step_time:.6g}, speedup={self.speedup:.3g}, "
                f"samples={self.train.samples})")

    @property
    def best_baseline(self) -> float:
        """The fastest single-device step time (``inf`` when all fail)."""
        return min((m.step_time for m in self.baselines.values()), default=float("inf"))

    @property
    def speedup(self) -> float:
        """Best single-device step time over the learned one (1 where both are 0: a graph with no work)."""
        return time_ratio(self.best_baseline, self.measurement.step_time)


def place(
    graph: OpGraph, cluster: Cluster, *, method: str | Path | Placer = "learned",
    budget: float | str | Budget | None = None,
    seed: int | None = None, encoder: Module | None = None,
    policy: Module | Callable[..., Module] | None = None, runtime: Runtime | None = None,
    trainer: Trainer | None = None, max_groups: int = MAX_GROUPS, run_dir: str | Path | None = None,
    logger: Logger | None = None, warm_start: Placement | str | Placer | None = None, split_groups: bool = False,
    refine: float = 0.0,
) -> PlacementReport:
    """Place ``graph`` on ``cluster``: by default, learn a placement (the paper's LSTM policy, the simulator).

    One call for compilers: ``place(graph, cluster, method="heft")``, ``method="pretrained", budget="64
    samples"``, or ``method="learned", budget=30, seed=0, warm_start="heft"``. The placement is
    ``report.placement``; it is deterministic for a seed on the simulator (networks given as ``encoder`` and
    ``policy`` start from their weights as they are: see ``encoder``).

    Args:
        graph: the op graph.
        cluster: the devices.
        method: ``"learned"`` (train a policy on this graph; or a learned method by its policy's name,
            ``"gdp"``, ``"list_scheduling"``, ...), a baseline name (``"heft"``, ``"m_etf"``,
            ``"metis"``, ...), a pipeline placer's (``"ideal_dp"``, ``"local_search"``, ...; with a pipeline
            ``runtime``), a :class:`~gplace.interfaces.Placer` of one's own, ``"pretrained"`` (the policy file
            shipped with gplace) or a policy file's path;
            see :mod:`gplace.methods` (default: ``"learned"``). A learned search's or a policy file's placement
            is never slower than every op on one device (the baselines measured in this call); a baseline's or
            pipeline placer's is its own.
        budget: seconds (``30``, ``"30s"``) or samples (``"500 samples"``) the search may use; for a policy file,
            samples to draw beside the greedy placement (``"0 samples"``: the greedy one alone), never seconds;
            for ``"ilp"``, seconds for HiGHS (default: the trainer's own settings; 16 samples; the ILP's 10 s).
        seed: seeds the initial weights of the networks built here, the search and random baselines (default:
            the trainer's seed, so a call gives the same placement in every process).
        encoder: group encoder (default: ``method``'s, for ``"learned"`` :class:`~gplace.encoders.LSTMEncoder`).
            The networks run where it is: ``encoder=LSTMEncoder().to("cuda")`` trains on a GPU (a policy module
            must be on the same device). Modules given are trained in place, as torch trains a module: afterwards
            they hold the search's weights (the way to keep them), so a second call with the same modules starts
            from those, not from the first call's (one pretrained pair fine-tuned on graph after graph leaks each
            graph's tuning into the next; pass ``copy.deepcopy(encoder)`` and the policy's copy to start each call
            from the same weights, as :func:`gplace.training.finetune` does). Give both ``encoder`` and
            ``policy``, or neither, except with ``method="learned"``, which pairs one given with the other's
            default.
        policy: a policy module, or a factory called with ``num_devices`` (default: ``method``'s, for
            ``"learned"`` the seq2seq policy).
        runtime: measures placements (default: :class:`~gplace.runtime.Simulator`).
        trainer: the search, any :class:`~gplace.interfaces.Trainer` (default:
            :class:`~gplace.training.ReinforceTrainer`; or a :class:`~gplace.training.PPOTrainer`).
        max_groups: coarsen the graph to at most this many groups, for a learned search (default: 256); a policy
            file groups as its file records (its ``meta``), and baselines and pipeline placers place single ops.
        run_dir: where metrics, checkpoints, ``placement.json`` and ``trace.json`` go; resumes from it. One
            process (one thread) at a time, and one graph: see :func:`gplace.run_dir.claim_run_dir`.
        logger: metrics logger (default: none beyond ``run_dir/metrics.jsonl``). It gets the run's config (graph,
            cluster, method, seed, budget, runtime, the search's settings), a search's scalars and, where it has a
            ``log_results`` (:class:`~gplace.loggers.JsonlLogger`, :class:`~gplace.loggers.WandbLogger`), the
            results (:func:`report_results`), the config with the first of them (a call that fails before it logs
            anything sends none, so it opens no W&B run); once the arguments are checked, it is finished when the
            call ends (marked failed if it raised). The trainer gets it wrapped (:class:`~gplace.loggers.HeldOpen`,
            which forwards the logger's other attributes), so that results logged after the search reach the same
            run.
        warm_start: a placement to start the search from, a baseline's or pipeline placer's name (e.g.
            ``"heft"``, ``"ideal_dp"``; a placer that searches, such as ``"local_search"``, gets the same
            ``budget``, before the learned search's) or a :class:`~gplace.interfaces.Placer`; see
            :meth:`~gplace.training.ReinforceTrainer.fit`. The
            result is never slower than it, nor than every op on one device (the baselines measured in this call).
        split_groups: with a ``warm_start``, split the groups it spreads over several devices, so that the
            policy starts exactly at it (see :class:`~gplace.placer.PolicyPlacer`'s ``express``). Off by default:
            on the paper's graphs as first costed, HEFT's projection onto the default groups was faster than HEFT
            itself and searches from it ended faster; re-measured on the corrected costs, splitting ended faster on
            the two cases re-run (``benchmarks/warm_start.md``) (default: False).
        refine: seconds of :class:`~gplace.baselines.pipeline.PipelineLocalSearch` descent from the placement
            found (a learned search's, a policy file's or a placer's), for a ``runtime`` that measures a pipelined
            mini-batch by pipe-v3 (a :class:`~gplace.pipeline.PipelineSimulator`, or a cache or pool around one;
            ``objective=pipeline`` on the command line), whose micro-batches and schedule it takes; the descent's
            placement is returned where it measures faster (it never measures slower): no sample found it
            (``report.train.best_sample`` is ``None``, ``report.train.refined_from`` the step time it started from;
            ``report.train.seconds`` counts the descent, ``samples`` not its measurements). A learned search's
            policy does not learn from it. 0: no descent (default: 0).

    Raises:
        GraphError: the graph has no ops (a :class:`ValueError`).
        PlacementInfeasibleError: no placement the search or placer measured succeeded (every one out of memory,
            say); a :class:`ValueError`.
        ValueError: an unknown method or baseline, a malformed budget, a pipeline placer for a runtime that
            measures no micro-batches, or a learned search's settings (``warm_start``, ``split_groups``,
            ``trainer``, ``encoder``, ``policy``) or a policy file's budget in seconds for a method that does not
            train; a ``refine`` below 0 or not finite, or one for a runtime that is not a pipeline simulator.
        RunDirConflictError: ``run_dir`` belongs to another run: another graph or cluster, or (its subclass
            ``RunDirInUseError``) another process running there (a :class:`ValueError`;
            :mod:`gplace.run_dir`).
        FileNotFoundError: ``method`` is a path with no file.
        TypeError: ``graph`` or ``cluster`` is not gplace's (an ONNX model, say: import it first), ``seed`` is
            not an int, ``runtime`` not a Runtime, ``trainer`` not a Trainer, ``warm_start`` neither a Placement
            nor a name nor a Placer, or ``refine`` not a number.
    """
    from gplace.runtime import Simulator

    check_graph_and_cluster(graph, cluster)
    check_has_ops(graph)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)):
        raise TypeError(f"seed must be an int or None, got {seed!r}")
    if seed is not None and not 0 <= seed < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    seed = None if seed is None else int(seed)  # torch's manual_seed, the placers and the run's JSON take no np.int64
    check_method(method)
    check_runtime(runtime)
    if trainer is not None and (isinstance(trainer, type) or not isinstance(trainer, Trainer)):
        raise TypeError(f"trainer must be a gplace Trainer (e.g. gplace.training.PPOTrainer()), got {trainer!r}")
    check_logger(logger)
    if warm_start is not None and not isinstance(warm_start, Placement | str | Placer):
        raise TypeError(f"warm_start must be a Placement (e.g. Placement.for_graph(graph, devices)), a placer's "
                        f"name or a Placer, got {type(warm_start).__name__}")
    if not isinstance(split_groups, bool):
        raise TypeError(f"split_groups must be a bool, got {split_groups!r}")
    _check_method_settings(method, budget, warm_start=warm_start, split_groups=split_groups, trainer=trainer,
                        encoder=encoder, policy=policy)
    if split_groups and warm_start is None:
        raise ValueError("split_groups=True splits groups to express a warm_start: give one (e.g. warm_start='heft')")
    refine = _check_refine(refine, runtime)  # refused before the run directory is claimed
    run_dir = None if run_dir is None else as_path(run_dir, "place: run_dir")
    with contextlib.nullcontext() if run_dir is None else claim_run_dir(run_dir, graph, cluster):  # one run a dir
        runtime = Simulator() if runtime is None else runtime
        runtime.check_cluster(cluster)  # a cluster this machine cannot run fails here, once
        runtime.check_graph(graph)  # so does a graph without the program a real runtime runs
        budget = None if budget is None else Budget.parse(budget)
        learned = _learned(method)
        trainer = _budgeted(trainer, budget, seed) if learned else None
        config = _run_config(graph, cluster, method, budget, seed, runtime, trainer, max_groups, warm_start, refine)
        with _logged(logger, config) as logger:
            if isinstance(warm_start, str):
                warm_start = _warm_start_placer(warm_start, seed or 0, runtime, budget)
            if isinstance(warm_start, Placer):
                warm_start = warm_start.place(graph, cluster)
            path = None if learned else policy_file(method)
            placer = method if isinstance(method, Placer) else \
                None if learned or path else make_placer(str(method), seed or 0, runtime, budget)
            baselines = single_device_baselines(graph, cluster, runtime)
            if learned:  # torch is imported here: a baseline's placement needs none of it
                from gplace.training.trainer import ReinforceTrainer, autograd_on

                # the initial weights of the networks built here: the same in every process (torch's own seed is not)
                with _seeded_torch(seed if seed is not None else getattr(trainer, "seed", ReinforceTrainer.seed)), \
                        autograd_on(who="place"):  # weights autograd can train, whatever the caller's mode
                    encoder, policy = _networks(str(method), cluster, encoder, policy)
                result = _learned_result(graph, cluster, encoder, policy, runtime, trainer, max_groups, run_dir,
                                         logger, warm_start, split_groups, baselines)
            else:
                if path is None:
                    result = _place_once(graph, cluster, placer, path, runtime, budget, seed or 0)
                else:  # a policy's search, as the learned ones: never behind a placement measured here
                    result = _ran_or_failed(lambda: _place_once(graph, cluster, placer, path, runtime, budget,
                                                                seed or 0), graph, cluster, runtime, baselines,
                                            learned=False)
                    result = _searched(result, baselines, graph, cluster, runtime)
            if refine:
                result = _refined(result, graph, cluster, runtime, refine)
            report = PlacementReport(graph, cluster, result.best_placement, result.best_measurement, baselines,
                                     result, _method_name(method))
            if run_dir is not None:
                write_report(report, run_dir, runtime)
            if logger is not None and logger.keeps_results:
                logger.log_results(*report_results(report, runtime, run_dir))
        return report


def _learned_result(graph: OpGraph, cluster: Cluster, encoder: Module, policy: Module,
                    runtime: Runtime, trainer: Trainer, max_groups: int, run_dir: str | Path | None,
                    logger: Logger | None, warm_start: Placement | None, split_groups: bool,
                    baselines: dict[str, Measurement]) -> TrainResult:
    """The learned search's result as reported (:func:`_searched`): the fastest single-device placement where the
    search measured none that ran (none of them ran either: :class:`PlacementInfeasibleError`)."""
    result = _ran_or_failed(lambda: _learn(graph, cluster, encoder, policy, runtime, trainer, max_groups, run_dir,
                                           logger, warm_start, split_groups), graph, cluster, runtime, baselines)
    result = _no_worse_than(result, warm_start, graph, cluster, runtime)
    return _searched(result, baselines, graph, cluster, runtime)


def _ran_or_failed(search: Callable[[], TrainResult], graph: OpGraph, cluster: Cluster, runtime: Runtime,
                   baselines: dict[str, Measurement], learned: bool = True) -> TrainResult:
    """``search()``'s result; where it measured no placement that ran, a failed result (its samples, seconds and
    history where it kept them) that :func:`_searched` replaces by the fastest single-device placement, unless
    none of those ran either (:class:`PlacementInfeasibleError`)."""
    try:
        return search()
    except PlacementInfeasibleError as err:
        done = getattr(err, "result", None)  # what the search did (its samples), where it kept it
        if not any(m.ok for m in baselines.values()):
            from gplace.training import NothingFitError

            message = f"{err}; {_why_nothing_ran(graph, cluster, runtime, baselines, learned)}"
            raise (PlacementInfeasibleError(message) if done is None else NothingFitError(message, done)) from None
        log.warning("the search measured no placement that ran; returning the fastest single-device one")
        failed = done or TrainResult(Placement.for_graph(graph, np.zeros(graph.num_ops, np.int64)),
                                     Measurement.failure("search", "no placement of the search fits"), 0, 0.0)
        return dataclasses.replace(failed, found_at=-math.inf)  # no sample found what _searched puts in its place


@contextlib.contextmanager
def _logged(logger: Logger | None, config: dict[str, Any]) -> Iterator[HeldOpen | None]:
    """``logger`` given ``config`` and held open for the block (a search finishes its logger, and the results
    come after it), then finished; its run marked failed (exit code 1) when the block raises."""
    if logger is None:
        yield None
        return
    held = HeldOpen(logger)
    try:
        held.log_config(config)  # held back until the search logs: a search refused opens no W&B run
        yield held
    except BaseException:
        close_as_failed(held)
        raise
    held.close(failed=False)


def _run_config(graph: OpGraph, cluster: Cluster, method: str | Path | Placer, budget: Budget | None,
                seed: int | None, runtime: Runtime, trainer: Trainer | None, max_groups: int,
                warm_start: Placement | str | Placer | None, refine: float = 0.0) -> dict[str, Any]:
    """What :func:`place` logs as its run's config: the graph, cluster, method, seed, budget, runtime and
    refinement seconds, and a learned search's grouping, warm start and trainer settings."""
    config = {"graph": graph.name, "graph_ops": graph.num_ops, "cluster": cluster.name,
              "devices": list(cluster.device_names), "method": _method_name(method), "seed": seed,
              "budget": None if budget is None else dataclasses.asdict(budget), "runtime": runtime.id,
              "refine": refine}
    if trainer is None:
        return config
    fields = dataclasses.fields(trainer) if dataclasses.is_dataclass(trainer) else ()
    settings = {f.name: getattr(trainer, f.name) for f in fields}
    settings = {k: v if isinstance(v, bool | int | float | str | None) else str(v) for k, v in settings.items()}
    given = warm_start if isinstance(warm_start, str | None) else type(warm_start).__name__
    config.update(max_groups=max_groups, warm_start=given, trainer={"name": type(trainer).__name__, **settings})
    return config


def report_results(report: PlacementReport, runtime: Runtime, run_dir: str | Path | None = None,
                   ) -> tuple[dict[str, float], list[dict[str, Any]], dict[str, Path]]:
    """What a logger's ``log_results`` keeps of a placement: the final figures (``step_time``, ``speedup``,
    ``best_single_device``, ..., each device's from ``run_dir``'s ``placement.json``), a table of placements (each
    single device, HEFT and ``report``'s, with its step time and ``report``'s speed-up over it) and ``run_dir``'s
    files (``placement``, ``trace``)."""
    from gplace.methods import make_baseline

    placed = report.measurement.step_time
    times = {f"single {name}": m.step_time if m.ok else math.inf for name, m in report.baselines.items()}
    try:
        heft = runtime.measure(report.graph, report.cluster, make_baseline("heft").place(report.graph, report.cluster))
        times["heft"] = heft.step_time if heft.ok else math.inf
    except ValueError as err:  # HEFT found no placement that fits memory
        log.info("heft: %s", err)
    times["learned" if _learned(report.method) else report.method] = placed
    rows = [{"placement": name, "step_time": t if math.isfinite(t) else None,
             "learned_speedup": time_ratio(t, placed) if math.isfinite(t) else None} for name, t in times.items()]
    summary = {"step_time": placed, "best_single_device": report.best_baseline, "speedup": report.speedup,
               "heft_step_time": times.get("heft", math.inf), "samples": report.train.samples,
               "best_sample": report.train.best_sample or math.nan, "search_seconds": report.train.seconds,
               "refined_from": math.nan if report.train.refined_from is None else report.train.refined_from}
    if run_dir is None:
        return summary, rows, {}
    run_dir = Path(run_dir)
    summary.update(_device_figures(run_dir / "placement.json"))
    return summary, rows, {"placement": run_dir / "placement.json", "trace": run_dir / "trace.json"}


def _device_figures(path: Path) -> dict[str, float]:
    """Each device's peak memory and, for a pipelined mini-batch, its bubble and micro-batches in flight, from
    ``placement.json``'s per-device summary, as ``peak_memory/GPU:0``, ``bubble/GPU:0``, ``in_flight/GPU:0`` (the
    device names without their leading ``/``, or whole where that would give two devices one key); none where that
    summary is a model's (``summary_model``) rather than the measuring runtime's own figures."""
    from gplace.ir import load_json
    from gplace.show import MODEL_KEY, SUMMARY_KEY

    doc = load_json(path) if path.is_file() else {}
    if doc.get(MODEL_KEY):
        return {}
    rows = doc.get(SUMMARY_KEY) or {}
    short = {device: device.lstrip("/") or device for device in rows}
    names = short if len(set(short.values())) == len(short) else {device: device for device in rows}
    return {f"{key}/{names[device]}": row[key]
            for device, row in rows.items() for key in ("peak_memory", "bubble", "in_flight") if key in row}


def _method_name(method: str | Path | Placer) -> str:
    """``method`` as :class:`PlacementReport` records it: a placer by its class name."""
    return type(method).__name__ if isinstance(method, Placer) else str(method)


def _learned(method: str | Path | Placer) -> bool:
    """Whether ``method`` trains a policy on the graph (a name of :data:`~gplace.methods.LEARNED`)."""
    return isinstance(method, str) and method in LEARNED


def _warm_start_placer(name: str, seed: int, runtime: Runtime, budget: Budget | None) -> Placer:
    """The placer ``warm_start=name`` names; a refusal says it is the warm start's (it named the method)."""
    try:
        return make_placer(name, seed, runtime, budget, role="placer")
    except ValueError as err:
        raise ValueError(f"warm_start={name!r}: {err}") from None


def _check_method_settings(method: str | Path, budget: float | str | Budget | None, **learned: Any) -> None:
    """Refuse what ``method`` would silently ignore or cannot do: a search's settings for a method that does not
    train, a seconds budget for a policy file (which draws a count of samples), 0 samples for a search."""
    given = [name for name, value in learned.items() if value not in (None, False)]
    if given and not _learned(method):
        verb = "applies" if len(given) == 1 else "apply"
        raise ValueError(f"{', '.join(given)} only {verb} to a learned search (method='learned', 'gdp', ...); "
                         f"method {str(method)!r} does not train")
    networks = [name for name in ("encoder", "policy") if name in given]
    if method != "learned" and len(networks) == 1:  # the other was the paper's, not the method's: a mismatch
        other = "policy" if networks == ["encoder"] else "encoder"
        raise ValueError(f"method {method!r} builds its own encoder and policy: give the {other} too, or neither, "
                         f"or method='learned' (which pairs your {networks[0]} with the paper's {other})")
    if budget is None:
        return
    parsed = Budget.parse(budget)
    if unused := unused_budget(method, parsed):  # as the command line warns
        log.warning("budget=%r is unused: %s", budget, unused)
    samples = parsed.samples
    if policy_file(method) is not None and samples is None:
        raise ValueError(f"budget={budget!r}: a policy file's budget is a count of samples ('64 samples'), "
                         "not seconds")
    if policy_file(method) is None and samples == 0:
        raise ValueError(f"budget={budget!r}: a search measures at least one sample (0 samples is for a policy "
                         "file: its greedy placement alone)")


@contextlib.contextmanager
def _seeded_torch(seed: int) -> Iterator[None]:
    """torch's global generators seeded with ``seed`` for the block and given back as they were after it (the
    caller's random state is kept), one block at a time in the process: threads building networks never draw from
    each other's seed. The CPU generator, and the CUDA ones where CUDA is initialized or torch's default device is
    a GPU (``torch.set_default_device("cuda")``: the networks' weights are drawn there, from a generator that
    otherwise starts at torch's fixed seed whatever ``seed``); others are not touched. The default dtype is float32
    in the block (:func:`~gplace.torch_modes.float32_default`): the networks are float32 whatever the host's
    default."""
    import torch

    on_gpu = torch.cuda.is_initialized() or torch.get_default_device().type == "cuda"
    cuda = list(range(torch.cuda.device_count())) if on_gpu else []
    with forked_rng(seed, cuda), float32_default():
        yield


def _networks(method: str, cluster: Cluster, encoder: Module | None,
              policy: Module | Callable[..., Module] | None) -> tuple[Module, Any]:
    """The search's encoder and policy: those given, else ``method``'s (:func:`gplace.methods.make_learner`) or the
    LSTM encoder and seq2seq policy; a policy class or factory is sized for the cluster and the encoder."""
    import torch

    from gplace.encoders import LSTMEncoder
    from gplace.placer import module_device
    from gplace.policies import Seq2SeqPolicy

    if method != "learned" and encoder is None and policy is None:
        return make_learner(method, cluster.num_devices)
    encoder = LSTMEncoder() if encoder is None else encoder  # `or` swapped in LSTMEncoder for an encoder
    policy = Seq2SeqPolicy if policy is None else policy  # that is falsy (an empty nn.Sequential's len is 0)
    if not isinstance(policy, torch.nn.Module):  # a class or factory: sized for the cluster and the encoder
        sizes = {"num_devices": cluster.num_devices}
        if hasattr(encoder, "hidden_size") and "state_size" in inspect.signature(policy).parameters:
            sizes["state_size"] = encoder.hidden_size  # an encoder's states are hidden_size wide
        policy = policy(**sizes).to(module_device(encoder=encoder))
    return encoder, policy


def _learn(graph: OpGraph, cluster: Cluster, encoder: Module, policy: Module, runtime: Runtime,
           trainer: Trainer, max_groups: int, run_dir: str | Path | None, logger: Logger | None,
           warm_start: Placement | None, split_groups: bool) -> TrainResult:
    """Train a policy on ``graph`` (the paper's search); its best placement."""
    from gplace.placer import PolicyPlacer, merge_for
    from gplace.training.trainer import autograd_on

    with autograd_on(who="place"):  # the placer's buffers usable by autograd, whatever the caller's mode
        placer = PolicyPlacer(graph, cluster, encoder, policy, max_groups=max_groups,
                              express=warm_start if split_groups else None, merge_consumers=merge_for(runtime))
        log.info("placing %s (%d ops, %d group%s) on %s", graph.name, graph.num_ops, placer.num_groups,
                 "" if placer.num_groups == 1 else "s", cluster.name)
        result = trainer.fit(placer, runtime, graph, cluster, run_dir=run_dir, logger=logger, warm_start=warm_start)
    return _checked_result(result, trainer, graph, cluster, runtime)


def _checked_result(result: Any, trainer: Trainer, graph: OpGraph, cluster: Cluster, runtime: Runtime) -> TrainResult:
    """``trainer``'s result, checked (a trainer of one's own may return anything): a ``TrainResult`` whose best
    placement fits ``graph`` and ``cluster`` and, on a deterministic runtime, takes the step time it reports (else
    the time measured now is reported, with a warning).

    Raises:
        TypeError: not a ``TrainResult``, or its placement or measurement of another type; names the trainer.
        InvalidPlacementError: its best placement does not fit the graph or cluster; names the trainer.
    """
    from gplace.ir import InvalidPlacementError

    name = type(trainer).__name__
    if not isinstance(result, TrainResult):
        raise TypeError(f"trainer {name}'s fit returned a {type(result).__name__}, not a gplace.training.TrainResult")
    for field, kind in (("best_placement", Placement), ("best_measurement", Measurement)):
        if not isinstance(getattr(result, field), kind):
            raise TypeError(f"trainer {name}'s result: {field} is a {type(getattr(result, field)).__name__}, "
                            f"not a {kind.__name__}")
    try:
        result.best_placement.validate(graph, cluster)
    except InvalidPlacementError as err:
        raise InvalidPlacementError(f"trainer {name}'s best placement: {err}") from None
    if not (runtime.deterministic and result.best_measurement.ok):
        return result
    again = runtime.measure(graph, cluster, result.best_placement)
    if again.step_time == result.best_measurement.step_time:
        return result
    log.warning("trainer %s reported %.6g s for its best placement; %s measures %.6g s: reporting that", name,
                result.best_measurement.step_time, runtime.id, again.step_time)
    return dataclasses.replace(result, best_measurement=again)


def _no_worse_than(result: TrainResult, placement: Placement | None, graph: OpGraph, cluster: Cluster,
                   runtime: Runtime) -> TrainResult:
    """``result``, or ``placement`` in its place where that measures faster: a warm start (the search groups ops,
    so it may not reach it exactly), or ``refine``'s descent."""
    if placement is None:
        return result
    m = runtime.measure(graph, cluster, placement)
    if not (m.ok and m.step_time < result.best_measurement.step_time):
        return result
    return dataclasses.replace(result, best_placement=placement, best_measurement=m, found_at=None)


def _check_refine(refine: object, runtime: Runtime | None) -> float:
    """``refine`` as seconds (a finite number >= 0), for a ``runtime`` that measures pipe-v3 where it is not 0 (a
    ``runtime`` of ``None`` is :func:`place`'s default, sim-v1)."""
    from gplace.pipeline import PipelineSimulator
    from gplace.runtime.wrapper import innermost

    if isinstance(refine, bool) or not isinstance(refine, int | float | np.integer | np.floating):
        raise TypeError(f"refine must be seconds (a number >= 0; 0: no descent), got {refine!r}")
    if not (is_finite(refine) and refine >= 0):  # 10**400 overflowed math.isfinite
        raise ValueError(f"refine must be seconds, a finite number >= 0 (0: no descent), got {short_repr(refine)}")
    if refine and not isinstance(innermost(runtime), PipelineSimulator):
        given = "sim-v1 (the default)" if runtime is None else repr(runtime.id)
        raise ValueError(f"refine={refine:g} descends on pipe-v3's mini-batch time, the objective a "
                         f"PipelineSimulator measures, but runtime {given} measures another: pass "
                         "runtime=PipelineSimulator(microbatches=16, schedule='1f1b') (from the command line: "
                         "objective=pipeline), or refine=0")
    return float(refine)


def _refined(result: TrainResult, graph: OpGraph, cluster: Cluster, runtime: Runtime, refine: float) -> TrainResult:
    """``result`` with ``refine`` seconds of :class:`PipelineLocalSearch`'s descent from its placement on
    ``runtime``'s pipe-v3 objective counted in its seconds, and that descent's placement in its place where it
    measures faster (no sample found it: :attr:`~gplace.search_result.TrainResult.refined_from` says where it
    started)."""
    from gplace.baselines.pipeline import PipelineLocalSearch
    from gplace.runtime.wrapper import innermost

    sim = innermost(runtime)
    descent = PipelineLocalSearch(sim.microbatches, sim.schedule, start=result.best_placement, time_limit=refine,
                                  threads=sim.threads)
    started = time.perf_counter()
    placement = descent.place(graph, cluster)
    seconds = time.perf_counter() - started
    timed = dataclasses.replace(result, seconds=result.seconds + seconds)
    better = timed if placement == result.best_placement else _no_worse_than(timed, placement, graph, cluster,
                                                                              runtime)
    log.info("refine: %d placements measured in %.3g s; %s -> %s", descent.evaluations, seconds,
             format_seconds(result.best_measurement.step_time), format_seconds(better.best_measurement.step_time))
    if better is timed:
        return timed
    return dataclasses.replace(better, found_at=-math.inf, refined_from=result.best_measurement.step_time)


def _why_nothing_ran(graph: OpGraph, cluster: Cluster, runtime: Runtime, baselines: dict[str, Measurement],
                     learned: bool = True) -> str:
    """What to try when neither the search nor any single device measured a placement that ran: more memory where
    an op alone outgrows every device it may run on; for memory, a placement op by op (a learned search's warm
    start); else the single devices' own failure (a time limit, a runtime error)."""
    reasons = [m.reason for m in baselines.values()]
    too_large = _op_too_large(graph, cluster, runtime)
    if too_large is not None:
        return too_large
    if learned and (not reasons or any("out of memory" in r for r in reasons)):  # beside a device no op may run on
        return ("the search places groups of ops, which a tight memory may not pack: try warm_start='heft' (placed "
                "op by op), with split_groups=True to search from it (gplace.place's arguments; gplace place "
                "warm_start=heft split_groups=true)")
    if not learned:
        return "no single device holds it either: try a placer that goes op by op, such as method='heft'"
    return f"every single-device placement failed too (e.g. {reasons[0]}): the runtime ran none of them"


def _op_too_large(graph: OpGraph, cluster: Cluster, runtime: Runtime) -> str | None:
    """Why no placement can fit where an op, or a colocation group, outgrows every device it may run on: an op's own
    bytes (persistent + output + temporary; under a pipeline runtime one micro-batch's share of a forward op's
    output, none of another op's, as :mod:`gplace.pipeline.simulator` holds them), a group's lower bound (its
    members' persistent bytes together + its largest such output + temporary), naming the first such; else
    ``None``."""
    from gplace.pipeline.simulator import microbatch_activations
    from gplace.runtime.wrapper import microbatches_of

    allowed = graph.allowed_devices(cluster)
    microbatches = microbatches_of(runtime)
    if microbatches is None:
        output, held = graph.output_bytes, "output"
    else:
        output = microbatch_activations(graph, microbatches)
        held = "one micro-batch's output"
    own = output + graph.temporary_memory
    need = graph.persistent_memory + own
    room = np.where(allowed, cluster.memory[None, :], 0).max(axis=1)
    over = np.flatnonzero(need > room)
    if over.size:
        op = int(over[0])
        more = f" (and {over.size - 1} more ops)" if over.size > 1 else ""
        return (f"op {graph.op_names[op]!r} alone needs {format_bytes(int(need[op]))} (persistent + {held} + "
                f"temporary), more than any device it may run on holds ({format_bytes(int(room[op]))} at most){more}: "
                "no placement fits; give the cluster more memory")
    members: dict[str, list[int]] = {}
    for i, group in enumerate(graph.colocation):
        if group is not None:
            members.setdefault(group, []).append(i)
    for group, ops in members.items():
        together = int(graph.persistent_memory[ops].sum() + own[ops].max())
        most = int(np.where(allowed[ops].all(axis=0), cluster.memory, 0).max())
        if together > most:
            return (f"colocation group {group!r} ({len(ops)} ops) needs at least {format_bytes(together)} on one "
                    f"device (its persistent bytes together + its largest {held} and temporary), more than any "
                    f"device all its ops may run on holds ({format_bytes(most)} at most): no placement fits; give "
                    "the cluster more memory")
    return None


def _searched(result: TrainResult, baselines: dict[str, Measurement], graph: OpGraph, cluster: Cluster,
              runtime: Runtime) -> TrainResult:
    """A search's result as reported: a single-device placement with its baseline's measurement (one placement,
    one measurement: a noisy runtime reported such a result 1.07-1.18x faster than itself), else its best measured
    again (:func:`_measured_again`), then no worse than the fastest single-device placement
    (:func:`_no_worse_than_one_device`)."""
    from gplace.baselines.single import each_device

    names = cluster.device_names
    same = [names[d] for d, placed in each_device(graph, cluster)
            if baselines[names[d]].ok and placed == result.best_placement]
    result = dataclasses.replace(result, best_measurement=baselines[same[0]]) if same else \
        _measured_again(result, graph, cluster, runtime)
    return _no_worse_than_one_device(result, baselines, graph, cluster)


def _measured_again(result: TrainResult, graph: OpGraph, cluster: Cluster, runtime: Runtime) -> TrainResult:
    """``result`` with its best placement measured once more on a runtime that is not deterministic: the search's
    best is the luckiest of many noisy measurements, each single-device baseline is measured once, and the two are
    compared and reported side by side. A failed measurement keeps the search's (with a warning)."""
    if runtime.deterministic or not result.best_measurement.ok:
        return result
    again = runtime.measure(graph, cluster, result.best_placement)
    if not again.ok:
        log.warning("the search's best placement failed when measured again (%s); reporting the search's measurement",
                    again.reason)
        return result
    log.info("the search's best placement measured again: %s (the search measured %s)",
             format_seconds(again.step_time), format_seconds(result.best_measurement.step_time))
    return dataclasses.replace(result, best_measurement=again, found_at=result.best_measurement.step_time)


def _no_worse_than_one_device(result: TrainResult, baselines: dict[str, Measurement], graph: OpGraph,
                              cluster: Cluster) -> TrainResult:
    """``result``, or the fastest single-device placement in its place where that measured faster (a search that
    ended behind a placement measured in the same call returns that placement)."""
    from gplace.baselines import SingleDevice

    names = [n for n in cluster.device_names if baselines[n].ok]
    if not names:
        return result
    name = min(names, key=lambda n: baselines[n].step_time)
    if not baselines[name].step_time < result.best_measurement.step_time:
        return result
    log.info("the search's best (%s) is slower than every op on %s (%s): returning that placement",
             format_seconds(result.best_measurement.step_time), name, format_seconds(baselines[name].step_time))
    placement = SingleDevice(device=cluster.device_names.index(name)).place(graph, cluster)
    return dataclasses.replace(result, best_placement=placement, best_measurement=baselines[name],
                               found_at=-math.inf)  # no sample found it


def _budgeted(trainer: Trainer | None, budget: Budget | None, seed: int | None) -> Trainer:
    """``trainer`` (default: REINFORCE) with the budget and seed applied."""
    from gplace.training.trainer import ReinforceTrainer

    trainer = ReinforceTrainer() if trainer is None else trainer
    changes: dict[str, Any] = {} if seed is None else {"seed": seed}
    needs = {"seed"} if seed is not None else set()
    needs |= set() if budget is None else {"samples_per_update", "updates", "max_seconds"}
    fields = {f.name for f in dataclasses.fields(trainer)} if dataclasses.is_dataclass(trainer) else set()
    if needs - fields:
        raise TypeError(f"seed= and budget= set a trainer's {sorted(needs)}; {type(trainer).__name__} has no "
                        f"{sorted(needs - fields)} as dataclass fields (as ReinforceTrainer and PPOTrainer have): "
                        "give it its seed and budget yourself and leave them out here")
    if budget is not None and budget.samples is not None:  # whole updates, never more samples than the budget
        changes["samples_per_update"] = min(trainer.samples_per_update, budget.samples)
        changes["updates"] = budget.samples // changes["samples_per_update"]
        measured = changes["updates"] * changes["samples_per_update"]
        if measured < budget.samples:
            log.warning("a budget of %d samples measures %d: a search measures whole updates of %d samples "
                        "(samples_per_update)", budget.samples, measured, changes["samples_per_update"])
    elif budget is not None:
        changes.update(max_seconds=budget.seconds, updates=_UNBOUNDED_UPDATES)
    return dataclasses.replace(trainer, **changes) if changes else trainer


def _place_once(graph: OpGraph, cluster: Cluster, placer: Placer | None, path: Path | None, runtime: Runtime,
                budget: Budget | None, seed: int) -> TrainResult:
    """``placer``'s placement, or else the policy file ``path``'s zero-shot one (fastest of greedy and sampled),
    measured."""
    started = time.monotonic()
    if placer is None:
        from gplace.pretrained import (
            check_objective,
            check_policy_fits,
            load_policy,
            recorded_max_groups,
            zero_shot_search,
        )

        samples = SAMPLES if budget is None or budget.samples is None else budget.samples
        encoder, policy, meta = load_policy(path)
        check_policy_fits(policy, cluster, path, meta)
        check_objective(meta, runtime, path)
        return zero_shot_search(encoder, policy, graph, cluster, samples=samples, runtime=runtime,
                                max_groups=recorded_max_groups(meta), seed=seed)
    try:
        placement = placer.place(graph, cluster)
    except PlacementInfeasibleError as err:  # a greedy pass's "another order may fit", where none can
        why = _op_too_large(graph, cluster, runtime)
        if why is None:
            raise
        raise PlacementInfeasibleError(f"{err}; {why}") from None
    samples = getattr(placer, "evaluations", 0)  # a placer that searches by measuring says how many it did
    measurement = runtime.measure(graph, cluster, placement)
    if not measurement.ok:  # as HEFT's and the m_* placers' own checks say
        why = _op_too_large(graph, cluster, runtime) if "out of memory" in measurement.reason else None
        raise PlacementInfeasibleError(f"{type(placer).__name__}'s placement of {graph.name!r} on {cluster.name!r} "
                                       f"failed: {measurement.reason}" + (f"; {why}" if why else ""))
    return TrainResult(placement, measurement, samples, time.monotonic() - started)  # its result's not counted


def single_device_baselines(graph: OpGraph, cluster: Cluster, runtime: Runtime) -> dict[str, Measurement]:
    """Measure every op on one device, for each device (ops pinned elsewhere stay on their kind); a device no op may
    run on is a failed baseline saying so (it was every op on another device, reported as this one's)."""
    from gplace.baselines.single import each_device

    names = cluster.device_names
    return {names[d]: runtime.measure(graph, cluster, placed) if isinstance(placed, Placement)
            else Measurement.failure(runtime.id, str(placed)) for d, placed in each_device(graph, cluster)}


def write_report(report: PlacementReport, run_dir: str | Path, runtime: Runtime | None = None) -> None:
    """Write ``placement.json`` (the versioned placement format, with the per-device summary of
    :func:`gplace.show.device_summary`) and ``trace.json`` (Chrome trace). Where ``runtime`` is a pipeline
    simulator, both describe its mini-batch (peak memory, bubble, micro-batches labelled in the trace); else
    ``sim-v1``'s schedule of one step (``placement.json`` then says so in ``summary_model`` where another runtime
    measured the step)."""
    from gplace.pipeline import PipelineSimulator, write_pipeline_trace
    from gplace.pipeline.stages import placement_extras
    from gplace.runtime import schedule, write_chrome_trace
    from gplace.runtime.wrapper import innermost, microbatches_of
    from gplace.show import MODEL_KEY, SIM_V1, SUMMARY_KEY, device_summary

    run_dir, graph, cluster, placement = Path(run_dir), report.graph, report.cluster, report.placement
    inner = None if runtime is None else innermost(runtime)
    timeline = inner.simulate(graph, cluster, placement) if isinstance(inner, PipelineSimulator) else None
    extra = {"runtime": report.measurement.runtime, "samples": report.train.samples,
             "best_sample": report.train.best_sample, "search_seconds": report.train.seconds,
             "refined_from": report.train.refined_from,
             "failed_baselines": {k: m.reason for k, m in report.baselines.items() if not m.ok}}
    extra.update(placement_extras(graph, cluster, placement))
    extra[SUMMARY_KEY] = device_summary(graph, cluster, placement, timeline)
    if timeline is None and report.measurement.runtime != SIM_V1:  # a real runtime or the steady-state score
        extra[MODEL_KEY] = SIM_V1
    if microbatches_of(inner) and (extra.get("split_unaligned") or extra.get("split_backward_away")):
        _warn_unaligned(extra["split_unaligned"], extra["split_backward_away"])
    doc = placement_to_dict(placement, graph, cluster, step_time=report.measurement.step_time,
                            baselines={k: m.step_time for k, m in report.baselines.items()}, extra=extra)
    _keep_faster(run_dir / "placement.json", doc)
    save_json(doc, run_dir / "placement.json")
    if timeline is not None:
        write_pipeline_trace(run_dir / "trace.json", graph, cluster, timeline)
    else:
        write_chrome_trace(run_dir / "trace.json", graph, cluster, schedule(graph, cluster, placement))


def _keep_faster(path: Path, doc: Mapping[str, Any]) -> None:
    """Move ``path``, another placement of the same graph on the same cluster measured by the same runtime as
    ``doc``'s but faster (and faster than a ``placement.previous.json`` kept before), to ``placement.previous.json``
    beside it, with a WARNING: a run directory's earlier result (its checkpoint deleted and run again with less
    budget, or run again without the ``refine`` that found it) was replaced by a slower one without a word."""
    was, now = _step_time_of(path, doc, another=True), doc.get("step_time")
    if was is None or (now is not None and was >= now):
        return
    best_kept = _step_time_of(previous_name(path), doc, another=False)
    if best_kept is None or was < best_kept:
        keep_previous(path, f"a faster placement ({format_seconds(was)}) than this run's "
                            f"({'failed' if now is None else format_seconds(now)})")


def _step_time_of(path: Path, doc: Mapping[str, Any], *, another: bool) -> float | None:
    """The step time of the placement document ``path`` where it places ``doc``'s graph on its cluster, measured by
    its runtime (with ``another``, a placement other than ``doc``'s: the same one measured again is no other
    result); else ``None``."""
    from gplace.ir.serialize import load_json

    try:
        other = load_json(path)
    except (OSError, ValueError):  # none, or not one gplace wrote
        return None
    keys = ("graph_fingerprint", "cluster", "devices", "runtime")
    if not isinstance(other, Mapping) or (another and other.get("placement") == doc.get("placement")) or \
            any(other.get(key) != doc.get(key) for key in keys):
        return None
    step_time = other.get("step_time")
    return step_time if isinstance(step_time, float) and math.isfinite(step_time) else None


def _warn_unaligned(unaligned: list[dict[str, str]], backward_away: int) -> None:
    """Log that a pipeline's split is not one ``torch.distributed.pipelining`` can run as simulated: a cut inside
    a module, or backward ops away from their forward op."""
    what = [f"its split at op {unaligned[0]['op']!r} falls inside module {unaligned[0]['module']!r} "
            f"({len(unaligned)} such cuts, placement.json's split_unaligned)"] if unaligned else []
    what += [f"{backward_away} backward ops are on another device than their forward op (torch runs a stage's "
             "backward on its device)"] if backward_away else []
    log.warning("torch.distributed.pipelining cannot run this pipeline as simulated: %s; place "
                "gplace.pipeline.stages.align_to_modules(graph) (graph.align_to_modules=true) instead",
                "; ".join(what))
