"""Expert placers pick gradient ops by their phase where the graph has phases: a forward op under
``gradient_tape/`` (a layer or variable named ``gradient_tape``) goes by the rules, not after the forward op its
name would point to; a backward op outside that scope (the tape's seed ``ones``) follows as gradient ops do.
Graphs without phases keep the name rule."""

from __future__ import annotations

from gplace.baselines import Expert
from gplace.ir import Edge, Op, OpGraph
from gplace.testing import cpu_gpu_cluster

GPU0, GPU1 = 1, 2  # cpu_gpu_cluster(2): the CPU, then the GPUs

_SPEC = [  # (name, type, inputs, phase, grad_of)
    ("x", "Placeholder", [], "forward", None),
    ("gradient_tape/dense/MatMul", "MatMul", ["x"], "forward", None),  # a layer named gradient_tape
    ("dense/MatMul", "MatMul", ["gradient_tape/dense/MatMul"], "forward", None),
    ("loss", "Sum", ["dense/MatMul"], "forward", None),
    ("ones", "Const", [], "backward", None),  # the tape's seed
    ("gradient_tape/dense/MatMul/MatMul_1", "MatMul", ["ones", "gradient_tape/dense/MatMul"], "backward",
     "dense/MatMul"),
    ("gradient_tape/gradient_tape/dense/MatMul/MatMul_1", "MatMul", ["gradient_tape/dense/MatMul/MatMul_1", "x"],
     "backward", "gradient_tape/dense/MatMul"),
    ("sgd/AssignSub", "AssignSubVariableOp", ["gradient_tape/gradient_tape/dense/MatMul/MatMul_1"], "update", None),
]
_RULES = [("^gradient_tape/dense/", "gpu:1"), ("^dense/", "gpu:0")]


def _graph(phases: bool) -> OpGraph:
    ops = [Op(n, t, 1e-3, output_bytes=1000, phase=p if phases else None, grad_of=f if phases else None)
           for n, t, _, p, f in _SPEC]
    edges = [Edge(src, n) for n, _, inputs, _, _ in _SPEC for src in inputs]
    return OpGraph.from_ops(ops, edges, name="g")


def _devices(graph: OpGraph) -> dict[str, int]:
    placement = Expert(_RULES, "gpu:0", follow_neighbours=True).place(graph, cpu_gpu_cluster(2))
    return dict(zip(graph.op_names, placement.devices.tolist(), strict=True))


def test_a_forward_op_under_the_gradient_scope_goes_by_the_rules_where_the_graph_has_phases():
    d = _devices(_graph(phases=True))
    assert d["gradient_tape/dense/MatMul"] == GPU1  # followed dense/MatMul to GPU 0 as a "gradient op"
    assert d["gradient_tape/gradient_tape/dense/MatMul/MatMul_1"] == GPU1  # follows its forward op
    assert d["dense/MatMul"] == d["gradient_tape/dense/MatMul/MatMul_1"] == GPU0
    assert d["ones"] == GPU0  # a backward op with no gradient prefix: placed, no error


def test_without_phases_gradient_ops_are_still_picked_by_name():
    d = _devices(_graph(phases=False))
    assert d["gradient_tape/dense/MatMul"] == GPU0  # the name rule: it follows dense/MatMul
    assert d["gradient_tape/dense/MatMul/MatMul_1"] == GPU0
