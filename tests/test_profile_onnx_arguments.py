"""profile_onnx names a bad seed (numpy's "expected non-negative integer" / "SeedSequence expects int" named
none) and refuses a missing model file with the ProfileError its docstring promises, naming the file (it was a
FileNotFoundError)."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def relu_graph():
    from onnx import TensorProto, helper

    from gplace import from_onnx

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    return from_onnx(model)


@pytest.mark.onnx
@pytest.mark.parametrize("seed", [-1, 1.5, "0", None, True])
def test_bad_seed_is_named(relu_graph, seed):
    from gplace import profile_onnx

    with pytest.raises(ValueError, match="seed"):
        profile_onnx(relu_graph, repeats=1, warmup=0, seed=seed)


@pytest.mark.onnx
def test_missing_model_file_is_a_profile_error_naming_it(relu_graph, tmp_path):
    from gplace.profiling import ProfileError, profile_onnx

    missing = tmp_path / "nope.onnx"
    with pytest.raises(ProfileError, match="nope.onnx.*cannot be read"):
        profile_onnx(relu_graph, missing, repeats=1, warmup=0)


@pytest.mark.onnx
def test_good_seed_profiles(relu_graph):
    from gplace import profile_onnx

    assert "cpu" in profile_onnx(relu_graph, repeats=1, warmup=0, seed=3).kind_cost
