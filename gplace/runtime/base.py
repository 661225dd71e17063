"""The runtime contract: measure one step of a placed graph."""

from __future__ import annotations

import abc
import contextlib
import contextvars
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar, overload

import numpy as np

from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.frozen import ReadOnlyArrays
from gplace.ir.graph import short_repr
from gplace.ir.placement import check_placement

log = logging.getLogger(__name__)
T = TypeVar("T")


def time_ratio(time: float, other: float) -> float:
    """``time / other`` (a speed-up of ``other`` over ``time``): 1 where both are 0 (a graph with no work), inf where
    only ``other`` is.

    >>> time_ratio(2.0, 0.5), time_ratio(0.0, 0.0), time_ratio(1.0, 0.0)
    (4.0, 1.0, inf)
    """
    if other == 0:
        return 1.0 if time == 0 else math.inf
    return time / other


class ClusterMismatchError(ValueError):
    """The cluster cannot run on this machine (a device it lacks, two cluster devices on one GPU); the message
    names the devices. Raised by :meth:`Runtime.check_cluster`, before a search."""

    @classmethod
    def check(cls, cluster: Cluster, problems: Sequence[str]) -> None:
        """Raise one error listing ``problems`` (each naming devices), if there are any."""
        if problems:
            raise cls(f"cluster {cluster.name!r} does not fit this machine: " + "; ".join(problems))


@dataclass(frozen=True, eq=False)
class Measurement(ReadOnlyArrays):
    """What a runtime reports for one placement.

    A failed step (out of memory, crash, time limit) has ``ok=False``, ``step_time=inf`` and a ``reason``;
    it is never an exception. Measurements compare by identity (two measurements of one placement are two
    events): compare ``step_time`` and ``ok`` for equal results.
    """

    ok: bool
    step_time: float
    """Seconds per step (median for real runtimes); ``inf`` when not ok."""
    runtime: str
    """Versioned id of the runtime that measured it, e.g. ``"sim-v1"``."""
    reason: str = ""
    """Why the step failed; empty when ok."""
    busy_time: np.ndarray | None = field(default=None, repr=False)
    """(D,) float64 seconds each device computed."""
    peak_memory: np.ndarray | None = field(default=None, repr=False)
    """(D,) int64 peak bytes per device."""
    bytes_moved: int = 0
    """Bytes sent between devices."""
    op_start: np.ndarray | None = field(default=None, repr=False)
    """(N,) float64 start time of each op, where the runtime knows it."""
    op_end: np.ndarray | None = field(default=None, repr=False)
    """(N,) float64 end time of each op, where the runtime knows it."""
    spread: float = 0.0
    """Relative spread of the timed steps, ``(max - min) / median`` (unitless, not seconds; 0 for a deterministic
    runtime)."""
    transient: bool = False
    """A failure of the measuring machinery, not of the placement (a worker pool's timeout, a worker that died):
    measured again it may succeed, so caches do not keep it, and the outermost :meth:`Runtime.measure` or
    :func:`measure_each` call of a thread measures it once more (a pool's worker is a process of its own: a failure
    its runtime marks transient is measured again there and, still failing, in the caller)."""

    @classmethod
    def failure(cls, runtime: str, reason: str, **fields: Any) -> Measurement:
        """A failed measurement."""
        return cls(ok=False, step_time=math.inf, runtime=runtime, reason=reason, **fields)


class Runtime(abc.ABC):
    """Measures placements. Subclasses implement :meth:`_measure`.

    :meth:`measure` validates the placement first, so every runtime rejects an invalid placement the
    same way (:class:`~gplace.ir.InvalidPlacementError`); failures while running are measurements with
    ``ok=False``, and so is a success in a step time that is not a finite number >= 0 (:func:`checked`).
    """

    id: str = "runtime-v0"
    """Versioned identifier, part of every measurement and cache key: a subclass sets its own (``"mine-v1"``;
    a file cache and :func:`~gplace.runtime.conformance.check_runtime` refuse this default)."""
    deterministic: bool = False
    """Whether measuring the same placement twice gives the same result."""

    def measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        """Measure one step of ``graph`` placed by ``placement`` on ``cluster``; a ``transient`` failure (see
        :class:`Measurement`) is measured once more.

        Raises:
            InvalidPlacementError: ``placement`` does not fit ``graph`` or ``cluster`` (:meth:`Placement.validate`).
            TypeError: ``placement`` is not a :class:`~gplace.ir.Placement` (a list of device indices: make one
                with ``Placement.for_graph(graph, devices)``), or ``graph`` or ``cluster`` is not gplace's.
        """
        check_placement(placement)
        placement.validate(graph, cluster)
        with _measuring() as outermost:
            measurement = checked(self._measure(graph, cluster, placement), self)
            if measurement.transient and outermost:  # no fault of the placement: one more try
                log.info("runtime %r: a transient failure (%s); measuring the placement once more", self.id,
                         measurement.reason)
                measurement = checked(self._measure(graph, cluster, placement), self)
        return measurement

    def check_cluster(self, cluster: Cluster) -> None:
        """Raise :class:`ClusterMismatchError` when ``cluster`` cannot run here; a model-based runtime accepts
        any cluster. Call it once, before a search, so that a wrong cluster fails up front."""
        return None

    def check_graph(self, graph: OpGraph) -> None:
        """Raise :class:`~gplace.ir.UnsupportedGraphError` when this runtime cannot run ``graph`` at all (a real
        runtime needs the program the graph was imported from); a model-based runtime accepts any graph. Call
        it once, before a search, so that every measurement does not fail the same way."""
        return None

    def measure_many(self, graph: OpGraph, cluster: Cluster, placements: Sequence[Placement]) -> list[Measurement]:
        """Measure several placements (in order); runtimes that can evaluate in parallel override this."""
        return [self.measure(graph, cluster, p) for p in placements]

    @abc.abstractmethod
    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        """Measure a placement already validated against ``graph`` and ``cluster``."""


class ReadOnlySetting(Generic[T]):
    """A runtime's constructor setting that its :attr:`~Runtime.id` is made from (caches keep settings apart by the
    id): read as an attribute, held in ``_<name>``; assigning raises ``AttributeError`` saying to build a new
    runtime (a changed setting would be measured, or cached, under the old id). ``ReadOnlySetting[int]()`` reads
    as an ``int`` to type checkers."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.private = name, f"_{name}"

    @overload
    def __get__(self, runtime: None, owner: type | None = None) -> ReadOnlySetting[T]: ...

    @overload
    def __get__(self, runtime: object, owner: type | None = None) -> T: ...

    def __get__(self, runtime: object, owner: type | None = None) -> T | ReadOnlySetting[T]:
        return self if runtime is None else getattr(runtime, self.private)

    def __set__(self, runtime: object, value: object) -> None:
        cls = type(runtime).__name__
        raise AttributeError(f"{cls}.{self.name} is read-only (the runtime id {getattr(runtime, 'id', '?')!r} "
                             f"depends on it): build a new {cls} with {self.name}={value!r} instead")


def check_runtime(runtime: object, *, optional: bool = True) -> None:
    """Raise a ``TypeError`` naming ``runtime`` unless it is a gplace :class:`Runtime` (or ``None``, with
    ``optional``: the caller's default)."""
    if not (isinstance(runtime, Runtime) or (optional and runtime is None)):
        raise TypeError(f"runtime must be a gplace Runtime (e.g. gplace.runtime.Simulator()), got "
                        f"{short_repr(runtime)}")


def measure_each(runtime: Runtime, graph: OpGraph, cluster: Cluster,
                 placements: Sequence[Placement]) -> list[Measurement]:
    """``runtime.measure_many``, checked to give one measurement per placement (a wrapper or runtime of one's
    own that drops some would otherwise pair measurements with the wrong placements); ``transient`` failures are
    measured once more (a search charged each a failed placement's penalty, which also shrank the other samples'
    normalised advantages).

    Raises:
        ValueError: the runtime returned another number of measurements (names the runtime and both counts).
    """
    with _measuring() as outermost:
        measurements = _measured_many(runtime, graph, cluster, placements)
        again = [i for i, m in enumerate(measurements) if m.transient] if outermost else []
        if again:
            log.info("runtime %r: %d transient failures of %d placements; measuring them once more", runtime.id,
                     len(again), len(placements))
            redo = _measured_many(runtime, graph, cluster, [placements[i] for i in again])
            for i, m in zip(again, redo, strict=True):
                measurements[i] = m
    return measurements


_MEASURING: contextvars.ContextVar[bool] = contextvars.ContextVar("gplace_measuring", default=False)


@contextlib.contextmanager
def _measuring() -> Iterator[bool]:
    """Whether this measuring call is the outermost of its thread, the one that measures a transient failure once
    more (a wrapper measuring through its inner runtime, each retrying, tried a placement 4 times)."""
    token = _MEASURING.set(True)
    try:
        yield token.old_value is not True
    finally:
        _MEASURING.reset(token)


def _measured_many(runtime: Runtime, graph: OpGraph, cluster: Cluster,
                   placements: Sequence[Placement]) -> list[Measurement]:
    measurements = list(runtime.measure_many(graph, cluster, list(placements)))  # a copy: ours stays in order
    if len(measurements) != len(placements):
        raise ValueError(f"runtime {runtime.id!r} ({type(runtime).__name__}) returned {len(measurements)} measurements "
                         f"for {len(placements)} placements: measure_many gives one per placement, in order")
    return [checked(m, runtime) for m in measurements]


def checked(measurement: Measurement, runtime: object) -> Measurement:
    """``measurement`` with a Python ``float`` step time and a ``bool`` ``ok`` (a runtime's torch scalar or 0-d array
    crashed the search deep inside), or a failure in its place where it reports success with a step time that is
    not a finite number of seconds >= 0 (a runtime's bug: a NaN would stay the best placement, and a NaN reward
    makes every weight NaN); logged as a warning, once per runtime id.

    Raises:
        TypeError: ``measurement`` is not a :class:`Measurement` (names the runtime).
    """
    if not isinstance(measurement, Measurement):
        raise TypeError(f"runtime {getattr(runtime, 'id', '?')!r} ({type(runtime).__name__}) returned a "
                        f"{type(measurement).__name__}, not a Measurement: _measure and measure_many return "
                        "gplace.runtime.Measurement objects (Measurement.failure(...) for a failed step)")
    try:
        time = float(measurement.step_time)
    except (TypeError, ValueError):
        time = math.nan
    ok = bool(measurement.ok)
    if not ok and not str(measurement.reason).strip():  # errors that quote the reason named nothing
        reason = f"runtime {measurement.runtime!r} ({type(runtime).__name__}) {NO_REASON}"
        _warn_once(measurement.runtime, reason)
        return replace(measurement, ok=False, step_time=math.inf, reason=reason)
    if not ok or (math.isfinite(time) and time >= 0):
        if type(measurement.step_time) is float and type(measurement.ok) is bool:
            return measurement
        return replace(measurement, ok=ok, step_time=math.inf if math.isnan(time) else time)
    reason = (f"runtime {measurement.runtime!r} ({type(runtime).__name__}) reported success with step time "
              f"{measurement.step_time!r}: {IMPOSSIBLE}; counted as a failure")
    _warn_once(measurement.runtime, reason)
    return Measurement.failure(measurement.runtime, reason)


def _warn_once(runtime_id: str, reason: str) -> None:
    if runtime_id not in _WARNED:
        _WARNED.add(runtime_id)
        log.warning("%s (warned once per runtime id)", reason)


IMPOSSIBLE = "a step time is a finite number of seconds >= 0"
"""What :func:`checked` says of an impossible step time (:func:`~gplace.runtime.conformance.check_runtime` looks
for it)."""
NO_REASON = "reported a failure without a reason (Measurement.failure(id, reason) says what failed)"
"""What :func:`checked` says of a failure without a reason (:func:`~gplace.runtime.conformance.check_runtime` looks
for it)."""
_WARNED: set[str] = set()


def forget_warnings() -> None:
    """Warn again for each runtime id (a new job of a sweep in this process has a log of its own)."""
    _WARNED.clear()


