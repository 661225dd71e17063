"""Writes the bad-input corpus next to this file: ``python tests/corpus/make_corpus.py`` (the files are committed).

Every file is a small graph, cluster, placement or policy file that gplace must refuse with its own typed error
naming what is wrong (see ``tests/reliability/test_corpus.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent

GOOD_OPS = [{"name": "a", "type": "MatMul", "cost": 0.001, "output_bytes": 1000},
            {"name": "b", "type": "Relu", "cost": 0.002, "output_bytes": 1000}]


def graph(ops=None, edges=None, **extra) -> dict:
    doc = {"format": "gplace.graph", "version": 1, "name": "corpus", "ops": ops or GOOD_OPS,
           "edges": [{"src": "a", "dst": "b"}] if edges is None else edges}
    return {**doc, **extra}


def op(**fields) -> list[dict]:
    return [{**GOOD_OPS[0], **fields}, GOOD_OPS[1]]


GRAPHS = {
    "huge_persistent_memory": graph(op(persistent_memory=1e30)),
    "huge_output_bytes": graph(op(output_bytes=10**30)),
    "negative_temporary_memory": graph(op(temporary_memory=-5)),
    "fractional_bytes": graph(op(output_bytes=1.5)),
    "nan_cost": graph(op(cost=float("nan"))),
    "infinite_cost": graph(op(cost=float("inf"))),
    "negative_cost": graph(op(cost=-1.0)),
    "string_cost": graph(op(cost="fast")),
    "infinite_kind_cost": graph(op(kind_cost={"gpu": float("inf")})),
    "kind_cost_not_a_map": graph(op(kind_cost=[1.0])),
    "numeric_colocation": graph(op(colocation=5)),
    "list_pinned": graph(op(pinned=["gpu"])),
    "huge_shape": graph(op(output_shapes=[[1e30]])),
    "shape_not_a_list": graph(op(output_shapes=5)),
    "unknown_field": graph(op(flops=3)),
    "numeric_name": graph([{"name": 5, "type": "X", "cost": 1.0}], []),
    "null_type": graph(op(type=None)),
    "no_cost": graph(op(cost=None)),
    "cycle": graph(edges=[{"src": "a", "dst": "b"}, {"src": "b", "dst": "a"}]),
    "self_loop": graph(edges=[{"src": "a", "dst": "a"}]),
    "edge_to_missing_op": graph(edges=[{"src": "a", "dst": "ghost"}]),
    "huge_edge_bytes": graph(edges=[{"src": "a", "dst": "b", "bytes": 1e30}]),
    "duplicate_names": graph([GOOD_OPS[0], GOOD_OPS[0]], []),
    "ops_not_a_list": graph(ops={"a": 1}),
    "version_99": graph(version=99),
    "wrong_format": {**graph(), "format": "gplace.cluster"},
}

CLUSTER = {"format": "gplace.cluster", "version": 1, "name": "corpus",
           "devices": [{"name": "/CPU:0", "kind": "cpu", "speed": 1.0, "memory": 10**9},
                       {"name": "/GPU:0", "kind": "gpu", "speed": 4.0, "memory": 10**9}],
           "links": [{"a": "/CPU:0", "b": "/GPU:0", "bandwidth": 1e9, "latency": 1e-5}]}


def cluster(device: dict | None = None, link: dict | None = None, **extra) -> dict:
    doc = json.loads(json.dumps(CLUSTER))
    doc["devices"][0].update(device or {})
    doc["links"][0].update(link or {})
    return {**doc, **extra}


CLUSTERS = {
    "huge_memory": cluster({"memory": 1e30}),
    "zero_memory": cluster({"memory": 0}),
    "infinite_speed": cluster({"speed": float("inf")}),
    "zero_speed": cluster({"speed": 0}),
    "nan_bandwidth": cluster(link={"bandwidth": float("nan")}),
    "negative_bandwidth": cluster(link={"bandwidth": -1.0}),
    "infinite_latency": cluster(link={"latency": float("inf")}),
    "numeric_kind": cluster({"kind": 5}),
    "duplicate_device": cluster({"name": "/GPU:0"}),
    "link_to_unknown_device": cluster(link={"a": "/TPU:0"}),
    "no_devices": {**CLUSTER, "devices": [], "links": []},
    "default_link_not_an_object": cluster(default_link=[1e9]),
    "default_link_not_a_number": cluster(default_link={"bandwidth": "fast"}),
}

RAW = {
    "empty.json": b"",
    "truncated.json": json.dumps(graph()).encode()[:40],
    "not_utf8.json": b"\xff\xfe\x00\x01 not text",
    "a_list.json": b"[1, 2, 3]",
    "empty.onnx": b"",
    "garbage.onnx": b"garbage\x00\x01\x02",
    "not_a_model.onnx": b"\x08\x01\x12\x05hello",
    "empty.pb": b"",
    "garbage.pb": b"\x08\x01garbage\xff",
    "truncated.pbtxt": b'node {\n  name: "a"\n  op: ',
    "garbage.pt": b"not a torch file",
}


def truncated_onnx() -> bytes:
    """The first half of a valid two-node ONNX model."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"), helper.make_node("Neg", ["h"], ["y"], name="neg")]
    data = helper.make_model(helper.make_graph(nodes, "g", [x], [y])).SerializeToString()
    return data[: len(data) // 2]


def main() -> None:
    for folder, docs in (("graphs", GRAPHS), ("clusters", CLUSTERS)):
        (HERE / folder).mkdir(exist_ok=True)
        for name, doc in docs.items():
            (HERE / folder / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    (HERE / "raw").mkdir(exist_ok=True)
    for name, data in {**RAW, "truncated.onnx": truncated_onnx()}.items():
        (HERE / "raw" / name).write_bytes(data)


if __name__ == "__main__":
    main()
