"""Pipeline partitioners: the exact DPs against brute force, the ILP against the DP, pins, colocation, memory."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from gplace import testing
from gplace.baselines import PlacementInfeasibleError
from gplace.baselines.pipeline import (
    GPipePartitioner,
    IdealDPPartitioner,
    PipeDreamPartitioner,
    PipelineILPPlacer,
    PipelineLocalSearch,
    ProblemTooLargeError,
    StageProblem,
    pipeline_lower_bound,
)
from gplace.ir import Cluster, Device, Edge, Op, OpGraph, Placement
from gplace.pipeline import PipelineSimulator

KB = 1000


def _weighted_dag(n: int, seed: int) -> OpGraph:
    """A random DAG with random costs (0.1-3 s) and edge bytes (0-3 KB)."""
    rng = np.random.default_rng(seed)
    ops = [Op(f"o{i}", "MatMul", float(rng.uniform(0.1, 3.0)), output_bytes=int(rng.integers(0, 3 * KB)))
           for i in range(n)]
    edges = [Edge(f"o{i}", f"o{j}") for i in range(n) for j in range(i + 1, n) if rng.random() < 0.35]
    return OpGraph.from_ops(ops, edges, name=f"dag{n}-{seed}")


def skip_chain(n: int) -> OpGraph:
    """A chain of ``n`` ops with skip edges ``i -> i + 3`` (a ResNet-like DAG)."""
    ops = [Op(f"o{i}", "Conv", 1.0 + (i % 7) / 7, output_bytes=KB) for i in range(n)]
    edges = [Edge(f"o{i}", f"o{j}") for i in range(n) for j in (i + 1, i + 3) if j < n]
    return OpGraph.from_ops(ops, edges, name=f"skip_chain{n}")


SMALL = [
    testing.chain((1.0, 2.0, 3.0, 1.0, 2.5, 0.5), nbytes=2 * KB),
    testing.chain((4.0, 1.0, 1.0, 1.0, 1.0), nbytes=0),
    testing.diamond(nbytes=KB),
    testing.fork_join(3, nbytes=KB),
    testing.two_branches(3, nbytes=KB),
    *[_weighted_dag(7, seed) for seed in range(4)],
]
_OVERLAP_MATTERS = testing.chain((1.0, 1.0, 1.0, 1.0), nbytes=1_500_000)
"""On 1 MB/s links the overlap optimum hops a0 | a1 a2 | a3 (5 s summed); the summed optimum is 3.5 s."""
CONTIGUOUS = [GPipePartitioner, PipeDreamPartitioner, IdealDPPartitioner]


def _brute_force(problem: StageProblem, contiguous: bool) -> float:
    """Smallest bottleneck over every assignment of units to stages (contiguous: forward edges never go back)."""
    best = np.inf
    for stages in itertools.product(range(problem.num_stages), repeat=problem.num_units):
        stages = np.array(stages)
        if contiguous and (stages[problem.edge_src] > stages[problem.edge_dst]).any():
            continue
        if any(problem.memory[stages == s, s].sum() > problem.capacity[s] for s in range(problem.num_stages)):
            continue
        best = min(best, problem.bottleneck(stages))
    return best


def _bottleneck(placer, graph: OpGraph, cluster: Cluster, overlap: bool = True) -> float:
    problem = StageProblem(graph, cluster, overlap=overlap)
    return problem.bottleneck(placer.stages(problem))


@pytest.mark.parametrize("graph", SMALL, ids=lambda g: g.name)
@pytest.mark.parametrize("devices", [2, 3])
@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "sum"])
def test_ideal_dp_equals_brute_force_and_beats_every_contiguous_placer(graph: OpGraph, devices: int,
                                                                        overlap: bool) -> None:
    cluster = testing.uniform_cluster(devices, bandwidth=1e3)
    problem = StageProblem(graph, cluster, overlap=overlap)
    exact = _bottleneck(IdealDPPartitioner(), graph, cluster, overlap)
    assert exact == pytest.approx(_brute_force(problem, contiguous=True))
    for placer in (GPipePartitioner(), PipeDreamPartitioner()):
        assert exact <= _bottleneck(placer, graph, cluster, overlap) + 1e-9


@pytest.mark.parametrize("costs", [(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0), (9.0, 1.0, 1.0, 1.0, 1.0, 1.0, 9.0)])
def test_chain_dp_is_the_linear_partition_optimum(costs: tuple[float, ...]) -> None:
    graph, cluster = testing.chain(costs, nbytes=0), testing.uniform_cluster(3)
    splits = [(a, b) for a in range(len(costs) + 1) for b in range(a, len(costs) + 1)]
    optimum = min(max(sum(costs[:a]), sum(costs[a:b]), sum(costs[b:])) for a, b in splits)
    assert _bottleneck(PipeDreamPartitioner(), graph, cluster) == pytest.approx(optimum)
    assert _bottleneck(IdealDPPartitioner(), graph, cluster) == pytest.approx(optimum)


@pytest.mark.parametrize("graph", SMALL[:6], ids=lambda g: g.name)
@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "sum"])
def test_ilp_is_no_worse_than_the_dp_and_equals_non_contiguous_brute_force(graph: OpGraph, overlap: bool) -> None:
    cluster = testing.uniform_cluster(2, bandwidth=1e3)
    problem = StageProblem(graph, cluster, overlap=overlap)
    ilp = _bottleneck(PipelineILPPlacer(), graph, cluster, overlap)
    assert ilp <= _bottleneck(IdealDPPartitioner(), graph, cluster, overlap) + 1e-9
    assert ilp == pytest.approx(_brute_force(problem, contiguous=False), rel=1e-6)


def test_the_ilp_is_no_worse_than_the_dp_where_seconds_span_more_than_highs_keeps() -> None:
    """a and b take a microsecond; b's output would take 1e9 s over the link: scaled by that, the compute
    coefficients fell below HiGHS' 1e-9 and the program put all three on one device (2 us, against the DP's 1 us)."""
    graph = OpGraph.from_ops([Op("a", "T", 1e-6), Op("b", "T", 1e-6, output_bytes=10**9), Op("c", "T", 0.0)],
                             [Edge("b", "c")], name="wide_range")
    cluster = testing.uniform_cluster(2, bandwidth=1.0)
    ilp, dp = PipelineILPPlacer("gpu", 4).place(graph, cluster), IdealDPPartitioner("gpu", 4).place(graph, cluster)
    sim = PipelineSimulator(4, "gpipe")
    assert sim.measure(graph, cluster, ilp).step_time <= sim.measure(graph, cluster, dp).step_time == 1e-6


def test_ilp_beats_contiguous_splits_where_that_pays() -> None:
    graph, cluster = testing.chain((1.0, 2.0, 1.0), nbytes=0), testing.uniform_cluster(2)
    assert _bottleneck(IdealDPPartitioner(), graph, cluster) == pytest.approx(3.0)  # {a0, a1} | {a2}
    assert _bottleneck(PipelineILPPlacer(), graph, cluster) == pytest.approx(2.0)  # {a0, a2} | {a1}


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "sum"])
def test_the_ilp_placer_solves_the_model_it_is_given(overlap: bool) -> None:
    """``overlap`` reaches the model through ``place`` (it was once dropped): the two optima differ here."""
    graph, cluster = _OVERLAP_MATTERS, testing.uniform_cluster(2, bandwidth=1e6)
    problem = StageProblem(graph, cluster, overlap=overlap)
    unit_device = np.empty(problem.units.num_units, dtype=np.int64)
    unit_device[problem.units.unit_of] = PipelineILPPlacer(overlap=overlap).place(graph, cluster).devices
    stages = np.searchsorted(problem.devices, unit_device[problem.order])
    assert problem.bottleneck(stages) == pytest.approx(_brute_force(problem, contiguous=False))


def test_ilp_names_the_sizes_when_too_large() -> None:
    graph = testing.random_dag(40, edge_prob=0.3)
    with pytest.raises(ProblemTooLargeError, match=r"40 units .* 4 devices need (at least )?\d+ variables"):
        PipelineILPPlacer(max_variables=100).place(graph, testing.uniform_cluster(4))


def test_the_ilp_stops_by_default_within_a_placers_time_target() -> None:
    """HiGHS's limit was 30 s: a 200-op graph of 3,777 variables blocked gplace.place for 30 s (target: 10 s)."""
    assert PipelineILPPlacer().time_limit <= 10


@pytest.mark.parametrize("placer", [*CONTIGUOUS, PipelineILPPlacer], ids=lambda p: p.name)
def test_pins_colocation_and_memory_are_respected(placer) -> None:
    ops = [Op(f"o{i}", "MatMul", 1.0, persistent_memory=40, colocation="g" if i in (1, 5) else None)
           for i in range(8)]
    ops[0] = Op("o0", "Input", 0.1, pinned="cpu")
    graph = OpGraph.from_ops(ops, [Edge(f"o{i}", f"o{i + 1}", 10) for i in range(7)], name="pinned")
    cluster = testing.cpu_gpu_cluster(num_gpus=3, gpu_memory=130)
    devices = placer().place(graph, cluster).devices
    assert devices[0] == 0  # pinned to the only CPU
    assert devices[1] == devices[5]  # colocated
    assert (devices[1:] > 0).all()  # the stages are the GPUs
    used = np.bincount(devices, weights=graph.persistent_memory, minlength=4)
    assert (used[1:] <= 130).all()


@pytest.mark.parametrize("placer", CONTIGUOUS, ids=lambda p: p.name)
def test_a_split_around_an_op_pinned_off_the_stages_stays_contiguous(placer) -> None:
    """A GPU chain through one CPU-pinned op: the exact DP saw no order between the ops before and after it and
    split it [1, 3, 0, 1, 2, 3] (GPU stages back and forth, 11.9 s under pipe-v2 against GPipe's 9.9 s)."""
    ops = [Op(f"o{i}", "MatMul", float(c), output_bytes=10**6, pinned="cpu" if i == 2 else None)
           for i, c in enumerate((2.3, 0.4, 1.1, 2.9, 0.7, 1.8))]
    graph = OpGraph.from_ops(ops, [Edge(f"o{i}", f"o{i + 1}") for i in range(5)], name="pinned_chain")
    cluster = testing.cpu_gpu_cluster(num_gpus=3)
    devices = placer(microbatches=1).place(graph, cluster).devices
    gpu = devices[devices > 0]
    assert devices[2] == 0 and (np.diff(gpu) >= 0).all(), devices  # stage order follows the chain
    if placer is IdealDPPartitioner:
        sim = PipelineSimulator(1, "gpipe")
        gpipe = sim.measure(graph, cluster, GPipePartitioner(microbatches=1).place(graph, cluster)).step_time
        assert sim.measure(graph, cluster, Placement.for_graph(graph, devices)).step_time <= gpipe * 1.001


@pytest.mark.parametrize("placer", [*CONTIGUOUS, PipelineILPPlacer], ids=lambda p: p.name)
def test_no_room_is_a_typed_error(placer) -> None:
    graph = OpGraph.from_ops([Op(f"o{i}", "MatMul", 1.0, persistent_memory=100) for i in range(4)],
                             [Edge(f"o{i}", f"o{i + 1}") for i in range(3)], name="big")
    with pytest.raises(PlacementInfeasibleError):
        placer().place(graph, testing.uniform_cluster(2, memory=150))


def test_ideal_dp_coarsens_a_large_graph() -> None:
    graph = skip_chain(10_000)
    cluster = testing.uniform_cluster(4, bandwidth=1e9)
    problem = StageProblem(graph, cluster)
    dp = IdealDPPartitioner()
    stages = dp.stages(problem)
    assert stages.shape == (10_000,) and len(set(stages.tolist())) == 4
    assert problem.bottleneck(stages) <= problem.bottleneck(GPipePartitioner().stages(problem)) * 1.5
    assert dp.place(graph, cluster).devices.shape == (10_000,)


def test_lower_bound_is_work_over_devices_or_the_largest_op() -> None:
    cluster = testing.uniform_cluster(2)
    assert pipeline_lower_bound(testing.chain((1.0, 1.0, 1.0, 1.0)), cluster) == pytest.approx(2.0)
    assert pipeline_lower_bound(testing.chain((5.0, 1.0)), cluster) == pytest.approx(5.0)
    for graph in SMALL:
        bound = pipeline_lower_bound(graph, testing.uniform_cluster(3, bandwidth=1e3))
        assert bound <= _bottleneck(IdealDPPartitioner(), graph, testing.uniform_cluster(3, bandwidth=1e3)) + 1e-9


def test_heterogeneous_speeds_give_the_fast_device_more_work() -> None:
    devices = [Device("/GPU:0", "gpu", 1.0), Device("/GPU:1", "gpu", 3.0)]
    cluster = Cluster.build(devices, default_bandwidth=1e9)
    graph = testing.chain((1.0,) * 8, nbytes=0)
    placed = IdealDPPartitioner().place(graph, cluster).devices
    assert (placed == 1).sum() == 6


@pytest.mark.parametrize("placer", [GPipePartitioner, PipeDreamPartitioner, IdealDPPartitioner, PipelineILPPlacer])
def test_a_kind_that_is_not_a_string_is_refused_by_name(placer):
    """``IdealDPPartitioner(16)`` passes 16 as the kind, not as M: refused, not a silent fall-back to every device."""
    with pytest.raises(ValueError, match="kind must be a device kind .* got 16"):
        placer(16)


@pytest.mark.parametrize("placer", [GPipePartitioner, PipeDreamPartitioner, IdealDPPartitioner, PipelineILPPlacer,
                                    PipelineLocalSearch])
@pytest.mark.parametrize("microbatches", [0, 2.5, True, "4", 2**63, float("inf"), 1e300])
def test_a_microbatch_count_that_is_not_a_whole_number_is_refused_at_construction(placer, microbatches):
    """Refused by name when the placer is built (M = 2.5 used to split by ``cost / 2.5`` without a word; 2**63 and
    up raised a bare OverflowError deep inside, or a traceback from the CLI)."""
    with pytest.raises(ValueError, match=rf"microbatches must be an integer from 1 to 16,777,216, got "
                                         rf"{re.escape(repr(microbatches))}"):
        placer(microbatches=microbatches)
    assert placer(microbatches=4.0).microbatches == 4


def test_a_kind_the_cluster_lacks_puts_stages_on_every_device_with_a_warning(caplog):
    graph = testing.chain((1.0,) * 4, nbytes=KB)
    cluster = testing.uniform_cluster(2)  # two "gpu" devices: "GPU" is a misspelling
    with caplog.at_level("WARNING", logger="gplace.baselines.pipeline.stages"):
        devices = GPipePartitioner(kind="GPU").place(graph, cluster).devices
    assert sorted(set(devices.tolist())) == [0, 1]
    assert "has no device of kind 'GPU' (kinds: gpu)" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="gplace.baselines.pipeline.stages"):
        PipelineLocalSearch(kind="GPU", max_evaluations=8).place(graph, cluster)  # its DP start warns, it does not
    assert caplog.text.count("has no device of kind 'GPU'") == 1


def test_an_edge_between_update_ops_is_charged_once_per_minibatch_as_pipe_v1_sends_it() -> None:
    """f (forward) -> u0 (update) -> u1 (update), 1 KB each, on 2 devices with 0.5 s latency and 1 KB/s: the
    forward-to-update edge is a transfer per micro-batch (0.5 + 1 / M s), the update-to-update edge one transfer
    per mini-batch, (0.5 + 1) / M s per micro-batch; pipe-v2 measures exactly that one transfer."""
    m = 4
    ops = [Op("f", "MatMul", 1.0, output_bytes=KB, phase="forward"),
           Op("u0", "Assign", 1.0, output_bytes=KB, phase="update"),
           Op("u1", "Assign", 1.0, output_bytes=KB, phase="update")]
    graph = OpGraph.from_ops(ops, [Edge("f", "u0"), Edge("u0", "u1")], name="updates")
    cluster = Cluster.build([Device("/GPU:0", "gpu"), Device("/GPU:1", "gpu")], default_bandwidth=KB,
                            default_latency=0.5)
    problem = StageProblem(graph, cluster, microbatches=m)
    assert problem.edge_seconds.tolist() == [0.5 + 1 / m, (0.5 + 1) / m]
    loads = problem.stage_loads(np.array([0, 0, 1]))  # u1 alone on device 1: it receives u0's edge only
    assert loads[1] == max(1.0 / m, (0.5 + 1) / m)
    apart = PipelineSimulator(m, "gpipe").simulate(graph, cluster, Placement.for_graph(graph, [0, 0, 1]))
    together = PipelineSimulator(m, "gpipe").simulate(graph, cluster, Placement.for_graph(graph, [0, 0, 0]))
    assert apart.minibatch_time - together.minibatch_time == pytest.approx(0.5 + 1)  # one transfer, u1 after it


def test_past_its_coarsening_the_ideal_dp_is_never_behind_gpipes_split() -> None:
    """1,100 units of mostly tiny ops: the DPs over 1,024 blocks gave 3.228 s, GPipe's unit-by-unit split 3.223 s."""
    costs = np.random.default_rng(1).choice([1e-3, 1.0], p=[0.99, 0.01], size=1100)
    graph = OpGraph.from_ops([Op(f"o{i}", "T", float(x)) for i, x in enumerate(costs)],
                             [Edge(f"o{i}", f"o{i + 1}") for i in range(1099)])
    problem = StageProblem(graph, testing.uniform_cluster(4, bandwidth=1e9))
    gpipe = problem.bottleneck(GPipePartitioner().stages(problem))
    assert problem.bottleneck(IdealDPPartitioner().stages(problem)) <= gpipe


@pytest.mark.parametrize("placer", [*CONTIGUOUS, PipelineILPPlacer, PipelineLocalSearch], ids=lambda p: p.name)
def test_an_op_off_the_stages_goes_to_a_device_with_room(placer) -> None:
    """emb (pinned to a CPU) went to the faster CPU, which cannot hold it (out of memory in pipe-v2)."""
    graph = OpGraph.from_ops([Op("a", "T", 1.0), Op("emb", "T", 1.0, persistent_memory=100, pinned="cpu"),
                              Op("b", "T", 1.0)], [Edge("a", "emb"), Edge("emb", "b")])
    cluster = Cluster.build([Device("g0", "gpu", 1.0, 1000), Device("c0", "cpu", 2.0, 10),
                             Device("c1", "cpu", 1.0, 1000)], default_bandwidth=1e6)
    placement = placer(microbatches=4).place(graph, cluster)
    assert placement.devices.tolist() == [0, 2, 0]
    assert PipelineSimulator(4).measure(graph, cluster, placement).ok
    small = Cluster.build([Device("g0", "gpu", 1.0, 1000), Device("c0", "cpu", 2.0, 10)], default_bandwidth=1e6)
    with pytest.raises(PlacementInfeasibleError, match="'emb'.*which no stage device may run, needs 100 bytes"):
        placer(microbatches=4).place(graph, small)


def test_a_transfer_from_an_op_off_the_stages_is_charged_in_its_direction() -> None:
    """A CPU-pinned input feeding the stages was charged over the stage->CPU link: with CPU->GPU0 slow (10 s for
    10 MB) and GPU0->CPU fast, the partitioners put the first stage on GPU0 (12 s in pipe-v2, not 2 s)."""
    from gplace.ir import Link

    devices = [Device("/CPU:0", "cpu"), Device("/GPU:0", "gpu"), Device("/GPU:1", "gpu")]
    links = [Link("/CPU:0", "/GPU:0", 1e6, 0.0, reverse_bandwidth=1e12),
             Link("/CPU:0", "/GPU:1", 1e12, 0.0, reverse_bandwidth=1e6), Link("/GPU:0", "/GPU:1", 1e12, 0.0)]
    cluster = Cluster.build(devices, links)
    graph = OpGraph.from_ops([Op("x", "Input", 0.0, output_bytes=10**7, pinned="cpu"), Op("a", "L", 1.0),
                              Op("b", "L", 1.0)], [Edge("x", "a"), Edge("a", "b", 0)])
    problem = StageProblem(graph, cluster, kind="gpu", microbatches=1)
    np.testing.assert_allclose(problem.cost[problem.position[problem.units.unit_of[1]]], [11.0, 1.00001])
    for placer in (PipeDreamPartitioner, IdealDPPartitioner, PipelineILPPlacer):  # GPipe's split weighs no transfer
        placement = placer(microbatches=1).place(graph, cluster)
        assert placement.devices[1] == 2, placer.name
        assert PipelineSimulator(1).measure(graph, cluster, placement).step_time == pytest.approx(2.00001)


def test_gpipe_names_a_pin_that_no_split_in_pipeline_order_can_meet() -> None:
    """CPU, GPU, CPU along a chain: no order of the stage devices has a contiguous split."""
    graph = OpGraph.from_ops([Op("a", "T", 1.0, pinned="cpu"), Op("b", "T", 1.0, pinned="gpu"),
                              Op("c", "T", 1.0, pinned="cpu")], [Edge("a", "b"), Edge("b", "c")])
    cluster = Cluster.build([Device("c0", "cpu"), Device("g0", "gpu"), Device("g1", "gpu")], default_bandwidth=1e6)
    for placer in (GPipePartitioner(kind=None), IdealDPPartitioner(kind=None)):  # the DP's said memory (a review)
        with pytest.raises(PlacementInfeasibleError, match=r"'c'.*may run only on stages \[\d\].*comes after"):
            placer.place(graph, cluster)  # "0 bytes needed" (a memory problem) before


def test_a_pin_met_in_another_order_of_the_stage_devices_is_split_there() -> None:
    """A CPU-pinned op last in a chain, the CPU listed first: the CPU takes the last stage (it was refused)."""
    graph = OpGraph.from_ops([Op("a", "T", 1.0), Op("b", "T", 1.0), Op("c", "T", 1.0, pinned="cpu")],
                             [Edge("a", "b"), Edge("b", "c")])
    cluster = Cluster.build([Device("c0", "cpu"), Device("g0", "gpu"), Device("g1", "gpu")], default_bandwidth=1e6)
    for placer in (GPipePartitioner(kind=None), IdealDPPartitioner(kind=None)):
        devices = placer.place(graph, cluster).devices.tolist()
        assert devices[2] == 0 and devices[:2] in ([1, 2], [2, 1])


@pytest.mark.parametrize("placer", [GPipePartitioner, IdealDPPartitioner, PipelineILPPlacer])
def test_a_graph_larger_than_all_stage_devices_together_is_named_as_such(placer) -> None:
    """Six ops of 41 bytes on two devices of 100: the partitioners blamed the last op they tried ("op 'a4' (with
    its colocation group) fits no stage device after the earlier stages", an op of no group) and the ILP gave only
    HiGHS's "The problem is infeasible" (found by a probe of the baselines)."""
    graph = OpGraph.from_ops([Op(f"a{i}", "T", 1.0, persistent_memory=41) for i in range(6)],
                             [Edge(f"a{i}", f"a{i + 1}") for i in range(5)], name="t")
    cluster = Cluster.build([Device(f"g{i}", "gpu", memory=100) for i in range(2)], default_bandwidth=1e9)
    with pytest.raises(PlacementInfeasibleError, match=r"the ops need 246 bytes in all, the stage devices hold 200 "
                                                       r"together \(capacities \[100, 100\]\)") as err:
        placer().place(graph, cluster)
    assert "colocation group" not in str(err.value)


def test_an_op_larger_than_every_stage_device_is_named() -> None:
    graph = OpGraph.from_ops([Op("a", "T", 1.0, persistent_memory=10), Op("big", "T", 1.0, persistent_memory=1001)],
                             [Edge("a", "big")], name="t")
    cluster = Cluster.build([Device(f"g{i}", "gpu", memory=100) for i in range(2)], default_bandwidth=1e9)
    with pytest.raises(PlacementInfeasibleError, match=r"op 'big' needs 1,001 bytes, more than any stage device "
                                                       r"holds"):
        GPipePartitioner().place(graph, cluster)


def test_partitioner_limits_are_checked_at_construction() -> None:
    for make in (lambda: IdealDPPartitioner(max_ideals=1), lambda: IdealDPPartitioner(chain_blocks=0),
                 lambda: PipeDreamPartitioner(max_blocks=0), lambda: PipeDreamPartitioner(max_blocks=2.5)):
        with pytest.raises(ValueError, match="must be a whole number"):
            make()  # max_ideals=1 hung for ever; max_blocks=0 put every op on one stage


def test_numbers_highs_refuses_are_named_as_too_large_for_the_ilp() -> None:
    graph = OpGraph.from_ops([Op("a", "T", 1.0, persistent_memory=2**55), Op("b", "T", 1.0, persistent_memory=1)],
                             [Edge("a", "b")])
    cluster = Cluster.build([Device("g0", "gpu", 1.0, 2**55), Device("c0", "cpu", 1.0, 2**56)],
                            default_bandwidth=1e6)
    with pytest.raises(ProblemTooLargeError, match="HiGHS refused the model.*36,028,797,018,963,968"):
        PipelineILPPlacer().place(graph, cluster)


def test_the_ideal_dp_counts_memory_in_whole_bytes():
    """2**55 + 1 bytes on a 2**55-byte device fitted in float64 (a split pipe-v2 runs out of memory on)."""
    graph = OpGraph.from_ops([Op("a", "T", 1.0, persistent_memory=2**55), Op("b", "T", 1.0, persistent_memory=1)],
                             [Edge("a", "b")])
    cluster = Cluster.build([Device("g0", "gpu", 1.0, 2**55)], default_bandwidth=1e6)
    with pytest.raises(PlacementInfeasibleError):
        IdealDPPartitioner().place(graph, cluster)


@pytest.mark.parametrize("scale", [1e-6, 1e-3, 1e3])
def test_the_ilp_finds_the_same_split_at_any_time_scale(scale):
    """Microsecond costs fell below HiGHS's tolerances and stopped binding the bottleneck: the ILP returned a split
    1.7x slower than the DP's, without a word (found by a probe of numbers at the edges of their ranges)."""
    costs = [5, 1, 1, 1, 1, 1, 3, 4]

    def chain_of(unit):
        return OpGraph.from_ops([Op(f"x{i}", "T", c * unit) for i, c in enumerate(costs)],
                                [Edge(f"x{i}", f"x{i + 1}", 0) for i in range(7)])

    cluster, ilp = testing.uniform_cluster(3, bandwidth=1e9), PipelineILPPlacer(microbatches=16)
    at_one = StageProblem(chain_of(1.0), cluster, microbatches=16)
    best = at_one.bottleneck(ilp.place(chain_of(1.0), cluster).devices)
    scaled = chain_of(scale)
    found = StageProblem(scaled, cluster, microbatches=16).bottleneck(ilp.place(scaled, cluster).devices)
    assert found / scale == pytest.approx(best, rel=1e-6)


def test_a_max_ideals_past_memory_coarsens_with_a_warning_instead_of_exhausting_memory(caplog):
    """max_ideals=20000 on a 30-op DAG of 18,880 ideals: the DP's (K, K) arrays (and a (K, K, B) one) took tens
    of GB and the process was killed for memory; the blocks are coarsened further now, saying why."""
    import logging
    import resource

    from gplace.baselines.pipeline.contiguous import MAX_DP_BYTES, dp_bytes

    graph, cluster = testing.random_dag(30, 0.1, 3), testing.uniform_cluster(4)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with caplog.at_level(logging.WARNING, logger="gplace.baselines.pipeline.contiguous"):
        placement = IdealDPPartitioner(max_ideals=20_000).place(graph, cluster)
    assert dp_bytes(18_880) > MAX_DP_BYTES
    assert "the DP over the 18880 ideals of 30 blocks would take about 35.6 GB" in caplog.text
    assert placement.devices.shape == (30,)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < MAX_DP_BYTES // 1024  # KiB


def test_the_memory_guard_warns_once_however_often_it_coarsens(monkeypatch, caplog):
    """The WARNING came once per halving (18,880 ideals of 30 blocks, then 70 of 15) where the limit was lower."""
    import logging

    from gplace.baselines.pipeline import contiguous

    monkeypatch.setattr(contiguous, "MAX_DP_BYTES", contiguous.dp_bytes(50))
    with caplog.at_level(logging.WARNING, logger="gplace.baselines.pipeline.contiguous"):
        IdealDPPartitioner(max_ideals=20_000).place(testing.random_dag(30, 0.1, 3), testing.uniform_cluster(4))
    assert caplog.text.count("coarsened further") == 1


@pytest.mark.parametrize("placer", [GPipePartitioner, PipeDreamPartitioner, IdealDPPartitioner, PipelineILPPlacer])
def test_join_gradients_keeps_each_backward_op_on_its_forward_ops_stage(placer) -> None:
    """A graph whose backward ops name their forward op (grad_of) but share no colocation group with it: by
    default the backward ops come after every forward op in pipeline order (stages of backward ops only: 10.1 ms a
    mini-batch in pipe-v2 for the DPs' split, 17.2 ms for GPipe's, where the layers split 4 ways take 7.75 ms);
    with join_gradients=True each stays on its forward op's stage, as the colocated graph's split does."""
    n = 8 if placer is PipelineILPPlacer else 40
    graph, colocated = testing.layered_training_chain(n), testing.layered_training_chain(n, colocated=True)
    cluster, sim = testing.uniform_cluster(4), PipelineSimulator(4, "1f1b")
    forward, backward = np.arange(n), np.arange(n, 2 * n)
    joined = placer(microbatches=4, join_gradients=True).place(graph, cluster).devices
    assert (joined[backward] == joined[forward]).all()
    want = placer(microbatches=4).place(colocated, cluster)
    assert sim.measure(graph, cluster, Placement.for_graph(graph, joined)).step_time == pytest.approx(
        sim.measure(colocated, cluster, want).step_time)
    if placer is not PipelineILPPlacer:  # any assignment may keep them together anyway
        apart = placer(microbatches=4).place(graph, cluster).devices
        assert not (apart[backward] == apart[forward]).all()


def test_a_backward_op_that_shares_no_device_with_its_forward_op_is_not_joined_to_it() -> None:
    """A forward op pinned to a GPU, its backward op to the CPU: the two stay separate units, no error."""
    from gplace.baselines._common import build_units

    ops = [Op("f", "F", 1.0, phase="forward", pinned="gpu"),
           Op("b", "B", 1.0, phase="backward", grad_of="f", pinned="cpu"),
           Op("g", "F", 1.0, phase="forward"), Op("h", "B", 1.0, phase="backward", grad_of="g")]
    graph = OpGraph.from_ops(ops, [Edge("f", "b"), Edge("f", "g"), Edge("g", "h"), Edge("h", "b")], name="pins")
    cluster = Cluster.build([Device("/CPU:0", "cpu", 1.0, 10**9), Device("/GPU:0", "gpu", 1.0, 10**9)],
                            default_bandwidth=1e9)
    units = build_units(graph, cluster, join_gradients=True)
    assert units.unit_of.tolist() == [0, 1, 2, 2] and units.num_units == 3
