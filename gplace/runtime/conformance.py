"""Conformance checks every runtime passes: the :class:`~gplace.runtime.Runtime` contract, tested one way.

Use them on your own runtime as TorchRL's ``check_env_specs`` is used on environments::

    check_runtime(MyRuntime(), graph, cluster, [Placement.single(graph, 0)])
    check_failure(MyRuntime(), graph, cluster, placement_that_cannot_run)

They raise :class:`AssertionError` naming the rule a runtime broke (explicit raises: they also work under
``python -O``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from gplace.ir import Cluster, InvalidPlacementError, OpGraph, Placement
from gplace.runtime.base import IMPOSSIBLE, NO_REASON, Measurement, Runtime

__all__ = ["check_failure", "check_runtime"]

_ARRAYS = ("busy_time", "peak_memory", "op_start", "op_end")


def check_runtime(
    runtime: Runtime, graph: OpGraph, cluster: Cluster, placements: Sequence[Placement]
) -> list[Measurement]:
    """Assert that ``runtime`` honours the runtime contract on ``graph`` and ``cluster``.

    The rules: an id and a determinism flag are declared; a placement of the wrong length, with a device out of
    range, made for another graph or breaking a pin raises :class:`~gplace.ir.InvalidPlacementError` through
    ``measure``; every measurement is a :class:`Measurement` with the runtime's id, a finite step time >= 0
    when ok (0: a graph with no work) and ``inf`` with a reason when not, nothing moved when all ops share a
    device; ``measure_many`` gives one measurement per placement, in order (the trainers measure through it); a
    deterministic runtime measures the same placement identically twice, with spread 0.

    Args:
        runtime: the runtime under test.
        graph: a graph it can run.
        cluster: the cluster to run it on.
        placements: valid placements of ``graph``; the first one is the base of the invalid ones.

    Returns:
        The measurement of each placement, for further checks.

    Raises:
        AssertionError: a rule is broken; the message names it.
        ValueError: ``placements`` is empty.
    """
    if not placements:
        raise ValueError("check_runtime needs at least one valid placement")
    _check_declaration(runtime)
    _check_rejects_invalid(runtime, graph, cluster, placements[0])
    measurements = [_check_measurement(runtime, graph, cluster, p) for p in placements]
    if runtime.deterministic:
        for placement, first in zip(placements, measurements, strict=True):
            _check_repeatable(runtime, first, runtime.measure(graph, cluster, placement))
    _check_measure_many(runtime, graph, cluster, placements, measurements)
    return measurements


def check_failure(runtime: Runtime, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
    """Assert that a placement that cannot run comes back as a failed measurement with a reason.

    Raises:
        AssertionError: ``measure`` raised, or returned an ok measurement or one without a reason.
    """
    try:
        m = runtime.measure(graph, cluster, placement)
    except Exception as err:
        raise AssertionError(f"{runtime.id}: a failing step raised {type(err).__name__}: {err}") from err
    _require(isinstance(m, Measurement), f"{runtime.id}: measure returned {type(m).__name__}, not a Measurement")
    _require(not m.ok, f"{runtime.id}: a placement expected to fail measured ok ({m.step_time} s)")
    _check_measurement_fields(runtime, graph, cluster, m)
    return m


# ---------------------------------------------------------------------- rules
def _check_measure_many(runtime: Runtime, graph: OpGraph, cluster: Cluster, placements: Sequence[Placement],
                        one_by_one: list[Measurement]) -> None:
    """``measure_many`` gives a measurement per placement, in order, each a :class:`Measurement` of its own
    fields, and leaves the caller's list as it was: for a deterministic runtime, equal to ``measure``'s (ok and
    step time); for any, as many as given."""
    given = list(placements)
    many = runtime.measure_many(graph, cluster, given)
    _require(len(given) == len(placements) and all(a is b for a, b in zip(given, placements, strict=True)),
             f"{runtime.id}: measure_many changed the caller's list of placements (its order or contents): callers "
             "pair results with their own list")
    _require(isinstance(many, list) and len(many) == len(placements),
             f"{runtime.id}: measure_many must return one measurement per placement ({len(placements)}), got "
             f"{len(many) if isinstance(many, list) else type(many).__name__}")
    for k, m in enumerate(many):
        _require(isinstance(m, Measurement), f"{runtime.id}: measure_many's result {k} is a {type(m).__name__}, "
                                             "not a Measurement")
        _check_measurement_fields(runtime, graph, cluster, m)
    if runtime.deterministic:
        for k, (a, b) in enumerate(zip(many, one_by_one, strict=True)):
            _require(a.ok == b.ok and a.step_time == b.step_time,
                     f"{runtime.id}: measure_many's measurement {k} ({a.step_time} s) is not measure's of placement "
                     f"{k} ({b.step_time} s): results must come back in the order of the placements")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _check_declaration(runtime: Runtime) -> None:
    _require(isinstance(runtime.id, str) and bool(runtime.id), f"{type(runtime).__name__}: id must be a non-empty str")
    _require(runtime.id != Runtime.id, f"{type(runtime).__name__}: id is Runtime's default {Runtime.id!r}; give the "
                                       "runtime its own versioned id (caches and checkpoints key measurements by it)")
    _require(isinstance(runtime.deterministic, bool), f"{runtime.id}: deterministic must be a bool")


def _check_rejects_invalid(runtime: Runtime, graph: OpGraph, cluster: Cluster, base: Placement) -> None:
    devices = base.devices
    d = cluster.num_devices
    _expect_invalid(runtime, graph, cluster, Placement(np.append(devices, devices[:1])), "a placement too long")
    _expect_invalid(runtime, graph, cluster, Placement(devices[:-1]), "a placement too short")
    _expect_invalid(runtime, graph, cluster, Placement.for_graph(graph, np.full_like(devices, d)),
                    f"device index {d} on a cluster of {d}")
    _expect_invalid(runtime, graph, cluster, Placement.for_graph(graph, np.full_like(devices, -1)),
                    "device index -1")
    _expect_invalid(runtime, graph, cluster, Placement(devices, "0" * 16), "a placement made for another graph")
    pinned = _pin_against(graph, cluster, int(devices[0]))
    _expect_invalid(runtime, pinned, cluster, Placement.for_graph(pinned, devices),
                    f"op {graph.op_names[0]!r} placed against its pin")
    if graph.num_ops >= 2 and d >= 2:
        split = devices.copy()
        split[1] = (devices[0] + 1) % d
        colocated = _colocate_first_two(graph)
        _expect_invalid(runtime, colocated, cluster, Placement.for_graph(colocated, split),
                        f"ops {graph.op_names[0]!r} and {graph.op_names[1]!r}, colocated, on two devices")


def _expect_invalid(runtime: Runtime, graph: OpGraph, cluster: Cluster, placement: Placement, what: str) -> None:
    try:
        m = runtime.measure(graph, cluster, placement)
    except InvalidPlacementError:
        return
    except Exception as err:
        raise AssertionError(
            f"{runtime.id}: {what} raised {type(err).__name__}, not InvalidPlacementError: {err}"
        ) from err
    raise AssertionError(f"{runtime.id}: {what} was measured ({m!r}) instead of raising InvalidPlacementError")


def _pin_against(graph: OpGraph, cluster: Cluster, device: int) -> OpGraph:
    """``graph`` with its first op pinned to a device kind other than that of ``device``."""
    kind = cluster.kinds[device]
    others = [k for k in cluster.kinds if k != kind]
    ops = graph.ops()
    ops[0] = dataclasses.replace(ops[0], pinned=others[0] if others else f"not-{kind}", colocation=None)
    return OpGraph.from_ops(ops, graph.edges(), name=graph.name, source=graph.source)


def _colocate_first_two(graph: OpGraph) -> OpGraph:
    """``graph`` with its first two ops in a colocation group of their own, unpinned."""
    ops = graph.ops()
    for i in (0, 1):
        ops[i] = dataclasses.replace(ops[i], pinned=None, colocation="gplace-conformance")
    return OpGraph.from_ops(ops, graph.edges(), name=graph.name, source=graph.source)


def _check_measurement(runtime: Runtime, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
    try:
        m = runtime.measure(graph, cluster, placement)
    except InvalidPlacementError:
        raise  # a placement given as valid is not: the caller's
    except Exception as err:
        raise AssertionError(f"{runtime.id}: measuring a valid placement raised {type(err).__name__}: {err}; a step "
                             "that cannot run is a failed Measurement (Measurement.failure(id, reason)), not an "
                             "exception") from err
    _require(isinstance(m, Measurement), f"{runtime.id}: measure returned {type(m).__name__}, not a Measurement")
    _require(m.ok or (IMPOSSIBLE not in m.reason and NO_REASON not in m.reason), f"{runtime.id}: {m.reason}")
    _check_measurement_fields(runtime, graph, cluster, m)
    if m.ok and np.unique(placement.devices).size == 1:
        _require(m.bytes_moved == 0, f"{runtime.id}: a single-device placement moved {m.bytes_moved} bytes")
    return m


def _check_measurement_fields(runtime: Runtime, graph: OpGraph, cluster: Cluster, m: Measurement) -> None:
    rid = runtime.id
    _require(m.runtime == rid, f"{rid}: measurement says runtime {m.runtime!r}")
    _require(isinstance(m.reason, str), f"{rid}: reason must be a str")
    _require(m.bytes_moved >= 0, f"{rid}: bytes_moved {m.bytes_moved} < 0")
    if m.ok:
        _require(math.isfinite(m.step_time) and m.step_time >= 0, f"{rid}: ok step_time {m.step_time} not finite >= 0")
        _require(m.reason == "", f"{rid}: an ok measurement has reason {m.reason!r}")
        _require(math.isfinite(m.spread) and m.spread >= 0, f"{rid}: spread {m.spread} not finite >= 0")
    else:
        _require(m.step_time == math.inf, f"{rid}: a failed measurement has step_time {m.step_time}, not inf")
        _require(bool(m.reason.strip()), f"{rid}: a failed measurement has no reason")
    expected = {"busy_time": cluster.num_devices, "peak_memory": cluster.num_devices,
                "op_start": graph.num_ops, "op_end": graph.num_ops}
    for name in _ARRAYS:
        arr = getattr(m, name)
        _require(arr is None or np.shape(arr) == (expected[name],),
                 f"{rid}: {name} has shape {np.shape(arr)}, expected ({expected[name]},)")


def _check_repeatable(runtime: Runtime, first: Measurement, second: Measurement) -> None:
    rid = runtime.id
    for name in ("ok", "step_time", "reason", "bytes_moved", "spread"):
        a, b = getattr(first, name), getattr(second, name)
        _require(a == b, f"{rid} is declared deterministic but measured {name} {a!r} then {b!r}")
    for name in _ARRAYS:
        a, b = getattr(first, name), getattr(second, name)
        same = (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))
        _require(same, f"{rid} is declared deterministic but measured two different {name}")
    _require(first.spread == 0, f"{rid} is declared deterministic but reports spread {first.spread}")
