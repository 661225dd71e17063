"""The outcome of a search (:class:`TrainResult`), without torch: what ``gplace.place`` reports for any method."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gplace.ir import Placement
from gplace.runtime.base import Measurement

__all__ = ["TrainResult"]


@dataclass
class TrainResult:
    """The outcome of a search: the best of its samples (a running minimum) and of the trained policy's greedy
    placement, measured once, when the search ends. So with one seed, more updates can end on a worse result than
    fewer did (a greedy placement the shorter run measured and the longer one never did: 2.4 % in one of 32 runs of
    1-8 updates), and a search resumed to N updates keeps the greedy result of its earlier end where a fresh one
    of N updates does not."""

    best_placement: Placement
    best_measurement: Measurement
    samples: int
    """Placements sampled, over all runs of a resumed search (a warm start and the final greedy placement are
    measured besides, uncounted)."""
    seconds: float
    """Wall time of the search, over all runs of a resumed search (up to its last checkpoint, then this run)."""
    history: list[dict[str, float]] = field(default_factory=list, repr=False)
    sample_step_times: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    """(S,) float64: each sampled placement's step time in the order measured, ``inf`` where it failed (``nan`` for
    the samples of a run resumed from a checkpoint that did not keep them)."""
    found_at: float | None = field(default=None, repr=False)
    """The step time the search measured for its result, where the result was measured again since (a runtime
    that is not deterministic): :attr:`best_sample` looks for this time, not the new one (``-inf``: no sample found
    the result: a single-device placement that beat the search, or :func:`gplace.place`'s ``refine``)."""
    refined_from: float | None = field(default=None, repr=False)
    """The step time of the placement :func:`gplace.place`'s ``refine`` descended from, where the result is that
    descent's (it measured faster; no sample found it); ``None`` otherwise."""
    start_step_time: float | None = field(default=None, repr=False)
    """The step time of the placement the search started from, measured before its first sample
    (:func:`~gplace.training.finetune`'s pretrained greedy placement, the result where fine-tuning beat it in no
    sample); ``None`` otherwise. :meth:`samples_to_reach` counts it as reached after 0 samples, and
    :meth:`best_so_far` starts at it."""

    def __post_init__(self) -> None:
        if self.sample_step_times is not None:  # a trainer of one's own may give a list
            self.sample_step_times = np.asarray(self.sample_step_times, dtype=np.float64)

    @property
    def best_step_time(self) -> float:
        """Step time of the best placement."""
        return self.best_measurement.step_time

    @property
    def best_sample(self) -> int | None:
        """The sample (the first is 1) that found the result; ``None`` where the result is no sample (the trained
        policy's greedy placement, a warm start, a placer's placement). Late means the search was still improving."""
        return self._first_sample_within(self.best_step_time if self.found_at is None else self.found_at)

    def samples_to_reach(self, target: float) -> int | None:
        """Placements sampled until one took at most ``target`` seconds (the first is 1); 0 where the placement the
        search started from reaches it (:attr:`start_step_time`); the search's result, when only it reaches
        ``target`` (the trained policy's greedy placement, or a warm start), counts as one more after the last
        sample. ``None`` if nothing reached it."""
        if self.start_step_time is not None and self.start_step_time <= target:
            return 0
        first = self._first_sample_within(target)
        if first is None and self.best_step_time <= target:
            return self.samples + 1
        return first

    def _first_sample_within(self, seconds: float) -> int | None:
        """The first sample (from 1) that took at most ``seconds``; ``None`` if none did."""
        hits = np.flatnonzero(self.sample_step_times <= seconds)
        return int(hits[0]) + 1 if hits.size else None

    def best_so_far(self) -> tuple[np.ndarray, np.ndarray]:
        """The best step time as the search improved it, for a sample-efficiency curve: the samples that improved
        it (the first is 1) and the time each reached, then the last sample, so the curve runs to the end; it starts
        at sample 0 where the search's start is known (:attr:`start_step_time`). The result, where it beats every
        sample (the trained policy's greedy placement, a warm start), is one more point, a sample after the last.
        Failed samples and samples of unknown time (``nan``) improve nothing.
        Shapes: (P,) int64 and (P,) float64."""
        times = np.nan_to_num(self.sample_step_times, nan=np.inf, posinf=np.inf)  # a failure stays inf
        start = np.inf if self.start_step_time is None else self.start_step_time
        running = np.minimum.accumulate(np.r_[start, times])  # [p]: the best after p samples
        at = np.flatnonzero(np.r_[True, running[1:] < running[:-1]])
        at = at[np.isfinite(running[at])]  # before the first placement that ran there is no best
        if at.size and at[-1] < times.size:
            at = np.r_[at, times.size]
        samples, best = at, running[at]
        if not best.size or self.best_step_time < best[-1]:
            samples, best = np.r_[samples, self.samples + 1], np.r_[best, self.best_step_time]
        return samples.astype(np.int64), best.astype(np.float64)
