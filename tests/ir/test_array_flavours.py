"""Array and number flavours at the API boundary: big-endian, narrower and NumPy values are taken as the native
int64 / float64 / int they stand for, or refused by name; a generator is read once."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

import gplace
from gplace.ir import Cluster, Device, Edge, GraphError, InvalidPlacementError, Link, Op, OpGraph, Placement
from gplace.pipeline.stages import pipeline_stages, placement_extras, split_spec
from gplace.runtime import Measurement, Simulator
from gplace.runtime.base import checked
from gplace.testing import chain, diamond, layered_dag, two_branches, uniform_cluster
from gplace.training import ReinforceTrainer


def _with(graph: OpGraph, **arrays: object) -> OpGraph:
    return OpGraph(**{**{f.name: getattr(graph, f.name) for f in dataclasses.fields(graph)}, **arrays})


def test_graph_arrays_are_stored_as_native_int64_and_float64() -> None:
    """Big-endian edge bytes gave a step time of 9.26e12 s for 6 s; an int32 edge index or a float32 cost another
    fingerprint than the graph's JSON copy. Other kinds (unsigned, int costs) are still refused by name."""
    g, c = diamond(), uniform_cluster(2)
    odd = _with(g, edge_bytes=g.edge_bytes.astype(">i8"), edge_index=g.edge_index.astype(np.int32),
                compute_cost=g.compute_cost.astype(np.float32), output_bytes=g.output_bytes.astype(">i4"),
                kind_cost={"gpu": g.compute_cost.astype(">f8")})
    for name in ("edge_bytes", "edge_index", "output_bytes"):
        assert getattr(odd, name).dtype == np.dtype(np.int64) and getattr(odd, name).dtype.isnative
    assert odd.compute_cost.dtype == odd.kind_cost["gpu"].dtype == np.dtype(np.float64)
    assert _with(g, edge_bytes=g.edge_bytes.astype(">i8")).fingerprint == g.fingerprint
    assert Simulator().step_times(odd, c, np.array([[0, 1, 0, 0]])).tolist() == [6.0]
    with pytest.raises(GraphError, match="edge_index has dtype uint8"):
        _with(g, edge_index=g.edge_index.astype(np.uint8))


def test_from_ops_reads_generators_of_ops_and_edges() -> None:
    """The type checks used a generator up: its edges were silently dropped."""
    ops = [Op(n, "T", 1.0) for n in "abc"]
    g = OpGraph.from_ops((op for op in ops), (Edge(s, d) for s, d in ("ab", "bc")))
    assert (g.num_ops, g.num_edges) == (3, 2)


def test_numpy_integer_seeds_are_whole_numbers() -> None:
    """np.int64(3) passed place's seed check, then failed in RandomPlacer's (and torch's manual_seed); a trainer
    seed of 2**70 was taken and overflowed in torch."""
    g, c = two_branches(2), uniform_cluster(2)
    want = gplace.place(g, c, method="random", seed=3).placement
    assert gplace.place(g, c, method="random", seed=np.int64(3)).placement == want
    tiny = ReinforceTrainer(updates=1, samples_per_update=2, seed=np.int64(1))
    assert type(tiny.seed) is int
    assert gplace.place(g, c, method="mlp", seed=np.int64(1), trainer=tiny).measurement.ok
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*63\)"):
        ReinforceTrainer(seed=2**70)


def test_stages_validate_the_placement() -> None:
    """A negative index was the last device, another graph's placement was used, a list raised AttributeError."""
    g, c = chain((1.0, 2.0, 3.0)), uniform_cluster(2)
    negative = Placement.for_graph(g, [0, -1, 0])
    for call in (lambda p: pipeline_stages(g, c, p), lambda p: placement_extras(g, c, p), lambda p: split_spec(g, p)):
        with pytest.raises(InvalidPlacementError, match="op 'a1' placed on device -1"):
            call(negative)
        with pytest.raises(InvalidPlacementError, match="placement was made for graph"):
            call(Placement.for_graph(chain((1.0, 1.0, 1.0)), [0, 1, 1]))
        with pytest.raises(TypeError, match="placement must be a gplace Placement, got list"):
            call([0, 1, 0])
    with pytest.raises(InvalidPlacementError, match="placed on device 5"):
        pipeline_stages(g, c, Placement.for_graph(g, [0, 5, 0]))


def test_placement_refuses_indices_it_cannot_hold() -> None:
    """uint64 indices >= 2**63 became negative; single() truncated 1.5, took True as device 1, and 2**70 raised a
    bare OverflowError."""
    g = chain((1.0, 2.0, 3.0))
    with pytest.raises(InvalidPlacementError, match="device index 18446744073709551615"):
        Placement.for_graph(g, np.array([0, 2**64 - 1, 0], np.uint64))
    assert Placement.for_graph(g, np.array([0, 1, 0], np.uint64)).devices.tolist() == [0, 1, 0]
    for bad in (1.5, 1.0, True, np.array(True), 2**70, -1):
        with pytest.raises(InvalidPlacementError, match="device"):
            Placement.single(g, bad)
    assert Placement.single(g, np.int64(1)).devices.tolist() == [1, 1, 1]


def test_checked_gives_a_python_float_step_time_and_bool_ok() -> None:
    """A runtime's torch scalar step time crashed the search in a comparison with an array."""
    for step_time, ok in ((torch.tensor(2.0, dtype=torch.float64), np.bool_(True)), (np.array(2.0), torch.tensor(1))):
        m = checked(Measurement(ok=ok, step_time=step_time, runtime="mine"), object())
        assert type(m.step_time) is float and m.step_time == 2.0 and m.ok is True
    failed = checked(Measurement(ok=np.bool_(False), step_time=torch.tensor(math.inf), runtime="mine"), object())
    assert failed.ok is False and failed.step_time == math.inf and type(failed.step_time) is float


def test_cluster_matrices_must_be_numbers() -> None:
    """A bool bandwidth was taken as 1 byte/s; a complex or object one crashed in numba."""
    devices, bw, lat = (Device("a", "gpu"), Device("b", "gpu")), np.full((2, 2), 1e6), np.zeros((2, 2))
    for label, arrays in (("bandwidth", (np.ones((2, 2), bool), lat)), ("latency", (bw, np.zeros((2, 2), bool))),
                          ("bandwidth", (bw.astype(complex), lat)), ("bandwidth", (bw.astype(object), lat))):
        with pytest.raises(GraphError, match=f"{label} has dtype"):
            Cluster(devices, *arrays)


def test_layered_dag_takes_a_numpy_memory_unit() -> None:
    """An np.uint16 unit wrapped around: 19 * 5000 bytes became 29464."""
    assert layered_dag(300, memory_unit=np.uint16(5000)).fingerprint == layered_dag(300, memory_unit=5000).fingerprint


def test_huge_python_ints_are_named() -> None:
    """Op(cost=10**400) and a link of 10**400 bytes/s raised a bare OverflowError."""
    with pytest.raises(GraphError, match="op 'a' cost is .* too large"):
        OpGraph.from_ops([Op("a", "T", 10**400)], [])
    devices = [Device("a", "gpu"), Device("b", "gpu")]
    with pytest.raises(GraphError, match="link a<->b bandwidth is too large"):
        Cluster.build(devices, [Link("a", "b", 10**400)])
    with pytest.raises(GraphError, match="default_latency is too large"):
        Cluster.build(devices, default_bandwidth=1e9, default_latency=10**400)
