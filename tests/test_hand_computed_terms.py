"""Hand-computed cases at rules no other test pinned: temporary memory in the simulators' memory bounds, coarse edge
bytes of a grouping, FLOP rules with a bias, a transposed kernel, a broadcast ellipsis and a pooling window, list
scheduling ties at the instant a device frees up, and memory limits met exactly."""

from __future__ import annotations

import math

import numpy as np

from gplace.baselines import METF
from gplace.baselines.pipeline.contiguous import enumerate_ideals, ideal_partition
from gplace.baselines.pipeline.stages import StageProblem
from gplace.costmodel import TensorSpec, op_flops
from gplace.grouping import group_ops, make_grouping
from gplace.ir import Edge, Op, OpGraph, Placement
from gplace.pipeline import PipelineSimulator
from gplace.runtime import Simulator
from gplace.testing import chain, uniform_cluster


def _t(*shape: int) -> TensorSpec:
    return TensorSpec(shape, 4 * math.prod(shape))


# ---------------------------------------------------------------------- temporary memory
def test_step_times_is_inf_when_an_earlier_ops_temporary_memory_overflows():
    """a0 needs 1000 B of scratch on a 500 B device, a1 none: ``step_times`` (its memory bound takes the largest
    temporary memory on the device, not the last op's) says ``inf``, as ``measure`` says out of memory."""
    ops = [Op("a0", "MatMul", 1.0, output_bytes=10, temporary_memory=1000), Op("a1", "MatMul", 1.0, output_bytes=10)]
    g, c = OpGraph.from_ops(ops, [Edge("a0", "a1")], name="scratch"), uniform_cluster(2, memory=500)
    assert not Simulator().measure(g, c, Placement.single(g, 0)).ok
    assert Simulator().step_times(g, c, np.array([[0, 0], [1, 1]])).tolist() == [math.inf, math.inf]


def test_pipe_v2_peak_counts_the_largest_temporary_memory_once():
    """Two ops with 100 B of scratch each, one after the other on GPU:0, no outputs: peak 100 B, not 200 B."""
    ops = [Op("b0", "MatMul", 1.0, output_bytes=0, temporary_memory=100),
           Op("b1", "MatMul", 1.0, output_bytes=0, temporary_memory=100)]
    g = OpGraph.from_ops(ops, [Edge("b0", "b1")], name="scratch2")
    sched = PipelineSimulator(microbatches=2, schedule="gpipe").simulate(g, uniform_cluster(2), Placement.single(g, 0))
    assert sched.peak_memory.tolist() == [100, 0]


# ---------------------------------------------------------------------- grouping
def test_coarse_edge_bytes_add_up_over_distinct_producers():
    """Group {p, q} feeds group {c}; p sends 100 B and q 300 B: the coarse edge carries 400 B."""
    ops = [Op("p", "MatMul", 1.0, output_bytes=100), Op("q", "MatMul", 1.0, output_bytes=300), Op("c", "Add", 1.0)]
    g = OpGraph.from_ops(ops, [Edge("p", "c"), Edge("q", "c")], name="two_producers")
    coarse = make_grouping(g, np.array([0, 0, 1])).graph
    assert coarse.edge_index.tolist() == [[0], [1]] and coarse.edge_bytes.tolist() == [400]


def test_merge_into_only_consumer_allows_a_group_exactly_at_the_memory_cap():
    """A 4-op chain of 100 B outputs, cap 200 B: latest first, a2 joins a3 (200 B, allowed), a1 cannot join them
    (300 B), a0 joins a1 (200 B)."""
    g = chain((1.0,) * 4, nbytes=100)
    assert group_ops(g, None, memory_cap=200).op_group.tolist() == [0, 0, 1, 1]
    assert group_ops(g, None, memory_cap=199).op_group.tolist() == [0, 1, 2, 3]


# ---------------------------------------------------------------------- FLOP rules
def test_gemm_counts_adding_c():
    """Gemm(A[4,8], B[8,16], C[16]) -> Y[4,16]: 2 * 4 * 16 * 8 multiply-adds, plus 4 * 16 additions of C."""
    assert op_flops("Gemm", [_t(4, 8), _t(8, 16), _t(16)], [_t(4, 16)]) == 2 * 4 * 16 * 8 + 4 * 16 == 1088
    assert op_flops("Gemm", [_t(4, 8), _t(8, 16)], [_t(4, 16)]) == 1024


def test_conv_transpose_counts_per_input_element():
    """ConvTranspose x[1,8,4,4], w[8,3,2,2], stride 2 -> y[1,3,8,8]: each of the 128 input elements meets
    3 * 2 * 2 weights, 2 FLOPs each (2 * 128 * 12), not per output element (2 * 192 * 12)."""
    assert op_flops("ConvTranspose", [_t(1, 8, 4, 4), _t(8, 3, 2, 2)], [_t(1, 3, 8, 8)]) == 2 * 128 * 12 == 3072


def test_einsum_broadcast_ellipsis_takes_the_larger_size():
    """``...ij,...jk->...ik`` with A[5,2,3], B[1,3,4]: the ellipsis broadcasts 1 against 5, so 5 products of
    2x3 by 3x4: 2 * 5 * 2 * 3 * 4 FLOPs (the size-1 dimension in the last operand does not shrink it)."""
    assert op_flops("Einsum", [_t(5, 2, 3), _t(1, 3, 4)], [_t(5, 2, 4)],
                    {"equation": "...ij,...jk->...ik"}) == 2 * 5 * 2 * 3 * 4 == 240


def test_max_pool_counts_every_element_of_the_window():
    """MaxPool x[1,1,4,4], kernel 2x2 -> y[1,1,2,2]: 4 outputs, 4 elements each."""
    assert op_flops("MaxPool", [_t(1, 1, 4, 4)], [_t(1, 1, 2, 2)], {"kernel_shape": [2, 2]}) == 16


# ---------------------------------------------------------------------- list scheduling
def test_m_etf_ranks_an_input_arriving_as_the_device_frees_up_with_the_ready_ops():
    """Two 1 MB/s devices. s1 (1 s) -> h (2 s, 0.5 MB); b (1.5 s) and l (1 s) are sources; priorities
    s1 > h > b > l. s1 takes GPU:0 [0, 1], b GPU:1 [0, 1.5]. At 1 GPU:0 frees up as h's input arrives there:
    h (higher priority than l, ready since 0) starts on GPU:0 at 1, and l then goes to GPU:1 at 1.5. (Were h
    not counted as ready at 1, l would take GPU:0 at 1 and h GPU:1 at 1.5.)"""
    ops = [Op("s1", "T", 1.0, output_bytes=500_000), Op("b", "T", 1.5), Op("l", "T", 1.0), Op("h", "T", 2.0)]
    g = OpGraph.from_ops(ops, [Edge("s1", "h")], name="tie_at_free")
    placement = METF().place(g, uniform_cluster(2, bandwidth=1e6))
    assert dict(zip(g.op_names, placement.devices.tolist(), strict=True)) == {"s1": 0, "b": 1, "l": 1, "h": 0}


# ---------------------------------------------------------------------- pipeline memory
def test_ideal_partition_accepts_a_stage_that_fills_its_device_exactly():
    """Three 100 B blocks over two 200 B stages: one stage must hold two blocks, exactly 200 B."""
    problem = StageProblem(chain((1.0,) * 3, nbytes=100), uniform_cluster(2, memory=200), microbatches=1)
    blocks = problem.blocks(3)
    assert blocks.memory.tolist() == [[100, 100]] * 3 and problem.capacity.tolist() == [200, 200]
    stage = ideal_partition(blocks, enumerate_ideals(blocks.forward, 512), problem.capacity)
    assert sorted(np.bincount(stage, weights=blocks.memory[:, 0], minlength=2).tolist()) == [100, 200]
    assert (np.diff(stage) >= 0).all()
