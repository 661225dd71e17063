"""The hyper-parameters of a placement search, written once: :class:`LoopSettings` (what every training loop
has), :class:`SearchSettings` (REINFORCE's on one graph), :class:`PPOSettings` (PPO's, which extends them) and
:class:`MultiGraphSettings` (training over many graphs). The trainers are these dataclasses plus a ``fit``
method."""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass
from typing import Literal

from gplace.defaults import MAX_GROUPS
from gplace.ir.errors import is_finite, short_repr


@dataclass(frozen=True, kw_only=True)
class LoopSettings:
    """What every training loop is configured by; validated on construction.

    Raises:
        ValueError: a setting out of range, naming it.
    """

    updates: int = 150
    """Policy updates."""
    samples_per_update: int = 8
    """K placements sampled per update."""
    lr: float = 1e-3
    """Adam learning rate. Adam's first step moves every weight by about ``lr`` whatever ``grad_clip``: 1e-2 took
    the seq2seq policy's entropy on the default graph from 137 to 86 in one REINFORCE update (to 12 under PPO),
    and a 729-placement toy's sampling to 2 distinct placements."""
    entropy_coef: float = 1e-2
    """Weight of the entropy bonus."""
    grad_clip: float = 1.0
    """Gradient norm clip."""
    baseline_decay: float = 0.9
    """Decay of the EMA baseline."""
    checkpoint_every: int = 10
    """Updates between checkpoints."""
    max_seconds: float | None = None
    """Stop after this much wall time (``None``: no limit)."""
    seed: int = 0
    """Seeds the sampling (the loop's own generator); :func:`gplace.place` also seeds the initial weights it builds."""
    self_imitation: float = 0.0
    """Weight of ``loss_self_imitation``, minus the log-likelihood of the best placement measured so far (of each
    drawn task in multi-graph training; priority queue training with a queue of one, Abolafia et al. 2018), so
    sampling stays around the best instead of settling on a worse mode (0: off, the paper's REINFORCE)."""

    def __post_init__(self) -> None:
        _check_types(self)
        _check_finite(self)
        _at_least(self, "updates", 0)
        _at_least(self, "seed", 0)
        if self.seed >= 2**63:
            raise ValueError(f"seed must be an int in [0, 2**63), got {self.seed!r}")  # 2**70 overflowed in torch
        object.__setattr__(self, "seed", int(self.seed))  # torch's manual_seed takes no np.int64
        for name in ("samples_per_update", "checkpoint_every"):
            _at_least(self, name, 1)
        for name in ("lr", "grad_clip"):
            _positive(self, name)
        if not 0.0 <= self.baseline_decay < 1.0:
            raise ValueError(f"baseline_decay must be in [0, 1), got {self.baseline_decay!r}")
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ValueError(f"max_seconds must be > 0 or None, got {self.max_seconds!r}")
        for name in ("self_imitation", "entropy_coef"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")


@dataclass(frozen=True, kw_only=True)
class SearchSettings(LoopSettings):
    """:class:`LoopSettings` plus what a search on one graph needs."""

    normalize_advantage: bool = True
    """Scale advantages by their batch standard deviation."""
    penalty_step_time: float = 100.0
    """Step time (s) charged to a failed placement (the paper's 100 s)."""
    risk_seeking: float | None = None
    """Risk-seeking policy gradient (Petersen et al. 2021): learn only from the best fraction ``eps`` in (0, 1] of
    each update's samples, measured from the batch's ``1 - eps`` reward quantile in place of the baseline (PPO's
    ``baseline`` too), so the policy improves its best samples rather than its average (``None``: every sample,
    the paper's REINFORCE)."""
    imitation_steps: int = 100
    """With a ``warm_start`` placement, supervised steps pulling the policy towards it before the search (fewer
    when they use half of ``max_seconds``)."""
    progress: bool = False
    """Show a progress bar."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _at_least(self, "imitation_steps", 0)
        _positive(self, "penalty_step_time")
        if self.risk_seeking is not None and not 0 < self.risk_seeking <= 1:
            raise ValueError(f"risk_seeking must be in (0, 1] or None, got {self.risk_seeking!r}")


@dataclass(frozen=True, kw_only=True)
class MultiGraphSettings(LoopSettings):
    """:class:`LoopSettings` (with GDP-scale defaults) plus how tasks are drawn and scored."""

    updates: int = 1000
    """Policy updates."""
    samples_per_update: int = 16
    """K placements sampled per drawn task."""
    lr: float = 3e-3
    """Adam learning rate."""
    checkpoint_every: int = 50
    """Updates between checkpoints."""
    tasks_per_update: int = 1
    """Tasks drawn (without replacement) per update; all of them when there are fewer tasks."""
    penalty_ratio: float = 10.0
    """A failed placement counts as this many times its task's reference step time."""
    max_groups: int | None = MAX_GROUPS
    """Coarsen each graph to at most this many groups (``None``: co-location groups only)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _at_least(self, "tasks_per_update", 1)
        if self.max_groups is not None:
            _at_least(self, "max_groups", 1)
        _positive(self, "penalty_ratio")


@dataclass(frozen=True, kw_only=True)
class PPOSettings(SearchSettings):
    """:class:`SearchSettings` plus PPO's clipped surrogate."""

    updates: int = 100
    """Policy updates, each on a fresh batch of K samples."""
    epochs: int = 4
    """Optimiser steps on each batch."""
    clip_eps: float = 0.2
    """PPO's clip range for the probability ratio. The ratio is of whole placements (the product of every group's),
    so it leaves the range quickly on many groups: on the default graph (126 groups) the last epoch clipped 38-100 %
    of the samples (approx_kl 0.07-1.4) over 6 updates, and later epochs add little beyond the entropy bonus;
    ``target_kl`` (e.g. 0.02) ends an update's epochs instead."""
    baseline: Literal["ema", "mean"] = "ema"
    """The value baseline: ``"ema"``, the moving average of past successful rewards, or ``"mean"``, the mean
    successful reward of the batch itself."""
    target_kl: float | None = None
    """Stop an update's epochs early once ``approx_kl`` exceeds this (``None``: no limit)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _at_least(self, "epochs", 1)
        _positive(self, "clip_eps")
        if self.baseline not in ("ema", "mean"):
            raise ValueError(f"baseline must be 'ema' or 'mean', got {self.baseline!r}")
        if self.target_kl is not None and not self.target_kl > 0:
            raise ValueError(f"target_kl must be > 0 or None, got {self.target_kl!r}")


_KINDS = {"int": numbers.Integral, "float": numbers.Real, "bool": bool}
"""The annotated types checked on construction (a number given as a string, say from the command line, is named
here, not found by a comparison deep in the search)."""


def _check_types(settings: LoopSettings) -> None:
    """Raise ValueError naming the first setting whose value is not of its annotated type (``bool`` is not a
    number here)."""
    for field in dataclasses.fields(settings):
        value, kinds = getattr(settings, field.name), str(field.type).split(" | ")
        checked = [k for k in kinds if k in _KINDS]
        if not checked or (value is None and "None" in kinds):
            continue
        if not any(isinstance(value, _KINDS[k]) and (k == "bool") == isinstance(value, bool) for k in checked):
            kind = " or ".join(["a bool" if k == "bool" else f"an {k}" if k == "int" else f"a {k}" for k in checked]
                               + ["None"] * ("None" in kinds))
            raise ValueError(f"{field.name} must be {kind}, got {value!r}")


def _check_finite(settings: LoopSettings) -> None:
    """Raise ValueError naming the first number that is NaN or infinite (a weight or rate of ``inf`` or ``nan``
    made every parameter NaN, and the search went on sampling one placement)."""
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and not is_finite(value):
            raise ValueError(f"{field.name} must be a finite number, got {short_repr(value)}")


def _positive(settings: LoopSettings, name: str) -> None:
    if not getattr(settings, name) > 0:
        raise ValueError(f"{name} must be > 0, got {getattr(settings, name)!r}")


def _at_least(settings: LoopSettings, name: str, low: int) -> None:
    value = getattr(settings, name)
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
