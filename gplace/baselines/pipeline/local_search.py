"""Simulator-guided local search for the pipeline objective: polish a partitioner's split move by move."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import numpy as np

from gplace.baselines._common import build_units
from gplace.baselines.base import Placer
from gplace.baselines.pipeline.contiguous import IdealDPPartitioner
from gplace.baselines.pipeline.stages import check_kind, stage_devices
from gplace.defaults import MICROBATCHES, SCHEDULE
from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.errors import check_sizes
from gplace.runtime.wrapper import check_timeout

_IMPROVES = 1 - 1e-9  # a candidate must beat the current time by more than rounding


class PipelineLocalSearch(Placer):
    """Descent from a start placement (default: :class:`IdealDPPartitioner`'s) over moves of one unit, a
    colocation group or lone op, to another stage device, every candidate measured by ``pipe-v3``
    (:meth:`PipelineSimulator.minibatch_times`, in batches of ``batch_size``).

    Moves to a device that one of the unit's graph neighbours is on (a stage boundary) come first, then the
    rest; the best candidate of the first batch that beats the current time is taken (steepest descent when the
    moves fit one batch, first improvement on large graphs). When no single move improves, pairs are tried:
    each single move, the best-measured first, followed by every boundary move from there. This is how a
    contiguous split becomes a non-contiguous one when the simulator says it pays. It stops at a local optimum
    of both neighbourhoods or when the budget is spent, and never returns a placement slower than its start.
    Like FlexFlow's simulator-guided search (Jia et al. 2019), but a deterministic descent instead of MCMC.

    Pins, colocation groups and the allowed devices hold by construction (units move whole, only to devices
    every member may run on); a placement that runs out of memory measures ``inf`` and is never taken. Units
    that may not run on a stage device keep the start's device.

    Raises:
        ValueError: a bad budget, schedule or micro-batch count, naming it (on construction).
        TypeError: ``start`` is neither a :class:`~gplace.interfaces.Placer` nor a
            :class:`~gplace.ir.Placement` (on construction).
        InvalidPlacementError: a ``start`` placement that is not one of ``graph`` on ``cluster`` (on :meth:`place`:
            another graph's, a device index out of range, a pin or colocation group broken), naming the op.

    Args:
        microbatches: M of the objective, and of the default start (default: 4, :class:`PipelineSimulator`'s, as
            every default in :mod:`gplace.defaults`).
        schedule: ``"gpipe"`` or ``"1f1b"``. (default: ``"1f1b"``)
        kind: device kind of the stages (every device if the cluster has none). (default: ``"gpu"``)
        start: the placer whose placement is polished, or the placement itself (a learned search's, say: the
            descent then refines it) (default: ``IdealDPPartitioner(kind, microbatches, schedule=schedule)``, whose
            stages fit that schedule's memory).
        time_limit: seconds of search after the start is placed and measured (that first measurement, which
            compiles the simulator's kernels where numba's cache is cold, is not counted), checked between batches;
            ``None`` or ``inf``: no limit.
            The result then depends on the machine's speed; ``max_evaluations`` alone is reproducible.
            (default: 10)
        max_evaluations: placements measured at most; ``None`` or ``inf``: no limit. (default: ``None``)
        batch_size: candidates measured per call of the simulator. (default: 128)
        threads: most threads the simulator splits a batch over, as :class:`PipelineSimulator`'s (``None``: every
            core this process may use; :func:`gplace.place` passes its runtime's). (default: ``None``)

    After :meth:`place`, :attr:`evaluations` is the number of placements that call measured.
    """

    name = "local_search"

    def __init__(self, microbatches: int = MICROBATCHES, schedule: str = SCHEDULE, kind: str | None = "gpu",
                 start: Placer | Placement | None = None, time_limit: float | None = 10.0,
                 max_evaluations: int | None = None, batch_size: int = 128, threads: int | None = None) -> None:
        where = type(self).__name__
        time_limit = _check_time_limit(where, time_limit)
        max_evaluations = None if max_evaluations == math.inf else max_evaluations
        if max_evaluations is not None:
            check_sizes(where, 0, max_evaluations=max_evaluations)
        check_sizes(where, 1, batch_size=batch_size)
        if start is not None and not isinstance(start, Placer | Placement):
            raise TypeError(f"{where}: start must be a Placer (e.g. IdealDPPartitioner()), a Placement or None, "
                            f"got {start!r}")
        from gplace.pipeline import PipelineSimulator

        self._sim = PipelineSimulator(microbatches, schedule, threads=threads)  # checks all; keeps prepared graphs
        self.microbatches, self.schedule, self.kind = self._sim.microbatches, schedule, check_kind(kind)
        self.threads = self._sim.threads
        self.start = start
        self.time_limit, self.max_evaluations, self.batch_size = time_limit, max_evaluations, batch_size
        self.evaluations = 0
        """Placements measured by the last :meth:`place` call."""

    def _place(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        self.evaluations = 0
        settings = (self.microbatches, self.schedule, self.threads)
        if (self._sim.microbatches, self._sim.schedule, self._sim.threads) != settings:  # set after __init__
            from gplace.pipeline import PipelineSimulator  # (the descent measured the old objective)

            self._sim = PipelineSimulator(self.microbatches, self.schedule, threads=self.threads)  # checks them
        start = self.start if self.start is not None else IdealDPPartitioner(self.kind, self.microbatches,
                                                                            schedule=self.schedule)
        if isinstance(start, Placement):
            start.validate(graph, cluster)
        else:
            start = start.place(graph, cluster)
        devices = np.asarray(start.devices, dtype=np.int64)
        if graph.num_ops == 0:
            return devices
        budget = _Budget(self.time_limit, self.max_evaluations)
        descent = _Descent(graph, cluster, self._sim, self.kind, self.batch_size, budget, warn=self.start is not None)
        devices = descent.run(devices)
        self.evaluations = budget.measured
        return devices


def _check_time_limit(where: str, time_limit: object) -> float | None:
    """``time_limit`` in seconds: 0 (the start only), > 0, or ``None`` for no limit (``None`` or ``inf``).

    Raises:
        ValueError: anything else (a string, ``True``, ``nan``, a negative number), naming ``where``.
    """
    if type(time_limit) in (int, float) and time_limit == 0:
        return 0.0
    try:
        return check_timeout(time_limit)
    except ValueError:
        raise ValueError(f"{where}: time_limit must be a number of seconds >= 0 (None or inf: no limit), got "
                         f"{time_limit!r}") from None


class _Budget:
    """Wall time and evaluations left; a batch is cut to what the time left allows at the pace measured so far."""

    def __init__(self, seconds: float | None, evaluations: int | None) -> None:
        self.seconds, self.left = seconds, evaluations
        self.pace = 0.0  # seconds per evaluation in the latest batch
        self.measured = 0
        self.start_clock()

    def start_clock(self) -> None:
        """Give the full time from now. The pace so far (the start's own measurement, which may have compiled the
        kernels: more than a batch's placement costs) sizes the first batch: without it, a first batch of
        ``batch_size`` placements of a large graph overran the time limit (a 5 s search of GNMT-8 took 10 s)."""
        self.deadline = None if self.seconds is None else time.perf_counter() + self.seconds

    def spent(self) -> bool:
        return (self.left is not None and self.left <= 0) or \
            (self.deadline is not None and time.perf_counter() >= self.deadline)

    def take(self, wanted: int) -> int:
        """How many of ``wanted`` evaluations may run now (charged): at least one while time is left."""
        granted = wanted if self.left is None else min(wanted, self.left)
        if self.deadline is not None and self.pace > 0:
            granted = min(granted, max(1, int((self.deadline - time.perf_counter()) / self.pace)))
        if self.left is not None:
            self.left -= granted
        return granted

    def timed(self, measure, rows: np.ndarray) -> np.ndarray:
        """``measure(rows)``, keeping the pace up to date."""
        started = time.perf_counter()
        out = measure(rows)
        self.measured += len(rows)
        self.pace = (time.perf_counter() - started) / max(len(rows), 1)
        return out


class _Descent:
    """The search state of one :meth:`PipelineLocalSearch.place` call."""

    def __init__(self, graph: OpGraph, cluster: Cluster, sim, kind: str | None, batch_size: int,
                 budget: _Budget, warn: bool = True) -> None:
        units = build_units(graph, cluster)
        unit_of = units.unit_of
        self.members = np.split(np.argsort(unit_of, kind="stable"), np.cumsum(units.size)[:-1])
        self.leader = np.array([m[0] for m in self.members])  # (U,) an op of each unit, to read its device
        on_stage = np.zeros(cluster.num_devices, dtype=bool)
        on_stage[stage_devices(cluster, kind, warn)] = True  # the default start (the DP) has warned
        self.targets = units.allowed & on_stage  # (U, D)
        src, dst = graph.edge_index
        cut = unit_of[src] != unit_of[dst]
        self.edge_units = (unit_of[src][cut], unit_of[dst][cut])
        self.times = lambda rows: sim.minibatch_times(graph, cluster, rows)
        self.batch_size, self.budget = batch_size, budget

    def measure(self, rows: np.ndarray) -> np.ndarray:
        """(B,) pipe-v3 times of the placements ``rows`` (B, N), the budget's pace updated."""
        return self.budget.timed(self.times, rows)

    def run(self, devices: np.ndarray) -> np.ndarray:
        """The best placement found from ``devices`` (N,); never slower than it."""
        if not self.budget.take(1):
            return devices
        best = float(self.measure(devices[None])[0])
        self.budget.start_clock()  # the start's measurement (it may compile the kernels) is not search time
        while not self.budget.spent():
            singles: list[tuple[float, np.ndarray]] = []
            found = self._first_better(devices, best, singles)
            for _, first in sorted(singles, key=lambda s: s[0]):
                if found is not None or self.budget.spent():
                    break
                found = self._first_better(first, best, None, near_only=True)
            if found is None:
                break
            best, devices = found
        return devices

    def _first_better(self, devices: np.ndarray, best: float, seen: list | None, near_only: bool = False
                      ) -> tuple[float, np.ndarray] | None:
        """The best candidate of the first batch of single moves from ``devices`` that beats ``best``; every
        candidate measured is appended to ``seen`` (time, devices) when given: those that ran, or every one where
        ``devices`` itself did not (from a start out of memory, a split that runs may be two moves away)."""
        for rows in self._batches(devices, near_only):
            times = self.measure(rows)
            if seen is not None:
                seen += [(float(t), row) for t, row in zip(times, rows, strict=True)
                         if np.isfinite(t) or not np.isfinite(best)]
            k = int(np.argmin(times))
            if times[k] < best * _IMPROVES:
                return float(times[k]), rows[k]
            if self.budget.spent():
                break
        return None

    def _batches(self, devices: np.ndarray, near_only: bool) -> Iterator[np.ndarray]:
        """Candidates one move from ``devices``, boundary moves first, as (B, N) batches within the budget."""
        moves = self._moves(devices, near_only)
        for at in range(0, len(moves), self.batch_size):
            chunk = moves[at:at + self.batch_size][:self.budget.take(min(self.batch_size, len(moves) - at))]
            if not len(chunk):
                return
            rows = np.repeat(devices[None], len(chunk), 0)
            for row, (unit, device) in zip(rows, chunk, strict=True):
                row[self.members[unit]] = device
            yield rows
            if self.budget.spent():
                return

    def _moves(self, devices: np.ndarray, near_only: bool) -> np.ndarray:
        """(K, 2) (unit, device) moves that change ``devices``: to a neighbour's device first, then the rest."""
        unit_device = devices[self.leader]
        allowed = self.targets.copy()
        allowed[np.arange(len(unit_device)), unit_device] = False
        a, b = self.edge_units
        across = unit_device[a] != unit_device[b]
        near = np.zeros_like(allowed)
        near[a[across], unit_device[b[across]]] = True
        near[b[across], unit_device[a[across]]] = True
        near &= allowed
        first = np.argwhere(near)
        if near_only:
            return first.astype(np.int64)
        return np.concatenate([first, np.argwhere(allowed & ~near)]).astype(np.int64)
