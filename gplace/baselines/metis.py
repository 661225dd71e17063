"""Balanced k-way min-cut partitioning with METIS (through ``pymetis``)."""

from __future__ import annotations

import logging
from types import ModuleType

import numpy as np
import scipy.sparse as sp

from gplace.baselines._c_stdout import c_stdout_to_debug_log
from gplace.baselines._common import Units, build_units, graph_speeds, mean_durations, unit_durations
from gplace.baselines.base import Placer
from gplace.ir import Cluster, OpGraph
from gplace.ir.errors import check_sizes

logger = logging.getLogger(__name__)

_MAX_WEIGHT = 1_000_000
"""Integer weights are scaled into [1, this] so METIS's 32-bit sums cannot overflow on large graphs."""


class METIS(Placer):
    """Partition the graph into one part per device, balancing compute and cutting few bytes.

    Colocation groups are contracted into one vertex first. Vertex weights are the unit's mean duration
    over its allowed devices, edge weights the bytes between units (both directions summed); both are
    scaled to positive integers. The target weight of part ``k`` is proportional to how fast device ``k`` runs
    the graph (:func:`~gplace.baselines._common.graph_speeds`: the ops' costs for its kind, and its speed), and
    parts are then matched to devices by weight: heaviest part to fastest device (on a wide cluster some parts may
    stay empty; what METIS prints about them goes to the DEBUG log, not to stdout). Units that may not run on their
    part's device (pins) move to the allowed device with the least load (summed
    durations) so far. Not memory-aware.

    Needs ``pymetis`` (``pip install 'gplace[metis]'``), imported only when :meth:`place` runs.

    Args:
        seed: METIS's random seed. (default: ``0``)

    Raises:
        ImportError: from :meth:`place`, when ``pymetis`` is not installed.
    """

    name = "metis"

    def __init__(self, seed: int = 0) -> None:
        check_sizes(type(self).__name__, 0, seed=seed)
        self.seed = seed

    def _place(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        pymetis = _import_pymetis()
        units = build_units(graph, cluster)
        durations = graph.durations(cluster)
        speeds = graph_speeds(durations, units.allowed[units.unit_of], cluster.speeds)
        parts = self._partition(pymetis, graph, units, durations, speeds)
        unit_device = _parts_to_devices(parts, units, durations, cluster, speeds)
        return _repair_pins(unit_device, units, unit_durations(units, durations))[units.unit_of]

    def _partition(
        self, pymetis: ModuleType, graph: OpGraph, units: Units, durations: np.ndarray, speeds: np.ndarray
    ) -> np.ndarray:
        """(U,) part index of every unit; part ``k``'s target weight is proportional to ``speeds[k]``."""
        num_parts = len(speeds)
        if num_parts == 1 or units.num_units <= 1:
            return np.zeros(units.num_units, dtype=np.int64)
        if units.num_units <= num_parts:  # a part each
            return np.arange(units.num_units, dtype=np.int64)
        weight = np.zeros(units.num_units)
        np.add.at(weight, units.unit_of, mean_durations(durations, units.allowed[units.unit_of]))
        adjacency = _unit_adjacency(graph, units)
        with c_stdout_to_debug_log(logger, "METIS"):  # on wide clusters: "***Cannot bisect ..." to fd 1
            result = pymetis.part_graph(
                num_parts, pymetis.CSRAdjacency(adjacency.indptr.tolist(), adjacency.indices.tolist()),
                vweights=_scale(weight), eweights=_scale(adjacency.data) if adjacency.nnz else None,
                tpwgts=(speeds / speeds.sum()).tolist(),
                options=pymetis.Options(seed=self.seed),
            )
        return np.asarray(result[1], dtype=np.int64)


def _import_pymetis() -> ModuleType:
    from gplace.extras import require

    return require("pymetis", "metis", "the METIS placer")


def _unit_adjacency(graph: OpGraph, units: Units) -> sp.csr_matrix:
    """Symmetric (U, U) CSR matrix of bytes between units, without self-loops."""
    src, dst = units.unit_of[graph.edge_index[0]], units.unit_of[graph.edge_index[1]]
    keep = src != dst
    nbytes = graph.edge_bytes[keep].astype(np.float64) + 1.0  # +1: a zero-byte edge is still a dependency
    u = units.num_units
    half = sp.coo_matrix((nbytes, (src[keep], dst[keep])), shape=(u, u))
    full = (half + half.T).tocsr()
    full.sum_duplicates()
    full.sort_indices()
    return full


def _scale(values: np.ndarray) -> list[int]:
    """Positive integer weights proportional to ``values``, at most ``_MAX_WEIGHT``."""
    top = float(values.max()) if values.size else 0.0
    if top <= 0:
        return [1] * int(values.size)
    return np.maximum(1, np.rint(values / top * _MAX_WEIGHT)).astype(np.int64).tolist()


def _parts_to_devices(parts: np.ndarray, units: Units, durations: np.ndarray, cluster: Cluster,
                      speeds: np.ndarray) -> np.ndarray:
    """(U,) device per unit: parts by decreasing speed-1 work go to devices by decreasing ``speeds`` (D,)."""
    work = np.where(units.allowed[units.unit_of], durations * cluster.speeds, 0.0).max(1)
    part_work = np.bincount(parts[units.unit_of], weights=work, minlength=cluster.num_devices)
    by_work = np.argsort(-part_work, kind="stable")
    by_speed = np.argsort(-speeds, kind="stable")
    device_of_part = np.empty(cluster.num_devices, dtype=np.int64)
    device_of_part[by_work] = by_speed
    return device_of_part[parts]


def _repair_pins(unit_device: np.ndarray, units: Units, unit_time: np.ndarray) -> np.ndarray:
    """Move units off devices they may not use, to the allowed device with the least load."""
    unit_device = unit_device.copy()
    ok = units.allowed[np.arange(units.num_units), unit_device]
    load = np.bincount(unit_device[ok], weights=unit_time[ok, unit_device[ok]], minlength=unit_time.shape[1])
    for u in np.flatnonzero(~ok).tolist():
        options = np.flatnonzero(units.allowed[u])
        d = int(options[np.argmin(load[options])])
        unit_device[u] = d
        load[d] += unit_time[u, d]
    return unit_device
