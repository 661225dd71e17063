"""The pipeline order of units (:attr:`StageProblem.order`, from ``stages.pipeline_order``): a colocation group whose
first member comes early but whose other members run late (a buffer or KV cache written in place, as torch.export
gives) follows the units it needs, so contiguous stages send no data back; where ordering by first member already
keeps every edge between units outside a cycle (graphs without such groups, layers colocated with their backward
ops), that order is kept as it was."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from gplace import from_torch
from gplace.baselines._common import build_units
from gplace.baselines.pipeline import GPipePartitioner, IdealDPPartitioner, PipeDreamPartitioner, StageProblem
from gplace.importers import load_pipedream
from gplace.ir import Edge, Op, OpGraph
from gplace.pipeline import PipelineSimulator
from gplace.testing import uniform_cluster
from gplace.zoo import lstm_lm, modern_cluster

MB = 1_000_000
SHARED = Path(os.environ.get("GPLACE_SHARED") or Path(__file__).resolve().parents[3].parent / "shared")
PROFILES = SHARED / "graphs" / "pipedream" / "profiles"
MODELS = sorted(p.name for p in PROFILES.iterdir()) if PROFILES.is_dir() else []


def kv_graph(cache_bytes: int = 64 * MB) -> OpGraph:
    """Eight 1 s layers and a KV cache written after l3, as torch.export imports ``cache[...] = k(h)``: the group
    {cache (a source, op 0), write (after k), view (cache.T)}, read by attn (outside it) before l4."""
    group = {"colocation": "cache"}
    ops = [Op("cache", "Placeholder", 0.0, output_bytes=cache_bytes, persistent_memory=cache_bytes, **group),
           Op("x", "Input", 0.0, output_bytes=MB), *[Op(f"l{i}", "Layer", 1.0, output_bytes=MB) for i in range(8)],
           Op("k", "Linear", 0.25, output_bytes=MB), Op("q", "Linear", 0.25, output_bytes=MB),
           Op("write", "Copy_", 0.05, **group), Op("view", "Transpose", 0.0, output_bytes=cache_bytes, **group),
           Op("attn", "MatMul", 0.5, output_bytes=MB), Op("head", "Linear", 0.5, output_bytes=MB)]
    chain = ["x", "l0", "l1", "l2", "l3"], ["attn", "l4", "l5", "l6", "l7", "head"]
    edges = [Edge(a, b) for names in chain for a, b in itertools.pairwise(names)]
    edges += [Edge("l3", "k"), Edge("l3", "q"), Edge("k", "write"), Edge("cache", "write"), Edge("cache", "view"),
              Edge("write", "view", 0), Edge("view", "attn"), Edge("q", "attn")]
    return OpGraph.from_ops(ops, edges, name="kv_hand")


class KVGPT(nn.Module):
    """GPT-like blocks around one that writes k into a KV-cache buffer in place and attends over the cache."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.pre, self.post = (nn.ModuleList(nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.GELU())
                                             for _ in range(2)) for _ in range(2))
        self.k, self.q = nn.Linear(d, d), nn.Linear(d, d)
        self.register_buffer("cache", torch.zeros(12, d))

    def forward(self, x):
        for block in self.pre:
            x = x + block(x)
        self.cache[2:2 + x.shape[0]] = self.k(x)
        x = x + (self.q(x) @ self.cache.T).softmax(-1) @ self.cache
        for block in self.post:
            x = x + block(x)
        return x


def first_member_order(graph: OpGraph, cluster) -> np.ndarray:
    """Unit ids sorted by the topological position of their first member (the order before this fix)."""
    units = build_units(graph, cluster)
    position = np.empty(graph.num_ops, dtype=np.int64)
    position[graph.topological_order] = np.arange(graph.num_ops)
    first = np.full(units.num_units, graph.num_ops)
    np.minimum.at(first, units.unit_of, position)
    return np.argsort(first)


def unit_edges(graph: OpGraph, cluster) -> tuple[int, list[tuple[int, int]]]:
    """Number of units and the edges between different units."""
    units = build_units(graph, cluster)
    pairs = zip(units.unit_of[graph.edge_index[0]].tolist(), units.unit_of[graph.edge_index[1]].tolist(), strict=True)
    return units.num_units, [(a, b) for a, b in pairs if a != b]


def reaches(n: int, edges: list[tuple[int, int]]) -> np.ndarray:
    """(n, n) bool, ``[a, b]``: a path from a to b (Floyd-Warshall, independent of the code under test)."""
    reach = np.eye(n, dtype=bool)
    for a, b in edges:
        reach[a, b] = True
    for k in range(n):
        reach |= reach[:, k:k + 1] & reach[k:k + 1, :]
    return reach


# ---------------------------------------------------------------------- the defect: a buffer written late
def test_a_kv_cache_group_follows_the_units_it_needs_and_every_unit_edge_goes_forward():
    graph, cluster = kv_graph(), uniform_cluster(3, bandwidth=1e7)
    problem = StageProblem(graph, cluster, microbatches=8)
    names = [problem.first_op(int(u)) for u in problem.order]
    assert names == ["x", "l0", "l1", "l2", "l3", "k", "cache", "q", "attn", "l4", "l5", "l6", "l7", "head"]
    assert (problem.edge_src < problem.edge_dst).all()  # was first: the k -> write edge went back to it


def test_kv_cache_module_imported_by_torch_export_is_ordered_after_what_it_writes():
    torch.manual_seed(0)
    graph = from_torch(KVGPT().eval(), (torch.randn(4, 16),))
    cluster = uniform_cluster(3, bandwidth=1e9)
    problem = StageProblem(graph, cluster, microbatches=8)
    assert any(graph.colocation)  # the buffer, its views and the write (copy_) are one group
    assert (problem.edge_src < problem.edge_dst).all()
    assert problem.order.tolist() != first_member_order(graph, cluster).tolist()  # every unit is pipelined


@pytest.mark.parametrize("placer", [GPipePartitioner, PipeDreamPartitioner, IdealDPPartitioner], ids=lambda p: p.name)
def test_contiguous_placers_split_the_kv_graph_forward_at_the_balanced_bottleneck(placer):
    """On 3 devices at 10 MB/s (the 64 MB cache costs 0.8 s per micro-batch to move, so it stays with attn): stages
    x..l2 | l3..l4 | l5..head, bottleneck 3.5 s / 8. Before, GPipe (0.81 s) put the cache on stage 0 and received the
    write from stage 1, and PipeDream (0.63 s, two stages) could not cut where the cache sat."""
    graph, cluster, m = kv_graph(), uniform_cluster(3, bandwidth=1e7), 8
    problem = StageProblem(graph, cluster, microbatches=m)
    assert problem.bottleneck(placer(microbatches=m).stages(problem)) == pytest.approx(3.5 / m)
    devices = placer(microbatches=m).place(graph, cluster).devices
    assert (devices[graph.edge_index[0]] <= devices[graph.edge_index[1]]).all()  # stage s on device s
    assert devices[graph.op_index["cache"]] == devices[graph.op_index["attn"]]
    time = PipelineSimulator(m, "1f1b").measure(graph, cluster, placer(microbatches=m).place(graph, cluster))
    assert time.step_time <= (m + 3 - 1) * 3.5 / m  # fill, steady state, drain (was 8.08 s, 5.63 s for 2 of 3)


# ---------------------------------------------------------------------- the order is a topological order of units
@pytest.mark.parametrize("seed", range(40))
def test_on_random_graphs_with_random_groups_edges_outside_cycles_go_forward(seed):
    """Random DAGs with random colocation groups: every unit once; an edge between units not on one cycle of
    units goes forward; where the first-member order already has them all forward, it is the order."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 14))
    group = [f"g{int(rng.integers(3))}" if rng.random() < 0.35 else None for _ in range(n)]
    ops = [Op(f"o{i}", "F", 1.0, colocation=group[i]) for i in range(n)]
    edges = [Edge(f"o{i}", f"o{j}") for i in range(n) for j in range(i + 1, n) if rng.random() < 0.3]
    graph, cluster = OpGraph.from_ops(ops, edges, name=f"random{seed}"), uniform_cluster(2)
    order = StageProblem(graph, cluster).order  # every unit is pipelined
    count, pairs = unit_edges(graph, cluster)
    assert sorted(order.tolist()) == list(range(count))
    rank = np.empty(count, dtype=np.int64)
    rank[order] = np.arange(count)
    reach = reaches(count, pairs)
    kept = [(a, b) for a, b in pairs if not reach[b, a]]  # a and b not on one cycle
    assert all(rank[a] < rank[b] for a, b in kept)
    old = first_member_order(graph, cluster)
    old_rank = np.empty(count, dtype=np.int64)
    old_rank[old] = np.arange(count)
    if all(old_rank[a] < old_rank[b] for a, b in kept):
        assert order.tolist() == old.tolist()


# ---------------------------------------------------------------------- graphs whose order was right are unchanged
def _assert_first_member_order(graph: OpGraph) -> None:
    cluster = modern_cluster(num_gpus=4)
    problem = StageProblem(graph, cluster, microbatches=16)
    old = first_member_order(graph, cluster)
    piped = problem.position >= 0
    assert problem.order.tolist() == old[piped[old]].tolist()


@pytest.mark.skipif(not MODELS, reason="no ../shared PipeDream profiles (set GPLACE_SHARED)")
@pytest.mark.parametrize("phases", [True, False], ids=["phases", "layers"])
@pytest.mark.parametrize("model", MODELS)
def test_pipedream_profiles_keep_the_first_member_order(model, phases):
    """With ``phases`` every layer's forward and backward op are one group: the units form one cycle."""
    _assert_first_member_order(load_pipedream(PROFILES / model / "graph.txt", phases=phases))


def test_the_lstm_lm_training_step_keeps_the_first_member_order():
    """Its variables are colocated with their updates (first member early, updates last), which puts nearly the
    whole step on one cycle of units; the ops off the cycle keep their places."""
    _assert_first_member_order(lstm_lm())


@pytest.mark.tf
def test_a_keras_training_step_keeps_the_first_member_order():
    pytest.importorskip("tensorflow")
    from gplace.zoo import load_zoo_model

    _assert_first_member_order(load_zoo_model("rnnlm", layers=2, hidden=32, steps=3, batch=2, vocab=50,
                                              cache=False))
