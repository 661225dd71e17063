"""Metric loggers: none, a local JSON-lines file, and Weights & Biases."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol


class Logger(Protocol):
    """Where a trainer sends metrics."""

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Record the run's resolved configuration."""

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        """Record namespaced scalars (``charts/…``, ``losses/…``) at ``step``."""

    def finish(self) -> None:
        """Flush and close."""


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
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def log_config(self, config: Mapping[str, Any]) -> None:  # noqa: D102
        self._write({"config": dict(config)})

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:  # noqa: D102
        self._write({"step": step, **{k: _finite(v) for k, v in scalars.items()}})

    def finish(self) -> None:  # noqa: D102
        pass

    def _write(self, record: Mapping[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record, default=str) + "\n")


class WandbLogger:
    """Weights & Biases; offline when no API key is set (or as ``WANDB_MODE`` says).

    Args:
        project: W&B project (default: ``"gplace"``).
        mode: ``"online"``, ``"offline"`` or ``"disabled"``; ``None`` picks from ``WANDB_MODE`` and the key.
        name: run name (default: W&B's).
        dir: where W&B writes its files (default: the working directory).
    """

    def __init__(self, project: str = "gplace", mode: str | None = None, name: str | None = None,
                 dir: str | None = None) -> None:
        import wandb

        if mode is None:
            mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
        self._wandb = wandb
        self.run = wandb.init(project=project, mode=mode, name=name, dir=dir, reinit="finish_previous")

    def log_config(self, config: Mapping[str, Any]) -> None:  # noqa: D102
        self.run.config.update(dict(config), allow_val_change=True)

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:  # noqa: D102
        self.run.log(dict(scalars), step=step)

    def finish(self) -> None:  # noqa: D102
        self.run.finish()


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

    def finish(self) -> None:  # noqa: D102
        for lg in self.loggers:
            lg.finish()


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None
