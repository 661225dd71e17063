"""The command line: ``gplace`` / ``python -m gplace`` run the configured experiment (Hydra)."""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import logging
import math
import os
import re
import signal
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import CompactHydraException, HydraException, InstantiationException
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from gplace.extras import MissingExtraError
from gplace.ir.errors import error_summary, format_seconds, is_finite, short_repr

log = logging.getLogger("gplace")


def run(cfg: DictConfig, run_dir: str | Path) -> float:
    """Build every part from ``cfg``, learn a placement, print the table; returns the learned step time."""
    _check_whole(cfg, {"seed": 0, "threads": 1, "max_groups": 1}, {"seed": 2**32 - 1, "threads": _MOST_THREADS})
    _check_seconds(cfg, "refine")
    _check_sweep_dir(run_dir)
    with _held_first(run_dir):
        return _train(cfg, run_dir)


@contextlib.contextmanager
def _held_first(run_dir: str | Path):
    """Hold ``run_dir`` before the job builds or logs anything but its refusals of bad settings: a run refused a
    directory another run holds wrote its warnings into that run's ``cli.log`` (Hydra opens it first), which a
    script reading it took as that run's. A ``.hydra`` there that :func:`record_job` refuses is refused now, before
    the job's search."""
    from gplace.run_dir import hold_dir

    _LOG_SIZES.clear()  # a job refused the directory (held by another) cuts nothing: an earlier sweep job's sizes
    with hold_dir(run_dir):
        _note_log_sizes()
        _record_folder(run_dir)
        yield


_LOG_SIZES: dict[str, int] = {}
"""The size of each of the job's log files (Hydra's ``cli.log``) when the job took its run directory."""


def _note_log_sizes() -> None:
    """Note the size of each of the job's log files, for :func:`_restore_log_files`."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler) and handler.stream is not None:
            with contextlib.suppress(OSError, ValueError):
                handler.flush()
                _LOG_SIZES[handler.baseFilename] = os.path.getsize(handler.baseFilename)


def _restore_log_files() -> None:
    """Cut each of the job's log files back to its size when the job took its run directory: a job refused by
    another run's checkpoint found in it (read only once the job had logged "placing ...") leaves that run's
    ``cli.log`` as it was, not ending as if that run had been killed mid-way."""
    for handler in logging.getLogger().handlers:
        size = _LOG_SIZES.get(getattr(handler, "baseFilename", ""))
        if isinstance(handler, logging.FileHandler) and size is not None:
            with contextlib.suppress(OSError, ValueError):
                handler.flush()
                os.truncate(handler.baseFilename, size)
    _LOG_SIZES.clear()


_TORCH_THREADS: list[int] = []
"""torch's own thread count, read before a job first sets one (``threads=null`` in a sweep's later job kept the
thread count of the job before it)."""


def _set_threads(threads: int | None) -> None:
    """Set torch's threads to ``threads``, or back to torch's own count for ``None``."""
    import torch

    if not _TORCH_THREADS:
        _TORCH_THREADS.append(torch.get_num_threads())
    torch.set_num_threads(_TORCH_THREADS[0] if threads is None else threads)


def _train(cfg: DictConfig, run_dir: str | Path) -> float:
    """:func:`run` in the held ``run_dir``."""
    import torch

    from gplace.loggers import HeldOpen

    _set_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    graph, cluster = _graph_and_cluster(cfg)
    fields = _sweep_fields(cfg.logger)

    def open_logger():  # once there is something to log: the run directory is this run's, its resume accepted
        record_job(cfg, run_dir)
        return instantiate(cfg.logger, **fields)

    logger = HeldOpen(open_logger=open_logger)
    failed = True
    try:
        step_time = _run(cfg, run_dir, graph, cluster, logger)
        failed = False
        return step_time
    finally:
        logger.close(failed=failed)


def record_job(cfg: DictConfig, run_dir: str | Path) -> None:
    """Write Hydra's record of this job into ``run_dir/.hydra/`` (``config.yaml``, ``hydra.yaml``,
    ``overrides.yaml``, as Hydra would with its ``output_subdir``), called once the directory is the job's, so a job
    refused there changes no earlier run's record. Each file is replaced whole (a symbolic link in its place is
    replaced, never written through). Nothing outside a Hydra job."""
    from gplace.ir.serialize import write_text_atomic

    if not HydraConfig.initialized():
        return
    hydra_cfg = HydraConfig.get()
    out = _record_folder(run_dir)
    for name, doc in (("config.yaml", cfg), ("hydra.yaml", OmegaConf.create({"hydra": hydra_cfg})),
                      ("overrides.yaml", hydra_cfg.overrides.task)):
        write_text_atomic(out / name, OmegaConf.to_yaml(doc))


def _record_folder(run_dir: str | Path) -> Path:
    """``run_dir/.hydra``, made if missing.

    Raises:
        RunDirConflictError: it is a symbolic link (a directory someone shared): the record would replace the files
            of the folder it points to.
        NotADirectoryError: a file stands there, naming it.
    """
    from gplace.ir.serialize import make_folder
    from gplace.run_dir import RunDirConflictError

    out = Path(run_dir) / ".hydra"
    if out.is_symlink():
        raise RunDirConflictError(f"{out} is a symbolic link, not a folder: gplace writes the job's record there and "
                                  "never through a link; remove it (the run makes a new one) or use another run "
                                  "directory")
    return make_folder(out)


def _run(cfg: DictConfig, run_dir: str | Path, graph, cluster, logger) -> float:
    from gplace.experiment import place
    from gplace.placer import network_device
    from gplace.pretrained import save_policy
    from gplace.run_dir import hold_dir

    logger.log_config(OmegaConf.to_container(cfg, resolve=True))
    device = network_device(cfg.device)
    encoder = _savable(cfg.encoder, "encoder").to(device)
    policy = _savable(cfg.policy, "policy", num_devices=cluster.num_devices).to(device)
    with _closing(_objective_runtime(cfg)) as runtime:
        with hold_dir(run_dir):  # place() holds it too; held on until the policy file is written
            report = place(graph, cluster, encoder=encoder, policy=policy, runtime=runtime,
                           trainer=instantiate(cfg.trainer), max_groups=cfg.max_groups, run_dir=run_dir,
                           logger=_SearchOnly(logger), warm_start=_seeded_warm_start(cfg, graph, cluster, runtime),
                           refine=cfg.get("refine", 0))
            save_policy(Path(run_dir) / "policy.pt", encoder, policy, meta={"max_groups": cfg.max_groups,
                        "graph": graph.name, "cluster": cluster.name, "device_kinds": list(cluster.kinds),
                        "runtime": str(runtime.id)})
        if logger.keeps_results:
            logger.log_results(*results(report, runtime, run_dir))
    _print_table(report, run_dir, warm_started=cfg.get("warm_start") is not None)
    _log_to_files(f"{_outcome(report)}; wrote {Path(run_dir) / 'placement.json'}, trace.json and policy.pt",
                  logging.INFO)
    return report.measurement.step_time


@contextlib.contextmanager
def _closing(runtime):
    """``runtime``, closed when the job is done with it, with every runtime it wraps (the job built them all):
    each layer with a ``close`` (a pool's workers stopped and waited for: left to the interpreter's exit, a worker
    still starting printed a traceback after the result; a cache around a pool kept it running)."""
    try:
        yield runtime
    finally:
        layer = runtime
        while layer is not None:
            close = getattr(layer, "close", None)
            if callable(close):
                close()
            layer = getattr(layer, "runtime", None)


class _SearchOnly:
    """A job's logger as :func:`gplace.place` gets it: the search's scalars and its end go through, not the config
    and results, which the job logs itself (the whole config; HEFT and the policy file among the results)."""

    def __init__(self, logger) -> None:
        self.logger = logger

    def log_config(self, config) -> None:  # noqa: D102
        pass

    def log_scalars(self, step: int, scalars) -> None:  # noqa: D102
        self.logger.log_scalars(step, scalars)

    def finish(self, exit_code: int | None = None) -> None:  # noqa: D102
        self.logger.finish(exit_code=exit_code)


def _graph_and_cluster(cfg: DictConfig):
    """``cfg.graph`` and ``cfg.cluster`` built; a ``_target_`` that returns no ``OpGraph`` (``Cluster``), such as
    a graph's JSON dict, ends in one line naming it (it failed later in an AttributeError). A cluster value that
    reads like another unit than gplace's is a WARNING (:func:`~gplace.ir.cluster.unlikely_units`)."""
    from gplace.ir import Cluster, OpGraph
    from gplace.ir.cluster import misspelt_kinds, unlikely_units

    built = []
    for key, kind in (("graph", OpGraph), ("cluster", Cluster)):
        made = instantiate(cfg[key])
        if not isinstance(made, kind):
            _fail(f"{key}._target_={cfg[key].get('_target_')} returned a {type(made).__name__}, not a gplace "
                  f"{kind.__name__}")
        built.append(made)
    for doubt in unlikely_units(built[1], None if _giph_file(cfg.graph) else built[0]) + misspelt_kinds(*built[::-1]):
        log.warning("%s", _escaped(doubt))
    return tuple(built)


def _giph_file(graph_cfg: DictConfig) -> bool:
    """Whether ``graph_cfg`` reads a GiPH task graph, whose costs are in GiPH's own units (its run of days of compute
    is no mistake to warn of)."""
    from gplace.importers.load import detect_graph_format

    if graph_cfg.get("_target_") != "gplace.importers.load_graph":
        return False
    try:
        return detect_graph_format(graph_cfg.path) == "giph"
    except (ValueError, OSError):
        return False


def _objective_runtime(cfg: DictConfig):
    """The runtime that measures ``cfg.objective`` (the configured ``cfg.runtime`` for ``step``); a ``_target_`` that
    builds no :class:`~gplace.runtime.Runtime` ends in one line naming it, as a graph's does."""
    from gplace.runtime.base import Runtime

    runtime = instantiate(cfg.runtime)
    if not isinstance(runtime, Runtime):
        _fail(f"runtime._target_={cfg.runtime.get('_target_')} returned a {type(runtime).__name__}, not a gplace "
              "Runtime (a subclass of gplace.runtime.Runtime; with _partial_: true it is not called)")
    return _call_partial(instantiate(cfg.objective), "objective", runtime) if "objective" in cfg else runtime


def results(report, runtime, run_dir: str | Path) -> tuple[dict[str, float], list[dict], dict[str, Path]]:
    """What a logger keeps of a finished job: :func:`gplace.experiment.report_results` (the final figures, a table
    of placements, ``placement.json`` and ``trace.json``), with the run's ``policy.pt`` among the files."""
    from gplace.experiment import report_results

    summary, rows, files = report_results(report, runtime, run_dir)
    return summary, rows, {**files, "policy": Path(run_dir) / "policy.pt"}


def _sweep_fields(logger_cfg: DictConfig) -> dict[str, str]:
    """In a multirun, ``group`` (:func:`sweep_group`) and ``name`` (the job's overrides) for a logger config that
    has those fields unset, so each job is its own run, grouped by sweep."""
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return {}
    hc = HydraConfig.get()
    fields = {"group": sweep_group(hc.sweep.dir, hc.runtime.cwd),
              "name": hc.job.override_dirname or f"job{hc.job.num}"}
    return {k: v for k, v in fields.items() if k in logger_cfg and logger_cfg[k] is None}


GROUP_CHARS = 128
"""The longest W&B run group gplace makes (the end of a longer one is kept)."""


def sweep_group(sweep_dir: str | Path, cwd: str | Path) -> str:
    """The sweep directory relative to ``cwd``, the directory gplace was started in (``multirun/2026-12-02/00-59-57``
    by default: its last part alone, the time, is the same for sweeps of other days), else in full; the last
    :data:`GROUP_CHARS` characters of a longer one."""
    path = Path(cwd, sweep_dir).resolve()
    try:
        group = str(path.relative_to(Path(cwd).resolve()))
    except ValueError:  # outside the working directory
        group = str(path)
    return group[-GROUP_CHARS:]


def _warm_start(cfg: DictConfig, graph, cluster):
    """The placement in ``cfg.warm_start`` (a placement.json), a placer's name (``heft``, ``ideal_dp``, ...: placed
    by :func:`gplace.place`), or ``None``."""
    return _warm_start_of(cfg.get("warm_start"), graph, cluster)


def _place_warm_start(cfg: DictConfig, graph, cluster):
    """``gplace place``'s :func:`_warm_start`; ``warm_start_baseline``, its old name, read with a WARNING (a name
    only, until 2026-12-05, where ``gplace`` and :func:`gplace.place` took ``warm_start``, a file too)."""
    old, new = cfg.get("warm_start_baseline"), cfg.get("warm_start")
    if old is None:
        return _warm_start_of(new, graph, cluster)
    if new is not None and new != old:
        raise ValueError(f"warm_start={new!r} and warm_start_baseline={old!r}: warm_start_baseline is warm_start's "
                         "old name; give warm_start alone")
    start = _warm_start_of(old, graph, cluster, key="warm_start_baseline")
    log.warning("warm_start_baseline is warm_start's old name: %s", "drop it (warm_start says the same)" if new
                else f"use warm_start={old}")
    return start


def _warm_start_of(path, graph, cluster, key: str = "warm_start"):
    """:func:`_warm_start` of the value ``path`` of setting ``key``."""
    from gplace.ir import GraphError, InvalidPlacementError, load_json, placement_from_dict
    from gplace.ir.errors import OtherGraphError
    from gplace.methods import baselines, pipeline_placers

    if path is None:
        return None
    if not isinstance(path, str):  # warm_start=true failed inside pathlib
        raise ValueError(f"{key} must be a placement.json or a placer's name, got {path!r}")
    if Path(path).is_file():
        try:
            doc = load_json(path)
            return placement_from_dict(doc, graph, cluster, by_name=_same_graph_and_ops(doc, graph))
        except OtherGraphError as err:  # its hint, by_name=True, is the API's: the command line has no by_name
            raise InvalidPlacementError(f"{key}={path!r}: {err.facts}: a warm start is a placement of this graph, or "
                                        "of one of the same name and ops (then placed by op name)") from None
        except (GraphError, InvalidPlacementError) as err:  # devices the cluster lacks, a damaged file
            raise type(err)(f"{key}={path!r}: {err}") from None
    if str(path) in pipeline_placers() or str(path) in baselines():
        return str(path)
    looks_like_a_file = Path(path).suffix or "/" in str(path)
    raise ValueError(f"{key}={path!r} is " + ("not a file" if looks_like_a_file else
                     "neither a placement.json nor a placer's name") +
                     f" (placers: {', '.join(sorted(baselines()))}, {', '.join(pipeline_placers())})")


def _seeded_warm_start(cfg: DictConfig, graph, cluster, runtime):
    """:func:`_warm_start`, a placer's name made the placer seeded with ``cfg.seed``, as :func:`gplace.place` makes
    it for its ``seed=`` (the job passes no ``seed=``, which would also replace ``trainer.seed``: a named warm
    start was placed with seed 0 whatever the job's seed)."""
    from gplace.methods import make_placer

    warm_start = _warm_start(cfg, graph, cluster)
    return make_placer(warm_start, cfg.seed, runtime) if isinstance(warm_start, str) else warm_start


def _same_graph_and_ops(doc, graph) -> bool:
    """Whether a placement document names ``graph`` and exactly its ops, so a warm start may take it by op name
    when the graph's contents changed (e.g. a built-in graph whose costs a newer gplace changed)."""
    if not isinstance(doc, dict):
        return False
    placed = doc.get("placement")
    return doc.get("graph") == graph.name and isinstance(placed, dict) and set(placed) == set(graph.op_names)


def _savable(node: DictConfig, key: str, **extra):
    """Instantiate a module (a partial config ``key`` is called with those of ``extra`` it takes); built-in modules
    record their own constructor arguments, and a user's module that records none gets the config's as its
    ``init_kwargs``, so :func:`gplace.pretrained.save_policy` can rebuild either (a user's encoder failed to save
    after the search). Anything but a torch module ends in one line: the job moves it to ``device`` and saves it."""
    import torch

    from gplace.bench.searches import accepted
    from gplace.configurable import Configurable

    module = instantiate(node)
    partial = isinstance(module, functools.partial)
    called = accepted(module, extra) if partial else {}  # what the module was built with beside its config
    built = _call_partial(module, key, **called) if partial else module
    if not isinstance(built, torch.nn.Module):
        _fail(f"{key}: {key}._target_={node.get('_target_')} built a {type(built).__name__}, not a torch.nn.Module, "
              f"which gplace's command line needs (it moves the {key} to `device` and saves it in policy.pt)")
    if getattr(built, "init_kwargs", None) is None and not isinstance(built, Configurable):
        given = OmegaConf.to_container(node, resolve=True)
        built.init_kwargs = {**{k: v for k, v in given.items() if not k.startswith("_")}, **called}
    return built


def _call_partial(partial, key: str, *args, **kwargs):
    """``partial(*args, **kwargs)`` for the ``_partial_`` config ``key``; a setting of the wrong type or an unknown
    one (a ``TypeError`` from the constructor, which Hydra's instantiate did not call), or one it refuses (a
    ``ValueError``), ends in one line naming ``key``."""
    try:
        return partial(*args, **kwargs)
    except TypeError as err:
        _fail(f"{key}: a value of the wrong type or an unknown setting ({type(err).__name__}: {err}); check {key}'s "
              "settings")
    except ValueError as err:
        _fail(f"ValueError: {_keyed(key, str(err))}")


def _keyed(key: str | None, said: str) -> str:
    """A constructor's refusal ``said``, led by the config ``key`` it was built from unless it names it already."""
    return f"{key}: {said}" if key and not said.startswith((f"{key}:", f"{key}.")) else said


def _console():
    """A Rich console that prints text as it is: names and paths (a graph ``net[/v2]``, a run directory
    ``runs/[exp1]``, a device ``[red]gpu2``, ``:cat:``) are neither markup nor emoji codes, nor highlighted (``1.32x``
    was drawn as a bold ``1.`` and a plain ``32x``). Its width is the
    terminal's where ``COLUMNS`` is no positive number (``COLUMNS=0`` printed nothing); a closed stdout
    (``gplace ... | head -1``) is :func:`_stdout_gone`, not rich's exit with status 1."""
    from rich.console import Console

    console = Console(markup=False, emoji=False, highlight=False, width=_fallback_width())
    console.on_broken_pipe = _stdout_gone
    return console


def _fallback_width() -> int | None:
    """The terminal's width (80 columns off a terminal) where ``COLUMNS`` is set but no positive number, else
    ``None`` (rich's own: ``COLUMNS``, or the terminal's)."""
    import shutil

    columns = os.environ.get("COLUMNS")
    if columns is None or (columns.strip().isdigit() and int(columns) > 0):
        return None
    return shutil.get_terminal_size((80, 24)).columns


def _stdout_gone(stdout=None) -> None:
    """Point ``stdout`` (default: ``sys.stdout``) at /dev/null once its reader is gone, so the run goes on to write
    its files and ends normally, its lines unread."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, (stdout or sys.stdout).fileno())
    os.close(devnull)


def _fit_off_a_terminal(console, table) -> None:
    """Off a terminal (piped, a log file), widen ``console`` to what ``table`` needs, up to 200 columns: at 80, long
    device names were cut to the same prefix (a terminal folds them: a wider table wraps)."""
    if not console.is_terminal:
        console.width = max(console.width, console.measure(table, options=console.options.update_width(200)).maximum)


def _print_table(report, run_dir: str | Path, warm_started: bool = False) -> None:
    from rich.table import Table
    from rich.text import Text

    from gplace.runtime.base import time_ratio

    runtime = report.measurement.runtime
    table = Table(title=_encodable(f"{report.graph.name} ({report.graph.num_ops} ops) on {report.cluster.name}, "
                                   f"{runtime}"))
    table.add_column("placement", overflow="fold")
    table.add_column(_time_label(runtime), justify="right")
    table.add_column("vs learned", justify="right")
    learned = report.measurement.step_time
    for name, alike in _single_rows(report.baselines):
        m = report.baselines[name]
        label, failed = (f"single {name}", "failed") if alike == 1 else (f"single ({alike} devices)", "all failed")
        reason = " ".join(m.reason.split())  # a runtime's reason over several lines wraps in its cell
        table.add_row(_encodable(label), _ms(m.step_time) if m.ok else _encodable(f"{failed}: {reason}"),
                      f"{time_ratio(m.step_time, learned):.2f}x" if m.ok else "")
    table.add_row(Text("learned", style="bold"), Text(_ms(learned), style="bold"), "1.00x")
    console = _console()
    _fit_off_a_terminal(console, table)
    console.print(table)
    console.print(f"{_speedup(report)}; {report.train.samples} placements sampled in {report.train.seconds:.0f} s; "
                  + _found(report.train, warm_started), soft_wrap=True)
    console.print(f"wrote {Path(run_dir) / 'placement.json'}, trace.json and policy.pt (for `gplace place`)",
                  soft_wrap=True)


def _single_rows(baselines: dict) -> list[tuple[str, int]]:
    """The single-device rows of the results table, ``(device, devices)``: the failed devices whose reasons differ
    only in device name and numbers (64 out of memory on a wide cluster) as one row, the first's, with their count;
    every device that ran as its own row (count 1)."""
    from gplace.training._loop import failure_kind

    def shape(name, m):
        return failure_kind(str(m.reason).replace(name, "\0"))

    alike: dict[str, list[str]] = {}
    for name, m in baselines.items():
        if not m.ok:
            alike.setdefault(shape(name, m), []).append(name)
    rows = []
    for name, m in baselines.items():
        group = [name] if m.ok else alike[shape(name, m)]
        if group[0] == name:
            rows.append((name, len(group)))
    return rows


def _speedup(report) -> str:
    """The speed-up over the best single device, or that none fits (every single device failed: the ratio is then
    inf)."""
    if not any(m.ok for m in report.baselines.values()):
        return "no single device fits (every one failed)"
    return f"speed-up over the best single device: {report.speedup:.2f}x"


def _versus_one(report) -> str:
    """``gplace place``'s comparison with the best single device: ``speed-up over the best single device: 1.23x``
    (as cli.log says; ``0.97x the best single device`` read as 97 % of its time, for a placement 3 % slower), or
    that none fits."""
    if not any(m.ok for m in report.baselines.values()):
        return "no single device fits"
    return f"speed-up over the best single device: {report.speedup:.2f}x"


def _time_label(runtime: str) -> str:
    """What a runtime's ``step_time`` is: a pipeline runtime's (``pipe-...``, ``torch-pipeline-...``) is one
    mini-batch's time."""
    return "mini-batch time" if runtime.startswith(("pipe-", "torch-pipeline-")) else "step time"


def _outcome(report) -> str:
    """One line of a job's outcome for its log files: step (or mini-batch) time, best single device, speed-up,
    samples, seconds."""
    ok = {name: m.step_time for name, m in report.baselines.items() if m.ok}
    best = min(ok, key=ok.get) if ok else None
    versus = f"best single device {_escaped(best)} {_ms(ok[best])}, {_speedup(report)}" if ok else _speedup(report)
    return (f"{_escaped(report.graph.name)} on {_escaped(report.cluster.name)} with {_escaped(report.method)}: "
            f"{_time_label(report.measurement.runtime)} "
            f"{_ms(report.measurement.step_time)}; {versus}; {report.train.samples} samples in "
            f"{report.train.seconds:.1f} s")


def _refined_note(train) -> str:
    """``; refine's descent from <time>`` where the result is that descent's, else nothing."""
    return "" if train.refined_from is None else f"; refine's descent from {_ms(train.refined_from)}"


def _found(train, warm_started: bool = False) -> str:
    if train.refined_from is not None:
        return f"the best is refine's descent from the search's {_ms(train.refined_from)}"
    if train.found_at == -math.inf:
        return "the best is every op on one device (the search found nothing faster)"
    if train.best_sample is None:  # no sample: the warm start (measured first) or the greedy decode (measured last)
        return ("the best is the warm start's or the trained policy's greedy placement" if warm_started
                else "the best is the trained policy's greedy placement")
    return f"the best found by sample {train.best_sample}"


def _ms(seconds: float) -> str:
    return format_seconds(seconds)


@hydra.main(version_base="1.3", config_path="pkg://gplace.conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> float:
    return _guard(lambda: run(cfg, HydraConfig.get().runtime.output_dir), cfg)


def _guard(job, cfg: DictConfig, command: str = "train"):
    """Run ``job()``; a user's mistake (missing value, bad file, bad graph) ends in one line, not a traceback, and
    so does Ctrl-C or SIGTERM, saying how ``command``'s job resumes (:func:`resume_hint`)."""
    _refuse_linked_log_files()
    _utf8_log_files()
    _log_files_fail_once()
    _log_lines_to_stderr()
    _log_lines_survive_a_gone_stdout()
    if "gplace.runtime.base" in sys.modules:  # a sweep's earlier job ran: warn again into this job's log
        sys.modules["gplace.runtime.base"].forget_warnings()
    try:
        missing = sorted(OmegaConf.missing_keys(cfg))
    except InterpolationResolutionError as err:  # e.g. ${hydra.job.num}: a job's config reads ${hydra:job.num}
        first = str(err).splitlines()[0]
        _fail(f"{type(err).__name__}: {first}{_interpolation_hint(first)}")
    if missing:
        _fail(f"missing value(s): {', '.join(missing)} (set them on the command line, e.g. {missing[0]}=...)")
    _check_top_keys(cfg, command)
    try:
        return job()
    except JobFailed as err:  # a sweep's job, its line written: Hydra names the job, with no traceback from deep in
        raise JobFailed(str(err)) from None
    except InstantiationException as err:
        cause = err.__cause__ or err
        if isinstance(cause, ImportError):  # a _target_ misspelt or not installed: Hydra's three lines as one
            _fail(f"ImportError: {'; '.join(line.strip() for line in str(cause).splitlines() if line.strip())}")
        key = str(err).rsplit("full_key: ", 1)[-1].strip() if "full_key: " in str(err) else None
        if isinstance(cause, ValueError | OSError):  # a constructor's check: named by its config key (runtime.runtime)
            _fail(f"{type(cause).__name__}: {_keyed(key, str(cause))}",
                  status=EXIT_CANNOT_WRITE if _no_room(cause) else 2)
        if isinstance(cause, TypeError):  # an unknown, missing or wrong-typed setting of a component's constructor
            key = key or "the config"
            _fail(_type_error_message(key, cause, OmegaConf.select(cfg, f"{key}._target_", default=None)))
        if _out_of_memory(cause):
            _fail(_out_of_memory_message(cause, command))
        if isinstance(cause, MemoryError):
            _fail(_memory_error_message(cause))
        _log_to_files(f"{type(err).__name__}: {err}")
        raise
    except (ValueError, OSError) as err:  # gplace's errors are ValueErrors naming the op, field or file
        others = _another_runs_dir(err)
        if others:
            _restore_log_files()
        _fail(f"{type(err).__name__}: {err}{_default_dir_hint(err)}", log_files=not others, status=_exit_status(err))
    except MissingExtraError as err:  # a part of the run needs an extra (the METIS placer, the tf runtime)
        _fail(f"ImportError: {err}")
    except KeyboardInterrupt as err:
        hydra_cfg = HydraConfig.get() if HydraConfig.initialized() else None
        _interrupted(err, resume_hint(command, cfg, hydra_cfg), in_job=True)
    except Exception as err:  # an interrupt raised inside a C callback comes out wrapped (numba: a SystemError)
        if _out_of_memory(err):
            _fail(_out_of_memory_message(err, command))
        if isinstance(err, MemoryError):  # numpy's, for gplace place samples=100000000: a traceback, exit 1
            _fail(_memory_error_message(err))
        interrupt = _interrupt_in(err)
        if interrupt is None:  # a crash: Hydra prints its traceback on the terminal
            _log_to_files(f"{type(err).__name__}: {err}")
            raise
        hydra_cfg = HydraConfig.get() if HydraConfig.initialized() else None
        _interrupted(interrupt, resume_hint(command, cfg, hydra_cfg), in_job=True)


def _interpolation_hint(first: str) -> str:
    """A hint for an interpolation that did not resolve (``first``: the first line of its error)."""
    if "'hydra." in first:
        return " (Hydra's own values are read as ${hydra:job.num}, with a colon)"
    if "'encoder.hidden_size'" in first:
        return (" (the policy configs read ${encoder.hidden_size}: set hidden_size in your encoder's config, its "
                "class accepting a hidden_size argument, or set policy.state_size= to the encoder's width)")
    return ""


def _type_error_message(key: str, err: TypeError, target: str | None) -> str:
    """One line for the ``TypeError`` of config ``key``'s constructor ``target``: the unknown setting with the
    constructor's own, or the missing ones to set; else a value of the wrong type."""
    settings = _settings(target)
    unknown = re.search(r"unexpected keyword argument '(\w+)'", str(err))
    if unknown and settings is not None and unknown[1] not in settings:
        return (f"{key}: no setting {unknown[1]!r} (its settings: {', '.join(settings) or 'none'})"
                f"{_replaced_settings_hint(key, target)}")
    missing = re.search(r"missing \d+ required (?:positional|keyword-only) arguments?: (.+)$", str(err))
    names = re.findall(r"'(\w+)'", missing[1]) if missing else []
    if names and settings is not None and set(names) <= set(settings):
        return f"{key}: set " + " and ".join(f"+{key}.{name}=..." for name in names)
    if "takes no arguments" in str(err) and settings == []:  # a class without __init__ given the settings it replaced
        return f"{key}: {target} takes no settings, but {key} holds some{_replaced_settings_hint(key, target, True)}"
    return f"{key}: a value of the wrong type ({type(err).__name__}: {error_summary(err)}); check {key}'s settings"


def _replaced_settings_hint(key: str, target: str | None, always: bool = False) -> str:
    """Where the command line gave ``key._target_`` (or ``always``): that the settings of the config it replaced
    stay, and how to start from none (``~key.NAME`` cannot drop a setting whose value is null: Hydra says it "does
    not exist")."""
    if not always and not _given(f"{key}._target_"):
        return ""
    return (f" (a {key}._target_ override keeps the settings of the config it replaces: start from none with "
            f"'~{key}' '+{key}._target_={target}', or give {target} a config file of its own)")


def _settings(target: str | None) -> list[str] | None:
    """The parameter names of the callable a ``_target_`` names, or ``None`` where it takes any keyword (its
    ``TypeError`` may come from deeper) or cannot be read."""
    import inspect

    from hydra.utils import get_object

    try:
        params = inspect.signature(get_object(str(target))).parameters.values()
    except Exception:  # no target, not importable, or no signature  # noqa: BLE001
        return None
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind != p.VAR_POSITIONAL]


def _out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is torch's out of memory (a GPU's ``torch.OutOfMemoryError``; the CPU allocator's
    ``RuntimeError``), raised by the placement networks: the runtimes count a placement's own as a failed one.
    Python's ``MemoryError`` is not (it may come from anywhere: :func:`_memory_error_message`)."""
    if "torch" not in sys.modules or not isinstance(err, Exception):  # only torch raises its own
        return False
    from gplace.runtime.torch_errors import out_of_memory

    return out_of_memory(err)


def _memory_error_message(err: MemoryError) -> str:
    """One line for a ``MemoryError`` (numpy's or Python's): what could not be had, no advice (it may come from
    building a graph as well as from a search's arrays)."""
    from gplace.ir.errors import error_summary

    return f"out of memory: {type(err).__name__}: {error_summary(err, 160)} (lower the sizes this command was given)"


def _out_of_memory_message(err: BaseException, command: str) -> str:
    """One line for ``err``, out of memory in ``command``'s job, naming the settings that size it."""
    from gplace.ir.errors import error_summary

    return f"out of memory in the placement networks ({error_summary(err, 160)}): {_SMALLER[command]}"


_SMALLER = {
    "train": "use smaller networks (encoder.hidden_size, policy.hidden_size), fewer groups (max_groups) or fewer "
             "samples an update (trainer.samples_per_update), or put them on another device (device=...); the run "
             "resumes from its last checkpoint",
    "place": "use fewer samples (samples=...), or train a smaller policy with gplace (encoder.hidden_size, "
             "policy.hidden_size, max_groups) and place with its policy.pt (checkpoint=...)",
    "bench": "give the learned searches smaller networks or fewer groups in their overrides (learned.<name>.overrides: "
             "encoder.hidden_size=..., policy.hidden_size=..., max_groups=...)",
}
"""What each command's out-of-memory message advises: settings that command has."""


_PROGRAMS = {"train": "gplace", "bench": "gplace bench", "place": "gplace place"}
"""Each command's name, as typed."""


def _check_top_keys(cfg: DictConfig, command: str) -> None:
    """Refuse top-level keys of ``cfg`` that ``command``'s primary config (composed without the command line's
    overrides) does not have and no interpolation (``${key}``) reads, naming them: added with ``+key=...``, nothing
    read them (``+max_groups=4`` to ``gplace place`` was ignored). Nothing outside a Hydra job, or when no override
    adds a key."""
    if not HydraConfig.initialized():
        return
    hydra_cfg = HydraConfig.get()
    if not hydra_cfg.job.config_name or not any(o.startswith("+") for o in hydra_cfg.overrides.task):
        return
    from hydra import compose

    from gplace.bench.searches import searchpath_overrides

    try:
        known = {*compose(config_name=hydra_cfg.job.config_name, overrides=searchpath_overrides()), "hydra"}
    except HydraException:  # a primary config that composes only with overrides (a group left ???)
        return
    text = OmegaConf.to_yaml(cfg)  # unresolved: a key only interpolated elsewhere (+h=16 ... '${h}') is read
    unknown = sorted(k for k in set(cfg) - known if not _interpolated(str(k), text))
    if unknown:
        _fail(f"{_PROGRAMS.get(command, command)} reads no top-level setting {', '.join(unknown)} (given with +); "
              f"the settings of {hydra_cfg.job.config_name}.yaml: {', '.join(sorted(known))}")


def _interpolated(key: str, text: str) -> bool:
    """Whether the config ``text`` (unresolved YAML) reads ``key`` through an interpolation: ``${key}``,
    ``${key.x}``, relatively (``${..key}``) or by a resolver (``${oc.select:key,8}``)."""
    return re.search(rf"\$\{{\s*(?:\.+|[\w.]+:\s*)?{re.escape(key)}\s*[}}.\[,]", text) is not None


def _interrupt_in(err: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM (:class:`Terminated`) that ``err`` was raised from or while handling, if any."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


def _interrupted(err: KeyboardInterrupt, hint: str, in_job: bool = False) -> NoReturn:
    """Ctrl-C or SIGTERM (:class:`Terminated`) ends in one line on stderr, ``hint`` after it, and exit status 130 or
    143, not a traceback; inside a job, its log files get the line too (cli.log stopped at "placing ...")."""
    terminated = isinstance(err, Terminated)
    line = f"{'terminated' if terminated else 'interrupted'}; {hint}"
    sys.stderr.write(f"gplace: {line}\n")
    if in_job:  # outside one, the handlers may still be a finished job's
        _log_to_files(line, logging.WARNING)
    raise SystemExit(143 if terminated else 130) from None


def _resumes(cfg: DictConfig) -> bool:
    """Whether a bench job keeps the records of its ``out_dir`` (``resume``; a config without the key starts over)."""
    return bool(cfg.get("resume", False))


def resume_hint(command: str, cfg: DictConfig, hydra_cfg: DictConfig | None) -> str:
    """What resumes ``command``'s interrupted job (``train``, ``bench`` or ``place``; ``hydra_cfg``: Hydra's config
    of the job, ``None`` outside Hydra): the same command with the directory it resumes from, named with its key
    (``hydra.run.dir=outputs/2026-12-02/12-51-33``: a rerun does not reuse Hydra's timestamped default), or that
    nothing resumes (``gplace place`` with a method that keeps no checkpoint)."""
    if command == "bench":
        again = _quoted(f"out_dir={cfg.get('out_dir')}", *[] if _resumes(cfg) else ["resume=true"])
        if cfg.get("pipeline"):  # bench_pipeline: written after each (graph, cluster); its searches keep no run dir
            return (f"the bench keeps its finished (graph, cluster) pairs, and the same command run again with {again} "
                    "runs the others (their learned searches start over)")
        return (f"the bench keeps its finished cases, and the same command run again with {again} runs the others "
                "(their learned searches from their last checkpoints)")
    what = "a training run"
    if command == "place":
        from gplace.methods import LEARNED

        method = _placing(cfg)
        if method not in LEARNED:
            return f"nothing resumes (method {method} keeps no checkpoint): run the command again"
        what = f"the {method} search"
    where = "the same hydra.run.dir" if hydra_cfg is None else _quoted(_job_dir_override(hydra_cfg))
    return f"{what} resumes from its last checkpoint when the same command runs again with {where}"


def _job_dir_override(hydra_cfg: DictConfig) -> str:
    """The override naming the job's directory as a rerun must give it: ``hydra.run.dir=...``, or a sweep's
    ``hydra.sweep.dir=...`` (each job's own directory under it)."""
    if hydra_cfg.mode == RunMode.MULTIRUN:
        return f"hydra.sweep.dir={hydra_cfg.sweep.dir}"
    return f"hydra.run.dir={hydra_cfg.run.dir}"


def _quoted(*overrides: str) -> str:
    """``overrides`` as a shell and Hydra take them: a value with a character Hydra's grammar reads otherwise (a
    space, ``ü``, ``(``, ``,``, ``=``) in Hydra's quotes, and each override quoted for the shell."""
    return " ".join(_shell_quoted(_hydra_quoted(override)) for override in overrides)


def _shell_quoted(text: str) -> str:
    """``text`` as a shell word: as it is where it can be, in double quotes where it holds Hydra's single quotes
    (and nothing a shell reads inside double quotes), else :func:`shlex.quote`'s."""
    import shlex

    if shlex.quote(text) == text or not ("'" in text and re.fullmatch(r'[^"$`\\!]*', text)):
        return shlex.quote(text)
    return f'"{text}"'


def _hydra_quoted(override: str) -> str:
    """``key=value`` with ``value`` in Hydra's single quotes where it holds more than letters, digits and
    ``_/.:@%+-`` (``hydra.run.dir=/tmp/ü run`` was refused by Hydra's override parser when pasted back)."""
    key, sep, value = override.partition("=")
    if not sep or re.fullmatch(r"[A-Za-z0-9_/.:@%+-]*", value):
        return override
    value = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", value)  # backslashes before a quote are escapes
    return f"{key}='" + re.sub(r"(\\+)$", lambda m: m.group(1) * 2, value) + "'"


def _outside_hint(hydra_cfg: DictConfig | None) -> str:
    """What the interrupted line says of Ctrl-C or SIGTERM outside a job (Hydra starting, between a sweep's jobs,
    Hydra ending)."""
    if hydra_cfg is not None and hydra_cfg.mode == RunMode.MULTIRUN:
        return (f"between the sweep's jobs: the same command run again with "
                f"{_quoted(_job_dir_override(hydra_cfg))} continues it, its training runs from their last checkpoints")
    return "no run was in progress: nothing to resume"


def _run_dir_in_use(err: Exception) -> bool:
    """Whether ``err`` refused a run directory another run holds."""
    from gplace.run_dir import RunDirInUseError

    return isinstance(err, RunDirInUseError)


def _another_runs_dir(err: Exception) -> bool:
    """Whether ``err`` refused a run directory another run holds or left (its checkpoint of another seed, say): its
    ``cli.log`` is that run's, which a script reading it for errors would take as failed."""
    from gplace.run_dir import RunDirConflictError

    return isinstance(err, RunDirConflictError)


def _default_dir_hint(err: Exception) -> str:
    """For a run directory in use that is Hydra's default (:func:`_time_named_dir_hint`); else nothing."""
    if not _run_dir_in_use(err) or getattr(err, "path", None) is None:
        return ""
    return _time_named_dir_hint(Path(err.path))


def _time_named_dir_hint(run_dir: Path) -> str:
    """For a job directory ``run_dir`` under Hydra's default (no ``hydra.run.dir``, or in a sweep no
    ``hydra.sweep.dir``, given): that the default is named by the second, so two runs (sweeps) started in the same
    second share it; else nothing."""
    if not HydraConfig.initialized():
        return ""
    hydra_cfg = HydraConfig.get()
    sweep = hydra_cfg.mode == RunMode.MULTIRUN
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    given = any(o.lstrip("+").startswith(f"{key}=") for o in hydra_cfg.overrides.hydra)
    if given or run_dir.resolve() != Path(hydra_cfg.runtime.output_dir).resolve():
        return ""
    if sweep:
        return ("; no hydra.sweep.dir was given, and Hydra's default sweep directory (multirun/<date>/<time>) is "
                "named by the second, so two sweeps started in the same second get the same one: give each sweep "
                "its own hydra.sweep.dir=...")
    return ("; no hydra.run.dir was given, and Hydra's default directory (outputs/<date>/<time>) is named by the "
            "second, so two runs started in the same second get the same one: give each run its own "
            "hydra.run.dir=..., or run them as one sweep (-m)")


_NULLABLE = ("threads", "max_groups")
"""Top-level whole-number settings where ``null`` means a default (torch's threads, no grouping limit)."""


_MOST_THREADS = 4 * (os.cpu_count() or 1)
"""The most threads a run may ask for (100,000 ran out of memory or spun for minutes)."""


def _check_whole(cfg: DictConfig, lows: dict[str, int], highs: dict[str, int] | None = None) -> None:
    """Refuse a top-level key of ``lows`` that is not a whole number from its low to its high in ``highs`` (or null,
    where :data:`_NULLABLE`), naming it."""
    for key, low in lows.items():
        value, high = cfg.get(key), (highs or {}).get(key)
        if value is None and key in _NULLABLE:
            continue
        if (value is None or isinstance(value, bool) or not isinstance(value, int) or value < low
                or (high is not None and value > high)):
            span = f">= {low}" if high is None else f"from {low} to {high}"
            _fail(f"{key} must be a whole number {span}" + (" or null" if key in _NULLABLE else "") +
                  f", got {value!r}")


def _check_seconds(cfg: DictConfig, *keys: str) -> None:
    """Refuse a top-level setting of ``keys`` that is given but not seconds, a finite number >= 0, naming it
    (``refine=abc`` ended in a traceback)."""
    for key in keys:
        value = cfg.get(key, 0)
        if not isinstance(value, int | float) or not (is_finite(value) and value >= 0):  # 10**400 overflowed
            _fail(f"{key} must be seconds, a finite number >= 0 (0: none), got {short_repr(value)}")


def _check_bools(cfg: DictConfig, *keys: str) -> None:
    """Refuse a setting of ``keys`` (dotted paths) that is given but not true or false, naming it (``resume=no``
    was taken as true)."""
    for key in keys:
        value = OmegaConf.select(cfg, key, default=False)
        if not isinstance(value, bool):
            _fail(f"{key} must be true or false, got {value!r}")


class JobFailed(CompactHydraException):
    """A job of a Hydra sweep refused (its one line already written): Hydra runs the sweep's other jobs and names
    this one's overrides, where ``SystemExit`` ended the whole sweep; compact, so Hydra's report at the end of the
    sweep is the line again, without a traceback of gplace's frames."""


EXIT_NO_PLACEMENT = 3
"""Exit status of a command that found no placement that runs (every one measured failed: out of memory, say)."""
EXIT_DIR_IN_USE = 75
"""Exit status of a command refused a run directory another run holds: try again later (sysexits' EX_TEMPFAIL)."""
EXIT_CANNOT_WRITE = 74
"""Exit status of a command whose output could not be written for want of room or a failing disk (a full disk or
quota, an I/O error), not for its input (sysexits' EX_IOERR)."""
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EIO)


def _fail(message: str, log_files: bool = True, status: int = 2) -> None:
    """One clear line on stderr and exit ``status`` (2: a user's mistake, bad input), instead of a traceback (in a
    sweep, :class:`JobFailed`, so the other jobs run); also in the job's log files unless ``log_files`` is false."""
    message = message.translate(_TERMINAL_ESCAPES)  # a name from a file in a reason (a device's) took the terminal
    sys.stderr.write(f"gplace: error: {message}{_job_named()}\n")
    if log_files:
        _log_to_files(message)
    if _in_sweep():  # from None: raised while handling the error, Hydra's report printed each chained traceback
        raise JobFailed(message) from None
    raise SystemExit(status)


def _exit_status(err: Exception) -> int:
    """2 for bad input; :data:`EXIT_NO_PLACEMENT` where no placement ran, :data:`EXIT_DIR_IN_USE` for a busy run
    directory, :data:`EXIT_CANNOT_WRITE` for a full disk: a script can tell them apart (every one was 2)."""
    from gplace.baselines import PlacementInfeasibleError

    if _run_dir_in_use(err):
        return EXIT_DIR_IN_USE
    if _no_room(err):
        return EXIT_CANNOT_WRITE
    return EXIT_NO_PLACEMENT if isinstance(err, PlacementInfeasibleError) else 2


def _no_room(err: BaseException | None) -> bool:
    """``err``, or an error it was raised from, is an ``OSError`` of a full disk or quota, or an I/O error."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, OSError) and err.errno in _NO_ROOM:
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def _log_to_files(message: str, level: int = logging.ERROR) -> None:
    """Write ``message`` (an error, or a job's outcome at INFO) to the job's log files alone (Hydra's ``cli.log`` in
    its directory), so a sweep's folders say how each job ended; the terminal has its line already."""
    record = log.makeRecord(log.name, level, __file__, 0, message, None, None)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler) and handler.stream is not None and level >= handler.level:
            try:  # written here, not through handle(): a log file that cannot take it (a full disk) adds nothing
                handler.stream.write(handler.format(record) + handler.terminator)
                handler.stream.flush()
            except (OSError, ValueError):
                pass


def _refuse_linked_log_files() -> None:
    """Refuse a job whose log file in its run directory (Hydra's ``cli.log``) is a symbolic link (a directory someone
    shared) to anything but a character device (``/dev/null`` to drop the log), before a line is written: its lines
    were appended to the file the link points to. Hydra has opened it already (appending, through the link: a link
    to nothing made an empty file where it points); the handler is closed here. A log file the configs put
    elsewhere is the user's to link."""
    run_dir = OmegaConf.select(HydraConfig.get(), "runtime.output_dir") if HydraConfig.initialized() else None
    if run_dir is None:  # no job's directory (a composed config of a test)
        return
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, logging.FileHandler) and _log_link_refused(handler.baseFilename, Path(run_dir)):
            root.removeHandler(handler)
            handler.close()
            _fail(f"{handler.baseFilename} is a symbolic link, not the job's log file: gplace never writes its log "
                  "through a link; remove it (the run makes a new one) or use another run directory",
                  log_files=False)


def _log_link_refused(name: str, run_dir: Path) -> bool:
    """Whether ``name``, a file in ``run_dir``, is a symbolic link to anything but a character device."""
    if not os.path.islink(name) or Path(name).parent.resolve() != run_dir.resolve():
        return False
    try:
        return not stat.S_ISCHR(os.stat(name).st_mode)
    except OSError:  # a link to nothing (Hydra made none there: not writable), or a loop
        return True


def _utf8_log_files() -> None:
    """Reopen the job's log files (Hydra's ``cli.log``), opened in the locale's encoding, in UTF-8: under an ASCII
    locale (``LC_ALL=C``) every line naming a non-ASCII graph, cluster or op failed to be written; a path the
    filesystem encoding could not decode (surrogates) is written escaped, not an error. Unlike a
    ``hydra.job_logging.handlers.file.encoding`` in the configs, this leaves ``hydra/job_logging=stdout`` or
    ``disabled`` (no file handler) working."""
    import codecs

    for handler in logging.getLogger().handlers:
        if not isinstance(handler, logging.FileHandler) or handler.stream is None:
            continue
        if codecs.lookup(handler.stream.encoding).name != "utf-8" or handler.stream.errors == "strict":
            handler.encoding, handler.errors = "utf-8", "backslashreplace"
            utf8 = open(handler.baseFilename, "a", encoding="utf-8", errors="backslashreplace")  # noqa: SIM115
            handler.setStream(utf8).close()  # the handler keeps the new stream open


def _log_files_fail_once() -> None:
    """Make each of the job's log files (Hydra's ``cli.log``) that cannot be written (a full disk, a file gone
    read-only) say so once, in one line on stderr naming the file and the error, and then stay silent: logging's own
    handler printed a ``--- Logging error ---`` traceback for every line logged (a bench: hundreds of lines). The
    run goes on, its lines on the terminal."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handleError = functools.partial(_log_file_error, handler)


def _log_file_error(handler: logging.FileHandler, record: logging.LogRecord) -> None:
    """``handler``'s failure to write ``record``: one warning line on stderr the first time, then nothing."""
    if getattr(handler, "_gplace_failed", False):
        return
    handler._gplace_failed = True  # noqa: SLF001
    err = sys.exc_info()[1]
    reason = f"{type(err).__name__}: {err}" if err is not None else "the write failed"
    line = f"gplace: warning: cannot write the log file {handler.baseFilename} ({reason}); the run goes on without it\n"
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(line.translate(_TERMINAL_ESCAPES))
        sys.stderr.flush()


def _log_lines_to_stderr() -> None:
    """Point Hydra's default console log handler (on stdout) at stderr, so that stdout holds only the results (a
    table, the result line) and a script can read them (``gplace place ... | head -1`` read a warning);
    ``hydra/job_logging=stdout`` keeps its stdout."""
    if HydraConfig.initialized() and HydraConfig.get().runtime.choices.get("hydra/job_logging") != "default":
        return
    for handler in logging.getLogger().handlers:
        if type(handler) is logging.StreamHandler and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)


def _log_lines_survive_a_gone_stdout() -> None:
    """Make Hydra's console log handler treat a closed stdout as :func:`_stdout_gone` does (``gplace ... | true``:
    each log line printed logging's own traceback, until the first print pointed stdout at /dev/null)."""
    for handler in logging.getLogger().handlers:
        if type(handler) is logging.StreamHandler and handler.stream is sys.stdout:
            handler.handleError = functools.partial(_log_error_on_stdout, handler)


def _log_error_on_stdout(handler: logging.StreamHandler, record: logging.LogRecord) -> None:
    """``handler``'s failure to write ``record``: a gone reader points stdout at /dev/null, silently."""
    if isinstance(sys.exc_info()[1], BrokenPipeError):
        _stdout_gone(handler.stream)
        return
    logging.StreamHandler.handleError(handler, record)


def _job_named() -> str:
    """`` (job 1 of the sweep: seed=1 ...)`` in a sweep, where each failed job's line is to be told apart (Hydra's
    report at the end names the first alone); else ``""``."""
    if not _in_sweep():
        return ""
    hydra_cfg = HydraConfig.get()
    return f" (job {hydra_cfg.job.num} of the sweep: {' '.join(hydra_cfg.overrides.task)})"


def _given(key: str) -> bool:
    """Whether this job's command line sets ``key`` (``key=``, ``+key=`` or ``++key=``)."""
    if not HydraConfig.initialized():
        return False
    return any(o.lstrip("+").split("=", 1)[0] == key for o in HydraConfig.get().overrides.task)


def _in_sweep() -> bool:
    """Whether this is a job of a Hydra multirun."""
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def _check_sweep_dir(run_dir: str | Path) -> None:
    """In a sweep, refuse a run directory that a job of other overrides left (two jobs resolving to one directory:
    the later one resumed the earlier's finished run and reported it as its own), naming both. The same command run
    again has the same overrides, in any order, so a killed sweep still resumes."""
    if not _in_sweep():
        return
    recorded = Path(run_dir) / ".hydra" / "overrides.yaml"
    if not recorded.is_file():
        return
    theirs = list(OmegaConf.load(recorded))
    hydra_cfg = HydraConfig.get()
    mine = list(hydra_cfg.overrides.task)
    if set(theirs) == set(mine):
        return
    num = _recorded_job_num(Path(run_dir))
    if num is not None and num != hydra_cfg.job.num:  # two jobs of one sweep in one directory
        _fail(f"run directory {run_dir} holds job {num} of the sweep {theirs}, not this job {hydra_cfg.job.num} "
              f"{mine}: give each job its own directory (hydra.sweep.subdir with ${{hydra.job.num}} or every swept "
              "key)", log_files=False)
    held = "a single run" if num is None else f"job {num} of a sweep"
    _fail(f"run directory {run_dir} holds {held} with other overrides {theirs}, not this job's {mine}: run the "
          "changed sweep in its own hydra.sweep.dir (a sweep's job resumes only with its own overrides; a single "
          f"run resumes with changed trainer settings: without -m, hydra.run.dir={run_dir})"
          + _time_named_dir_hint(Path(run_dir)), log_files=False)


def _recorded_job_num(run_dir: Path) -> int | None:
    """The number of the sweep job that :func:`record_job` recorded in ``run_dir`` (``None``: a single run's record,
    or none)."""
    path = run_dir / ".hydra" / "hydra.yaml"
    if not path.is_file():
        return None
    recorded = OmegaConf.load(path)
    if OmegaConf.select(recorded, "hydra.mode", default=None) != RunMode.MULTIRUN.name:
        return None
    num = OmegaConf.select(recorded, "hydra.job.num", default=None)
    return num if isinstance(num, int) else None


@hydra.main(version_base="1.3", config_path="pkg://gplace.conf", config_name="bench")
def _bench_main(cfg: DictConfig) -> None:
    _guard(lambda: bench(cfg), cfg, "bench")


def bench(cfg: DictConfig) -> list:
    """Build the bench cases, baselines and searches from ``cfg`` (gplace/conf/bench.yaml) and run them, holding
    ``cfg.out_dir`` (a second bench there stops at once: both would rewrite its results)."""

    from gplace.run_dir import hold_dir

    _check_whole(cfg, {"threads": 1}, {"threads": _MOST_THREADS})
    _check_bools(cfg, "resume", "search.plots", "pipeline")
    if _in_sweep() and not _given("out_dir"):
        _fail("a bench sweep needs out_dir set per job (e.g. 'out_dir=bench/${hydra:job.num}'): every job would "
              f"write {cfg.out_dir}, each after the first skipping or overwriting the cases the others ran")
    _set_threads(cfg.get("threads"))
    if not isinstance(cfg.out_dir, str) or not cfg.out_dir.strip():  # '' wrote into the working directory
        _fail(f"out_dir={cfg.out_dir!r} names no folder: give one with out_dir=/path/to/dir")
    unwritable = _unwritable(Path(cfg.out_dir))
    if unwritable is not None:
        _fail(f"out_dir={cfg.out_dir}: {unwritable} {_no_folder_there(unwritable)}: give a writable directory with "
              "out_dir=/path/to/dir")
    with hold_dir(cfg.out_dir, "bench directory"):
        _claim_bench_out_dir(Path(cfg.out_dir))
        if HydraConfig.initialized():  # hydra.output_subdir: null in the bench configs: its record written here
            record_job(cfg, HydraConfig.get().runtime.output_dir)
        if cfg.get("pipeline"):  # gplace/conf/bench_pipeline.yaml
            from gplace.bench.pipeline import bench_pipeline

            _check_graph_files([(f"graphs.{name}", graph) for name, graph in (cfg.get("graphs") or {}).items()], cfg)

            return bench_pipeline(cfg)
        return _bench_cases(cfg)


BENCH_SWEEP_RECORD = ".sweep_job.yaml"
"""In a bench sweep's ``out_dir``: the sweep directory, number and overrides of the job that uses it."""


def _claim_bench_out_dir(out_dir: Path) -> None:
    """In a bench sweep, refuse an ``out_dir`` recorded by another job of the same sweep (``hydra.sweep.dir``) with
    other overrides (one fixed ``out_dir=`` for every job: each after the first skipped the cases the first ran),
    naming both; else record this job there. The same job run again resumes, its settings changed or not, as a
    single bench does (``resume=``); so does another sweep's job (another ``hydra.sweep.dir``)."""
    if not _in_sweep():
        return
    hydra_cfg = HydraConfig.get()
    mine = {"sweep_dir": str(Path(hydra_cfg.sweep.dir).resolve()), "job": hydra_cfg.job.num,
            "overrides": list(hydra_cfg.overrides.task)}
    path = out_dir / BENCH_SWEEP_RECORD
    try:
        theirs = OmegaConf.to_container(OmegaConf.load(path)) if path.is_file() else {}
    except Exception:  # a record cut short by a killed job: as if none  # noqa: BLE001
        theirs = {}
    if (isinstance(theirs, dict) and theirs.get("sweep_dir") == mine["sweep_dir"] and theirs.get("job") != mine["job"]
            and set(theirs.get("overrides") or []) != set(mine["overrides"])):
        _fail(f"out_dir={out_dir} holds job {theirs.get('job')} of this sweep {theirs.get('overrides')}, not this "
              f"job {mine['job']} {mine['overrides']}: a bench sweep needs out_dir set per job (e.g. "
              "'out_dir=bench/${hydra:job.num}'), or each job after the first skips or overwrites the cases the "
              "others ran")
    OmegaConf.save(OmegaConf.create(mine), path)


def _bench_cases(cfg: DictConfig) -> list:
    """The main bench (gplace/conf/bench.yaml, bench_paper.yaml): each case's baselines and learned searches. Every
    setting, every case's graph files, and every search's trainer, encoder and policy on every case, is checked
    before any baseline runs."""
    from gplace.bench import BenchCase, run_suite
    from gplace.bench.runner import load_records
    from gplace.bench.searches import check_learned, check_search
    from gplace.bench.suite import warn_unfingerprinted

    check_search(cfg.search)
    check_learned(cfg.get("learned"), ("overrides", "warm_start"), cfg.get("baselines") or {})
    cases = _check_cases(cfg.get("cases"))
    composed = [_compose_case(case, cfg, f"cases[{i}]") for i, case in enumerate(cases)]
    _check_distinct_cases([c for c, _ in composed])
    _check_graph_files([(f"cases[{i}]", c.graph) for i, (c, _) in enumerate(composed)], cfg)
    for i, (c, _) in enumerate(composed):
        _check_step_objective(c, f"cases[{i}]")
    log.info("building %d learned search(es) on %d case(s) to check them", len(cfg.learned), len(cases))
    planned = [_plan_case(c, overrides, cfg) for c, overrides in composed]

    def build_case(c: DictConfig) -> BenchCase:
        return BenchCase(instantiate(c.graph), instantiate(c.cluster), instantiate(c.runtime))

    records = load_records(Path(cfg.out_dir) / "results.json") if _resumes(cfg) else []
    seen: set[tuple[str, str]] = set()  # the (graph, cluster) pairs this bench ran: results are keyed by them
    for (c, searches), case in zip(planned, cases, strict=True):
        records = run_suite([lambda c=c: build_case(c)], instantiate(cfg.baselines), searches, cfg.out_dir,
                            plots=cfg.search.plots, previous=records, fresh=not _resumes(cfg), seen=seen,
                            settings=_method_settings(cfg, list(case)))
    warn_unfingerprinted(records, seen, cfg.out_dir)
    log.info("results in %s/RESULTS.md and results.json", cfg.out_dir)
    return records


def _method_settings(cfg: DictConfig, case: list[str]) -> dict[str, str]:
    """Per bench method, a digest of what sets it on ``case`` (its overrides, sorted): a baseline's config; a
    learned search's overrides and warm start with the searches' budget (``search.seconds``, ``search.updates``;
    not ``search.plots``). A resumed bench measures again what its records hold other ones of."""
    from gplace.bench.runner import settings_digest

    given = sorted(case)
    budget = {key: cfg.search.get(key) for key in ("seconds", "updates")}
    baselines = {name: settings_digest(node, given) for name, node in (cfg.get("baselines") or {}).items()}
    return baselines | {name: settings_digest(node, budget, given) for name, node in (cfg.get("learned") or {}).items()}


def _check_cases(cases) -> list[list[str]]:
    """``cases`` as lists of overrides; refused (naming the case) unless it is a non-empty list of such lists, each
    setting no key the bench sets itself (:func:`gplace.bench.searches.check_case`)."""
    from omegaconf import ListConfig

    from gplace.bench.searches import check_case

    example = "e.g. \"cases=[['graph=lstm_lm','cluster=paper_2gpu']]\""
    if not isinstance(cases, ListConfig | list) or not cases:
        raise ValueError(f"cases must list at least one case, each a list of overrides of the main config ({example}), "
                         f"got {cases!r}")
    for i, case in enumerate(cases):
        if not isinstance(case, ListConfig | list) or not all(isinstance(o, str) for o in case):
            raise ValueError(f"cases[{i}] must be a list of overrides of the main config ({example}), got {case!r}")
        check_case(f"cases[{i}]", case)
    return [list(case) for case in cases]


def _check_distinct_cases(composed: list[DictConfig]) -> None:
    """Refuse two cases composing the same graph and cluster before any runs (results are keyed by graph and
    cluster: the second, found only once built, stopped the bench after the first had run)."""
    first: dict[str, int] = {}
    for i, c in enumerate(composed):
        key = repr([sorted(OmegaConf.to_container(c[part], resolve=True).items()) for part in ("graph", "cluster")])
        if key in first:
            raise ValueError(f"cases[{first[key]}] and cases[{i}] place the same graph on the same cluster: results "
                             "and run directories are keyed by graph and cluster; drop one, or run it with another "
                             "out_dir")
        first[key] = i


def _compose_case(case: list[str], cfg: DictConfig, label: str) -> tuple[DictConfig, list[str]]:
    """A case's main config, composed with the bench's search settings and the command line's ``hydra.searchpath``,
    and the overrides it was composed with; an override Hydra refuses is a ``ValueError`` naming the case
    (``label``) in one line."""
    from hydra import compose

    from gplace.bench.searches import error_reason, search_overrides, searchpath_overrides

    overrides = [*searchpath_overrides(), *case, *search_overrides(cfg.search)]
    try:
        return compose(config_name="config", overrides=overrides), overrides
    except HydraException as err:  # Hydra's "Error executing job with overrides" and its text, naming no case
        raise ValueError(f"{label}: {error_reason(err)}") from None


_PATH_KEYS = ("path", "model_or_path", "obj")
"""The keys of a graph config (at its top) that name a file or directory it is read from."""


def _check_graph_files(graphs: list[tuple[str, DictConfig]], cfg: DictConfig) -> None:
    """Refuse, before anything runs, graph configs (each with its label) that miss a value or name a file that does
    not exist (the graphs are built case by case, so a bad late case failed hours into a bench), naming each."""
    shared = str(cfg.get("shared") or "")
    problems, under_shared = [], False
    for label, graph in graphs:
        problems += [f"{label}: {key} is not set" for key in sorted(OmegaConf.missing_keys(graph))]
        for path in _graph_files(OmegaConf.to_container(graph, resolve=True)):
            if not Path(path).exists():
                problems.append(f"{label}: no such file {path}")
                under_shared |= bool(shared) and path.startswith(shared)
    if problems:
        hint = _shared_hint(shared) if under_shared else ""
        raise ValueError(f"{len(problems)} bench graph(s) cannot be built: " + "; ".join(problems) + hint)


def _shared_hint(shared: str) -> str:
    """How to point the bench at the shared graphs (``shared`` in bench.yaml: ``${oc.env:GPLACE_SHARED,../shared}``)."""
    where = shared if Path(shared).is_absolute() else f"{shared} (from the working directory {Path.cwd()})"
    return (f"; the shared graphs are read under shared={where}: set GPLACE_SHARED=/path/to/shared or pass "
            "shared=/path/to/shared")


def _graph_files(graph: dict) -> list[str]:
    """The values of :data:`_PATH_KEYS` at the top of a graph config (the importers' file arguments; a nested one,
    such as a torch module's own ``path``, may name a hub id or anything else the module reads), and of the graph
    a wrapper takes (``without_activation_memory``'s ``graph``)."""
    inner = graph.get("graph")
    return [v for k, v in graph.items() if k in _PATH_KEYS and isinstance(v, str) and v != "???"] + (
        _graph_files(inner) if isinstance(inner, dict) else [])


def _plan_case(c: DictConfig, overrides: list[str], cfg: DictConfig):
    """A case's config and its learned searches, each built once on the case's cluster to check it."""
    from gplace.bench.searches import prepare_search

    num_devices = instantiate(c.cluster).num_devices
    searches = {name: prepare_search(name, [*overrides, *spec.overrides], [num_devices])
                for name, spec in cfg.learned.items()}
    for name, search in searches.items():
        _check_step_objective(search, f"learned.{name}")
    return c, {name: _make_search(search, cfg.learned[name].warm_start) for name, search in searches.items()}


def _check_step_objective(c: DictConfig, where: str) -> None:
    """Refuse a case or search whose objective is not one step's: this bench measures steps (its baselines, its
    lower bound and the case's runtime), so a pipeline objective was measured as steps, silently; and a ``refine``
    (recorded as a failed search after every baseline had run)."""
    name = c.objective.get("name", "step") if "objective" in c else "step"
    if name != "step":
        raise ValueError(f"{where}: objective={name}, but gplace bench measures one step with the case's runtime "
                         "(its baselines and lower bound are the step's); bench pipelines with "
                         "`gplace bench --config-name bench_pipeline`")
    if c.get("refine", 0):
        raise ValueError(f"{where}: refine={c.refine} descends on a pipelined mini-batch's time, but gplace bench "
                         "measures one step; bench pipelines with `gplace bench --config-name bench_pipeline`")


def _make_search(c: DictConfig, warm_start: bool):
    """A bench search (:data:`gplace.bench.suite.Search`): :func:`gplace.place` with ``c``'s networks and trainer,
    warm-started from the best baseline's placement with ``warm_start``."""
    from gplace.bench.searches import place_with

    def search(graph, cluster, runtime, run_dir, best_baseline):
        return place_with(c, graph, cluster, runtime, run_dir=run_dir, warm_start=best_baseline if warm_start else None)
    return search


@hydra.main(version_base="1.3", config_path="pkg://gplace.conf", config_name="place")
def _place_main(cfg: DictConfig) -> None:
    _guard(lambda: place_with_policy(cfg, HydraConfig.get().runtime.output_dir), cfg, "place")


def place_with_policy(cfg: DictConfig, run_dir: str | Path) -> float:
    """Place ``cfg.graph`` on ``cfg.cluster`` with ``cfg.method`` (or the policy file ``cfg.checkpoint``) and
    ``cfg.budget`` (default: ``cfg.samples`` samples; a pipeline placer's own); write placement and trace."""
    _check_whole(cfg, {"seed": 0, "threads": 1, "samples": 0}, {"seed": 2**32 - 1, "threads": _MOST_THREADS})
    _check_seconds(cfg, "refine")
    _check_sweep_dir(run_dir)
    _check_not_a_training_run(Path(run_dir), _placing(cfg))  # a running one's too: not a wait
    with _held_first(run_dir):
        return _place_held(cfg, run_dir)


def _placing(cfg: DictConfig) -> str | Path:
    """What ``gplace place`` places with: ``cfg.checkpoint`` as a path (``checkpoint=heft`` is a file named heft, not
    the baseline), else ``cfg.method``."""
    checkpoint = cfg.get("checkpoint")
    return Path(str(checkpoint)) if checkpoint else cfg.get("method")


def _place_held(cfg: DictConfig, run_dir: str | Path) -> float:
    """:func:`place_with_policy` in the held ``run_dir``."""

    from gplace.experiment import place
    from gplace.export import write_back

    _check_bools(cfg, "write_back", "split_groups")
    if not cfg.get("checkpoint") and not isinstance(cfg.method, str):  # method=null: a TypeError's traceback
        raise ValueError(f"method must be a placer's name, 'pretrained' or a policy file's path, got {cfg.method!r}")
    if cfg.get("checkpoint") == "":  # checkpoint=$CKPT with CKPT unset placed with the shipped policy
        raise ValueError("checkpoint='' names no policy file (an unset shell variable?): give its path, or leave "
                         "checkpoint out")
    if cfg.get("logger", {}).get("_target_", "gplace.loggers.NullLogger") != "gplace.loggers.NullLogger":
        _fail("gplace place keeps no W&B run (a learned search logs to metrics.jsonl in its run directory): "
              "use logger=none, or `gplace` (a training run) for W&B")
    _set_threads(cfg.get("threads"))
    _import_modules(cfg.get("imports") or [])
    graph, cluster = _graph_and_cluster(cfg)
    runtime = _objective_runtime(cfg)
    method = _placing(cfg)
    if cfg.get("checkpoint") and cfg.method != "pretrained":  # pretrained: the default, not a choice
        log.warning("method=%s is unused: checkpoint=%s places the graph", cfg.method, cfg.checkpoint)
    writes = cfg.get("write_back", True)
    device_map = _write_back_map(cfg, graph, cluster) if writes else None
    with _closing(runtime):
        report = place(graph, cluster, method=method, budget=_place_budget(cfg, method), seed=cfg.seed,
                       runtime=runtime, run_dir=run_dir, warm_start=_place_warm_start(cfg, graph, cluster),
                       split_groups=cfg.get("split_groups", False), refine=cfg.get("refine", 0))
    record_job(cfg, run_dir)
    m = report.measurement
    written = write_back(graph, cluster, report.placement, run_dir, device_map=device_map) if writes else []
    _console().print(f"placed {_escaped(graph.name)} ({graph.num_ops} ops) on {_escaped(cluster.name)} with "
                     f"{_escaped(method)} in "
                     f"{report.train.seconds:.1f} s of search (loading and warm-up not counted): "
                     f"{_time_label(m.runtime)} {_ms(m.step_time)} "
                     f"({_versus_one(report)}{_refined_note(report.train)}); wrote {run_dir}"
                     + "".join(f"\n  {p}" for p in written), soft_wrap=True)
    _log_to_files(f"{_outcome(report)}; wrote {Path(run_dir) / 'placement.json'} and trace.json", logging.INFO)
    return m.step_time


def _write_back_map(cfg: DictConfig, graph, cluster) -> dict[str, str] | None:
    """The ``device_map`` that ``graph``'s placed program is written back with (:func:`_write_back_device_map`),
    checked before placing; a device that maps to none ends in one line saying how to map it, or to skip it."""
    from gplace.export import check_write_back
    from gplace.importers.tensorflow import TensorFlowSource
    from gplace.ir import InvalidPlacementError

    device_map = _write_back_device_map(cfg, cluster.device_names)
    try:
        check_write_back(graph, cluster, device_map=device_map)
    except InvalidPlacementError as err:
        target = "/CPU:0" if isinstance(graph.source, TensorFlowSource) else "cpu"
        example = ", ".join(f"{name}: {target}" for name in cluster.device_names[:2])
        _fail(f"write_back: {err}: on the command line, 'write_back_device_map={{{example}}}' (cluster device -> "
              "device), or write_back=false to skip writing the placed program")
    return device_map


def _write_back_device_map(cfg: DictConfig, devices: Sequence[str]) -> dict[str, str] | None:
    """``cfg.runtime.device_map`` (where the runtime has one; its entries for the cluster's ``devices`` only, as the
    runtime reads it: one map may serve a sweep over clusters) updated by ``cfg.write_back_device_map``, or
    ``None`` where neither is given; a ``write_back_device_map`` that is no mapping of names to devices is
    refused."""
    given = cfg.get("write_back_device_map")
    if given is not None and not (OmegaConf.is_dict(given) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in given.items())):
        _fail(f"write_back_device_map must map cluster device names to devices, e.g. "
              f"'write_back_device_map={{fast: cpu}}', got {given!r}")
    runtime = OmegaConf.select(cfg, "runtime.device_map", default=None)
    merged = {str(k): str(v) for k, v in runtime.items() if str(k) in devices} if OmegaConf.is_dict(runtime) else {}
    merged.update({str(k): str(v) for k, v in given.items()} if given is not None else {})
    return merged or None


def _import_modules(names) -> None:
    """Import the modules ``imports=`` names (the classes of one's own that a policy file names)."""
    import importlib

    if not OmegaConf.is_list(names) and not isinstance(names, list):
        _fail(f"imports={names!r}: a list of module names, e.g. 'imports=[mypkg.encoders]'")
    for name in names:
        try:
            importlib.import_module(str(name))
        except ImportError as err:
            _fail(f"imports: cannot import {name!r}: {err}")


def _check_not_a_training_run(run_dir: Path, method: str) -> None:
    """Refuse a directory holding a training run's results (``policy.pt``), or a search's ``checkpoint.pt`` when
    ``method`` is no learned search that resumes it: ``gplace place`` replaced its ``placement.json``, trace and
    ``.hydra/`` record with its own, silently, and left the run's checkpoint and metrics beside them."""
    from gplace.methods import LEARNED

    if (run_dir / "policy.pt").exists():
        _fail(f"{run_dir} holds a training run (policy.pt): gplace place would replace its placement.json, "
              f"trace.json and .hydra/ record; give gplace place its own hydra.run.dir (to place with that run's "
              f"policy: checkpoint={run_dir / 'policy.pt'} hydra.run.dir=<another directory>)", log_files=False)
    if (run_dir / "checkpoint.pt").exists() and method not in LEARNED:
        _fail(f"{run_dir} holds a search's checkpoint.pt: method={method} would replace that search's "
              "placement.json, trace.json and .hydra/ record; give it its own hydra.run.dir", log_files=False)


def _place_budget(cfg: DictConfig, method: str) -> str | None:
    """``cfg.budget``, else ``cfg.samples`` samples for a policy file or a learned search; none (with a WARNING if
    ``cfg.budget`` is given) for a baseline or a pipeline placer other than ``local_search``, which take no budget
    (``ilp`` takes one in seconds, as HiGHS's time limit); none for ``local_search`` without ``cfg.budget`` (it
    keeps its own 10 s: 16 evaluations would barely move it)."""
    from gplace.methods import LEARNED, Budget, pipeline_placers, unused_budget

    given, parsed = cfg.get("budget"), None
    if given is not None:
        try:
            parsed = Budget.parse(given)
        except ValueError as err:
            _fail(f"budget={given!r}: {err}")
    if method in pipeline_placers() and given is None and _given("samples"):  # its budget is budget=, not samples
        log.warning("samples=%s is unused: pipeline placer %s takes budget= (e.g. budget='%s samples' or budget=30)",
                    cfg.samples, method, cfg.samples)
    if unused := unused_budget(method, parsed):  # a baseline, or a pipeline placer without a budget
        if given is not None:
            log.warning("budget=%s is unused: %s", given, unused)
        return None
    if given is not None:
        if method in LEARNED and parsed.samples == 0:  # samples=0 was refused, budget='0 samples' taken
            _fail(f"budget={given!r}: method {method} is a search, which measures at least one sample (0 samples is "
                  "for a policy file: its greedy placement alone)")
        if _given("samples"):
            log.warning("samples=%s is unused: budget=%s is the search's budget", cfg.samples, given)
        return given
    if method in pipeline_placers():
        return None
    if method in LEARNED and cfg.samples == 0:
        _fail(f"samples=0: method {method} is a search, which measures at least one sample (0 samples is for a "
              "policy file: its greedy placement alone)")
    return f"{cfg.samples} samples"


def _summary_now(doc: dict, graph, cluster, placement) -> tuple[dict, str, Any]:
    """The per-device summary of a placement file, computed now, the model that made it, and that model's
    :class:`~gplace.runtime.Measurement` of the placement, as ``gplace place`` writes one: the file's
    ``pipe-v3/<schedule>/m<M>`` pipeline where its runtime is that simulator or an older one (``pipe-v2/...``,
    whose file then says what it measured; bubble and micro-batches in flight too), else one ``sim-v1`` step (a
    real pipeline's run included, as :func:`gplace.experiment.write_report` keeps it)."""
    import re

    from gplace.pipeline import PipelineSimulator
    from gplace.runtime import Simulator
    from gplace.show import device_summary

    piped = re.fullmatch(r"pipe-v[0-9]+/(gpipe|1f1b)/m([1-9][0-9]*)", str(doc.get("runtime")))
    if piped is None:
        return device_summary(graph, cluster, placement), "sim-v1", Simulator().measure(graph, cluster, placement)
    sim = PipelineSimulator(int(piped[2]), piped[1])
    summary = device_summary(graph, cluster, placement, sim.simulate(graph, cluster, placement))
    return summary, sim.id, sim.measure(graph, cluster, placement)


def show(argv: list[str]) -> None:
    """``gplace show placement.json``: per device, ops, compute seconds, peak memory, bytes in and out, and the
    step time; ``--draw out.png --graph graph.json`` draws the graph coloured by device."""
    import argparse

    parser = argparse.ArgumentParser(prog="gplace show", description=(
        "per device, ops, compute seconds, peak memory, bytes in and out, and the step time; --draw out.png --graph "
        "graph.json draws the graph coloured by device"))
    parser.add_argument("placement", help="a placement.json written by gplace (gplace, gplace place, ...), or its "
                                          "run directory")
    parser.add_argument("--graph", help="the graph file it places (needed by --draw; with --cluster, the placement "
                                        "is checked against both and its per-device figures computed now)")
    parser.add_argument("--cluster", help="the cluster file (with --graph: the figures computed now)")
    parser.add_argument("--draw", metavar="IMAGE", help="draw the graph, ops coloured by device, to this image (PNG; "
                                                        "SVG or PDF where its suffix says so)")
    args = parser.parse_args(argv)
    logging.basicConfig(format="[%(name)s][%(levelname)s] - %(message)s")  # the readers' WARNINGs, on stderr
    try:
        _show(args)
    except (ValueError, OSError) as err:
        _fail(f"{type(err).__name__}: {err}")


def _placement_file(path: Path) -> Path:
    """``path``, or the ``placement.json`` of the run directory ``path`` (``IsADirectoryError`` before); a run
    that wrote none ends in one line saying whether it stopped before the end (a checkpoint) or never ran."""
    if not path.is_dir():
        return path
    if (path / "placement.json").is_file():
        return path / "placement.json"
    if (path / "checkpoint.pt").is_file():
        resume = _quoted(f"hydra.run.dir={path}")
        why = f"it stopped before the end (checkpoint.pt is there): run the same command with {resume} to resume it"
    else:
        why = "see its cli.log" if (path / "cli.log").is_file() else "give a run's directory or its placement.json"
    _fail(f"{path} is a run directory without a placement.json: {why}")


def _show(args) -> None:
    from rich.table import Table

    from gplace.importers import load_cluster, load_graph
    from gplace.ir import load_json, placement_from_dict
    from gplace.ir.serialize import check_placement_header
    from gplace.show import MODEL_KEY, SUMMARY_KEY, check_shown, draw_placement

    if args.cluster and not args.graph:
        raise ValueError("--cluster needs --graph (the graph file the placement is for)")
    source = _placement_file(Path(args.placement))
    if args.draw:
        _check_not_an_input(Path(args.draw), source, args.graph, args.cluster)
    doc = load_json(source)
    check_placement_header(doc, args.placement)
    check_shown(doc, args.placement, with_summary=not (args.graph and args.cluster))  # else computed below
    graph = load_graph(args.graph) if args.graph else None
    if graph is not None and doc.get("graph_fingerprint") not in (None, graph.fingerprint):
        raise ValueError(f"{args.placement} places another graph (fingerprint {doc.get('graph_fingerprint')!r}) "
                         f"than {args.graph} ({graph.fingerprint!r})")
    summary, computed, cluster, now = doc.get(SUMMARY_KEY), None, None, None
    title = stored = (f"{doc.get('graph') or 'an unnamed graph'} on {doc.get('cluster') or 'an unnamed cluster'} "
                      f"({doc.get('runtime') or 'step time'}: "
                      f"{_ms(doc['step_time']) if doc.get('step_time') is not None else 'not measured'})")
    if graph is not None and args.cluster:  # the placement checked against both, and its figures computed now
        cluster = load_cluster(args.cluster)
        summary, computed, now = _summary_now(doc, graph, cluster, placement_from_dict(doc, graph, cluster))
        title = (f"{graph.name} on {cluster.name} ({computed}, computed now: "
                 f"{_ms(now.step_time) if now.ok else 'failed: ' + _first_reason(now.reason)})")
    table = Table(title=_encodable(title))
    piped = any("bubble" in row for row in (summary or {}).values())  # a pipelined mini-batch's summary
    # a pipeline's devices by torch-pipeline-v1's ranks (every placement lists its stages; one step has no ranks)
    rank_of = {d: k for k, d in enumerate(doc.get("stages") or {})} if piped else {}
    columns = ("rank",) * bool(rank_of) + ("device", "ops", "compute", "peak memory", "bytes in", "bytes out") \
        + ("bubble", "in flight") * piped
    counts = {d: 0 for d in doc.get("devices", [])}
    for device in doc["placement"].values():
        counts[device] = counts.get(device, 0) + 1
    rows = []
    for device in sorted(counts, key=lambda d: rank_of.get(d, len(rank_of))):
        row = (summary or {}).get(device)
        cells = ([_ms(row["compute_seconds"]), _bytes(row["peak_memory"]) + _over(row, device, cluster),
                  _bytes(row["bytes_in"]), _bytes(row["bytes_out"])] if row else ["?"] * 4)
        if piped:
            cells += [f"{row['bubble']:.0%}", str(row["in_flight"])] if row and "bubble" in row else ["?"] * 2
        rank = [str(rank_of.get(device, "-"))] if rank_of else []
        rows.append((*rank, _encodable(device), str(counts[device]), *cells))
    for column in columns:
        table.add_column(column, justify="left" if column == "device" else "right", overflow="fold")
    for row in rows:
        table.add_row(*row)
    console = _console()
    _fit_off_a_terminal(console, table)  # a pipeline's nine columns cut every device name to /job:localhost/rep...
    console.print(table)
    if summary is None:
        console.print("(no per-device summary in the file: give --graph and --cluster to compute one)", soft_wrap=True)
    elif doc.get(MODEL_KEY):
        console.print(f"(the per-device figures and trace.json are the {_escaped(doc[MODEL_KEY])} model of this "
                      f"placement, not {_escaped(doc.get('runtime'))}'s measurement)", soft_wrap=True)
    elif computed is not None and doc.get("runtime") and computed != doc.get("runtime"):
        console.print(f"(the per-device figures are the {computed} model of this placement, computed now, not "
                      f"{_escaped(doc.get('runtime'))}'s measurement)", soft_wrap=True)
    recorded = doc.get("cluster") is not None or doc.get("step_time") is not None  # not a hand-written file's
    if now is not None and recorded and (cluster.name != doc.get("cluster") or now.step_time != doc.get("step_time")):
        console.print(_encodable(f"(the file's own run: {stored})"), soft_wrap=True)
    if args.draw:
        if graph is None:
            raise ValueError("--draw needs --graph (the graph file the placement is for)")
        if doc.get("graph_fingerprint") not in (None, graph.fingerprint):
            raise ValueError(f"{args.placement} is for graph {doc.get('graph')!r} ({doc['graph_fingerprint']!r}), "
                             f"not {graph.name!r} ({graph.fingerprint!r})")
        console.print(f"wrote {draw_placement(graph, list(counts), doc['placement'], args.draw)}", soft_wrap=True)


def _check_not_an_input(draw: Path, *inputs: str | Path | None) -> None:
    """Refuse a ``--draw`` path that is one of the files ``gplace show`` reads: the image would replace it."""
    for given in inputs:
        if given is not None and draw.resolve() == Path(given).resolve():
            raise ValueError(f"--draw {draw} is the file {given} being shown: give the image another path")


def _first_reason(reason: str) -> str:
    """A failure's first clause (``"; "`` separates one per device), and how many more: a title, not a wall of text
    (32 devices out of memory gave 24 lines before the table, which marks each device over its memory)."""
    first, *more = reason.split("; ")
    return first + (f" (and {len(more)} more)" if more else "")


def _over(row: dict, device: str, cluster) -> str:
    """`` > <capacity>`` where a device's peak memory (computed now on ``cluster``) is over its memory."""
    if cluster is None or device not in cluster.device_names:
        return ""
    memory = cluster.devices[cluster.index(device)].memory
    return f" > {_bytes(memory)}" if row["peak_memory"] > memory else ""


def _bytes(n: float) -> str:
    for unit in ("B", "KB", "MB"):
        if abs(n) < 1000:
            return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's time limit, ``kill``), ended as Ctrl-C is: pools stopped, one line, exit status 143."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def _version() -> str:
    """What ``gplace --version`` prints: gplace's version and Hydra's."""
    from gplace import __version__

    return f"gplace {__version__} (Hydra {hydra.__version__})"


def main() -> None:
    """Console-script entry point: ``gplace [train] [overrides]`` runs the experiment; ``gplace bench
    [overrides]`` the bench; ``gplace place [method=heft|pretrained|policy.pt] [overrides]`` places without
    training a policy (``method=learned`` trains one for ``samples=16`` samples unless ``budget=`` is given, not the
    trainer's default of ``gplace.place(method="learned")``); ``gplace show placement.json`` prints and draws a
    placement. Ctrl-C or SIGTERM ends it in one line, exit status 130 or 143, at any moment until it returns
    (SIGTERM's handler is then given back)."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        _dispatch()
    except KeyboardInterrupt as err:  # outside a job (_guard's): while Hydra composes, between jobs, or ends
        _interrupted(err, _outside_hint(HydraConfig.get() if HydraConfig.initialized() else None))
    finally:  # a SIGTERM while the interpreter exits ends it silently, not with "Exception ignored ... Terminated"
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _write_version() -> None:
    """Print the versions; a closed stdout (``gplace --version | true``, ``>&-``) ends quietly, not in a traceback."""
    if sys.stdout is None:
        return
    try:
        sys.stdout.write(_version() + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_gone()


def _dispatch() -> None:
    """Run the command ``sys.argv`` names."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the CLI's own process (and its workers): TensorFlow quiet,
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # without its oneDNN notice; the library leaves both alone
    _escape_unencodable(sys.stdout)
    if "--version" in sys.argv[1:]:  # Hydra's own flag printed Hydra's version alone
        _write_version()
        return
    command = sys.argv[1] if len(sys.argv) > 1 else None
    if command == "show":
        show(sys.argv[2:])
        return
    if command in COMMANDS:  # "show" returned above
        del sys.argv[1]
    elif command is not None and not command.startswith(("-", "~")) and "=" not in command:
        _fail(_unknown_command_message(command))
    _check_job_dir(sys.argv[1:])
    _check_launcher(sys.argv[1:])
    _check_config_command(command if command in COMMANDS else "train", sys.argv[1:])
    _check_cases_quoted(sys.argv[1:])
    try:
        {"bench": _bench_main, "place": _place_main}.get(command, _hydra_main)()
    except ValueError as err:  # Hydra's, raised before any job, for flags that do not combine
        if not str(err).startswith(_HYDRA_ONE_MODE):
            raise
        _fail(_one_mode_message(sys.argv[1:]))


COMMANDS = ("train", "place", "bench", "show")
"""The commands of ``gplace``; anything else is Hydra's (overrides ``key=value``, flags)."""


def _unknown_command_message(word: str) -> str:
    """For a first argument that is neither a command nor an override (``gplace shwo r2``: Hydra said "missing
    EQUAL"), naming the closest command."""
    import difflib

    close = difflib.get_close_matches(word, COMMANDS, n=1)
    guess = f"did you mean {close[0]!r}? " if close else ""
    return (f"unknown command {word!r}: {guess}gplace takes {', '.join(COMMANDS)}, or overrides key=value for a "
            "training run")


def _encodable(text: str) -> str:
    """``text`` :func:`_escaped`, as stdout's encoding prints it (escapes where it cannot, as
    :func:`_escape_unencodable` writes them), so that a table is laid out for the text it prints: escaped after the
    layout, a name ``/GPU:ä0`` widened its row past the table's border."""
    text = _escaped(text)
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:
        return text


_BIDI_CONTROLS = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029)
"""Bidirectional-text controls (a right-to-left override reverses the rest of the line on screen) and the Unicode
line and paragraph separators."""
_CONTROL_ESCAPES = {c: repr(chr(c))[1:-1] for c in (*range(0x20), *range(0x7F, 0xA0), *_BIDI_CONTROLS)}
"""Each C0 and C1 control character (and DEL) and each of :data:`_BIDI_CONTROLS` -> its escape as ``repr`` writes
it (``\\x1b``, ``\\n``, ``\\u202e``)."""
_TERMINAL_ESCAPES = {c: e for c, e in _CONTROL_ESCAPES.items() if chr(c) not in "\n\t"}
"""The same but newlines and tabs, which an error's own text may hold."""


def _escaped(text: object) -> str:
    """``text`` with its control characters escaped (ESC as ``\\x1b``, a newline as ``\\n``): a name from a file
    (graph, cluster, device, runtime) printed raw cleared the screen, set the terminal's title or forged a line
    of cli.log."""
    return str(text).translate(_CONTROL_ESCAPES)


def _escape_unencodable(stream) -> None:
    """Make ``stream`` write what its encoding cannot (a name ``grâphe`` under ``LC_ALL=C`` or
    ``PYTHONIOENCODING=ascii``) as escapes (``gr\\xe2phe``): a finished run's last lines and every log line naming
    it failed, the run reported as an error."""
    import codecs

    if isinstance(stream, io.TextIOWrapper) and codecs.lookup(stream.encoding).name != "utf-8":
        stream.reconfigure(errors="backslashreplace")


_NO_JOB_FLAGS = ("-h", "--help", "--hydra-help", "-c", "--cfg", "-i", "--info", "-sc", "--shell-completion",
                 "-cd", "--config-dir", "-cp", "--config-path")
"""Hydra's flags that run no job, or name a config directory of one's own (whose config may set the job's folder)."""


CONFIG_COMMANDS = {"config": "train", "place": "place", "bench": "bench", "bench_paper": "bench",
                   "bench_pipeline": "bench"}
"""The command each of gplace's own primary configs is for."""


def _check_config_command(command: str, args: list[str]) -> None:
    """Refuse one of gplace's primary configs given to another command (``gplace --config-name bench_pipeline``
    without ``bench`` said "seed must be a whole number ..., got None"), naming the command it is for."""
    if any(arg.split("=", 1)[0] in ("--config-path", "-cp") for arg in args):  # a config folder of one's own
        return
    name = None
    for i, arg in enumerate(args):
        if arg in ("--config-name", "-cn") and i + 1 < len(args):
            name = args[i + 1]
        elif arg.startswith(("--config-name=", "-cn=")):
            name = arg.split("=", 1)[1]
    wanted = CONFIG_COMMANDS.get(name)
    if wanted is not None and wanted != command:
        _fail(f"--config-name {name} is the config of `{_PROGRAMS[wanted]}`, not of `{_PROGRAMS[command]}`: run "
              f"`{_PROGRAMS[wanted]} --config-name {name} ...`")


def _check_cases_quoted(args: list[str]) -> None:
    """Refuse a bench's ``cases=`` whose overrides are not quoted (``cases=[[graph=x,cluster=y]]``: Hydra's own "no
    viable alternative at input '[[graph='"), with the quoted form."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    for arg in args:
        key, _, value = arg.partition("=")
        if key.lstrip("+") != "cases" or not re.search(r"\[\s*[\w.@/~+-]+=", value):
            continue
        try:  # a quoted value holding "[name=" (a case's own override's text) parses
            OverridesParser.create().parse_overrides([arg])
        except HydraException:
            _fail(f"{arg}: quote each override of a case, as a list of lists of strings: "
                  "\"cases=[['graph=inception_v3','cluster=paper_4gpu']]\" (the shell's double quotes around it "
                  "all)")


SUBMITIT_LAUNCHERS = ("gplace_slurm", "submitit_slurm", "submitit_local")
"""The ``hydra/launcher`` options the hydra-submitit-launcher plugin (the ``cluster`` extra) provides."""


def _check_launcher(args: list[str]) -> None:
    """Refuse a submitit launcher without its plugin in one line naming the extra (Hydra's own: "Could not load
    'hydra/launcher/submitit_slurm'", its search path, and exit status 1)."""
    from gplace.extras import require

    launcher = next((a.split("=", 1)[1] for a in args if a.lstrip("+").startswith("hydra/launcher=")), None)
    if launcher in SUBMITIT_LAUNCHERS:
        try:
            require("hydra_plugins.hydra_submitit_launcher", "cluster", f"hydra/launcher={launcher}")
        except MissingExtraError as err:
            _fail(f"ImportError: {err}")


def _check_job_dir(args: list[str]) -> None:
    """Refuse, in one line naming the folder and the override that moves it, a job (sweep) directory that Hydra
    could not make (Hydra's default ``outputs/<date>/<time>`` in a read-only working directory): Hydra's own failure,
    before any job, was a chained traceback. Nothing for a directory given with interpolations or quotes."""
    flags = {a.split("=", 1)[0] for a in args if a.startswith("-")}
    if flags & set(_NO_JOB_FLAGS):
        return
    sweep = bool(flags & {"-m", "--multirun"}) or "hydra.mode=MULTIRUN" in (a.lstrip("+") for a in args)
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    given = next((a.split("=", 1)[1] for a in args if a.lstrip("+").startswith(f"{key}=")), None)
    if given is not None and any(c in given for c in "$\\'\""):
        return
    root = "multirun" if sweep else "outputs"
    folder = _unwritable(Path(given if given is not None else root))
    if folder is None:
        return
    fix = f"give a writable directory with {key}=/path/to/dir"
    if given is not None:
        _fail(f"{key}={given}: {folder} {_no_folder_there(folder)}: {fix}")
    _fail(f"{folder} {_no_folder_there(folder)}, and Hydra writes each {'sweep' if sweep else 'run'} under "
          f"./{root}/ of the working directory by default: {fix}, or start gplace in a writable working directory")


def _no_folder_there(path: Path) -> str:
    """Why :func:`_unwritable` refused ``path``."""
    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "is a symbolic link loop (or goes through one)"
        if err.errno == errno.ENAMETOOLONG:
            return "has a name too long for the file system"
        if err.errno == errno.ENOENT and os.path.islink(path):
            try:
                target = os.readlink(path)
            except OSError:
                return "is a dangling symbolic link (what it points to does not exist)"
            return f"is a dangling symbolic link (to {target}, which does not exist)"
        return f"cannot be used: {err.strerror or err}"
    return "is not writable" if path.is_dir() else "is a file, not a folder"


def _unwritable(path: Path) -> Path | None:
    """The nearest existing path of ``path`` (itself or the folder it would be made in) if no folder can be made
    there: a folder that cannot be written to (read-only, or no permission), or a file; a symbolic link whose target
    does not exist or that loops, or a name too long for the file system (the highest such path); else ``None``.
    (``Path.exists()`` is false for a dangling or looping link, and raised for a name too long.)"""
    folder = path.absolute()
    while folder != folder.parent:
        try:
            os.stat(folder)
        except OSError as err:
            if err.errno not in (errno.ENOENT, errno.ENOTDIR):  # a loop, a name too long: from the highest such
                while folder.parent != folder.parent.parent and _stat_errno(folder.parent) == err.errno:
                    folder = folder.parent
                return folder
            if os.path.lexists(folder):  # a link to nothing: Hydra's mkdir of it fails (it exists)
                return folder
            folder = folder.parent
        else:
            break
    return None if folder.is_dir() and os.access(folder, os.W_OK) and _can_make_folder_in(folder) else folder


def _can_make_folder_in(folder: Path) -> bool:
    """Whether a folder can be made in ``folder``, tried (and removed): ``os.access`` says yes to root on ``/sys``
    and ``/proc``, where making one fails."""
    import tempfile

    try:
        os.rmdir(tempfile.mkdtemp(prefix=".gplace-", dir=folder))
    except OSError:
        return False
    return True


def _stat_errno(path: Path) -> int | None:
    """The errno of ``os.stat(path)``, ``None`` if it succeeds."""
    try:
        os.stat(path)
    except OSError as err:
        return err.errno
    return None


_HYDRA_ONE_MODE = "Only one of --run, --multirun, --cfg, --info"
"""How Hydra's ValueError for flags that do not combine begins."""


def _one_mode_message(args: list[str]) -> str:
    """What :func:`_dispatch` says when Hydra refuses ``args`` for naming more than one of ``-m``, ``--cfg``,
    ``--info``, ``--run`` and ``--shell-completion``."""
    multirun = any(a in ("-m", "--multirun") for a in args)
    shown = any(a in ("-c", "--cfg", "-i", "--info") or a.startswith(("--cfg=", "--info=")) for a in args)
    if multirun and shown:
        return "--cfg/--info do not combine with -m: drop -m to see one job's config"
    return "Hydra takes only one of -m (--multirun), --run, --cfg, --info and --shell-completion: drop the others"
