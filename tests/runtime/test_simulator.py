"""Golden and invariant tests for the ``sim-v1`` simulator (gplace.runtime.simulator)."""

from __future__ import annotations

import numpy as np
import pytest

from gplace.ir import Cluster, Device, Edge, InvalidPlacementError, Op, OpGraph, Placement
from gplace.pipeline import PipelineSimulator
from gplace.runtime import Simulator, schedule
from gplace.runtime.cache import CachedRuntime
from gplace.testing import MB, chain, diamond, fork_join, random_dag, uniform_cluster

SEEDS = range(8)


@pytest.fixture(scope="module")
def sim() -> Simulator:
    return Simulator()


def _place(graph: OpGraph, devices: list[int]) -> Placement:
    return Placement.for_graph(graph, devices)


def _graph(ops: list[Op], edges: list[tuple[str, str, int | None]]) -> OpGraph:
    return OpGraph.from_ops(ops, [Edge(s, d, b) for s, d, b in edges], name="custom")


def _memory_chain() -> OpGraph:
    """a0 -> a1 -> a2: costs 1, 2, 3; outputs 1, 2, 3 MB; a0 holds 100 MB of weights; a1 needs 10 MB scratch."""
    ops = [Op("a0", "MatMul", 1.0, persistent_memory=100 * MB, output_bytes=1 * MB),
           Op("a1", "MatMul", 2.0, temporary_memory=10 * MB, output_bytes=2 * MB),
           Op("a2", "MatMul", 3.0, output_bytes=3 * MB)]
    return _graph(ops, [("a0", "a1", None), ("a1", "a2", None)])


# ---------------------------------------------------------------------- golden timings
def test_chain_on_one_device_runs_back_to_back(sim: Simulator) -> None:
    """Costs 1, 2, 3 on one device: step 6, no bytes moved."""
    g, c = chain((1.0, 2.0, 3.0)), uniform_cluster(2)
    m = sim.measure(g, c, Placement.single(g, 0))
    assert m.ok and m.step_time == 6.0 and m.bytes_moved == 0 and m.runtime == "sim-v1"
    np.testing.assert_array_equal(m.op_start, [0, 1, 3])
    np.testing.assert_array_equal(m.op_end, [1, 3, 6])
    np.testing.assert_array_equal(m.busy_time, [6, 0])


def test_chain_split_adds_latency_plus_bytes_over_bandwidth(sim: Simulator) -> None:
    """a2 on the other device waits 0.5 s latency + 1 MB / (1 MB/s) after a1 ends at 3."""
    g, c = chain((1.0, 2.0, 3.0)), uniform_cluster(2, bandwidth=1e6, latency=0.5)
    s = sim.schedule(g, c, _place(g, [0, 0, 1]))
    assert s.step_time == 7.5 and s.bytes_moved == MB
    np.testing.assert_array_equal(s.transfer_start, [3.0])
    np.testing.assert_array_equal(s.transfer_end, [4.5])
    np.testing.assert_array_equal(s.op_start, [0, 1, 4.5])


def test_diamond_one_device_runs_branches_in_topological_order(sim: Simulator) -> None:
    """left and right are ready together at 1; left (earlier in topological order) runs first."""
    g = diamond()
    m = sim.measure(g, uniform_cluster(2), Placement.single(g, 0))
    assert m.step_time == 7.0
    np.testing.assert_array_equal(m.op_start, [0, 1, 3, 6])


def test_diamond_split_overlaps_branches(sim: Simulator) -> None:
    """left on GPU:1: src 0-1, send 1-2, left 2-4, send back 4-5, sink 5-6 while right runs 1-4."""
    g = diamond()
    m = sim.measure(g, uniform_cluster(2, bandwidth=1e6), _place(g, [0, 1, 0, 0]))
    assert m.step_time == 6.0 and m.bytes_moved == 2 * MB
    np.testing.assert_array_equal(m.op_start, [0, 2, 1, 5])


@pytest.mark.parametrize("k", [2, 3, 4])
def test_fork_join_k_ops_on_k_devices(sim: Simulator, k: int) -> None:
    """src and sink on GPU:0, b_i on GPU:i: 1 s out + 1 s compute + 1 s back, on separate channels."""
    g, c = fork_join(k), uniform_cluster(k, bandwidth=1e6)
    m = sim.measure(g, c, _place(g, [0, *range(k), 0]))
    assert m.step_time == 3.0 and m.bytes_moved == 2 * (k - 1) * MB
    np.testing.assert_array_equal(m.busy_time, np.ones(k))
    assert sim.measure(g, c, Placement.single(g, 0)).step_time == k


def test_tensor_sent_once_per_device_with_largest_edge(sim: Simulator) -> None:
    """src feeds c1 (1 MB) and c2 (3 MB) on GPU:1: one 3 MB transfer 1-4, then c1 4-5, c2 5-6."""
    ops = [Op("src", "Input", 1.0, output_bytes=MB), Op("c1", "MatMul", 1.0), Op("c2", "MatMul", 1.0)]
    g = _graph(ops, [("src", "c1", MB), ("src", "c2", 3 * MB)])
    s = sim.schedule(g, uniform_cluster(2, bandwidth=1e6), _place(g, [0, 1, 1]))
    assert s.step_time == 6.0 and s.bytes_moved == 3 * MB
    np.testing.assert_array_equal(s.transfer_bytes, [3 * MB])
    np.testing.assert_array_equal(s.op_start, [0, 4, 5])
    np.testing.assert_array_equal(s.peak_memory, [MB, 3 * MB])


def test_transfers_on_one_channel_serialise(sim: Simulator) -> None:
    """p (2 MB) ends at 1 and q (1 MB) at 2 on GPU:0; q's transfer waits for p's: 1-3 then 3-4, r 4-5."""
    ops = [Op("p", "MatMul", 1.0, output_bytes=2 * MB), Op("q", "MatMul", 1.0, output_bytes=MB),
           Op("s", "Add", 0.0), Op("r", "Add", 1.0)]
    g = _graph(ops, [("p", "s", None), ("q", "r", None)])
    s = sim.schedule(g, uniform_cluster(2, bandwidth=1e6), _place(g, [0, 0, 1, 1]))
    np.testing.assert_array_equal(s.transfer_start, [1, 3])
    np.testing.assert_array_equal(s.transfer_end, [3, 4])
    assert s.step_time == 5.0  # 4.0 without contention


# ---------------------------------------------------------------------- golden memory
def test_memory_peak_on_chain(sim: Simulator) -> None:
    """Peak while a1 runs: 100 weights + 1 (a0 out) + 2 (a1 out) + 10 (scratch) = 113 MB."""
    g = _memory_chain()
    s = sim.schedule(g, uniform_cluster(2), Placement.single(g, 0))
    np.testing.assert_array_equal(s.peak_memory, [113 * MB, 0])
    on0 = s.memory_device == 0
    np.testing.assert_array_equal(s.memory_time[on0], [0, 0, 1, 3, 3, 3, 6])
    np.testing.assert_array_equal(s.memory_bytes[on0] // MB, [100, 101, 113, 103, 102, 105, 103])


def test_memory_peak_on_split_chain(sim: Simulator) -> None:
    """a2 on GPU:1: the 2 MB copy arrives from 3 to 5, then a2's 3 MB output: 5 MB there; a1's output
    stays on GPU:0 until its transfer ends at 5."""
    g = _memory_chain()
    s = sim.schedule(g, uniform_cluster(2, bandwidth=1e6), _place(g, [0, 0, 1]))
    np.testing.assert_array_equal(s.peak_memory, [113 * MB, 5 * MB])
    last = [s.memory_bytes[s.memory_device == d][-1] for d in (0, 1)]
    assert last == [100 * MB, 3 * MB]


def test_out_of_memory_is_a_failed_measurement_naming_the_device(sim: Simulator) -> None:
    """113 MB needed on GPU:0 with 110 MB per device: ok=False, inf time, reason names GPU:0 only."""
    g = _memory_chain()
    c = uniform_cluster(2, memory=110 * MB, bandwidth=1e6)
    m = sim.measure(g, c, _place(g, [0, 0, 1]))
    assert not m.ok and m.step_time == np.inf
    assert m.reason == "out of memory on /GPU:0: needs 113.0 MB, has 110.0 MB"
    np.testing.assert_array_equal(m.peak_memory, [113 * MB, 5 * MB])
    np.testing.assert_array_equal(sim.step_times(g, c, np.array([[0, 0, 1]])), [np.inf])
    tight = uniform_cluster(2, memory=113 * MB - 1, bandwidth=1e6)  # rounded, both would read 113.0 MB
    assert sim.measure(g, tight, _place(g, [0, 0, 1])).reason == (
        "out of memory on /GPU:0: needs 113,000,000 B, has 112,999,999 B")


# ---------------------------------------------------------------------- contract
def test_invalid_placements_raise_through_measure(sim: Simulator) -> None:
    """Wrong length and out-of-range devices raise InvalidPlacementError, from measure and step_times."""
    g, c = chain(), uniform_cluster(2)
    with pytest.raises(InvalidPlacementError, match="2 entries"):
        sim.measure(g, c, _place(g, [0, 0]))
    with pytest.raises(InvalidPlacementError, match="device 2"):
        sim.measure(g, c, _place(g, [0, 2, 0]))
    with pytest.raises(InvalidPlacementError, match="out of range"):
        sim.step_times(g, c, np.array([[0, -1, 0]]))
    with pytest.raises(InvalidPlacementError, match=r"\(K, 3\)"):
        sim.step_times(g, c, np.zeros((1, 2), dtype=np.int64))


def test_a_list_of_device_indices_instead_of_a_placement_is_a_type_error_naming_the_argument(sim: Simulator) -> None:
    """``measure(graph, cluster, [0, 0, 1])`` failed with an AttributeError inside Runtime.measure."""
    g, c = chain(), uniform_cluster(2)
    with pytest.raises(TypeError, match=r"placement must be a gplace Placement, got list; .*Placement.for_graph"):
        sim.measure(g, c, [0, 0, 1])
    with pytest.raises(TypeError, match=r"placements\[1\] must be a gplace Placement, got ndarray"):
        CachedRuntime(sim).measure_many(g, c, [_place(g, [0, 0, 1]), np.array([0, 0, 1])])


def test_op_without_cost_on_its_device_raises(sim: Simulator) -> None:
    """An op with only a GPU cost placed on the CPU is rejected, naming op and device."""
    g = _graph([Op("a", "MatMul", None, kind_cost={"gpu": 1.0})], [])
    c = Cluster.build([Device("/CPU:0", "cpu"), Device("/GPU:0", "gpu")], default_bandwidth=1e6)
    assert sim.measure(g, c, _place(g, [1])).step_time == 1.0
    with pytest.raises(InvalidPlacementError, match="'a' has no cost for kind 'cpu' but is placed on '/CPU:0'"):
        sim.measure(g, c, _place(g, [0]))


def test_measure_is_deterministic(sim: Simulator) -> None:
    """A deterministic runtime: measuring twice gives identical results, also from a fresh simulator."""
    g, c = random_dag(40, seed=3), uniform_cluster(3, bandwidth=1e7)
    p = _place(g, np.random.default_rng(0).integers(0, 3, g.num_ops))
    a, b, fresh = sim.measure(g, c, p), sim.measure(g, c, p), Simulator().measure(g, c, p)
    assert Simulator.deterministic
    for m in (b, fresh):
        assert m.step_time == a.step_time and m.bytes_moved == a.bytes_moved
        np.testing.assert_array_equal(m.op_start, a.op_start)
        np.testing.assert_array_equal(m.peak_memory, a.peak_memory)


def test_cache_tells_clusters_apart(sim: Simulator) -> None:
    """Two clusters of the same shape but different bandwidth give their own transfer times."""
    g = chain((1.0, 2.0, 3.0))
    p = _place(g, [0, 0, 1])
    assert sim.measure(g, uniform_cluster(2, bandwidth=1e6), p).step_time == 7.0
    assert sim.measure(g, uniform_cluster(2, bandwidth=0.5e6), p).step_time == 8.0


def test_step_times_match_measure_and_pure_schedule(sim: Simulator) -> None:
    """The batch path, measure and the pure function agree on every placement."""
    g, c = random_dag(30, seed=5), uniform_cluster(4, bandwidth=3e6, latency=0.01)
    batch = np.random.default_rng(1).integers(0, 4, (16, g.num_ops))
    expected = [sim.measure(g, c, _place(g, row)).step_time for row in batch]
    np.testing.assert_array_equal(sim.step_times(g, c, batch), expected)
    assert schedule(g, c, _place(g, batch[0])).step_time == expected[0]



def test_step_times_keep_the_rounds_of_an_instant_with_zero_length_work(sim: Simulator) -> None:
    """p (GPU 1) and q (GPU 0) run 0..1; at t = 1 GPU 0 starts x (q's consumer, ready in the first round), as p's
    free transfer to y ends in the round after; so y runs 3..4 and z 4..9. First-ready order alone (y before x:
    same ready time, lower rank) would end at 7."""
    ops = [Op("p", "T", 1.0), Op("q", "T", 1.0), Op("y", "T", 1.0), Op("x", "T", 2.0), Op("z", "T", 5.0)]
    g = _graph(ops, [("p", "y", 0), ("q", "x", 0), ("y", "z", 0)])
    c, devices = uniform_cluster(2, bandwidth=1e6), [1, 0, 0, 0, 1]
    assert schedule(g, c, _place(g, devices)).step_time == 9.0
    assert sim.step_times(g, c, np.array([devices])).tolist() == [9.0]


def test_a_channel_serves_transfers_of_one_instant_in_topological_order(sim: Simulator) -> None:
    """Zero-cost ops o1..o5 wait on GPU 1 behind o9 (0..2); at t = 2 it runs o1, then o3, o4, o5 (ready since
    t = 1e-5) and o2 last (ready only after o1), all ending at t = 2 in successive rounds. o1, o2 and o5 send to
    GPU 0 over one channel; the producers' end times tie, so topological order decides: o2's transfer goes
    before o5's, and o8 (cost 2 after o2) ends at 4 + 2e-5, not 4 + 3e-5 (the order the rounds ended them in;
    found by the property test against tests/reference_sim.py)."""
    ops = [Op(f"o{i}", "T", 1.0 if i >= 8 else 0.0) for i in range(10)]
    edges = [("o0", "o1"), ("o1", "o2"), ("o2", "o8"), ("o0", "o2"), ("o0", "o3"), ("o0", "o4"), ("o0", "o5"),
             ("o1", "o6"), ("o5", "o6")]
    g = _graph(ops, [(a, b, 0) for a, b in edges])
    c = Cluster.build([Device(f"/GPU:{i}", "gpu", 0.5, 10**12) for i in range(2)], default_bandwidth=1e5,
                      default_latency=1e-5)
    devices = [0, 1, 1, 1, 1, 1, 0, 0, 0, 1]
    assert schedule(g, c, _place(g, devices)).step_time == pytest.approx(4 + 2e-5, abs=1e-12)
    assert sim.step_times(g, c, np.array([devices])).tolist() == [schedule(g, c, _place(g, devices)).step_time]


def test_step_times_count_received_copies_against_memory(sim: Simulator) -> None:
    """a (GPU 0) sends its 10 MB output to b on GPU 1, which has 5 MB: the received copy alone is out of memory."""
    g = _graph([Op("a", "T", 1.0, output_bytes=10 * MB), Op("b", "T", 1.0)], [("a", "b", None)])
    devices = [Device("/GPU:0", "gpu", 1.0, 20 * MB), Device("/GPU:1", "gpu", 1.0, 5 * MB)]
    c = Cluster.build(devices, default_bandwidth=1e9, name="small")
    assert not sim.measure(g, c, _place(g, [0, 1])).ok
    assert sim.step_times(g, c, np.array([[0, 1], [0, 0]])).tolist() == [np.inf, 2.0]

# ---------------------------------------------------------------------- invariants over random DAGs
def _critical_path(g: OpGraph, op_time: np.ndarray) -> float:
    finish = np.zeros(g.num_ops)
    src, dst = g.edge_index
    for i in g.topological_order:
        preds = src[dst == i]
        finish[i] = (finish[preds].max() if preds.size else 0.0) + op_time[i]
    return float(finish.max())


@pytest.mark.parametrize("seed", SEEDS)
def test_step_time_at_least_lower_bounds(sim: Simulator, seed: int) -> None:
    """Step >= critical path at each op's fastest device; on equal devices >= total work / D."""
    g = random_dag(30, seed=seed)
    fast = Cluster.build([Device(f"/GPU:{i}", "gpu", speed) for i, speed in enumerate((1.0, 2.0, 0.5))],
                         default_bandwidth=1e7)
    rows = np.random.default_rng(seed).integers(0, 3, (20, g.num_ops))
    bound = _critical_path(g, g.durations(fast).min(1))
    assert (sim.step_times(g, fast, rows) >= bound - 1e-9).all()
    uniform = uniform_cluster(3, bandwidth=1e7)
    assert (sim.step_times(g, uniform, rows) >= g.compute_cost.sum() / 3 - 1e-9).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_single_device_moves_nothing_and_never_idles(sim: Simulator, seed: int) -> None:
    """All ops on one device: 0 bytes moved and the step is exactly the total work."""
    g = random_dag(30, seed=seed)
    m = sim.measure(g, uniform_cluster(3), Placement.single(g, 1))
    assert m.bytes_moved == 0
    assert m.step_time == pytest.approx(g.compute_cost.sum(), rel=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_relabelling_identical_devices_keeps_step_time(sim: Simulator, seed: int) -> None:
    """Permuting equal devices permutes busy time and memory but leaves the step time unchanged."""
    g, c = random_dag(30, seed=seed), uniform_cluster(4, bandwidth=2e6, latency=0.01)
    rng = np.random.default_rng(seed)
    devices, perm = rng.integers(0, 4, g.num_ops), rng.permutation(4)
    a, b = sim.measure(g, c, _place(g, devices)), sim.measure(g, c, _place(g, perm[devices]))
    assert a.step_time == b.step_time
    np.testing.assert_array_equal(b.busy_time[perm], a.busy_time)
    np.testing.assert_array_equal(b.peak_memory[perm], a.peak_memory)


@pytest.mark.parametrize("seed", SEEDS)
def test_schedule_respects_dependencies_devices_and_memory(sim: Simulator, seed: int) -> None:
    """Inputs arrive before an op starts, a device runs one op at a time, and at the end only weights and
    unconsumed outputs remain in memory."""
    g, c = random_dag(30, seed=seed), uniform_cluster(3, bandwidth=2e6, latency=0.01)
    devices = np.random.default_rng(seed).integers(0, 3, g.num_ops)
    s = sim.schedule(g, c, _place(g, devices))
    for (p, j), nbytes in zip(g.edge_index.T, g.edge_bytes, strict=True):
        wait = 0.0 if devices[p] == devices[j] else c.transfer_time(nbytes, devices[p], devices[j])
        assert s.op_start[j] >= s.op_end[p] + wait - 1e-9
    for d in range(3):
        on = np.flatnonzero(devices == d)
        order = on[np.argsort(s.op_start[on], kind="stable")]
        assert (s.op_start[order[1:]] >= s.op_end[order[:-1]]).all()
        sinks = np.setdiff1d(on, g.edge_index[0])
        left = g.persistent_memory[on].sum() + g.output_bytes[sinks].sum()
        assert s.memory_bytes[s.memory_device == d][-1] == left


def test_a_started_transfer_is_not_put_back_for_a_producer_ending_a_round_later_at_the_same_instant() -> None:
    """The module docstring's tie rule: A (zero cost, after s on GPU 1) and B both end on GPU 0 at t = 1, A a round
    later, so B's transfer (started in the first round) goes first though A comes first in topological order:
    B -> GPU 1 over 1..2, A's over 2..3, cA 3..5 (after cB 2..2.5), step 5 s (4.5 s if A's went first)."""
    c = uniform_cluster(2, bandwidth=1e6, latency=0.0)
    g = OpGraph.from_ops([Op("s", "T", 1.0), Op("A", "T", 0.0), Op("B", "T", 1.0), Op("cA", "T", 2.0),
                          Op("cB", "T", 0.5)], [Edge("s", "A", 0), Edge("A", "cA", MB), Edge("B", "cB", MB)])
    p = _place(g, [1, 0, 0, 1, 1])
    sched = schedule(g, c, p)
    assert sched.step_time == 5.0 and sched.op_end[1] == sched.op_end[2] == 1.0
    assert Simulator().step_times(g, c, np.asarray([p.devices]))[0] == 5.0


@pytest.mark.parametrize("make", [Simulator, lambda: PipelineSimulator(4)])
def test_an_equal_cluster_built_anew_finds_the_prepared_arrays(make):
    """Prepared arrays are keyed by the cluster's content: a copy read back (unpickled) for each call prepared them
    again (keyed by the object), 2.6-9x slower a measurement."""
    import pickle

    sim, graph, cluster = make(), random_dag(20, seed=3), uniform_cluster(3)
    placement = Placement.for_graph(graph, [i % 3 for i in range(graph.num_ops)])
    first = sim.measure(graph, cluster, placement)
    copy = pickle.loads(pickle.dumps(cluster))
    assert copy is not cluster and sim.measure(graph, copy, placement).step_time == first.step_time
    assert len(sim._cache) == 1
    other = uniform_cluster(3, bandwidth=1e3)  # other content: prepared anew
    assert sim.measure(graph, other, placement).step_time != first.step_time and len(sim._cache) == 2
    sim.clear_cache()
    assert len(sim._cache) == 0 and sim.measure(graph, copy, placement).step_time == first.step_time
