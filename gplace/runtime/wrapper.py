"""A runtime around another one (a cache, a process pool, Ray actors)."""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence

from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.placement import check_placement
from gplace.runtime.base import Measurement, Runtime


class RuntimeWrapper(Runtime):
    """Keeps the inner runtime's ``id`` and ``deterministic`` flag; subclasses measure batches.

    :meth:`measure` and :meth:`measure_many` validate every placement, then call :meth:`_measure_batch`.
    """

    def __init__(self, runtime: Runtime) -> None:
        if not isinstance(runtime, Runtime):
            raise TypeError(f"{type(self).__name__} wraps a gplace Runtime, got {type(runtime).__name__}")
        self.runtime = runtime

    @property
    def id(self) -> str:  # type: ignore[override]
        """The inner runtime's id."""
        return self.runtime.id

    @property
    def deterministic(self) -> bool:  # type: ignore[override]
        """The inner runtime's determinism."""
        return self.runtime.deterministic

    def check_cluster(self, cluster: Cluster) -> None:
        """The inner runtime's check."""
        self.runtime.check_cluster(cluster)

    def check_graph(self, graph: OpGraph) -> None:
        """The inner runtime's check."""
        self.runtime.check_graph(graph)

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        return self._measure_batch(graph, cluster, [placement])[0]

    def measure_many(self, graph: OpGraph, cluster: Cluster, placements: Sequence[Placement]) -> list[Measurement]:
        """Validate, then measure several placements; results in the order of ``placements``."""
        placements = list(placements)  # an iterator is read once
        for i, placement in enumerate(placements):
            check_placement(placement, f"placements[{i}]")
            placement.validate(graph, cluster)
        return self._measure_batch(graph, cluster, placements)

    @abc.abstractmethod
    def _measure_batch(self, graph: OpGraph, cluster: Cluster, placements: Sequence[Placement]) -> list[Measurement]:
        """Measure placements already validated against ``graph`` and ``cluster``."""


def check_timeout(timeout: object) -> float | None:
    """``timeout`` in seconds, ``None`` for no limit (``None`` or ``inf``).

    Raises:
        ValueError: not a number > 0.
    """
    if timeout is None or timeout == math.inf:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"timeout must be a number of seconds > 0 (None or inf: no limit), got {timeout!r}")
    return float(timeout)


def check_time_limit(where: str, time_limit: object) -> float:
    """A real runtime's ``time_limit`` in seconds, ``inf`` for no limit (``None`` or ``inf``).

    Raises:
        ValueError: not a number > 0, naming ``where`` (the runtime's class) and the setting.
    """
    try:
        limit = check_timeout(time_limit)
    except ValueError:
        raise ValueError(f"{where}: time_limit must be a number of seconds > 0 (None or inf: no limit), got "
                         f"{time_limit!r}") from None
    return math.inf if limit is None else limit


def innermost(runtime: Runtime) -> Runtime:
    """The runtime inside any :class:`RuntimeWrapper` layers around it (``runtime`` itself if it wraps none): the
    one whose settings, such as a pipeline's micro-batches, say what is measured."""
    while isinstance(runtime, RuntimeWrapper):
        runtime = runtime.runtime
    return runtime


def microbatches_of(runtime: Runtime | None) -> int | None:
    """The number of micro-batches a pipeline runtime (inside any wrappers) splits a mini-batch into; ``None`` for
    a runtime that measures one step (or no runtime)."""
    return None if runtime is None else getattr(innermost(runtime), "microbatches", None)
