"""``pipe-steady-v1``: a cheap steady-state score of a pipelined placement, for large searches.

The load of device ``d`` is the time it spends per micro-batch in steady state: ``sum durations[i, d] / M``
over its forward and backward ops, plus ``latency + ceil(bytes / M) / bandwidth`` of each transfer it sends
or receives per micro-batch (one per (producer, other consumer device), the largest edge, as in ``pipe-v3``).
Update ops are left out. The score of a placement is ``M * max_d load_d``. Its ``bytes_moved`` is ``pipe-v3``'s
(:func:`pipeline_bytes_moved`), and so is its ``busy_time``: the seconds each device computes in a mini-batch (every
op's duration on its device), no transfer counted.

Bound against ``pipe-v3`` (tested): with ``s = max_d load_d``, ``D`` devices and ``W_u`` the summed
duration of the update ops and of the transfers they send (whole edges, as ``pipe-v3`` sends them), the full
simulation's mini-batch time ``T`` satisfies ``M s / (2D - 1) <= T <= D M s + W_u``. Lower: ``load_d`` is
device ``d``'s compute plus its transfers on at most ``2(D-1)`` channels, each of which, like the device, is a
serial resource busy at most ``T`` over ``M`` micro-batches. Upper: until ``T`` some instance or transfer is
always running (the simulation never deadlocks), and all of them together take
``M sum_d (compute_d + sent_d) + W_u <= D M s + W_u``.

Example:
    >>> from gplace.ir import Placement
    >>> from gplace.testing import chain, uniform_cluster
    >>> g, c = chain((1.0, 3.0), nbytes=0), uniform_cluster(2)
    >>> steady_state_loads(g, c, Placement.for_graph(g, [0, 1]), microbatches=4).tolist()
    [0.25, 0.75]
"""

from __future__ import annotations

import numpy as np

from gplace.defaults import MICROBATCHES
from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.graph import UPDATE
from gplace.ir.placement import check_placement
from gplace.pipeline.simulator import check_microbatches, check_phases
from gplace.runtime.base import Measurement, ReadOnlySetting, Runtime
from gplace.runtime.batch import check_device_batch
from gplace.runtime.jit import cached_njit
from gplace.runtime.kernels import transfers

__all__ = ["SteadyStateScore", "pipeline_bytes_moved", "steady_state_loads"]


def steady_state_loads(graph: OpGraph, cluster: Cluster, placement: Placement,
                       microbatches: int = MICROBATCHES) -> np.ndarray:
    """(D,) float64 seconds per micro-batch of each device: compute plus the transfers it sends and receives."""
    check_placement(placement)
    placement.validate(graph, cluster)
    return _loads(np.asarray(placement.devices, np.int64), *_arrays(graph, cluster, check_microbatches(microbatches)))


def pipeline_bytes_moved(graph: OpGraph, cluster: Cluster, placement: Placement,
                         microbatches: int = MICROBATCHES) -> int:
    """Bytes a ``pipe-v3`` mini-batch sends between devices: per instance, one transfer per (producer, other
    device with a consumer) carrying its largest edge, ``ceil(bytes / M)`` from each of a micro-batch op's ``M``
    instances and the whole edge from an update op (``pipe-v3``'s transfers, counted without simulating)."""
    microbatches = check_microbatches(microbatches)
    check_placement(placement)
    placement.validate(graph, cluster)
    micro = check_phases(graph) != UPDATE
    nbytes = np.where(micro[graph.edge_index[0]], -(-graph.edge_bytes // microbatches), graph.edge_bytes)
    out_ptr, out_dst, out_eid = graph.out_csr
    _, x_op, _, x_bytes, _ = transfers(np.asarray(placement.devices, np.int64), out_ptr, out_dst, out_eid,
                                       nbytes.astype(np.int64), cluster.num_devices)
    return int((x_bytes * np.where(micro[x_op], microbatches, 1)).sum())


class SteadyStateScore(Runtime):
    """The ``pipe-steady-v1`` runtime: ``step_time = M * max(steady_state_loads)``; never out of memory.

    Its :attr:`id` is ``pipe-steady-v1/m<M>``.
    """

    semantics = "pipe-steady-v1"
    deterministic = True

    microbatches = ReadOnlySetting[int]()
    """Micro-batches per mini-batch (read-only: :attr:`id` is made from it)."""

    def __init__(self, microbatches: int = MICROBATCHES) -> None:
        self._microbatches = check_microbatches(microbatches)
        self.id = f"{self.semantics}/m{self._microbatches}"

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        loads = steady_state_loads(graph, cluster, placement, self.microbatches)
        devices = placement.devices
        computed = graph.durations(cluster)[np.arange(graph.num_ops), devices]  # pipe-v3's busy time: M x (d / M)
        return Measurement(ok=True, step_time=float(self.microbatches * loads.max()), runtime=self.id,
                           busy_time=np.bincount(devices, weights=computed, minlength=cluster.num_devices),
                           bytes_moved=pipeline_bytes_moved(graph, cluster, placement, self.microbatches))

    def minibatch_times(self, graph: OpGraph, cluster: Cluster, devices: np.ndarray) -> np.ndarray:
        """Scores of a batch of placements. Shapes: devices (K, N) int; returns (K,) float64 seconds."""
        devices = check_device_batch(graph, cluster, devices)
        arrays = _arrays(graph, cluster, self.microbatches)
        return np.array([self.microbatches * _loads(row, *arrays).max() for row in devices])


def _arrays(graph: OpGraph, cluster: Cluster, microbatches: int) -> tuple:
    mb = check_phases(graph) != UPDATE
    dur = np.where(mb[:, None], graph.durations(cluster) / microbatches, 0.0)
    out_ptr, out_dst, out_eid = graph.out_csr
    nbytes = np.where(mb[graph.edge_index[0]], -(-graph.edge_bytes // microbatches), 0)
    return (np.ascontiguousarray(dur), out_ptr, out_dst, out_eid, nbytes.astype(np.int64),
            np.ascontiguousarray(cluster.latency), np.ascontiguousarray(cluster.bandwidth), mb)


@cached_njit()
def _loads(dev, dur, out_ptr, out_dst, out_eid, nbytes, lat, bw, mb):
    nd = lat.shape[0]
    load = np.zeros(nd)
    for i in range(dev.shape[0]):
        load[dev[i]] += dur[i, dev[i]]
    _, x_op, x_dst, x_bytes, _ = transfers(dev, out_ptr, out_dst, out_eid, nbytes, nd)
    for x in range(x_op.shape[0]):
        if mb[x_op[x]]:
            s, d = dev[x_op[x]], x_dst[x]
            seconds = lat[s, d] + x_bytes[x] / bw[s, d]
            load[s] += seconds
            load[d] += seconds
    return load
