"""Pipelined units joined only through units off the stage devices (ops pinned to the CPU between GPU layers) keep
their order in the blocks' ``forward`` relation without any pair being listed: it equals the relation of an
explicit reachability search, the lazily built ``edge_src``/``edge_dst`` pairs list exactly those pairs, and the
partitioners place a pinned hub as they place the same graph with the pairs as edges."""

from __future__ import annotations

import numpy as np
import pytest

from gplace.baselines.pipeline import GPipePartitioner, IdealDPPartitioner, PipeDreamPartitioner, StageProblem
from gplace.bench.pipeline import is_contiguous
from gplace.ir import Edge, Op, OpGraph, Placement
from gplace.zoo import modern_cluster


def _random_graph(seed: int, n: int = 50) -> OpGraph:
    """A random DAG where a third of the ops are pinned to the CPU, some of them colocated (cycles of fixed units)."""
    rng = np.random.default_rng(seed)
    ops, edges = [], []
    for i in range(n):
        pinned = rng.random() < 0.35
        group = (f"c{rng.integers(2)}" if rng.random() < 0.3 else None) if pinned else \
            (f"g{rng.integers(3)}" if rng.random() < 0.1 else None)
        ops.append(Op(f"o{i}", "MatMul", float(rng.uniform(1e-5, 1e-3)), output_bytes=int(rng.integers(1, 10**5)),
                      pinned="cpu" if pinned else None, colocation=group))
        edges += [Edge(f"o{j}", f"o{i}") for j in (rng.choice(i, size=min(i, 3), replace=False) if i else [])]
    return OpGraph.from_ops(ops, edges, name=f"random{seed}")


def _pairs_by_search(problem: StageProblem) -> set[tuple[int, int]]:
    """(a, b) positions of pipelined units with a path a -> fixed units only -> b, by depth-first search."""
    unit_of, position = problem.units.unit_of, problem.position
    succ: dict[int, set[int]] = {}
    for x, y in problem.graph.edge_index.T.tolist():
        if unit_of[x] != unit_of[y]:
            succ.setdefault(int(unit_of[x]), set()).add(int(unit_of[y]))
    pairs = set()
    for a in problem.order.tolist():
        todo = [f for f in succ.get(a, ()) if position[f] < 0]
        seen = set(todo)
        while todo:
            for nxt in succ.get(todo.pop(), ()):
                if position[nxt] >= 0:
                    if nxt != a:
                        pairs.add((int(position[a]), int(position[nxt])))
                elif nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
    return pairs


@pytest.mark.parametrize("seed", range(12))
def test_forward_through_fixed_units_equals_a_reachability_search(seed: int) -> None:
    problem = StageProblem(_random_graph(seed), modern_cluster(num_gpus=4), microbatches=4)
    pairs = _pairs_by_search(problem)
    through = set(zip(problem.edge_src[problem.unit_src.size:].tolist(),
                      problem.edge_dst[problem.unit_dst.size:].tolist(), strict=True))
    assert through == pairs and (problem.edge_seconds[problem.unit_src.size:] == 0).all()
    direct = set(zip(problem.unit_src.tolist(), problem.unit_dst.tolist(), strict=True))
    for count in (None, 9, 4):
        blocks = problem.blocks(count)
        block_of = np.repeat(np.arange(blocks.num_blocks), np.diff(blocks.bounds))
        expected = np.zeros_like(blocks.forward)
        for a, b in pairs | direct:
            if block_of[a] < block_of[b]:
                expected[block_of[a], block_of[b]] = True
        assert np.array_equal(blocks.forward, expected)


def _hub(k: int, pinned: bool) -> OpGraph:
    """k GPU ops -> a hub -> k GPU ops; the hub pinned to the CPU, or left on the GPUs with edges in -> out added."""
    ops = [Op(f"in{i}", "MatMul", 1e-4 * (1 + i % 3), output_bytes=1000) for i in range(k)]
    ops += [Op(f"out{i}", "MatMul", 1e-4 * (1 + i % 2), output_bytes=1000) for i in range(k)]
    edges = [Edge(f"in{i}", f"out{i}") for i in range(k)]  # the pipelined units' own edges (same in both)
    if pinned:
        ops.append(Op("hub", "AddN", 1e-5, output_bytes=0, pinned="cpu"))
        edges += [Edge(f"in{i}", "hub") for i in range(k)] + [Edge("hub", f"out{i}") for i in range(k)]
    else:  # the pairs as edges between the GPU ops, of no bytes (latency 0 below)
        edges += [Edge(f"in{i}", f"out{j}", bytes=0) for i in range(k) for j in range(k) if i != j]
    return OpGraph.from_ops(ops, edges, name=f"hub{k}{'_pinned' if pinned else ''}")


def test_a_pinned_hub_orders_the_units_as_explicit_edges_do() -> None:
    cluster = modern_cluster(num_gpus=4)
    a, b = StageProblem(_hub(12, True), cluster), StageProblem(_hub(12, False), cluster)
    names = lambda p: [p.first_op(u) for u in p.order.tolist()]  # noqa: E731
    assert names(a) == names(b)
    assert np.array_equal(a.blocks(None).forward, b.blocks(None).forward)
    assert a.blocks(None).forward.sum() == 12 * 12  # k x k pairs (in_i -> out_i is an edge too), none listed
    assert a.unit_src.size == 12


@pytest.mark.parametrize("placer", [GPipePartitioner, PipeDreamPartitioner, IdealDPPartitioner])
def test_a_pinned_hub_keeps_its_producers_before_its_consumers(placer) -> None:
    devices = placer(microbatches=4).place(_hub(12, True), modern_cluster(num_gpus=4)).devices
    stage = {int(d): s for s, d in enumerate(StageProblem(_hub(12, True), modern_cluster(num_gpus=4)).devices)}
    assert max(stage[int(d)] for d in devices[:12]) <= min(stage[int(d)] for d in devices[12:24])


def test_the_ilp_refuses_a_large_pinned_hub_before_listing_its_pairs() -> None:
    """The ILP listed the k^2 unit pairs through a pinned op before its size check refused the problem."""
    from gplace.baselines.pipeline import PipelineILPPlacer, ProblemTooLargeError

    problem = StageProblem(_hub(40, True), modern_cluster(num_gpus=4))
    with pytest.raises(ProblemTooLargeError, match=r"80 units on 4 devices need at least 321 variables"):
        PipelineILPPlacer(max_variables=300).stages(problem)
    assert "edge_src" not in vars(problem)  # the pairs were never built


def _contiguous_by_pairs(problem: StageProblem, devices: np.ndarray) -> bool:
    """The devices' forward relation over every listed pair (``edge_src``/``edge_dst``) has no cycle."""
    unit_device = np.empty(problem.units.num_units, dtype=np.int64)
    unit_device[problem.units.unit_of] = devices
    piped = unit_device[problem.order]
    a, b = piped[problem.edge_src], piped[problem.edge_dst]
    keep = (problem.edge_src < problem.edge_dst) & (a != b)
    succ = set(zip(a[keep].tolist(), b[keep].tolist(), strict=True))
    nodes = set(piped.tolist())
    while nodes:
        free = {n for n in nodes if not any(v == n and u in nodes for u, v in succ)}
        if not free:
            return False
        nodes -= free
    return True


@pytest.mark.parametrize("seed", range(8))
def test_contiguity_through_fixed_units_lists_no_pairs_and_equals_the_pairs(seed: int) -> None:
    graph, cluster = _random_graph(seed, 40), modern_cluster(num_gpus=4)
    problem = StageProblem(graph, cluster, microbatches=4)
    rng = np.random.default_rng(seed)
    placements = []
    for _ in range(40):
        unit_device = np.where(problem.position < 0, problem.fixed_device, 0)
        stages = np.sort(rng.integers(0, 3, problem.num_units)) if rng.random() < 0.5 else \
            rng.integers(0, 3, problem.num_units)
        unit_device[problem.order] = problem.devices[stages]
        placements.append(unit_device[problem.units.unit_of])
    answers = [is_contiguous(problem, Placement.for_graph(graph, p.tolist())) for p in placements]
    assert "edge_src" not in vars(problem)  # built 16 million pairs for a fixed op between halves of 8,000
    assert answers == [_contiguous_by_pairs(problem, p) for p in placements]
    assert True in answers and False in answers


def test_a_split_back_through_a_fixed_op_is_not_contiguous() -> None:
    ops = [Op(f"u{i}", "MatMul", 1e-3, output_bytes=100) for i in range(3)] + [Op("hub", "Add", 1e-5, pinned="cpu")]
    graph = OpGraph.from_ops(ops, [Edge("u0", "u1"), Edge("u1", "hub"), Edge("hub", "u2")], name="hub")
    cluster = modern_cluster(num_gpus=2)
    problem = StageProblem(graph, cluster)
    cpu = int(problem.fixed_device[problem.units.unit_of[3]])
    gpu0, gpu1 = problem.devices.tolist()
    assert is_contiguous(problem, Placement.for_graph(graph, [gpu0, gpu1, gpu1, cpu]))
    assert not is_contiguous(problem, Placement.for_graph(graph, [gpu0, gpu1, gpu0, cpu]))  # GPU 1 -> CPU -> GPU 0
