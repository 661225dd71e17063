"""The placer contract every baseline follows."""

from __future__ import annotations

import abc

import numpy as np

from gplace.ir import Cluster, OpGraph, Placement


class Placer(abc.ABC):
    """Maps every op of a graph to a device of a cluster. Subclasses implement :meth:`_place`.

    :meth:`place` builds the :class:`~gplace.ir.Placement` and validates it (length, device range,
    colocation groups, pinned kinds), so every placer returns a placement the runtimes accept or fails
    loudly.
    """

    name: str = "placer"
    """Short identifier used in tables and result files, e.g. ``"heft"``."""

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        """Place ``graph`` on ``cluster``.

        Raises:
            PlacementInfeasibleError: an op fits on no device it may run on.
            GraphError: an op, or a colocation group, may run on no device of the cluster.

        Shapes:
            returned ``Placement.devices`` (N,) int64, device indices into ``cluster.devices``.
        """
        devices = np.asarray(self._place(graph, cluster), dtype=np.int64)
        placement = Placement.for_graph(graph, devices)
        placement.validate(graph, cluster)
        return placement

    @abc.abstractmethod
    def _place(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        """Return the (N,) device index of every op."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({args})"
