"""``write_back`` of an ONNX model on devices with long names: each part's file name is cut to fit, with a hash."""

from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import Placement, from_onnx  # noqa: E402
from gplace.export import write_back  # noqa: E402
from gplace.ir import Cluster, Device  # noqa: E402


def _chain(path):
    weights = [numpy_helper.from_array(np.eye(4, dtype=np.float32), f"W{i}") for i in range(2)]
    nodes = [helper.make_node("MatMul", ["x", "W0"], ["a"], name="first"),
             helper.make_node("MatMul", ["a", "W1"], ["y"], name="second")]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], initializer=weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def _cluster(names):
    return Cluster.build([Device(name, "cpu") for name in names], default_bandwidth=1e9, name="c")


def test_devices_with_300_character_names_write_every_part(tmp_path):
    """A 300-character device name made a part's file name past the file system's 255 bytes: ``OSError: [Errno 36]``
    after placement.json and placed.onnx were written, and parts/ left empty."""
    graph = from_onnx(_chain(tmp_path / "m.onnx"))
    names = ["E" * 300, "/job:w/D" + "D" * 292]
    cluster = _cluster(names)
    written = write_back(graph, cluster, Placement.for_graph(graph, [k % 2 for k in range(graph.num_ops)]),
                         tmp_path / "out")
    parts = sorted((tmp_path / "out" / "parts").glob("*.onnx"))
    assert len(parts) == 2 and set(parts) <= set(written)
    assert all(len(p.name.encode()) <= 255 and re.search(r"-[0-9a-f]{12}\.onnx$", p.name) for p in parts)
    assert sorted(p.name[4:14] for p in parts) == ["EEEEEEEEEE", "job_w_DDDD"]
    for part in parts:
        onnx.checker.check_model(onnx.load(part))


def test_short_device_names_keep_their_part_file_names(tmp_path):
    graph = from_onnx(_chain(tmp_path / "m.onnx"))
    cluster = _cluster(["/CPU:0", "/GPU:1"])
    write_back(graph, cluster, Placement.for_graph(graph, [k % 2 for k in range(graph.num_ops)]), tmp_path / "out")
    assert sorted(p.name[4:] for p in (tmp_path / "out" / "parts").iterdir()) == ["CPU_0.onnx", "GPU_1.onnx"]
