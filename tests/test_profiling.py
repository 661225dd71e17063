"""Profiled op costs: torch and onnxruntime per-op times stored as kind_cost["cpu"]; clear errors otherwise."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gplace.ir import Edge, Op, OpGraph
from gplace.profiling import (
    ProfileError,
    cost_error,
    fit_speed_factor,
    onnx_op_times,
    op_group,
    ort_op_times,
    profile_onnx,
    profile_torch,
    read_ort_profile,
    with_measured_costs,
)

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

STRUCTURE = ("op_names", "op_types", "compute_cost", "persistent_memory", "temporary_memory", "output_bytes",
             "output_shapes", "colocation", "pinned", "edge_index", "edge_bytes")
"""Every field of a graph but its costs: profiling must leave them as they were."""


def _same_structure(a: OpGraph, b: OpGraph) -> None:
    for name in STRUCTURE:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=name)
        else:
            assert x == y, name
    assert sorted(a.kind_cost) == sorted(b.kind_cost)
    assert a.source is b.source


# ---------------------------------------------------------------------- torch
@pytest.fixture(scope="module")
def torch_mlp() -> OpGraph:
    torch = pytest.importorskip("torch")
    from gplace.importers.torch_export import from_torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    return from_torch(net, (torch.randn(4, 16),))


def test_profile_torch_measures_every_executed_op(torch_mlp: OpGraph) -> None:
    """Every op the executor runs gets a positive measured "cpu" cost; inputs keep theirs; nothing else moves."""
    graph = torch_mlp
    profiled = profile_torch(graph, repeats=3, warmup=1)
    _same_structure(graph, profiled)
    cpu, before = profiled.kind_cost["cpu"], graph.kind_cost["cpu"]
    ran = np.array([t != "Input" for t in graph.op_types])
    assert ran.sum() == 3
    assert np.all(np.isfinite(cpu[ran])) and np.all(cpu[ran] > 0)
    np.testing.assert_array_equal(cpu[~ran], before[~ran])  # not profiled: the analytic cost (here NaN) stays
    np.testing.assert_array_equal(profiled.kind_cost["gpu"], graph.kind_cost["gpu"])
    assert profiled.fingerprint != graph.fingerprint
    assert np.all(np.isfinite(profiled.durations(_cpu_cluster())))


def test_profile_torch_needs_a_torch_program() -> None:
    graph = OpGraph.from_ops([Op("a", "MatMul", 1.0)], [], name="plain")
    with pytest.raises(ValueError, match="'plain' has no torch program"):
        profile_torch(graph)


def _cpu_cluster():
    from gplace.ir import Cluster, Device

    return Cluster.build([Device("/CPU:0", "cpu")])


# ---------------------------------------------------------------------- onnx
def _tiny_onnx(hidden: int = 32, extra: bool = False):
    """x (8, 64) -> MatMul(W) -> Add(B) -> Relu; the MatMul and Relu nodes are unnamed."""
    pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("Add", ["y", "B"], ["z"], name="add"),
             helper.make_node("Relu", ["z"], ["out"])]
    if extra:
        nodes.append(helper.make_node("Sigmoid", ["out"], ["s"], name="sig"))
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info("s" if extra else "out", TensorProto.FLOAT, [8, hidden])],
        [numpy_helper.from_array(rng.standard_normal((64, hidden)).astype(np.float32), "W"),
         numpy_helper.from_array(rng.standard_normal(hidden).astype(np.float32), "B")])
    return onnx.helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])  # IR newer than ORT's


@pytest.mark.onnx
def test_profile_onnx_maps_every_node(tmp_path) -> None:
    """Each node's kernel time lands on its op (named or not), from the kept model, a ModelProto or a file."""
    import onnx

    from gplace.importers.onnx import from_onnx

    model = _tiny_onnx()
    graph = from_onnx(model)
    nodes = {"MatMul_0", "add", "Relu_2"}
    assert set(graph.op_names) == {"x"} | nodes
    times = onnx_op_times(graph, repeats=3, warmup=1)
    assert set(times) == nodes and all(t > 0 for t in times.values())

    path = tmp_path / "tiny.onnx"
    onnx.save(model, str(path))
    for source in (None, model, path):
        profiled = profile_onnx(graph, source, repeats=2, warmup=1)
        _same_structure(graph, profiled)
        cpu = profiled.kind_cost["cpu"]
        for name in nodes:
            assert cpu[graph.op_index[name]] > 0
        assert math.isnan(cpu[graph.op_index["x"]])  # the Input op keeps its (absent) analytic cost
        assert profiled.fingerprint != graph.fingerprint


@pytest.mark.onnx
def test_profile_onnx_times_a_control_flow_op_as_a_whole() -> None:
    """The nodes inside an If's branches and a Loop's body have their own kernel events; they were taken for ops of
    the graph ('profiled node ... is not an op', or, where a name matched a top-level op, mixed into its times)."""
    from onnx_control_flow import if_loop_model

    from gplace.importers.onnx import from_onnx

    model = if_loop_model(trips=3)
    for node in model.graph.node:  # a body node named as a top-level op
        if node.op_type == "Loop":
            node.attribute[0].g.node[1].name = "pre"
    graph = from_onnx(model)
    times = onnx_op_times(graph, repeats=2, warmup=1)
    assert {"branch", "loop", "pre"} <= set(times) and all(t > 0 for t in times.values())


@pytest.mark.onnx
def test_profile_onnx_refuses_an_unrelated_model() -> None:
    """A model whose ops differ from the graph's: a ValueError naming the op."""
    from gplace.importers.onnx import from_onnx

    graph = from_onnx(_tiny_onnx())
    with pytest.raises(ValueError, match="'sig'"):
        profile_onnx(graph, _tiny_onnx(extra=True))
    with pytest.raises(ValueError, match="input 'x'"):  # another batch size than the graph's input
        profile_onnx(graph, _other_batch())
    with pytest.raises(ValueError, match="op 'MatMul_0' has output shapes"):  # same ops, other weights
        profile_onnx(graph, _tiny_onnx(hidden=16))
    with pytest.raises(ValueError, match="keeps no ONNX model"):
        profile_onnx(OpGraph.from_ops([Op("a", "Relu", 1.0)], [], name="plain"))


def _other_batch():
    model = _tiny_onnx()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2
    return model


@pytest.mark.onnx
def test_malformed_profiles_name_the_file(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json.*not valid JSON"):
        read_ort_profile(bad)
    bad.write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(ValueError, match="bad.json.*list of trace events"):
        read_ort_profile(bad)
    bad.write_text(json.dumps([{"cat": "Session", "name": "model_run", "dur": 5}]))
    with pytest.raises(ValueError, match="bad.json.*no node kernel events"):
        read_ort_profile(bad)
    bad.write_text(json.dumps([{"cat": "Node", "name": "add_kernel_time", "dur": "fast"}]))
    with pytest.raises(ValueError, match="bad.json.*'add_kernel_time'.*no duration"):
        read_ort_profile(bad)
    with pytest.raises(FileNotFoundError):
        read_ort_profile(tmp_path / "missing.json")


@pytest.mark.onnx
def test_a_profile_of_another_model_names_the_node(tmp_path) -> None:
    from gplace.importers.onnx import from_onnx

    trace = tmp_path / "trace.json"
    events = [{"cat": "Node", "name": "add_kernel_time", "dur": 7, "args": {"op_name": "Add"}},
              {"cat": "Node", "name": "conv_kernel_time", "dur": 9, "args": {"op_name": "Conv"}}]
    trace.write_text(json.dumps(events))
    graph = from_onnx(_tiny_onnx())
    with pytest.raises(ProfileError, match="trace.json.*'conv' is not an op"):
        ort_op_times(graph, read_ort_profile(trace))
    trace.write_text(json.dumps([{**events[0], "args": {"op_name": "Mul"}}]))
    with pytest.raises(ProfileError, match="'add' is a Mul.*is a Add"):
        ort_op_times(graph, read_ort_profile(trace))
    trace.write_text(json.dumps(events[:1] * 3))
    assert ort_op_times(graph, read_ort_profile(trace), skip_runs=1) == {"add": pytest.approx(7e-6)}


# ---------------------------------------------------------------------- graph and comparison
def test_with_measured_costs_checks_names_and_values() -> None:
    graph = OpGraph.from_ops([Op("a", "MatMul", None, {"cpu": 1.0}), Op("b", "Relu", None, {"cpu": 2.0})],
                             [Edge("a", "b", 4)], name="g")
    out = with_measured_costs(graph, {"b": 0.5})
    np.testing.assert_array_equal(out.kind_cost["cpu"], [1.0, 0.5])
    with pytest.raises(ValueError, match="'c' is not an op"):
        with_measured_costs(graph, {"c": 1.0})
    with pytest.raises(ValueError, match="op 'a'.*-1"):
        with_measured_costs(graph, {"a": -1.0})


def test_measured_costs_for_a_cpu_of_another_speed_take_the_measured_time_there() -> None:
    """Profiled costs were stored for a CPU of speed 1.0 only: on local_cpu_cluster(1) (speed 0.111 on 2 cores) a
    0.355 s kernel was simulated at 3.196 s, where calibrate's costs, scaled by the device's speed, were right."""
    from gplace.ir import Cluster, Device

    graph = OpGraph.from_ops([Op("a", "MatMul", None, {"cpu": 1.0}), Op("b", "Relu", None, {"cpu": 2.0})],
                             [Edge("a", "b", 4)], name="g")
    slow = Cluster.build([Device("/CPU:0", "cpu", 0.111, 10**9)])
    out = with_measured_costs(graph, {"a": 0.355, "b": 0.01}, speed=0.111)
    np.testing.assert_allclose(out.durations(slow)[:, 0], [0.355, 0.01], rtol=1e-12)
    for bad in (0.0, -1.0, float("inf"), float("nan"), True, "1"):
        with pytest.raises(ValueError, match="with_measured_costs: speed must be a finite number > 0"):
            with_measured_costs(graph, {"a": 0.355}, speed=bad)


def test_speed_factor_and_errors() -> None:
    """Least squares in log space recovers a uniform speed-up; the error after it is the residual spread."""
    rng = np.random.default_rng(0)
    analytic = rng.uniform(1e-6, 1e-3, 200)
    measured = analytic / 2.5 * np.exp(rng.normal(0, 0.1, 200))
    speed = fit_speed_factor(np.append(analytic, 0.0), np.append(measured, 1.0))  # a 0 is left out
    assert speed == pytest.approx(2.5, rel=0.03)
    raw, scaled = cost_error(analytic, measured), cost_error(analytic, measured, speed=speed)
    assert raw.median == pytest.approx(2.5, rel=0.1) and raw.step_ratio == pytest.approx(2.5, rel=0.1)
    assert 1.0 <= scaled.median < 1.15 and scaled.p90 < 1.3
    assert scaled.step_ratio == pytest.approx(1.0, abs=0.05)
    for bad in (0, -2.0, float("nan")):  # inf or NaN figures, or ops=0 for a negative speed
        with pytest.raises(ValueError, match="cost_error: speed must be a finite number > 0"):
            cost_error(analytic, measured, speed=bad)
    exact = cost_error([1.0, 2.0], [1.0, 2.0])
    assert (exact.ops, exact.median, exact.p90, exact.step_ratio) == (2, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="no op"):
        fit_speed_factor([0.0], [1.0])


def test_cost_comparison_leaves_nan_ops_out() -> None:
    """A graph's own cost arrays (NaN for Input ops) give finite totals: NaN ops are left out of fits and sums."""
    analytic, measured = [math.nan, 4.0, 2.0, 0.0], [math.nan, 2.0, 1.0, 1.0]
    assert fit_speed_factor(analytic, measured) == pytest.approx(2.0)
    error = cost_error(analytic, measured, speed=2.0)
    assert (error.ops, error.predicted_total, error.measured_total) == (2, 3.0, 4.0)
    assert error.step_ratio == pytest.approx(0.75)


def test_negative_or_infinite_costs_are_refused_naming_the_index() -> None:
    """A negative measured time or an infinite cost is an error naming which array and index, not a figure."""
    with pytest.raises(ValueError, match="cost_error: measured cost at index 0 is -5.0"):
        cost_error([1.0, 1.0], [-5.0, 1.0])
    with pytest.raises(ValueError, match="fit_speed_factor: analytic cost at index 1 is inf"):
        fit_speed_factor([2.0, math.inf], [1.0, 1.0])
    with pytest.raises(ValueError, match="fit_speed_factor: the fitted factor is inf"):
        fit_speed_factor([1e300, 1e300], [1e-300, 1e-300])


def test_speed_may_be_a_numpy_scalar() -> None:
    """Any real number is a speed (np.float32, np.int64); a non-number is named as such."""
    assert cost_error([2.0], [1.0], speed=np.float32(2.0)).median == 1.0
    assert cost_error([2.0], [1.0], speed=np.int64(2)).median == 1.0
    with pytest.raises(ValueError, match="cost_error: speed must be a finite number > 0, got .2."):
        cost_error([2.0], [1.0], speed="2")


def test_op_groups() -> None:
    assert [op_group(t) for t in ("MatMul", "aten.linear.default", "Conv", "aten.conv2d.default", "Relu",
                                  "BatchNormalization", "aten.gelu.default", "MaxPool", "Concat", "Input")] == [
        "matmul", "matmul", "conv", "conv", "elementwise", "elementwise", "elementwise", "other", "other", "other"]


def test_profile_torch_names_repeats_and_warmup_that_are_not_whole_counts(torch_mlp: OpGraph) -> None:
    with pytest.raises(ValueError, match="repeats must be a whole number >= 1, got 0"):
        profile_torch(torch_mlp, repeats=0)  # numpy warnings, then "measured time nan" before
    with pytest.raises(ValueError, match="warmup must be a whole number >= 0, got -1"):
        profile_torch(torch_mlp, warmup=-1)  # accepted before: repeats - 1 steps, the last one kept
