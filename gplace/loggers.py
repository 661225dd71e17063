"""Metric loggers: none, a local JSON-lines file, and Weights & Biases."""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import math
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from gplace.ir.errors import error_summary
from gplace.ir.serialize import (
    finite_or_null,
    make_folder,
    refuse_special_file,
    write_bytes_atomic,
    write_error,
    write_text_atomic,
)

log = logging.getLogger(__name__)

PROBE_SECONDS = 3.0
"""How long :class:`WandbLogger` waits for the W&B server to accept a connection before going offline."""
INIT_SECONDS = 15.0
"""``wandb.init``'s own time limit online (W&B's default is 90 s, then a retry)."""


class Logger(Protocol):
    """Where a trainer sends metrics.

    A scalar that is not finite (``inf`` where every sample of a rollout failed) is no value: :class:`JsonlLogger`
    writes ``null``, :class:`WandbLogger` leaves it out of the run's history (a gap in the chart; the summary keeps
    the last finite value).
    """

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Record the run's resolved configuration."""

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        """Record namespaced scalars (``charts/…``, ``losses/…``) at ``step``."""

    def finish(self) -> None:
        """Flush and close. A logger whose ``finish`` takes ``exit_code`` is given ``exit_code=1`` when the run
        raised (see :func:`finish_logger`); one without it is called with no argument."""


LOGGER_METHODS = ("log_config", "log_scalars", "finish")
"""The methods of :class:`Logger`, which an object given as a logger must have."""


def check_logger(logger: object) -> None:
    """Raise a ``TypeError`` naming ``logger`` unless it is ``None`` or has :data:`LOGGER_METHODS`."""
    if logger is not None and not all(callable(getattr(logger, name, None)) for name in LOGGER_METHODS):
        raise TypeError(f"logger must be a gplace Logger (with {', '.join(LOGGER_METHODS)}; e.g. "
                        f"gplace.loggers.JsonlLogger(path)), got {logger!r:.200}")


def finish_logger(logger: Logger, exit_code: int | None = None) -> None:
    """``logger.finish(exit_code=exit_code)`` where its ``finish`` takes an ``exit_code`` (1: the run failed), else
    ``logger.finish()``."""
    if exit_code is not None and _takes_exit_code(logger.finish):
        logger.finish(exit_code=exit_code)
    else:
        logger.finish()


def _takes_exit_code(method: Callable[..., Any]) -> bool:
    try:
        return "exit_code" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # a builtin or C function without a signature
        return False


class NullLogger:
    """Logs nothing."""

    def log_config(self, config: Mapping[str, Any]) -> None:  # noqa: D102
        pass

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:  # noqa: D102
        pass

    def finish(self) -> None:  # noqa: D102
        pass


class JsonlLogger:
    """Appends one JSON object per call to a file (``{"step": …, "charts/…": …}``); survives a resume."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        make_folder(self.path.parent)
        refuse_special_file(self.path, "the JSON-lines file gplace appends to")  # a FIFO blocks every write

    def log_config(self, config: Mapping[str, Any]) -> None:  # noqa: D102
        self._write({"config": dict(config)})

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:  # noqa: D102
        self._write({"step": step, **_finite_scalars(scalars)})

    def finish(self) -> None:  # noqa: D102
        pass

    def log_results(self, summary: Mapping[str, float], rows: Sequence[Mapping[str, Any]],
                    files: Mapping[str, str | Path]) -> None:
        """One record: ``{"summary": ..., "table": rows, "files": {name: path}}``."""
        self._write({"summary": _finite_scalars(summary), "table": list(rows),
                     "files": {k: str(v) for k, v in files.items()}})

    def drop_from(self, step: float) -> None:
        """Drop the step records at ``step`` or later (a killed run's updates after its last checkpoint, which a
        resumed run logs again; ``-math.inf``: every step record); other records stay. The file is replaced
        atomically."""
        if not self.path.exists():
            return
        lines = self.path.read_bytes().splitlines(keepends=True)
        kept = [line for line in lines if _kept_before(_record_of(line), step)]
        if len(kept) < len(lines):
            write_bytes_atomic(self.path, b"".join(kept))

    def restore_steps(self, history: Sequence[Mapping[str, Any]]) -> int:
        """Write back the step records of ``history`` (a checkpoint's ``{"update": u, scalar: value}`` per update)
        that the file lacks (a file truncated, or replaced, after the checkpoint), each before the first later step
        record; returns how many. The file is replaced atomically."""
        lines = self.path.read_bytes().splitlines(keepends=True) if self.path.exists() else []
        steps = [_step_of(_record_of(line)) for line in lines]
        have = set(steps)
        missing = sorted((r for r in history if r["update"] not in have), key=lambda r: r["update"])
        if not missing:
            return 0
        queue = [(r["update"], self._line({"step": r["update"], **{k: _finite(v) for k, v in r.items()
                                                                   if k != "update"}})) for r in missing]
        out: list[bytes] = []
        for line, step in zip(lines, steps, strict=True):
            while queue and step is not None and queue[0][0] < step:
                out.append(queue.pop(0)[1].encode())
            out.append(line if line.endswith(b"\n") else line + b"\n")
        write_bytes_atomic(self.path, b"".join(out + [text.encode() for _, text in queue]))
        return len(missing)

    @staticmethod
    def _line(record: Mapping[str, Any]) -> str:
        return json.dumps(finite_or_null(record), default=str) + "\n"  # JSON has no NaN

    def _write(self, record: Mapping[str, Any]) -> None:
        line = self._line(record)
        try:
            with self.path.open("a") as f:
                f.write(line)
        except OSError as err:  # a full disk: name the file
            raise write_error(self.path, err) from None


def _record_of(line: bytes) -> dict[str, Any] | None:
    """A JSONL line's object (``{}`` for JSON that is not one); ``None`` for a torn or undecodable line (one Python
    cannot read too: nested too deeply, a number past its int-conversion limit)."""
    try:
        record = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    return record if isinstance(record, dict) else {}


def _step_of(record: Mapping[str, Any] | None) -> int | None:
    """The step of a step record; ``None`` for any other record, or none."""
    step = record.get("step") if record else None
    return step if isinstance(step, int) else None


def _kept_before(record: Mapping[str, Any] | None, step: float) -> bool:
    """Whether :meth:`JsonlLogger.drop_from` keeps a line: a record other than a step record, or a step record
    before ``step`` (a torn line is dropped)."""
    at = _step_of(record)
    return record is not None and (at is None or at < step)


_FALLBACK = {"online": "offline", "offline": "disabled"}


def _started(wandb: Any, mode: str, server: str, kwargs: dict[str, Any]) -> tuple[Any, str]:
    """``wandb.init`` in ``mode``, else in each mode of :data:`_FALLBACK` after it (a server that went away, a run
    folder whose path W&B cannot encode), saying why once one starts; the first error where even a disabled run
    fails (a bad setting)."""
    failures: list[tuple[str, Exception]] = []
    while True:
        try:
            settings = {} if failures else {"settings": wandb.Settings(init_timeout=INIT_SECONDS)}
            run = wandb.init(mode=mode, **settings, **kwargs)
        except Exception as err:  # wandb.errors.CommError, UsageError, UnicodeEncodeError, ...
            failures.append((mode, err))
            if mode not in _FALLBACK:
                raise failures[0][1] from None
            mode = _FALLBACK[mode]
            continue
        for tried, err in failures:
            where = f" at {server}" if tried == "online" else ""
            log.warning("W&B: %s start%s failed (%s: %s); %s", tried, where, type(err).__name__,
                        error_summary(err, limit=200),
                        "logging offline (sync later with `wandb sync`)" if _FALLBACK[tried] == "offline" else
                        "W&B is off for this run (metrics.jsonl in the run directory keeps every metric)")
        return run, mode


class WandbLogger:
    """Weights & Biases; offline when no API key is set (or as ``WANDB_MODE`` says), or a W&B run of your own.

    Online, the W&B server is probed first (:data:`PROBE_SECONDS`); when it cannot be reached (no network, a
    firewall) the run is logged offline instead, with a warning naming the server and how to sync later, so a
    job never waits on the network. An online ``wandb.init`` that still fails falls back the same way; an offline
    one that fails (a run folder whose path W&B cannot encode) turns W&B off for the run, with a warning: the run's
    ``metrics.jsonl`` keeps every metric.

    Args:
        project: W&B project (default: ``"gplace"``).
        mode: ``"online"``, ``"offline"`` or ``"disabled"``; ``None`` picks from ``WANDB_MODE`` and the key.
        name: run name (default: W&B's).
        dir: where W&B writes its files (default: the working directory). The run's id is kept there
            (``wandb_run_id``), so a search resumed from its ``checkpoint.pt`` in the same directory continues
            the same W&B run (online: W&B does not resume an offline run, and says so in a warning); without a
            checkpoint there when the logger is made (a fresh start) a new run begins.
        group: run group, e.g. the sweep of a multirun (default: none).
        run: an active ``wandb`` run of your own to log into instead of starting one (then give none of ``mode``,
            ``name``, ``dir``, ``group``). gplace never finishes it (:meth:`finish` does nothing): you do.

    A run gplace starts is its own (``wandb.init(reinit="create_new")``, wandb 0.19.10 or later): a run you have
    active stays active and stays ``wandb.run``; gplace finishes only the runs it started. It starts at the
    logger's first use (its first config, scalars or results, or reading :attr:`run` or :attr:`mode`), not when
    the logger is made, so a search refused before it logs anything (another search's run directory) opens no
    run. A search finishes its logger's run when it ends (or fails), so one logger given to several searches (a
    notebook cell run again) logs each into a run of its own: the first use after :meth:`finish` starts a new run
    with the same settings, never the kept one again.

    Every scalar is logged against the custom x-axis ``step``, the search's update (negative for a warm start's
    imitation steps, which W&B's own step, only ever increasing, would drop); in a run of your own only gplace's
    scalars are, each named the first time it is logged. A scalar that is not finite is left out (see
    :class:`Logger`).
    """

    def __init__(self, project: str = "gplace", mode: str | None = None, name: str | None = None,
                 dir: str | None = None, group: str | None = None, run: Any = None) -> None:
        import wandb

        for key, value in {"project": project, "mode": mode, "name": name, "dir": dir, "group": group}.items():
            if value is not None and not isinstance(value, str | (os.PathLike if key == "dir" else str)):
                raise ValueError(f"WandbLogger: {key} must be a string, got {value!r}")  # W&B's: many lines
        self._wandb = wandb
        self._owns_run = run is None
        self._settings = (project, mode, name, dir, group)
        self._finished = False
        self._stepped: set[str] = set()
        self._run: Any = None
        self._lost = False  # W&B failed mid-run (its service died): off for the rest of the run
        if run is not None:
            if any(arg is not None for arg in (mode, name, dir, group)):
                raise ValueError("WandbLogger: give a run of your own or mode, name, dir and group, not both")
            if not callable(getattr(run, "log", None)) or not hasattr(getattr(run, "settings", None), "mode"):
                raise TypeError(f"WandbLogger: run must be an active wandb run (what wandb.init() returns), got "
                                f"{run!r:.200}")
            self._run, self._mode = run, run.settings.mode
            self._define_step()
        else:
            _check_mode(mode)
            if dir is not None and Path(dir).exists() and not Path(dir).is_dir():
                raise NotADirectoryError(f"WandbLogger: dir {str(dir)!r} is a file, not a folder")
            self._resume = _resumed_id(dir)  # as the run directory is now, before a search writes its checkpoint

    @property
    def run(self) -> Any:
        """The ``wandb`` run logged into last (finished or not); started with this logger's settings where none
        was yet."""
        return self._run if self._run is not None else self._active()

    @property
    def mode(self) -> str:
        """The mode :attr:`run` was started in (``"offline"`` after a fallback)."""
        if self._run is None:
            self._active()
        return self._mode

    def _define_step(self) -> None:
        """Log scalars against ``step`` (in a run of your own, only gplace's: see :meth:`log_scalars`)."""
        self._run.define_metric("step")
        if self._owns_run:
            self._run.define_metric("*", step_metric="step")

    def _active(self) -> Any:
        """The run to log into: started at the first use, and again where :meth:`finish` finished gplace's own (the
        logger given to another search: a new run, never the kept one again)."""
        if self._run is None or self._finished:
            self._start(*self._settings, resume=self._resume if self._run is None else {})
            self._define_step()
            self._finished = self._lost = False
        return self._run

    def _start(self, project: str, mode: str | None, name: str | None, dir: str | None, group: str | None,
               resume: dict[str, str]) -> None:
        """Start gplace's own run (offline when the server cannot be reached), resuming the one ``resume`` names
        (``id`` and ``resume``, from :func:`_resumed_id`)."""
        wandb = self._wandb
        _check_mode(mode)
        if mode is None:
            mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
        server = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")
        if mode == "online" and not _reachable(server, PROBE_SECONDS):
            log.warning("W&B: cannot reach %s within %.0f s; logging offline (sync later with `wandb sync`)",
                        server, PROBE_SECONDS)
            mode = "offline"
        kwargs = {"project": project, "name": name, "dir": dir, "group": group, "reinit": "create_new", **resume}
        self._run, self._mode = _started(wandb, mode, server, kwargs)
        if self._mode == "offline" and "resume" in kwargs:
            log.warning("W&B does not resume an offline run (wandb issue 4624): this resumed search writes a second "
                        "offline run folder under id %s, which `wandb sync` may not join to the first; metrics.jsonl "
                        "in the run directory is the complete record", self._run.id)
        if dir is not None and self._mode != "disabled":
            try:
                write_text_atomic(Path(dir) / RUN_ID_FILE, self._run.id)
            except OSError as err:  # a read-only dir: W&B logs elsewhere (its own fallback), the search goes on
                log.warning("W&B: cannot keep the run's id in %s (%s): a resumed search starts a new W&B run", dir,
                            error_summary(err, limit=200))

    @contextlib.contextmanager
    def _kept_going(self) -> Any:
        """Where a W&B call raises once its run has started (its service died, a connection reset), say so once and
        turn W&B off for the rest of the run: metrics.jsonl keeps every metric, and a search does not end for it.
        Errors of the data logged (``TypeError``, ``ValueError``, ``KeyError``) are raised as they are; W&B's
        service is torn down only for a run gplace started (``wandb.teardown`` finishes every run of the process)."""
        try:
            yield
        except (TypeError, ValueError, KeyError):
            raise
        except Exception as err:  # noqa: BLE001  # wandb's own errors, ConnectionResetError, MailboxClosedError, ...
            if not self._lost:
                log.warning("W&B stopped working (%s: %s): it is off for the rest of this run (metrics.jsonl in the "
                            "run directory keeps every metric)", type(err).__name__, error_summary(err, limit=200))
                if self._owns_run:
                    with contextlib.suppress(Exception):  # its service gone: no traceback of W&B's own at exit
                        self._wandb.teardown()
            self._lost = True

    def log_config(self, config: Mapping[str, Any]) -> None:  # noqa: D102
        run = self._active()
        if not self._lost:
            with self._kept_going():
                run.config.update(dict(config), allow_val_change=True)

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:  # noqa: D102
        kept = {k: v for k, v in _finite_scalars(scalars).items() if v is not None}
        run = self._active()
        if self._lost:
            return
        with self._kept_going():
            if not self._owns_run:  # a run of your own: only gplace's scalars go against ``step``
                for key in kept.keys() - self._stepped:
                    run.define_metric(key, step_metric="step")
                self._stepped.update(kept)
            run.log({"step": step, **kept})

    def log_results(self, summary: Mapping[str, float], rows: Sequence[Mapping[str, Any]],
                    files: Mapping[str, str | Path]) -> list[Any]:
        """The final figures as the run's summary, ``rows`` as the table ``results/placements``, and each
        existing file of ``files`` (name -> path) as an artifact ``<name>-<run id>`` (one per run: a resumed run
        adds versions to its own), of type ``"model"`` for a ``.pt`` file, else ``name`` (``placement``,
        ``trace``); returns the ``wandb.Artifact`` objects logged."""
        artifacts = []
        run = self._active()
        if not self._lost:
            with self._kept_going():
                run.summary.update(_finite_scalars(summary))
                self._log_files(rows, files, artifacts)
        return artifacts

    def _log_files(self, rows: Sequence[Mapping[str, Any]], files: Mapping[str, str | Path],
                   artifacts: list[Any]) -> None:
        """:meth:`log_results`' table and artifacts (appended to ``artifacts``); each that cannot be written (a full
        disk) is a WARNING."""
        if rows:
            columns = list(rows[0])
            table = self._wandb.Table(columns=columns, data=[[row.get(c) for c in columns] for row in rows])
            try:  # a table is staged as an artifact too
                self.run.log({"results/placements": table})
            except OSError as err:
                log.warning("W&B table results/placements not logged (placement.json holds it): %s", err)
        if getattr(self.run, "disabled", False):  # WANDB_MODE=disabled: nothing to upload, nothing staged
            return
        for name, path in files.items():
            path = Path(path)
            if path.is_file():
                try:  # staged in W&B's data folder (WANDB_DATA_DIR, else under the home folder)
                    artifact = self._wandb.Artifact(f"{name}-{self.run.id}",
                                                    type="model" if path.suffix == ".pt" else name)
                    artifact.add_file(str(path))
                    self.run.log_artifact(artifact)
                except OSError as err:
                    log.warning("W&B artifact %s-%s not logged (the file stays in the run's directory): %s", name,
                                self.run.id, err)
                    continue
                artifacts.append(artifact)

    def finish(self, exit_code: int | None = None) -> None:
        """Finish the run gplace started (a run of your own is left as it is); ``exit_code`` 1 marks it failed.
        The logger's next use starts a new run."""
        if self._owns_run and self._run is not None and not self._finished:  # a run never started: nothing
            with self._kept_going():
                self._run.finish(exit_code=exit_code)
            self._finished = True


WANDB_MODES = ("online", "offline", "disabled", "shared", "dryrun", "run")
"""The modes ``wandb.init`` takes (``wandb.sdk.wandb_settings.Settings.mode``)."""


def _check_mode(mode: str | None) -> None:
    """Refuse a mode, or a ``WANDB_MODE`` (which W&B reads whatever mode it is given), that W&B does not know."""
    env = os.environ.get("WANDB_MODE")
    if env is not None and env not in WANDB_MODES:
        raise ValueError(f"environment variable WANDB_MODE={env!r} is not a W&B mode; set it to one of "
                         f"{', '.join(WANDB_MODES[:3])} or unset it")
    if mode is not None and mode not in WANDB_MODES:
        raise ValueError(f"W&B mode {mode!r} is not one of {', '.join(WANDB_MODES[:3])}")


RUN_ID_FILE = "wandb_run_id"
"""The file in a :class:`WandbLogger`'s ``dir`` that keeps its run's id."""


def _resumed_id(dir: str | None) -> dict[str, str]:
    """``wandb.init``'s ``id`` and ``resume`` for the run an earlier process kept in ``dir``, if any, and only
    while that process's search can resume (its ``checkpoint.pt`` is there): a fresh start makes a new run."""
    path = None if dir is None else Path(dir) / RUN_ID_FILE
    if path is None or not path.is_file():
        return {}
    try:
        run_id = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        log.warning("W&B: cannot read the run id kept in %s (%s), so a new run", path, err)
        return {}
    if not run_id:
        return {}
    if re.search(r"[\s:;,#?/'\\]", run_id):
        log.warning("W&B: %s holds %r, no W&B run id (it may not hold whitespace or any of :;,#?/'\\), so a new "
                    "run", path, run_id[:80])
        return {}
    if not (Path(dir) / "checkpoint.pt").is_file():
        log.info("W&B: no checkpoint.pt in %s, so a new run (not %s)", dir, run_id)
        return {}
    return {"id": run_id, "resume": "allow"}


class HeldOpen:
    """``logger`` with ``finish()`` held back until :meth:`close`: results logged after a search (which
    finishes its logger) still reach the same run.

    The config is sent when the first scalars or results come (or at a successful :meth:`close`): a job that
    fails before it has anything to log (a resume refused, a bad setting) sends no config, so it opens no W&B run
    (:class:`WandbLogger` starts its run at first use) and changes no earlier run's config. Given ``open_logger``
    (a function making the logger) instead of ``logger``, the logger itself is made then too.
    """

    def __init__(self, logger: Logger | None = None, *, open_logger: Callable[[], Logger] | None = None) -> None:
        if (logger is None) == (open_logger is None):
            raise TypeError("HeldOpen takes a logger or open_logger, one of them")
        self.logger = logger
        self._open_logger = open_logger
        self._config: dict[str, Any] | None = None
        self._failed = False

    def _opened(self) -> Logger:
        """The logger, made if need be, with the config held back sent."""
        if self.logger is None:
            self.logger = self._open_logger()
        if self._config is not None:
            config, self._config = self._config, None
            self.logger.log_config(config)
        return self.logger

    def __getattr__(self, name: str) -> Any:
        """The logger's other attributes (a :class:`WandbLogger`'s ``run``, a custom logger's methods)."""
        if name.startswith("_") or name in ("logger",):  # not set yet (unpickling, copying): no recursion
            raise AttributeError(name)
        return getattr(self._opened(), name)

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Hold ``config`` back (merged with any held before) until there is something to log."""
        self._config = {**(self._config or {}), **config}

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:  # noqa: D102
        self._opened().log_scalars(step, scalars)

    @property
    def keeps_results(self) -> bool:
        """Whether the logger has a ``log_results`` (:class:`WandbLogger`, :class:`JsonlLogger`)."""
        return hasattr(self._opened(), "log_results")

    def log_results(self, summary: Mapping[str, float], rows: Sequence[Mapping[str, Any]],
                    files: Mapping[str, str | Path]) -> None:
        """Forward to the logger's ``log_results``, where it has one."""
        if self.keeps_results:
            self.logger.log_results(summary, rows, files)

    def finish(self, exit_code: int | None = None) -> None:
        """Nothing but note a failure (``exit_code`` 1, a search that raised) for :meth:`close`."""
        self._failed = self._failed or bool(exit_code)

    def close(self, failed: bool = False) -> None:
        """Finish the logger, if it was made; the run of a ``failed`` job (or search) is marked failed (exit code
        1, where the logger's ``finish`` takes one)."""
        failed = failed or self._failed
        if self._config is not None and not failed:  # a job that logged nothing else still records its config
            self._opened()
        if self.logger is not None:
            finish_logger(self.logger, 1 if failed else None)


def close_as_failed(closable: Any) -> None:
    """``closable.close(failed=True)`` while an exception propagates: a close that fails too is logged, not raised,
    so it does not replace what the host sees (a KeyboardInterrupt)."""
    try:
        closable.close(failed=True)
    except Exception as err:
        log.warning("the logger's finish failed too, after the error below it (%s: %s)", type(err).__name__, err)


class MultiLogger:
    """Sends everything to several loggers."""

    def __init__(self, *loggers: Logger) -> None:
        self.loggers = loggers

    def log_config(self, config: Mapping[str, Any]) -> None:  # noqa: D102
        for lg in self.loggers:
            lg.log_config(config)

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:  # noqa: D102
        for lg in self.loggers:
            lg.log_scalars(step, scalars)

    def finish(self, exit_code: int | None = None) -> None:
        """Finish each logger, passing ``exit_code`` to those that take one (:func:`finish_logger`)."""
        for lg in self.loggers:
            finish_logger(lg, exit_code)


def _finite(value: float) -> float | None:
    """``value`` as a float, ``None`` where it is not finite (an int past a float's range too)."""
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _finite_scalars(scalars: Mapping[str, float]) -> dict[str, float | None]:
    """Each scalar as :func:`_finite` gives it; one that is no number is a ``TypeError`` naming it."""
    out = {}
    for key, value in scalars.items():
        try:
            out[key] = _finite(value)
        except (TypeError, ValueError):
            raise TypeError(f"logger: scalar {key!r} must be a number, got {value!r:.80}") from None
    return out


def _reachable(url: str, timeout: float) -> bool:
    """Whether ``url``'s host accepts a TCP connection within ``timeout`` seconds (name lookup included)."""
    import socket

    parsed = urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    result: list[bool] = []

    def connect() -> None:
        try:
            socket.create_connection((parsed.hostname or "", port), timeout=timeout).close()
            result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])
