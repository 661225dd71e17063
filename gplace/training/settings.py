"""The hyper-parameters of a placement search, written once: :class:`SearchSettings` (REINFORCE's) and
:class:`PPOSettings` (PPO's, which extends them). The trainers are these dataclasses plus a ``fit`` method."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, kw_only=True)
class SearchSettings:
    """What every single-graph search is configured by; validated on construction.

    Raises:
        ValueError: a setting out of range, naming it.
    """

    updates: int = 150
    """Policy updates."""
    samples_per_update: int = 8
    """K placements sampled per update."""
    lr: float = 1e-3
    """Adam learning rate."""
    entropy_coef: float = 1e-2
    """Weight of the entropy bonus."""
    normalize_advantage: bool = True
    """Scale advantages by their batch standard deviation."""
    grad_clip: float = 1.0
    """Gradient norm clip."""
    baseline_decay: float = 0.9
    """Decay of the EMA baseline."""
    penalty_step_time: float = 100.0
    """Step time (s) charged to a failed placement (the paper's 100 s)."""
    checkpoint_every: int = 10
    """Updates between checkpoints."""
    max_seconds: float | None = None
    """Stop after this much wall time (``None``: no limit)."""
    imitation_steps: int = 100
    """With a ``warm_start`` placement, supervised steps pulling the policy towards it before the search (fewer
    when they use half of ``max_seconds``)."""
    seed: int = 0
    """Seeds sampling and initial weights."""
    progress: bool = False
    """Show a progress bar."""

    def __post_init__(self) -> None:
        for name in ("updates", "imitation_steps"):
            _at_least(self, name, 0)
        for name in ("samples_per_update", "checkpoint_every"):
            _at_least(self, name, 1)
        for name in ("lr", "grad_clip", "penalty_step_time"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not 0.0 <= self.baseline_decay < 1.0:
            raise ValueError(f"baseline_decay must be in [0, 1), got {self.baseline_decay!r}")
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ValueError(f"max_seconds must be > 0 or None, got {self.max_seconds!r}")


@dataclass(frozen=True, kw_only=True)
class PPOSettings(SearchSettings):
    """:class:`SearchSettings` plus PPO's clipped surrogate."""

    updates: int = 100
    """Policy updates, each on a fresh batch of K samples."""
    epochs: int = 4
    """Optimiser steps on each batch."""
    clip_eps: float = 0.2
    """PPO's clip range for the probability ratio."""
    baseline: Literal["ema", "mean"] = "ema"
    """The value baseline: ``"ema"``, the moving average of past successful rewards, or ``"mean"``, the mean
    successful reward of the batch itself."""
    target_kl: float | None = None
    """Stop an update's epochs early once ``approx_kl`` exceeds this (``None``: no limit)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _at_least(self, "epochs", 1)
        if self.clip_eps <= 0:
            raise ValueError(f"clip_eps must be > 0, got {self.clip_eps}")
        if self.baseline not in ("ema", "mean"):
            raise ValueError(f"baseline must be 'ema' or 'mean', got {self.baseline!r}")


def _at_least(settings: SearchSettings, name: str, low: int) -> None:
    value = getattr(settings, name)
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
