"""from_onnx takes its path as any os.PathLike, as a str or pathlib.Path."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace.importers.onnx import from_onnx  # noqa: E402

pytestmark = pytest.mark.onnx


class _PathLike:
    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    def __fspath__(self) -> str:
        return str(self.path)


@pytest.fixture
def model_file(tmp_path):
    """``x (2, 4) -> MatMul(W) -> Relu -> y``, saved as ``tmp_path / "tiny.onnx"``."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"])]
    weight = numpy_helper.from_array(np.ones((4, 4), np.float32), "W")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[weight])
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("as_path", [_PathLike, pathlib.PurePosixPath], ids=["__fspath__", "PurePosixPath"])
def test_a_path_may_be_any_os_pathlike(model_file, as_path):
    graph = from_onnx(as_path(model_file))
    assert graph.name == "tiny" and graph.source.base_dir == str(model_file.parent.resolve())
    assert graph.op_types == from_onnx(model_file).op_types


def test_a_missing_os_pathlike_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no ONNX file at .*nope.onnx"):
        from_onnx(_PathLike(tmp_path / "nope.onnx"))
