"""Calls of local functions that nest, each calling the one below twice (2**depth nodes inlined from a few KB), are
costed with bounded work and exactly; calls alike are costed once."""

from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402
from onnx import inliner as onnx_inliner  # noqa: E402

from gplace import from_onnx  # noqa: E402
from gplace.importers.onnx.control import SubgraphCosts  # noqa: E402

pytestmark = pytest.mark.onnx

OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]


class _TooMuchWork(BaseException):
    """Raised past a bound on the work counted (a BaseException: the importer's fallbacks do not swallow it)."""


def _functions(depth: int) -> list[onnx.FunctionProto]:
    """F0 is one Relu; F<k> calls F<k-1> twice, in a chain."""
    functions = [helper.make_function("local", "F0", ["x"], ["y"], [helper.make_node("Relu", ["x"], ["y"])],
                                      OPSETS[:1])]
    for k in range(1, depth + 1):
        calls = [helper.make_node(f"F{k - 1}", ["x"], ["h"], domain="local"),
                 helper.make_node(f"F{k - 1}", ["h"], ["y"], domain="local")]
        functions.append(helper.make_function("local", f"F{k}", ["x"], ["y"], calls, OPSETS))
    return functions


def _model(nodes: list, shapes: dict[str, list[int]], outputs: list[str], depth: int) -> onnx.ModelProto:
    value = helper.make_tensor_value_info
    inputs = [value(name, TensorProto.FLOAT, shape) for name, shape in shapes.items()]
    graph = helper.make_graph(nodes, "nested", inputs, [value(t, TensorProto.FLOAT, None) for t in outputs])
    return helper.make_model(graph, opset_imports=OPSETS, functions=_functions(depth) if depth >= 0 else [])


def _costs(model: onnx.ModelProto, tmp_path, name: str) -> dict[str, dict[str, float]]:
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return {op.name: op.kind_cost for op in from_onnx(str(path)).ops()}


def _leaf(tmp_path, shape: list[int]) -> dict[str, float]:
    """The costs of one Relu on a float tensor of ``shape``."""
    model = _model([helper.make_node("Relu", ["X"], ["Y"], name="relu")], {"X": shape}, ["Y"], -1)
    return _costs(model, tmp_path, "leaf")["relu"]


@pytest.fixture
def work(monkeypatch) -> dict[str, int]:
    """Counts of inliner invocations and of nodes costed one by one; past ``bound`` ones, :class:`_TooMuchWork`."""
    counts = {"inlined": 0, "plain": 0, "inline_bound": 10**9, "plain_bound": 10**9}
    inline, plain = onnx_inliner.inline_local_functions, SubgraphCosts._plain

    def counted_inline(*args, **kwargs):
        counts["inlined"] += 1
        if counts["inlined"] > counts["inline_bound"]:
            raise _TooMuchWork(f"{counts['inlined']} inliner invocations")
        return inline(*args, **kwargs)

    def counted_plain(*args, **kwargs):
        counts["plain"] += 1
        if counts["plain"] > counts["plain_bound"]:
            raise _TooMuchWork(f"{counts['plain']} nodes costed one by one")
        return plain(*args, **kwargs)

    monkeypatch.setattr(onnx_inliner, "inline_local_functions", counted_inline)
    monkeypatch.setattr(SubgraphCosts, "_plain", staticmethod(counted_plain))
    return counts


@pytest.mark.parametrize("depth", [17, pytest.param(20, marks=pytest.mark.slow)])
def test_a_call_inlining_to_millions_of_nodes_costs_each_function_once_and_exactly(tmp_path, work, depth):
    leaf = _leaf(tmp_path, [4, 4])
    work["inline_bound"], work["plain_bound"] = 0, 1000  # 2**depth nodes inlined is more than 100,000
    model = _model([helper.make_node(f"F{depth}", ["X"], ["Y"], domain="local", name="top")], {"X": [4, 4]},
                   ["Y"], depth)
    costs = _costs(model, tmp_path, f"depth{depth}")["top"]
    assert work["plain"] <= depth + 1
    assert costs == {kind: 2**depth * seconds for kind, seconds in leaf.items()}


def test_a_small_nest_is_still_inlined_and_costs_its_nodes_summed_in_order(tmp_path, work):
    leaf = _leaf(tmp_path, [4, 4])
    model = _model([helper.make_node("F3", ["X"], ["Y"], domain="local", name="top")], {"X": [4, 4]}, ["Y"], 3)
    costs = _costs(model, tmp_path, "depth3")["top"]
    summed = dict.fromkeys(leaf, 0.0)
    for _ in range(8):
        summed = {kind: summed[kind] + leaf[kind] for kind in leaf}
    assert costs == summed
    assert work["inlined"] == 1


def test_calls_alike_are_inlined_once_and_each_costs_the_same(tmp_path, work):
    work["inline_bound"] = 5  # one per call would be 30
    chain = ["X", *(f"t{i}" for i in range(1, 30)), "Y"]
    nodes = [helper.make_node("F8", [a], [b], domain="local", name=f"call{i}")
             for i, (a, b) in enumerate(zip(chain, chain[1:], strict=False))]
    costs = _costs(_model(nodes, {"X": [4, 4]}, ["Y"], 8), tmp_path, "chain")
    assert work["inlined"] == 1
    assert work["plain"] == 2**8
    assert all(costs[f"call{i}"] == costs["call0"] for i in range(30))


def test_calls_on_other_input_types_are_costed_apart(tmp_path):
    small, large = _leaf(tmp_path, [4, 4]), _leaf(tmp_path, [64, 64])
    nodes = [helper.make_node("F1", ["X"], ["Y"], domain="local", name="small"),
             helper.make_node("F1", ["Z"], ["W"], domain="local", name="large")]
    costs = _costs(_model(nodes, {"X": [4, 4], "Z": [64, 64]}, ["Y", "W"], 1), tmp_path, "apart")
    assert costs["small"] == {kind: 2 * seconds for kind, seconds in small.items()}
    assert costs["large"] == {kind: 2 * seconds for kind, seconds in large.items()}
