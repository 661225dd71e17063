"""Uniformly random placement of units."""

from __future__ import annotations

import numpy as np

from gplace.baselines._common import build_units
from gplace.baselines.base import Placer
from gplace.ir import Cluster, OpGraph
from gplace.ir.errors import check_sizes


class RandomPlacer(Placer):
    """Put each unit (colocation group or lone op) on a device drawn uniformly from those it may run on.

    Deterministic for a given ``seed``: every call to :meth:`place` starts a fresh generator. Not
    memory-aware.

    Args:
        seed: seed of the NumPy generator. (default: ``0``)
    """

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        check_sizes(type(self).__name__, 0, high=None, seed=seed)
        self.seed = seed

    def _place(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        units = build_units(graph, cluster)
        rng = np.random.default_rng(self.seed)
        # a uniform random key per (unit, device); the largest allowed key picks the device
        keys = np.where(units.allowed, rng.random(units.allowed.shape), -1.0)
        return np.argmax(keys, axis=1)[units.unit_of]
