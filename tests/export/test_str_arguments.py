"""A str where names are taken, and arguments of the wrong type, in run_parts and save_saved_model (found by a
type probe): outputs="logits" was split into letters and tags="serve" written as five tags; a generator of
outputs gave {}; feeds as a list and signature=None failed inside dict() and TensorFlow."""

from __future__ import annotations

import numpy as np
import pytest
from write_back_cases import one_line, onnx_case, tf_case

from gplace.testing import uniform_cluster


@pytest.fixture(scope="module")
def onnx_chain():
    return onnx_case()


@pytest.fixture(scope="module")
def parts(onnx_chain):
    from gplace.export.onnx import split_onnx

    g, placement, _ = onnx_chain
    out = split_onnx(g, uniform_cluster(2, kind="cpu"), placement)
    assert len(out) == 2
    return out


@pytest.mark.parametrize("outputs", [pytest.param(lambda: (o for o in ["logits"]), id="generator"),
                                     pytest.param(lambda: "logits", id="str"),
                                     pytest.param(lambda: ("logits",), id="tuple")])
def test_run_parts_reads_outputs_as_the_names_given(onnx_chain, parts, outputs):
    from gplace.export.onnx import run_parts

    _, _, x = onnx_chain
    want = run_parts(parts, {"x": x}, outputs=["logits"])
    got = run_parts(parts, {"x": x}, outputs=outputs())
    assert list(got) == ["logits"]
    np.testing.assert_array_equal(got["logits"], want["logits"])


def test_run_parts_refuses_an_output_name_that_is_no_str(onnx_chain, parts):
    from gplace.export.onnx import run_parts

    _, _, x = onnx_chain
    with pytest.raises(TypeError, match=r"^run_parts: outputs\[0\] must be a name \(str\), got a int 0") as err:
        run_parts(parts, {"x": x}, outputs=[0])
    one_line(err)


@pytest.mark.parametrize("feeds", [pytest.param(lambda x: [x], id="list"), pytest.param(lambda x: x, id="array"),
                                   pytest.param(lambda x: None, id="None")])
def test_run_parts_refuses_feeds_that_are_no_mapping_naming_feeds(onnx_chain, parts, feeds):
    from gplace.export.onnx import run_parts

    _, _, x = onnx_chain
    with pytest.raises(TypeError, match=r"^run_parts: feeds must map the model's input names to arrays") as err:
        run_parts(parts, feeds(x), outputs=["logits"])
    one_line(err)


@pytest.fixture(scope="module")
def tf_function():
    return tf_case()


@pytest.mark.tf
def test_save_saved_model_takes_a_str_as_one_tag(tf_function, tmp_path):
    from gplace.export.tensorflow import save_saved_model

    tf, graph, cluster, placement = tf_function
    out = save_saved_model(graph, cluster, placement, tmp_path / "sm", tags="serve")
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], str(out))
    assert list(meta.meta_info_def.tags) == ["serve"]


@pytest.mark.tf
@pytest.mark.parametrize("kwargs, error", [({"signature": None}, TypeError), ({"signature": ""}, ValueError),
                                           ({"tags": [1]}, TypeError), ({"tags": None}, TypeError)])
def test_save_saved_model_refuses_a_bad_signature_or_tags_before_writing(tf_function, tmp_path, kwargs, error):
    """signature=None raised TF's 'bad argument type for built-in operation' after creating export_dir."""
    from gplace.export.tensorflow import save_saved_model

    _, graph, cluster, placement = tf_function
    with pytest.raises(error, match=rf"^save_saved_model: {next(iter(kwargs))}(\[0\])? must be ") as err:
        save_saved_model(graph, cluster, placement, tmp_path / "sm", **kwargs)
    one_line(err)
    assert not (tmp_path / "sm").exists()
