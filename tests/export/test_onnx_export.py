"""ONNX write-back: import, place, annotate / split, run with onnxruntime, same outputs as the whole model."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_control_flow import growing_loop_model, if_loop_model, loop_scan_output_model, scan_model  # noqa: E402

from gplace import InvalidPlacementError, Placement, UnsupportedGraphError, from_onnx  # noqa: E402
from gplace.export.onnx import DEVICE_KEY, STAGE_KEY, annotate_onnx, run_parts, split_onnx  # noqa: E402
from gplace.testing import random_dag, uniform_cluster  # noqa: E402
from tests.export.onnx_files import run_onnx_files  # noqa: E402


def _model() -> onnx.ModelProto:
    """x -> (MatMul W1 -> Relu) + (MatMul W2 -> Sigmoid) -> MatMul W3 -> y."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), f"W{i}") for i in (1, 2, 3)]
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["a"], name="mm1"),
        helper.make_node("Relu", ["a"], ["b"], name="relu"),
        helper.make_node("MatMul", ["x", "W2"], ["c"], name="mm2"),
        helper.make_node("Sigmoid", ["c"], ["d"], name="sig"),
        helper.make_node("Add", ["b", "d"], ["e"], name="add"),
        helper.make_node("MatMul", ["e", "W3"], ["y"], name="mm3"),
    ]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], initializer=weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)  # onnxruntime lags onnx


def _whole(model, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(["y"], {"x": x})[0]


X = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
ACYCLIC = {"x": "/CPU:0", "mm1": "/CPU:0", "relu": "/CPU:0", "mm2": "/CPU:1", "sig": "/CPU:1", "add": "/CPU:0",
           "mm3": "/CPU:0"}
CYCLIC = {**ACYCLIC, "relu": "/CPU:1", "mm3": "/CPU:1"}  # /CPU:0 -> /CPU:1 -> /CPU:0 -> /CPU:1


@pytest.fixture(scope="module")
def imported():
    return from_onnx(_model()), uniform_cluster(2, kind="cpu")


def test_annotated_model_names_each_nodes_device_and_still_runs(imported):
    graph, cluster = imported
    placement = Placement.from_names(graph, cluster, ACYCLIC)
    model = annotate_onnx(graph, cluster, placement)
    onnx.checker.check_model(model)
    [config] = model.configuration
    assert (config.name, config.num_devices, list(config.device)) == (cluster.name, 2, ["/CPU:0", "/CPU:1"])
    for node in model.graph.node:
        meta = {p.key: p.value for p in node.metadata_props}
        assert meta[DEVICE_KEY] == ACYCLIC[node.name]
        [dc] = node.device_configurations
        assert dc.configuration_id == cluster.name and str(dc.pipeline_stage) == meta[STAGE_KEY]
        assert [list(s.device) for s in dc.sharding_spec] == [[cluster.device_names.index(ACYCLIC[node.name])]]
    np.testing.assert_array_equal(_whole(model, X), _whole(_model(), X))
    assert not _model().graph.node[0].metadata_props  # the user's model is untouched


@pytest.mark.parametrize("mapping, parts", [(ACYCLIC, 2), (CYCLIC, 4)])
def test_per_device_models_run_in_order_give_the_whole_models_outputs(imported, mapping, parts):
    graph, cluster = imported
    split = split_onnx(graph, cluster, Placement.from_names(graph, cluster, mapping))
    assert len(split) == parts
    for part in split:
        onnx.checker.check_model(part.model)
        assert {mapping[n.name] for n in part.model.graph.node} == {part.device}
    out = run_parts(split, {"x": X}, outputs=["y"])
    np.testing.assert_allclose(out["y"], _whole(_model(), X), rtol=1e-6)


def test_a_model_with_external_weights_splits_runs_and_writes_back_from_any_directory(tmp_path, monkeypatch):
    """Weights in a ``.data`` file beside the model (as torch.onnx.export writes them): the parts run from another
    working directory, and each written file carries its own weights, never pointing back at the original."""
    from gplace.export import write_back

    source = tmp_path / "model"
    source.mkdir()
    onnx.save_model(_model(), str(source / "m.onnx"), save_as_external_data=True, location="m.onnx.data",
                    size_threshold=0)
    graph, cluster = from_onnx(source / "m.onnx"), uniform_cluster(2, kind="cpu")
    placement = Placement.from_names(graph, cluster, CYCLIC)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    want = _whole(_model(), X)
    np.testing.assert_allclose(run_parts(split_onnx(graph, cluster, placement), {"x": X}, ["y"])["y"], want, rtol=1e-6)
    written = write_back(graph, cluster, placement, tmp_path / "out")
    (source / "m.onnx.data").unlink()  # the written models must not need the original's weights
    assert {p.name for p in written} >= {"placed.onnx", "placed.onnx.data"}
    modes = {p.name: p.stat().st_mode & 0o777 for p in written}
    assert modes["placed.onnx.data"] == modes["placed.onnx"]  # as readable as the model it belongs to
    np.testing.assert_allclose(_whole(onnx.load(str(tmp_path / "out" / "placed.onnx")), X), want, rtol=1e-6)
    np.testing.assert_allclose(run_onnx_files(sorted((tmp_path / "out" / "parts").glob("*.onnx")), {"x": X})["y"], want,
                               rtol=1e-6)



def test_tensors_inline_in_the_source_stay_inline_in_the_written_files(tmp_path):
    """Saved as onnx saves by default (tensors under 1 KiB inline): a ``Reshape``'s shape stays inline in the
    written files, so onnxruntime loads them (its shape inference reads no external data: every initialiser was
    moved out, and the placed model failed to load), and the placed model reads back as the same graph."""
    from gplace.export import write_back

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "W")
    shape = numpy_helper.from_array(np.array([2, 4, 16], dtype=np.int64), "shape")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["a"], name="mm"),
             helper.make_node("Reshape", ["a", "shape"], ["b"], name="rs"),
             helper.make_node("Relu", ["b"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "rsh", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 16])],
                              initializer=[weight, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    want = _whole(model, x)
    (tmp_path / "src").mkdir()
    onnx.save_model(model, str(tmp_path / "src" / "m.onnx"), save_as_external_data=True, location="m.onnx.data")
    imported, cluster = from_onnx(tmp_path / "src" / "m.onnx"), uniform_cluster(2, kind="cpu")
    placement = Placement.from_names(imported, cluster, {"x": "/CPU:0", "mm": "/CPU:0", "rs": "/CPU:1",
                                                         "relu": "/CPU:1"})
    write_back(imported, cluster, placement, tmp_path / "out")
    placed = onnx.load(str(tmp_path / "out" / "placed.onnx"), load_external_data=False)
    assert [t.name for t in placed.graph.initializer if t.external_data] == ["W"]
    got = ort.InferenceSession(str(tmp_path / "out" / "placed.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(got.run(["y"], {"x": x})[0], want)
    np.testing.assert_array_equal(run_onnx_files(sorted((tmp_path / "out" / "parts").glob("*.onnx")), {"x": x})["y"],
                                  want)
    assert from_onnx(tmp_path / "out" / "placed.onnx").fingerprint == imported.fingerprint


def _relocate_external_data(model_path, location: str) -> None:
    """Point every external tensor of the model file at ``model_path`` to ``location`` (its bytes unchanged)."""
    model = onnx.load(str(model_path), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    model_path.write_bytes(model.SerializeToString())


@pytest.mark.parametrize("case, why", [
    ("missing", "which is missing"),
    ("outside", "which is outside the model's folder"),
    ("absolute", "which is an absolute path"),
    ("symlink", "which is a symbolic link"),
    ("folder", "which is not a regular file"),
    ("short", "which onnx could not read: External data length"),
])
def test_external_data_onnx_does_not_read_is_refused_in_one_line_naming_the_tensor(tmp_path, case, why):
    """External data missing, outside the model's folder, absolute, a symbolic link, a folder or too short: the
    import and the placement go through (the simulator reads no weights), and writing the placed model back is
    refused with gplace's error naming the tensor, its location and why (was: onnx's ValidationError, or its
    ValueError, from deep inside onnx), without reading the data onnx refuses nor writing a model."""
    from gplace.export import write_back

    source = tmp_path / "model"
    source.mkdir()
    model_path = source / "m.onnx"
    onnx.save_model(_model(), str(model_path), save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    data = source / "m.onnx.data"
    outside = tmp_path / "secret.bin"
    location = {"missing": "m.onnx.data", "outside": "../secret.bin", "absolute": str(outside),
                "symlink": "link.bin", "folder": "weights", "short": "m.onnx.data"}[case]
    if case == "missing":
        data.unlink()
    elif case == "folder":
        (source / "weights").mkdir()
    elif case == "short":
        data.write_bytes(data.read_bytes()[:8])
    else:
        data.rename(outside)
        if case == "symlink":
            (source / "link.bin").symlink_to(outside)
    _relocate_external_data(model_path, location)
    graph, cluster = from_onnx(model_path), uniform_cluster(2, kind="cpu")
    placement = Placement.from_names(graph, cluster, ACYCLIC)
    with pytest.raises(UnsupportedGraphError) as err:
        write_back(graph, cluster, placement, tmp_path / "out")
    message = str(err.value)
    assert "\n" not in message and "tensor 'W1'" in message and repr(location) in message and why in message
    assert "placement.json" in message  # says the placement itself was written, only the model was not
    assert not list((tmp_path / "out").glob("*.onnx*"))


def _if_with_external_branch_weights() -> onnx.ModelProto:
    """y = If(sum(relu(x)) != 0, relu(x) @ Wt, relu(x) @ We + C): the weights live only inside the branches
    (``Wt``, ``We`` initialisers of the subgraphs, ``C`` a Constant node's attribute)."""
    rng = np.random.default_rng(2)
    value = helper.make_tensor_value_info

    def weight(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape or (4, 4)).astype(np.float32), name)

    then = helper.make_graph([helper.make_node("MatMul", ["a", "Wt"], ["t"])], "then", [],
                             [value("t", TensorProto.FLOAT, [2, 4])], initializer=[weight("Wt")])
    body = [helper.make_node("Constant", [], ["C"], value=weight("C", 4)),
            helper.make_node("MatMul", ["a", "We"], ["m"]), helper.make_node("Add", ["m", "C"], ["e"])]
    other = helper.make_graph(body, "else", [], [value("e", TensorProto.FLOAT, [2, 4])], initializer=[weight("We")])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("ReduceSum", ["a"], ["s"], keepdims=0, name="sum"),
             helper.make_node("Cast", ["s"], ["c"], to=TensorProto.BOOL, name="cast"),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if")]
    graph = helper.make_graph(nodes, "ext_if", [value("x", TensorProto.FLOAT, [2, 4])],
                              [value("y", TensorProto.FLOAT, [2, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("x", [X, -X], ids=["then", "else"])
def test_weights_external_only_inside_subgraphs_are_written_beside_each_file(tmp_path, monkeypatch, x):
    """A model whose only external data is in control-flow subgraphs (branch initialisers, a Constant's
    attribute) is written with its own data: placed.onnx and the parts load and run from another directory,
    with the original's data gone, and give the whole model's outputs."""
    from gplace.export import write_back

    source, elsewhere = tmp_path / "model", tmp_path / "elsewhere"
    source.mkdir(), elsewhere.mkdir()
    model = _if_with_external_branch_weights()
    want = _whole(model, x)
    onnx.save_model(model, str(source / "m.onnx"), save_as_external_data=True, location="m.onnx.data",
                    size_threshold=0, convert_attribute=True)
    graph, cluster = from_onnx(source / "m.onnx"), uniform_cluster(2, kind="cpu")
    placement = Placement.from_names(graph, cluster, {"x": "/CPU:0", "relu": "/CPU:0", "sum": "/CPU:0",
                                                      "cast": "/CPU:0", "if": "/CPU:1"})
    written = write_back(graph, cluster, placement, tmp_path / "out")
    (source / "m.onnx.data").unlink()
    monkeypatch.chdir(elsewhere)
    assert "placed.onnx.data" in {p.name for p in written}
    np.testing.assert_allclose(run_onnx_files([tmp_path / "out" / "placed.onnx"], {"x": x})["y"], want, rtol=1e-6)
    parts = sorted((tmp_path / "out" / "parts").glob("*.onnx"))
    assert len(parts) == 2
    np.testing.assert_allclose(run_onnx_files(parts, {"x": x})["y"], want, rtol=1e-6)


X_CONTROL = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)  # sum(relu) > 0: the branch reading h and W


@pytest.mark.parametrize("model, feeds, first_device", [
    (if_loop_model(), {"x": X_CONTROL}, {"x", "pre", "sum", "gt", "M", "go"}),
    (scan_model(), {"x": np.arange(6 * 4 * 8, dtype=np.float32).reshape(6, 4, 8) / 100}, {"x"}),
    (growing_loop_model(), {"x": np.array([[0.5], [-1.0]], np.float32)}, {"x", "pre", "loop"}),
    (loop_scan_output_model(), {"x": X_CONTROL[:2, :4]}, {"x", "loop"}),
])
def test_control_flow_nodes_split_with_the_outer_values_their_subgraphs_read(model, feeds, first_device):
    """An If, Loop or Scan placed away from the producers of what its subgraphs read gets those values as its
    part's inputs (and the weights only a subgraph reads as its part's initialisers): the parts run by
    onnxruntime give the whole model's outputs."""
    g, cluster = from_onnx(model), uniform_cluster(2, kind="cpu")
    placement = Placement.for_graph(g, [0 if name in first_device else 1 for name in g.op_names])
    parts = split_onnx(g, cluster, placement)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outputs = [v.name for v in model.graph.output]
    for got, want in zip(run_parts(parts, feeds, outputs).values(), session.run(outputs, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    if model.graph.name == "if_loop":
        assert set(parts[1].inputs) == {"c", "h", "M", "go"}  # h and W: read inside the branch; W2 in the body
        assert {t.name for t in parts[1].model.graph.initializer} == {"W", "W2"}


def test_a_placement_for_another_graph_is_refused_naming_it(imported):
    graph, cluster = imported
    other = random_dag(graph.num_ops, seed=0)
    with pytest.raises(InvalidPlacementError, match="placement was made for graph"):
        annotate_onnx(graph, cluster, Placement.single(other, 0))
    with pytest.raises(InvalidPlacementError, match="unknown device '/GPU:7'"):
        Placement.from_names(graph, cluster, {**ACYCLIC, "add": "/GPU:7"})


def test_a_graph_not_from_onnx_is_refused():
    graph = random_dag(5)
    with pytest.raises(UnsupportedGraphError, match="not imported from ONNX"):
        split_onnx(graph, uniform_cluster(2), Placement.single(graph, 0))


def test_onnx_backend_models_split_at_random_give_the_whole_models_outputs():
    """Every model of ONNX's pytorch-converted/-operator backend tests that gplace imports, placed at random on
    three devices, runs split with the outputs of the whole model on the test's own inputs."""
    from pathlib import Path

    from onnx.backend.test import __file__ as backend

    ort.set_default_logger_severity(3)
    data = Path(backend).parent / "data"
    cluster, checked = uniform_cluster(3, kind="cpu"), 0
    for case in sorted([*data.glob("pytorch-converted/*"), *data.glob("pytorch-operator/*")]):
        model = onnx.load(str(case / "model.onnx"))
        weights = {t.name for t in model.graph.initializer}
        names = [v.name for v in model.graph.input if v.name not in weights]
        inputs = sorted((case / "test_data_set_0").glob("input_*.pb"))
        if len(inputs) != len(names):
            continue
        feeds = {n: numpy_helper.to_array(onnx.load_tensor(str(p))) for n, p in zip(names, inputs, strict=True)}
        try:
            graph = from_onnx(model)
        except UnsupportedGraphError:
            continue
        try:
            expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
                None, feeds)
        except Exception:  # noqa: BLE001 -- an old opset onnxruntime has no kernel for: not a case
            continue
        placement = Placement.for_graph(graph, np.random.default_rng(checked).integers(0, 3, graph.num_ops))
        got = run_parts(split_onnx(graph, cluster, placement), feeds, outputs=[o.name for o in model.graph.output])
        for want, have in zip(expected, got.values(), strict=True):
            np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-5, err_msg=case.name)
        checked += 1
    assert checked >= 50


def _matmul_relu(weights: str) -> onnx.ModelProto:
    """y = Relu(x @ W), x (2, 3): W dense, dense and also an input (an overridable default), or sparse."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"],
                                                                                         name="relu")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])]
    w = np.arange(9, dtype=np.float32).reshape(3, 3) - 4
    graph = helper.make_graph(nodes, "mm", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    if weights == "sparse":
        graph.sparse_initializer.append(helper.make_sparse_tensor(
            numpy_helper.from_array(np.array([1.0, -2.0], np.float32), "W"),
            numpy_helper.from_array(np.array([0, 4], np.int64), "W_idx"), [3, 3]))
    else:
        graph.initializer.append(numpy_helper.from_array(w, "W"))
    if weights == "overridable":
        graph.input.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, [3, 3]))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("weights, feeds", [
    ("overridable", {"W": np.full((3, 3), 0.5, np.float32)}), ("overridable", {}), ("sparse", {}),
], ids=["default-overridden", "default-kept", "sparse"])
def test_split_parts_take_an_overridable_or_sparse_initialiser_as_the_model_does(weights, feeds):
    """An initialiser that is also an input is a part input with that default (a fed value wins, as in
    onnxruntime); a sparse one is the part's own: split parts give the whole model's output."""
    model, x = _matmul_relu(weights), np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    g = from_onnx(model)
    parts = split_onnx(g, uniform_cluster(2, kind="cpu"), Placement.for_graph(g, [i % 2 for i in range(g.num_ops)]))
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        ["y"], {"x": x, **feeds})[0]
    np.testing.assert_allclose(run_parts(parts, {"x": x, **feeds}, ["y"])["y"], want, rtol=1e-6)


def test_a_model_output_no_part_computes_is_named():
    model = _matmul_relu("dense")
    model.graph.output.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, [3, 3]))
    g = from_onnx(model)
    parts = split_onnx(g, uniform_cluster(2, kind="cpu"), Placement.single(g, 0))
    with pytest.raises(UnsupportedGraphError, match="no part computes 'W'"):
        run_parts(parts, {"x": np.zeros((2, 3), np.float32)}, ["y", "W"])


def test_nodes_whose_outputs_nobody_reads_get_no_part_of_their_own():
    """A dead node alone on a device made a part with no outputs, which onnxruntime refuses to run."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"), helper.make_node("Sigmoid", ["a"], ["dead"], name="s"),
             helper.make_node("Neg", ["a"], ["y"], name="n")]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])]), opset_imports=[helper.make_opsetid("", 13)],
        ir_version=8)  # onnxruntime lags onnx
    graph, cluster = from_onnx(model), uniform_cluster(2, kind="cpu")
    placement = Placement.from_names(graph, cluster, {"x": "/CPU:0", "r": "/CPU:0", "n": "/CPU:0", "s": "/CPU:1"})
    parts = split_onnx(graph, cluster, placement)
    assert [part.device for part in parts] == ["/CPU:0"]
    np.testing.assert_array_equal(run_parts(parts, {"x": X})["y"], -np.maximum(X, 0))


def test_parts_keep_the_models_producer_and_metadata():
    """The graph's own doc_string and metadata_props (IR 10) were dropped from the parts."""
    model = _model()
    model.producer_name, model.doc_string = "exporter", "the tiny model"
    helper.set_model_props(model, {"author": "gplace tests"})
    model.graph.doc_string = "the tiny graph"
    model.graph.metadata_props.add(key="stage", value="forward")
    graph, cluster = from_onnx(model), uniform_cluster(2, kind="cpu")
    for part in split_onnx(graph, cluster, Placement.from_names(graph, cluster, ACYCLIC)):
        assert (part.model.producer_name, part.model.doc_string) == ("exporter", "the tiny model")
        assert {p.key: p.value for p in part.model.metadata_props} == {"author": "gplace tests"}
        assert part.model.graph.doc_string == "the tiny graph"
        assert {p.key: p.value for p in part.model.graph.metadata_props} == {"stage": "forward"}


def _cast_through(dtype: int, *, opset: int = 21) -> onnx.ModelProto:
    """y = Cast(Cast(x, dtype), x's type): ``xb``, of ``dtype``, is the tensor a placement may cut."""
    nodes = [helper.make_node("Cast", ["x"], ["xb"], to=dtype, name="down"),
             helper.make_node("Cast", ["xb"], ["y"], to=TensorProto.FLOAT, name="up")]
    graph = helper.make_graph(nodes, "cast", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


@pytest.mark.parametrize("dtype, name", [(TensorProto.BFLOAT16, "bfloat16"), (TensorProto.FLOAT8E4M3FN, "float8e4m3fn"),
                                         (TensorProto.FLOAT16, "float16")], ids=["bfloat16", "float8", "float16"])
def test_a_tensor_of_a_type_numpy_lacks_crosses_devices(dtype, name):
    """A cut bfloat16 or float8 tensor passes between parts as an OrtValue: the parts give the whole model's
    output, and the cut tensor itself comes back as an OrtValue of its type (a numpy array where numpy has it)."""
    model = _cast_through(dtype)
    graph, cluster = from_onnx(model), uniform_cluster(2, kind="cpu")
    parts = split_onnx(graph, cluster, Placement.from_names(graph, cluster, {"x": "/CPU:0", "down": "/CPU:0",
                                                                              "up": "/CPU:1"}))
    out = run_parts(parts, {"x": X})
    np.testing.assert_array_equal(out["y"], _whole(model, X))
    if dtype == TensorProto.FLOAT16:
        assert out["xb"].dtype == np.float16
    else:
        assert isinstance(out["xb"], ort.OrtValue) and out["xb"].data_type() == f"tensor({name})"


def test_string_tensors_fed_and_cut_pass_between_parts():
    """onnxruntime makes no OrtValue of a numpy string array: a part fed one still runs, and a string tensor a
    part computes (an OrtValue) feeds the next and comes back as a numpy array."""
    value = helper.make_tensor_value_info
    nodes = [helper.make_node("Identity", ["s"], ["t"], name="a"), helper.make_node("Identity", ["t"], ["u"], name="b"),
             helper.make_node("Cast", ["x"], ["xs"], to=TensorProto.STRING, name="c"),
             helper.make_node("Identity", ["xs"], ["v"], name="d")]
    model = helper.make_model(helper.make_graph(
        nodes, "str", [value("s", TensorProto.STRING, [2]), value("x", TensorProto.FLOAT, [2])],
        [value("u", TensorProto.STRING, [2]), value("v", TensorProto.STRING, [2])]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)  # onnxruntime lags onnx
    graph, cluster = from_onnx(model), uniform_cluster(2, kind="cpu")
    placement = Placement.from_names(graph, cluster, {"s": "/CPU:0", "a": "/CPU:0", "b": "/CPU:1", "x": "/CPU:1",
                                                      "c": "/CPU:1", "d": "/CPU:0"})
    feeds = {"s": np.array(["a", "bc"], dtype=object), "x": np.array([1.5, -2.0], np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(["u", "v"], feeds)
    out = run_parts(split_onnx(graph, cluster, placement), feeds)
    assert out["u"].tolist() == want[0].tolist() and out["v"].tolist() == want[1].tolist()
    assert out["xs"].tolist() == want[1].tolist()


def test_parts_of_a_model_placed_before_carry_their_own_devices(imported):
    """A placed model fed back in and placed otherwise: its parts' nodes kept the earlier placement's device labels
    and configuration (every node said /CPU:0 in the part for /CPU:1), and named a configuration the part lacked."""
    graph, cluster = imported
    everywhere0 = Placement.from_names(graph, cluster, {op: "/CPU:0" for op in graph.op_names})
    again = from_onnx(annotate_onnx(graph, cluster, everywhere0))
    for part in split_onnx(again, cluster, Placement.from_names(again, cluster, ACYCLIC)):
        assert [c.name for c in part.model.configuration] == [cluster.name]
        for node in part.model.graph.node:
            meta = {p.key: p.value for p in node.metadata_props}
            assert meta[DEVICE_KEY] == part.device == ACYCLIC[node.name]
            assert [list(s.device) for dc in node.device_configurations for s in dc.sharding_spec] == \
                [[cluster.device_names.index(part.device)]]


def test_a_parts_value_info_follows_its_nodes_order(imported):
    """The inner tensors of a part were listed in a set's order, so the part's file changed with PYTHONHASHSEED."""
    graph, cluster = imported
    [part] = split_onnx(graph, cluster, Placement.from_names(graph, cluster, {op: "/CPU:0" for op in graph.op_names}))
    assert [v.name for v in part.model.graph.value_info] == ["a", "b", "c", "d", "e"]
