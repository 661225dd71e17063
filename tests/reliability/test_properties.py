"""Property tests (hypothesis): any JSON graph loads, places and measures or raises gplace's own error; save/load
round-trips exactly; the sim-v1 kernel equals the plain-Python reference (``tests/reference_sim.py``) and keeps
its invariants on random DAGs and placements."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gplace.baselines import HEFT, PlacementInfeasibleError, step_time_lower_bound
from gplace.ir import (
    Cluster,
    Device,
    Edge,
    GraphError,
    Link,
    Op,
    OpGraph,
    Placement,
    UnsupportedGraphError,
    cluster_from_dict,
    cluster_to_dict,
    graph_from_dict,
    graph_to_dict,
    placement_from_dict,
    placement_to_dict,
)
from gplace.runtime import Simulator, schedule
from gplace.testing import layered_dag

sys.path.insert(0, str(Path(__file__).parents[1]))
from reference_sim import simulate  # noqa: E402

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MB = 1_000_000


@st.composite
def dags(draw, max_ops: int = 14, costs: st.SearchStrategy | None = None) -> OpGraph:
    """A random DAG: edges only from lower to higher index; costs (default: floats in [0, 5]), memory and edge
    bytes drawn too."""
    n = draw(st.integers(1, max_ops))
    costs = st.floats(0.0, 5.0) if costs is None else costs
    ops = [Op(f"o{i}", f"T{draw(st.integers(0, 3))}", draw(costs),
              persistent_memory=draw(st.integers(0, 4)) * MB, temporary_memory=draw(st.integers(0, 3)) * MB,
              output_bytes=draw(st.integers(0, 6)) * MB) for i in range(n)]
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=3 * n)) if pairs else []
    edges = [Edge(f"o{i}", f"o{j}", draw(st.none() | st.integers(0, 8 * MB))) for i, j in chosen]
    return OpGraph.from_ops(ops, edges, name="hypothesis")


@st.composite
def clusters(draw) -> Cluster:
    """1-4 devices; each pair's link drawn, its reverse direction too where a reverse value is drawn (asymmetric)."""
    d = draw(st.integers(1, 4))
    devices = [Device(f"/D:{i}", "gpu", draw(st.sampled_from([0.5, 1.0, 2.0]))) for i in range(d)]
    bandwidths, latencies = st.floats(1e5, 1e9), st.floats(0.0, 1e-3)
    links = [Link(a.name, b.name, draw(bandwidths), draw(latencies), draw(st.none() | bandwidths),
                  draw(st.none() | latencies)) for k, a in enumerate(devices) for b in devices[k + 1:]]
    return Cluster.build(devices, links, name="hypothesis")


def _links(cluster: Cluster) -> list[Link]:
    """The links of ``cluster``, both directions as they are."""
    names, bw, lat = cluster.device_names, cluster.bandwidth, cluster.latency
    return [Link(names[i], names[j], float(bw[i, j]), float(lat[i, j]), float(bw[j, i]), float(lat[j, i]))
            for i in range(len(names)) for j in range(i + 1, len(names))]


@st.composite
def placed(draw, graphs: st.SearchStrategy | None = None):
    graph, cluster = draw(dags() if graphs is None else graphs), draw(clusters())
    devices = draw(st.lists(st.integers(0, cluster.num_devices - 1), min_size=graph.num_ops,
                            max_size=graph.num_ops))
    return graph, cluster, Placement.for_graph(graph, np.array(devices, dtype=np.int64))


def test_a_channel_starts_one_free_transfer_a_round_in_the_reference_too():
    """A's 4 MB transfer holds the channel 1 -> 0 until t = 5, where B's and C's free transfers wait; the channel
    carries one at a time, so B's ends in the round after it starts, and C's one round later: Y (B's consumer) is
    ready before X (A's and C's) and runs 5..6, X 6..7. The reference started both in one round (X first, by rank),
    where the kernel, the docstring's rounds, does not (found by fuzzing the kernel against it)."""
    mb = 1_000_000
    ops = [Op(name, "T", 1.0, output_bytes=mb) for name in ("A", "B", "C", "X", "Y")]
    graph = OpGraph.from_ops(ops, [Edge("A", "X", 4 * mb), Edge("C", "X", 0), Edge("B", "Y", 0)], name="rounds")
    cluster = Cluster.build([Device(f"/GPU:{i}", "gpu", 1.0) for i in range(2)], default_bandwidth=1e6,
                            default_latency=0.0)
    placement = Placement.for_graph(graph, [1, 1, 1, 0, 0])
    kernel, reference = schedule(graph, cluster, placement), simulate(graph, cluster, placement)
    assert kernel.op_start.tolist() == reference.op_start.tolist() == [0.0, 1.0, 2.0, 6.0, 5.0]
    assert kernel.peak_memory.tolist() == reference.peak_memory.tolist()


@FAST
@given(placed())
def test_kernel_equals_the_reference_simulator(case):
    graph, cluster, placement = case
    got, want = schedule(graph, cluster, placement), simulate(graph, cluster, placement)
    assert got.step_time == want.step_time  # exact: same operations in the same order
    np.testing.assert_array_equal(got.op_start, want.op_start)
    np.testing.assert_array_equal(got.peak_memory, want.peak_memory)


@settings(FAST, max_examples=150)
@given(placed() | placed(dags(costs=st.sampled_from([0.5, 1.0, 2.0]))), st.sampled_from([None, None, 6 * MB, 20 * MB]),
       st.integers(0, 2**32 - 1))
def test_batch_step_times_equal_the_reference_simulator(case, memory, seed):
    """``step_times`` (its fast path where memory cannot run out, else the full kernel) gives the reference's
    step time, ``inf`` out of memory, on 20 placements of each graph; costs from a few values make many ties."""
    graph, cluster, _ = case
    if memory is not None:
        devices = [Device(d.name, d.kind, d.speed, memory) for d in cluster.devices]
        cluster = Cluster.build(devices, _links(cluster), name="tight")
    batch = np.random.default_rng(seed).integers(0, cluster.num_devices, (20, graph.num_ops))
    expected = []
    for row in batch:
        want = simulate(graph, cluster, Placement.for_graph(graph, row))
        expected.append(want.step_time if (want.peak_memory <= cluster.memory).all() else np.inf)
    assert Simulator().step_times(graph, cluster, batch).tolist() == expected


@FAST
@given(placed())
def test_step_time_is_at_least_the_lower_bound(case):
    graph, cluster, placement = case
    assert schedule(graph, cluster, placement).step_time >= step_time_lower_bound(graph, cluster) * (1 - 1e-12)


@FAST
@given(dags(), clusters(), st.data())
def test_a_single_device_step_is_the_sum_of_its_durations(graph, cluster, data):
    d = data.draw(st.integers(0, cluster.num_devices - 1))
    step = schedule(graph, cluster, Placement.single(graph, d)).step_time
    assert step == pytest.approx(graph.durations(cluster)[:, d].sum(), rel=1e-12, abs=1e-15)


@FAST
@given(placed(), st.randoms(use_true_random=False))
def test_relabelling_identical_devices_keeps_the_step_time(case, rnd):
    graph, _, placement = case
    cluster = Cluster.build([Device(f"/D:{i}", "gpu") for i in range(4)], default_bandwidth=1e7, name="same")
    devices = placement.devices % 4
    perm = list(range(4))
    rnd.shuffle(perm)
    relabelled = np.array(perm)[devices]
    first = schedule(graph, cluster, Placement.for_graph(graph, devices)).step_time
    assert schedule(graph, cluster, Placement.for_graph(graph, relabelled)).step_time == first


@FAST
@given(placed())
def test_memory_is_never_negative_and_ends_at_persistent_plus_unconsumed_outputs(case):
    graph, cluster, placement = case
    s = schedule(graph, cluster, placement)
    assert (s.memory_bytes >= 0).all()
    end = np.zeros(cluster.num_devices, dtype=np.int64)
    np.add.at(end, placement.devices, graph.persistent_memory)
    sinks = np.setdiff1d(np.arange(graph.num_ops), graph.edge_index[0])
    np.add.at(end, placement.devices[sinks], graph.output_bytes[sinks])
    last = {int(d): int(b) for d, b in zip(s.memory_device, s.memory_bytes, strict=True)}
    assert [last.get(d, 0) for d in range(cluster.num_devices)] == end.tolist()


@FAST
@given(placed())
def test_graph_cluster_and_placement_round_trip_exactly(case):
    graph, cluster, placement = case
    doc = json.loads(json.dumps(graph_to_dict(graph)))
    again = graph_from_dict(doc)
    assert again.fingerprint == graph.fingerprint
    for field in ("compute_cost", "persistent_memory", "temporary_memory", "output_bytes", "edge_index",
                  "edge_bytes"):
        np.testing.assert_array_equal(getattr(again, field), getattr(graph, field))
    cluster_again = cluster_from_dict(json.loads(json.dumps(cluster_to_dict(cluster))))
    assert cluster_again.fingerprint == cluster.fingerprint
    placement_doc = json.loads(json.dumps(placement_to_dict(placement, graph, cluster)))
    np.testing.assert_array_equal(placement_from_dict(placement_doc, graph, cluster).devices, placement.devices)


JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 2**70), st.floats(allow_nan=True),
                        st.text(max_size=4), st.lists(st.integers(-1, 5), max_size=3))
OP_FIELDS = ["name", "type", "cost", "kind_cost", "persistent_memory", "temporary_memory", "output_bytes",
             "output_shapes", "colocation", "pinned", "bogus"]


@st.composite
def graph_docs(draw) -> dict:
    """A gplace graph document, mostly well formed, with any field of any op or edge possibly replaced."""
    n = draw(st.integers(1, 5))
    ops = [{"name": f"o{i}", "type": "X", "cost": 1.0} for i in range(n)]
    for _ in range(draw(st.integers(0, 3))):
        ops[draw(st.integers(0, n - 1))][draw(st.sampled_from(OP_FIELDS))] = draw(JSON_VALUES)
    edges = [{"src": f"o{draw(st.integers(0, n))}", "dst": f"o{draw(st.integers(0, n))}",
              **({"bytes": draw(JSON_VALUES)} if draw(st.booleans()) else {})}
             for _ in range(draw(st.integers(0, 4)))]
    return {"format": "gplace.graph", "version": 1, "name": "fuzz", "ops": ops, "edges": edges}


@settings(max_examples=150, deadline=None)
@given(graph_docs())
def test_any_json_graph_loads_places_and_measures_or_raises_a_gplace_error(doc):
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/GPU:0", "gpu")], default_bandwidth=1e9)
    try:
        graph = graph_from_dict(json.loads(json.dumps(doc)))
        placement = HEFT().place(graph, cluster)
    except (GraphError, UnsupportedGraphError, PlacementInfeasibleError):
        return
    m = Simulator().measure(graph, cluster, placement)
    assert m.ok == math.isfinite(m.step_time)


@pytest.mark.parametrize("seed", [0, 1])
def test_wide_graphs_take_the_heap_path_and_still_equal_the_reference(seed, monkeypatch):
    """Layers 100 ops wide make the fast path's sorted ready run give way to a heap (an insertion would move more
    than ``SHIFT_LIMIT`` entries); step times stay the reference's. The switch is counted on the kernel's
    Python twin (same code, run by the interpreter)."""
    from gplace.runtime import simulator

    graph = layered_dag(300, width=100, seed=seed)
    cluster = Cluster.build([Device(f"/D:{i}", "gpu", s) for i, s in enumerate([1.0, 0.5, 2.0])],
                            default_bandwidth=2e8, default_latency=1e-5, name="three")
    batch = np.random.default_rng(seed).integers(0, 3, (3, graph.num_ops))
    expected = [simulate(graph, cluster, Placement.for_graph(graph, row)).step_time for row in batch]
    assert Simulator().step_times(graph, cluster, batch).tolist() == expected

    switches = []
    compiled_move_front = simulator.move_front

    def counting_move_front(*args):
        switches.append(args[3] - args[2])
        return compiled_move_front(*args)

    monkeypatch.setattr(simulator, "move_front", counting_move_front)
    monkeypatch.setattr(simulator, "_fast_step_time", simulator._fast_step_time.py_func)
    prep = Simulator()._prepared(graph, cluster)
    got = simulator._batch_step_times.py_func(batch, prep.memory, prep.fits, prep.fast, *prep.args)
    assert got.tolist() == expected
    assert len(switches) > 0
