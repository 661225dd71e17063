"""Tests for the PipeDream, DOPPLER and GiPH importers and the content-dispatching loaders.

The real files live in ``shared/graphs`` beside the repository; tests that need them skip when it is absent.
Malformed files are written to ``tmp_path``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from gplace.importers import (
    detect_graph_format,
    load_cluster,
    load_doppler,
    load_giph_graph,
    load_giph_network,
    load_graph,
    load_pipedream,
    pipedream_stage_ids,
)
from gplace.ir import (
    Cluster,
    GraphError,
    OpGraph,
    UnsupportedGraphError,
    cluster_to_dict,
    graph_from_dict,
    graph_to_dict,
    save_json,
)
from gplace.testing import uniform_cluster

GRAPHS = Path(__file__).resolve().parents[2] / ".." / "shared" / "graphs"
needs_data = pytest.mark.skipif(
    not GRAPHS.is_dir(), reason=f"shared graph data not found at {GRAPHS} (clone shared/ beside the repository)"
)

# (ops, edges) per file. PipeDream's README sizes count the Input node(s), which the importer keeps.
PIPEDREAM = {
    "profiles/alexnet/graph.txt": (23, 23),
    "profiles/vgg16/graph.txt": (41, 41),
    "profiles/resnet18/graph.txt": (71, 79),
    "profiles/squeezenet1_0/graph.txt": (68, 76),
    "profiles/resnet50/graph.txt": (177, 193),
    "profiles/inception_v3/graph.txt": (326, 362),
    "profiles/gnmt/graph.txt": (48, 58),
    "test_graphs/resnet50_partitioned.txt": (177, 193),
    "test_graphs/vgg16_partitioned.txt": (41, 41),
}
# DOPPLER: input nodes dropped, so these are the README's id counts minus the inputs.
DOPPLER = {
    "8gpu_full_transformer.txt": (367, 470),
    "8gpu_transformer_block.txt": (302, 398),
    "chain_mm_112nodes.txt": (76, 80),
    "gdp_chain_mm_112nodes.txt": (76, 80),
    "ffnn_192nodes.txt": (180, 208),
    "gdp_ffnn_192nodes.txt": (180, 208),
    "full_transformer_layer_261nodes.txt": (229, 284),
    "gdp_full_transformer_layer_261nodes.txt": (229, 284),
    "transformer_block_215nodes.txt": (182, 234),
    "gdp_transformer_block_215nodes.txt": (182, 234),
}
GIPH_NETWORK = "giph/device_network_20.json"
GIPH_SAMPLE = "giph/task_graphs/v_100_alpha_0.5_seed_0_ccr_0.1_beta_0.25_comm_1000.json"


def _giph_files() -> list[Path]:
    return sorted((GRAPHS / "giph" / "task_graphs").glob("*.json"))


def _assert_sane(graph: OpGraph) -> None:
    """Every op has a finite cost >= 0 (generic or per kind), bytes are >= 0, and the graph is acyclic."""
    costs = np.column_stack([graph.compute_cost, *graph.kind_cost.values()])
    known = ~np.isnan(costs)
    assert known.any(axis=1).all(), "an op has no cost"
    assert np.isfinite(costs[known]).all() and (costs[known] >= 0).all()
    assert (graph.output_bytes >= 0).all() and (graph.edge_bytes >= 0).all()
    assert sorted(graph.topological_order.tolist()) == list(range(graph.num_ops))


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _raises_at(path: Path, where: str):
    """Expect a GraphError whose message starts with the file and ``where`` (``:3`` or ``: nodes[1]``)."""
    return pytest.raises(GraphError, match="^" + re.escape(f"{path}{where}:"))


# ---------------------------------------------------------------------- every real file imports
@needs_data
@pytest.mark.parametrize("rel", sorted(PIPEDREAM))
def test_pipedream_file_imports_with_known_size(rel: str) -> None:
    """Each PipeDream file gives its README node count (Input included), GPU-only costs and Input cost 0."""
    graph = load_pipedream(GRAPHS / "pipedream" / rel)
    assert (graph.num_ops, graph.num_edges) == PIPEDREAM[rel]
    _assert_sane(graph)
    assert set(graph.kind_cost) == {"gpu"} and np.isnan(graph.compute_cost).all()
    inputs = [i for i, t in enumerate(graph.op_types) if t == "Input"]
    assert len(inputs) == (3 if "gnmt" in rel else 1)
    assert all(graph.kind_cost["gpu"][i] == 0.0 for i in inputs)


@needs_data
@pytest.mark.parametrize("rel", sorted(DOPPLER))
def test_doppler_file_imports_with_known_size(rel: str) -> None:
    """Each DOPPLER file gives ids - inputs ops; gdp_ files carry op types, the others type "Op"."""
    graph = load_doppler(GRAPHS / "doppler" / rel)
    assert (graph.num_ops, graph.num_edges) == DOPPLER[rel]
    _assert_sane(graph)
    assert not graph.kind_cost and (graph.compute_cost > 0).all()
    assert ("Op" in graph.op_types) != rel.startswith("gdp_")


@needs_data
def test_all_giph_task_graphs_import() -> None:
    """All 90 GiPH task graphs import, one op per node record and one edge per edge record (15-145 ops)."""
    files = _giph_files()
    assert len(files) == 90
    sizes = []
    for path in files:
        doc = json.loads(path.read_text())
        graph = load_giph_graph(path)
        _assert_sane(graph)
        assert graph.name == path.stem == doc["name"]
        assert (graph.num_ops, graph.num_edges) == (len(doc["nodes"]), len(doc["edges"]))
        sizes.append(graph.num_ops)
    assert (sum(sizes), min(sizes), max(sizes)) == (5826, 15, 145)


@needs_data
def test_giph_network_imports() -> None:
    """The 20-device network: speeds as given, latency = delay, bandwidth = 1 / comm_speed, symmetric."""
    doc = json.loads((GRAPHS / GIPH_NETWORK).read_text())
    cluster = load_giph_network(GRAPHS / GIPH_NETWORK)
    assert cluster.num_devices == 20 and cluster.device_names[:2] == ("dev0", "dev1")
    assert set(cluster.kinds) == {"gpu"}
    np.testing.assert_array_equal(cluster.speeds, doc["speed"])
    np.testing.assert_array_equal(cluster.latency, doc["delay"])
    off = ~np.eye(20, dtype=bool)
    np.testing.assert_allclose(cluster.bandwidth[off], 1.0 / np.array(doc["comm_speed"])[off], rtol=1e-12)
    # the file's raw bw agrees with comm_speed through its lower triangle
    low = np.tril(np.array(doc["bw"]), -1)
    np.testing.assert_allclose(cluster.bandwidth[off], (low + low.T)[off], rtol=1e-9)
    assert np.isinf(np.diag(cluster.bandwidth)).all()


# ---------------------------------------------------------------------- hand-checked nodes
@needs_data
def test_pipedream_alexnet_conv_and_input_hand_checked() -> None:
    """In alexnet, node2 (Conv2d 22.316 + 6.405 ms, 198246400 B out, 93184 B weights); Input cost 0, bytes kept."""
    path = GRAPHS / "pipedream" / "profiles" / "alexnet" / "graph.txt"
    graph = load_pipedream(path)
    conv, inp = graph.op_index["node2"], graph.op_index["node1"]
    assert graph.name == "alexnet" and graph.op_types[conv] == "Conv2d"
    assert graph.kind_cost["gpu"][conv] == pytest.approx(0.028721, abs=1e-12)
    assert graph.output_bytes[conv] == 198246400 and graph.persistent_memory[conv] == 93184
    assert graph.kind_cost["gpu"][inp] == 0.0 and graph.output_bytes[inp] == 154140672
    edge = next(e for e in graph.edges() if (e.src, e.dst) == ("node1", "node2"))
    assert edge.bytes == 154140672
    forward = load_pipedream(path, training=False)
    assert forward.kind_cost["gpu"][conv] == pytest.approx(0.022316, abs=1e-12)


@needs_data
def test_pipedream_multi_output_activation_is_summed() -> None:
    """In gnmt, node7 (LSTM) has activation_size [6291456; 131072; 131072]: output_bytes is the sum."""
    graph = load_pipedream(GRAPHS / "pipedream" / "profiles" / "gnmt" / "graph.txt")
    i = graph.op_index["node7"]
    assert graph.op_types[i] == "LSTM" and graph.output_bytes[i] == 6553600
    assert graph.persistent_memory[i] == 50364416
    assert graph.kind_cost["gpu"][i] == pytest.approx((3.190 + 5.348) * 1e-3, abs=1e-12)


@needs_data
def test_pipedream_stage_ids_give_reference_partition() -> None:
    """The partitioned test graphs give every node a stage: vgg16 in 3 stages, resnet50 in 4."""
    vgg = pipedream_stage_ids(GRAPHS / "pipedream" / "test_graphs" / "vgg16_partitioned.txt")
    resnet = pipedream_stage_ids(GRAPHS / "pipedream" / "test_graphs" / "resnet50_partitioned.txt")
    assert len(vgg) == 41 and sorted(set(vgg.values())) == [0, 1, 2] and vgg["node1"] == 0
    assert len(resnet) == 177 and sorted(set(resnet.values())) == [0, 1, 2, 3]
    assert pipedream_stage_ids(GRAPHS / "pipedream" / "profiles" / "vgg16" / "graph.txt") == {}


@needs_data
def test_doppler_node_hand_checked() -> None:
    """gdp_full_transformer_layer node 2 is '262144,1048576,select' (line 7): cost, type and edge bytes."""
    path = GRAPHS / "doppler" / "gdp_full_transformer_layer_261nodes.txt"
    graph = load_doppler(path)
    i = graph.op_index["n2"]
    assert graph.op_types[i] == "select" and graph.compute_cost[i] == 262144 / 1e12
    assert graph.output_bytes[i] == 1048576
    assert {e.bytes for e in graph.edges() if e.src == "n2"} == {1048576}
    assert load_doppler(path, flops_per_second=1.0).compute_cost[i] == 262144.0


@needs_data
def test_giph_node_hand_checked() -> None:
    """GiPH node 0 of the v_100 sample: compute 57876.707..., type0, out-edges 8 with rounded bytes."""
    graph = load_giph_graph(GRAPHS / GIPH_SAMPLE)
    i = graph.op_index["n0"]
    assert graph.op_types[i] == "type0" and graph.compute_cost[i] == 57876.70729416392
    out = {e.dst: e.bytes for e in graph.edges() if e.src == "n0"}
    assert len(out) == 8 and out["n1"] == 29931 and out["n2"] == 10321
    assert graph.output_bytes[i] == sum(out.values()) == 282303


@needs_data
def test_giph_network_pair_hand_checked() -> None:
    """dev0-dev1: delay 17.622..., comm_speed 0.0121996... s/B; dev1 speed 3.766..."""
    cluster = load_giph_network(GRAPHS / GIPH_NETWORK)
    assert cluster.devices[1].speed == 3.7664085371717064
    assert cluster.latency[0, 1] == cluster.latency[1, 0] == 17.62206394222323
    assert cluster.bandwidth[0, 1] == cluster.bandwidth[1, 0] == 1.0 / 0.01219966338245527
    assert cluster.transfer_time(1000.0, 0, 1) == pytest.approx(17.62206394222323 + 1000 * 0.01219966338245527)


# ---------------------------------------------------------------------- small hand-written files
PD_OK = (
    "node1 -- Input -- forward_compute_time=5.000, backward_compute_time=0.000, activation_size=100.000, "
    "parameter_size=0.000\n"
    "node2 -- Conv2d(3, 8) -- forward_compute_time=1.500, backward_compute_time=2.500, "
    "activation_size=[10.0; 20.0], parameter_size=64.000 -- stage_id=1\n"
    "\tnode1 -- node2\n"
)
DOPPLER_OK = "4\n0\n0, 1,\n1, 2\n5,20,einsummable\n7,28\n3,12\n"


def test_pipedream_small_file_golden(tmp_path: Path) -> None:
    """A two-node file: Input cost 0, Conv cost 4 ms (1.5 ms forward only), list bytes summed, edge bytes."""
    path = _write(tmp_path, "tiny.txt", PD_OK)
    graph = load_pipedream(path)
    assert graph.name == "tiny" and graph.op_types == ("Input", "Conv2d")
    np.testing.assert_allclose(graph.kind_cost["gpu"], [0.0, 0.004], atol=1e-15)
    assert graph.output_bytes.tolist() == [100, 30] and graph.persistent_memory.tolist() == [0, 64]
    assert graph.edge_bytes.tolist() == [100]
    assert load_pipedream(path, training=False).kind_cost["gpu"][1] == pytest.approx(0.0015, abs=1e-15)
    assert pipedream_stage_ids(path) == {"node2": 1}


def test_doppler_small_file_golden(tmp_path: Path) -> None:
    """Ids 4 with input 0 gives 3 ops n0..n2; edges index those ops; bytes are the source's comm_cost."""
    graph = load_doppler(_write(tmp_path, "tiny.txt", DOPPLER_OK), flops_per_second=1.0)
    assert graph.op_names == ("n0", "n1", "n2") and graph.op_types == ("einsummable", "Op", "Op")
    assert graph.compute_cost.tolist() == [5.0, 7.0, 3.0] and graph.output_bytes.tolist() == [20, 28, 12]
    assert graph.edge_index.tolist() == [[0, 1], [1, 2]] and graph.edge_bytes.tolist() == [20, 28]


def test_a_repeated_edge_is_one_edge_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A profile listing an edge twice names one tensor: one edge (its bytes sent once), and a WARNING says where."""
    pipedream = load_pipedream(_write(tmp_path, "pd.txt", PD_OK + "\tnode1 -- node2\n"), phases=True)
    assert pipedream.num_edges == load_pipedream(_write(tmp_path, "pd1.txt", PD_OK), phases=True).num_edges
    assert "line 4 repeats line 3" in caplog.text
    doppler = load_doppler(_write(tmp_path, "dp.txt", "4\n0\n0, 1, 0\n1, 2, 1\n5,20\n7,28\n3,12\n"))
    assert doppler.edge_index.tolist() == [[0, 1], [1, 2]] and doppler.edge_bytes.tolist() == [20, 28]
    assert "position 2 of lines 3-4 repeats position 0" in caplog.text


PD_BAD = [
    ("bad number", PD_OK.replace("forward_compute_time=1.500", "forward_compute_time=abc"), 2),
    ("nan time", PD_OK.replace("forward_compute_time=1.500", "forward_compute_time=nan"), 2),
    ("negative time", PD_OK.replace("backward_compute_time=2.500", "backward_compute_time=-2.5"), 2),
    ("missing key", PD_OK.replace(", parameter_size=0.000", ""), 1),
    ("unknown key", PD_OK.replace("parameter_size=0.000", "params=0.000"), 1),
    ("bad list item", PD_OK.replace("[10.0; 20.0]", "[10.0; x]"), 2),
    ("bad stage", PD_OK.replace("stage_id=1", "stage_id=one"), 2),
    ("no separators", "node1 Input forward_compute_time=1\n", 1),
    ("duplicate node", PD_OK.replace("node2 -- Conv2d", "node1 -- Conv2d"), 2),
    ("edge with 3 ends", PD_OK + "\tnode1 -- node2 -- node3\n", 4),
    ("edge to undefined node", PD_OK + "\n\tnode2 -- node9\n", 5),
    ("activations adding up past a float", PD_OK.replace("[10.0; 20.0]", "[1e308; 1e308]"), 2),  # OverflowError
    ("line after a form feed", PD_OK.replace("5.000,", "5.000\f,", 1).replace("2.500", "x"), 2),  # said :3
    ("time with an underscore", PD_OK.replace("1.500", "1_5"), 2),  # read as 15 ms
    ("time in other digits", PD_OK.replace("1.500", "\uff11.5"), 2),
]


@pytest.mark.parametrize(("case", "text", "line"), PD_BAD, ids=[c[0] for c in PD_BAD])
def test_pipedream_malformed_line_is_named(tmp_path: Path, case: str, text: str, line: int) -> None:
    """A malformed PipeDream line raises GraphError starting '<file>:<line>:'."""
    path = _write(tmp_path, "graph.txt", text)
    with _raises_at(path, f":{line}"):
        load_pipedream(path)


DOPPLER_BAD = [
    ("count not an int", DOPPLER_OK.replace("4\n", "four\n", 1), 1),
    ("bad input id", DOPPLER_OK.replace("\n0\n", "\n0, a\n", 1), 2),
    ("input id out of range", DOPPLER_OK.replace("\n0\n", "\n9\n", 1), 2),
    ("duplicate input id", "5\n0, 0\n0\n1\n1,1\n1,1\n1,1\n", 2),
    ("negative source", DOPPLER_OK.replace("0, 1,\n", "0, -1\n"), 3),
    ("one destination short", DOPPLER_OK.replace("1, 2\n", "1\n"), 4),
    ("endpoint out of range", DOPPLER_OK.replace("1, 2\n", "1, 3\n"), 4),
    ("one cost field", DOPPLER_OK.replace("7,28\n", "7\n"), 6),
    ("float cost", DOPPLER_OK.replace("7,28\n", "7.5,28\n"), 6),
    ("bad op type", DOPPLER_OK.replace("5,20,einsummable", "5,20,ein sum"), 5),
    ("missing node line", DOPPLER_OK.replace("3,12\n", ""), 7),
    ("extra line", DOPPLER_OK + "\n1,1\n", 9),
    ("truncated header", "4\n0\n", 3),
    ("an id count past Python's digit limit", "4" + "0" * 5000 + "\n0\n0\n1\n1,1\n", 1),  # a bare ValueError
    ("an edge id past Python's digit limit", DOPPLER_OK.replace("0, 1,\n", "0, " + "1" * 5000 + "\n"), 3),
    ("a cost past Python's digit limit", DOPPLER_OK.replace("7,28\n", "7," + "2" * 5000 + "\n"), 6),
]


@pytest.mark.parametrize(("case", "text", "line"), DOPPLER_BAD, ids=[c[0] for c in DOPPLER_BAD])
def test_doppler_malformed_line_is_named(tmp_path: Path, case: str, text: str, line: int) -> None:
    """A malformed DOPPLER line raises GraphError starting '<file>:<line>:'."""
    path = _write(tmp_path, "g.txt", text)
    with _raises_at(path, f":{line}"):
        load_doppler(path)



def test_a_line_separator_inside_a_layer_description_keeps_the_line_whole(tmp_path: Path) -> None:
    """str.splitlines split node2's line at U+2028 in its description, and the file was refused."""
    path = _write(tmp_path, "graph.txt", PD_OK.replace("Conv2d(3, 8)", "Conv2d(3,\u2028 8)"))
    assert load_pipedream(path).num_ops == 2


@pytest.mark.parametrize("loader", [load_graph, load_giph_graph])
def test_a_json_number_past_pythons_digit_limit_names_the_file(tmp_path: Path, loader) -> None:
    """A bare ValueError ('Exceeds the limit (4300 digits)') named neither the file nor gplace."""
    path = _write(tmp_path, "g.json", json.dumps(GIPH_OK).replace("99.6", "9" * 5000))
    with pytest.raises((GraphError, UnsupportedGraphError), match=re.escape(str(path)) + ".*more than 4300 digits"):
        loader(path)


def test_a_giph_integer_too_large_for_a_float_names_its_record(tmp_path: Path) -> None:
    """A 400-digit compute raised a bare OverflowError ('int too large to convert to float')."""
    path = _write(tmp_path, "g.json", json.dumps(GIPH_OK).replace("10.0", "9" * 400))
    with _raises_at(path, ": nodes[0]"):
        load_giph_graph(path)


def test_doppler_comp_cost_too_large_for_a_float_names_its_line(tmp_path: Path) -> None:
    """Before, a 400-digit comp_cost raised a raw OverflowError ('int too large to convert to float')."""
    path = _write(tmp_path, "g.txt", DOPPLER_OK.replace("7,28\n", "9" * 400 + ",28\n"))
    with _raises_at(path, ":6"):
        load_doppler(path)

GIPH_OK = {
    "name": "tiny",
    "nodes": [{"id": 0, "compute": 10.0, "allowed_device_types": [1]},
              {"id": 1, "compute": 4.0, "allowed_device_types": [0, 2]}],
    "edges": [{"src": 0, "dst": 1, "bytes": 99.6}],
}


def _giph_variant(**changes: object) -> dict:
    doc = json.loads(json.dumps(GIPH_OK))
    for key, value in changes.items():
        kind, index, field = key.split("__")
        doc[kind][int(index)][field] = value
    return doc


GIPH_BAD = [
    ("missing compute", _giph_variant(nodes__1__compute=None), "nodes[1]"),
    ("negative compute", _giph_variant(nodes__0__compute=-1.0), "nodes[0]"),
    ("duplicate id", _giph_variant(nodes__1__id=0), "nodes[1]"),
    ("bad types", _giph_variant(nodes__0__allowed_device_types="gpu"), "nodes[0]"),
    ("unknown dst", _giph_variant(edges__0__dst=7), "edges[0]"),
    ("string bytes", _giph_variant(edges__0__bytes="many"), "edges[0]"),
]


def test_giph_small_file_golden(tmp_path: Path) -> None:
    """Costs are compute, types 'type1' / 'type0+2', bytes rounded, output_bytes summed over out-edges."""
    graph = load_giph_graph(_write(tmp_path, "g.json", json.dumps(GIPH_OK)))
    assert graph.name == "tiny" and graph.op_types == ("type1", "type0+2")
    assert graph.compute_cost.tolist() == [10.0, 4.0]
    assert graph.edge_bytes.tolist() == [100] and graph.output_bytes.tolist() == [100, 0]


@pytest.mark.parametrize(("case", "doc", "where"), GIPH_BAD, ids=[c[0] for c in GIPH_BAD])
def test_giph_malformed_record_is_named(tmp_path: Path, case: str, doc: dict, where: str) -> None:
    """A malformed GiPH record raises GraphError starting '<file>: <record>:'."""
    path = _write(tmp_path, "g.json", json.dumps(doc))
    with _raises_at(path, f": {where}"):
        load_giph_graph(path)


def test_giph_invalid_json_names_line(tmp_path: Path) -> None:
    """Invalid JSON raises GraphError with the file and the JSON error's line."""
    path = _write(tmp_path, "g.json", '{\n "nodes": [,]\n}')
    with pytest.raises(GraphError, match="^" + re.escape(f"{path}: not valid JSON (Expecting value: line 2 column")):
        load_giph_graph(path)


def test_giph_cycle_names_file(tmp_path: Path) -> None:
    """A cycle found by the IR is re-raised with the file name in front."""
    doc = json.loads(json.dumps(GIPH_OK))
    doc["edges"].append({"src": 1, "dst": 0, "bytes": 1})
    path = _write(tmp_path, "g.json", json.dumps(doc))
    with pytest.raises(GraphError, match=re.escape(str(path)) + ".*cycle"):
        load_giph_graph(path)


NET_OK = {"speed": [1.0, 2.0], "delay": [[0, 3.0], [3.0, 0]], "comm_speed": [[0, 0.5], [0.5, 0]]}
NET_BAD = [
    ("zero speed", {**NET_OK, "speed": [1.0, 0.0]}, "speed[1]"),
    ("ragged delay", {**NET_OK, "delay": [[0, 3.0], [3.0]]}, "delay"),
    ("asymmetric", {**NET_OK, "comm_speed": [[0, 0.5], [0.25, 0]]}, "comm_speed[0][1]"),
    ("negative delay", {**NET_OK, "delay": [[0, -3.0], [-3.0, 0]]}, "delay[0][1]"),
]


def test_giph_small_network_golden(tmp_path: Path) -> None:
    """Two devices: moving 10 bytes between them takes delay 3 + 10 * 0.5 = 8; on one device 0."""
    cluster = load_giph_network(_write(tmp_path, "net.json", json.dumps(NET_OK)))
    assert cluster.device_names == ("dev0", "dev1") and cluster.speeds.tolist() == [1.0, 2.0]
    assert cluster.transfer_time(10.0, 0, 1) == 8.0 and cluster.transfer_time(10.0, 1, 1) == 0.0


@pytest.mark.parametrize(("case", "doc", "where"), NET_BAD, ids=[c[0] for c in NET_BAD])
def test_giph_network_malformed_field_is_named(tmp_path: Path, case: str, doc: dict, where: str) -> None:
    """A malformed network field raises GraphError starting '<file>: <field>:'."""
    path = _write(tmp_path, "net.json", json.dumps(doc))
    with _raises_at(path, f": {where}"):
        load_giph_network(path)


# ---------------------------------------------------------------------- dispatch and round trips
@needs_data
@pytest.mark.parametrize(
    ("rel", "fmt", "loader"),
    [("pipedream/profiles/gnmt/graph.txt", "pipedream", load_pipedream),
     ("doppler/gdp_ffnn_192nodes.txt", "doppler", load_doppler),
     ("doppler/chain_mm_112nodes.txt", "doppler", load_doppler),
     (GIPH_SAMPLE, "giph", load_giph_graph)],
)
def test_load_graph_dispatches_on_content(tmp_path: Path, rel: str, fmt: str, loader) -> None:
    """load_graph picks the format from the content, even under a misleading file name."""
    disguised = tmp_path / "graph.bin"
    disguised.write_bytes((GRAPHS / rel).read_bytes())
    assert detect_graph_format(disguised) == fmt
    assert load_graph(disguised).fingerprint == loader(GRAPHS / rel).fingerprint


@needs_data
@pytest.mark.parametrize(
    "rel", ["pipedream/profiles/alexnet/graph.txt", "pipedream/profiles/gnmt/graph.txt",
            "doppler/gdp_full_transformer_layer_261nodes.txt", GIPH_SAMPLE],
)
def test_json_round_trip_keeps_fingerprint(tmp_path: Path, rel: str) -> None:
    """graph_to_dict -> graph_from_dict, and a saved gplace JSON through load_graph, keep the fingerprint."""
    graph = load_graph(GRAPHS / rel)
    assert graph_from_dict(graph_to_dict(graph)).fingerprint == graph.fingerprint
    saved = save_json(graph_to_dict(graph), tmp_path / "g.json")
    assert detect_graph_format(saved) == "gplace"
    again = load_graph(saved)
    assert again.fingerprint == graph.fingerprint and again.name == graph.name


@needs_data
def test_load_cluster_reads_giph_and_gplace(tmp_path: Path) -> None:
    """load_cluster reads the GiPH network and its gplace JSON re-export to the same devices and links."""
    cluster = load_cluster(GRAPHS / GIPH_NETWORK)
    assert isinstance(cluster, Cluster) and cluster.num_devices == 20
    again = load_cluster(save_json(cluster_to_dict(cluster), tmp_path / "c.json"))
    assert again.devices == cluster.devices
    np.testing.assert_array_equal(again.bandwidth, cluster.bandwidth)
    np.testing.assert_array_equal(again.latency, cluster.latency)


@pytest.mark.parametrize("text", [PD_OK, DOPPLER_OK])
def test_files_starting_with_a_byte_order_mark_load(tmp_path: Path, text: str) -> None:
    """A UTF-8 byte-order mark (some editors write one) is skipped, as load_json skips it; it was 'no known layout'."""
    graph = load_graph(_write(tmp_path, "plain.txt", text))
    marked = tmp_path / "marked.txt"
    marked.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert load_graph(marked).fingerprint == graph.fingerprint
    for doc, load in ((graph_to_dict(graph), load_graph), (cluster_to_dict(uniform_cluster(2)), load_cluster)):
        path = tmp_path / "marked.json"
        path.write_bytes(b"\xef\xbb\xbf" + json.dumps(doc).encode())
        load(path)


def test_a_directory_is_named_as_one(tmp_path: Path) -> None:
    for load in (load_graph, load_cluster):
        with pytest.raises(IsADirectoryError, match="is a directory; expected a file"):
            load(tmp_path)


UNKNOWN = [
    ("prose", b"hello world\nno format here\n"),
    ("empty", b""),
    ("other json", b'{"foo": 1}'),
    ("json list", b"[1, 2]"),
    ("cluster json", json.dumps({"format": "gplace.cluster", "version": 1, "devices": []}).encode()),
    ("binary", bytes(range(256))),
]


@pytest.mark.parametrize(("case", "data"), UNKNOWN, ids=[c[0] for c in UNKNOWN])
def test_load_graph_rejects_unknown_content(tmp_path: Path, case: str, data: bytes) -> None:
    """Content of no known graph format raises UnsupportedGraphError naming the file and the formats."""
    path = tmp_path / "mystery.dat"
    path.write_bytes(data)
    with pytest.raises(UnsupportedGraphError, match=re.escape(str(path)) + ".*expected gplace JSON"):
        load_graph(path)


def test_load_cluster_rejects_unknown_content(tmp_path: Path) -> None:
    """A graph file given to load_cluster raises UnsupportedGraphError naming the file."""
    path = _write(tmp_path, "g.json", json.dumps(GIPH_OK))
    with pytest.raises(UnsupportedGraphError, match=re.escape(str(path)) + ".*expected gplace cluster JSON"):
        load_cluster(path)


def test_load_graph_wraps_gplace_json_errors(tmp_path: Path) -> None:
    """A malformed gplace graph JSON raises GraphError naming the file."""
    doc = {"format": "gplace.graph", "version": 1, "name": "g", "ops": [{"name": "a", "cost": -1.0}], "edges": []}
    path = _write(tmp_path, "g.json", json.dumps(doc))
    with pytest.raises(GraphError, match="^" + re.escape(str(path))):
        load_graph(path)


def test_doppler_rejects_bad_flop_rate(tmp_path: Path) -> None:
    """flops_per_second must be a finite number > 0."""
    path = _write(tmp_path, "g.txt", DOPPLER_OK)
    for rate in (0.0, -1.0, math.inf):
        with pytest.raises(ValueError, match="flops_per_second"):
            load_doppler(path, flops_per_second=rate)


def test_json_nested_too_deeply_is_named_not_a_recursion_error(tmp_path: Path) -> None:
    """Before, load_graph, load_cluster, load_giph_graph and load_giph_network raised a raw RecursionError from
    the json module on a document nested 100000 deep."""
    path = _write(tmp_path, "deep.json", '{"nodes": ' + "[" * 100_000 + "]" * 100_000 + ', "edges": []}')
    for load in (load_graph, load_cluster):
        with pytest.raises(UnsupportedGraphError, match=re.escape(str(path)) + ".*nested too deeply"):
            load(path)
    for load in (load_giph_graph, load_giph_network):
        with pytest.raises(GraphError, match=re.escape(str(path)) + ": JSON nested too deeply"):
            load(path)


def test_doppler_flop_rate_given_as_a_string_is_a_value_error_naming_it(tmp_path: Path) -> None:
    """Before, flops_per_second="1e12" raised math.isfinite's raw TypeError ('must be real number, not str')."""
    path = _write(tmp_path, "g.txt", DOPPLER_OK)
    with pytest.raises(ValueError, match="load_doppler: flops_per_second must be a finite number > 0, got .1e12."):
        load_doppler(path, flops_per_second="1e12")


def test_doppler_counts_are_ascii_digits(tmp_path: Path) -> None:
    """'²' passed str.isdigit() and then int() raised a raw ValueError without the file; '٢' was read as 2."""
    from gplace import load_graph
    from gplace.ir import UnsupportedGraphError

    for first in ("²", "٢"):
        path = tmp_path / "dp.txt"
        path.write_text(f"{first}\n\n\n\n1,1\n1,1\n", encoding="utf-8")
        with pytest.raises(UnsupportedGraphError, match="dp.txt: unsupported file"):
            load_graph(path)


def test_a_key_given_twice_is_refused_naming_the_file_and_key(tmp_path: Path) -> None:
    """JSON readers keep the last of two equal keys silently: a second "memory": 1 gave a GPU one byte, a second
    cost replaced the first, a placement.json op placed twice took its second device."""
    from gplace.importers.load import load_cluster
    from gplace.ir import load_json
    from gplace.ir.serialize import cluster_to_dict
    from gplace.testing import cpu_gpu_cluster

    cluster = json.dumps(cluster_to_dict(cpu_gpu_cluster(2))).replace('"memory": 1000000000000}',
                                                                      '"memory": 1000000000000, "memory": 1}', 1)
    cases = [(load_cluster, cluster, "memory", " \\(in the object named '/CPU:0'\\)"),
             (load_json, '{"placement": {"x": "/GPU:0", "x": "/GPU:1"}}', "x", ""),
             (load_giph_graph, json.dumps(GIPH_OK)[:-1] + ', "name": "a", "name": "b"}', "name", "")]
    for loader, text, key, named in cases:
        path = _write(tmp_path, f"{loader.__name__}.json", text)
        with pytest.raises((GraphError, UnsupportedGraphError),
                           match=re.escape(str(path)) + f".*the key '{key}' is given twice in one object{named}"):
            loader(path)


@needs_data
def test_a_doppler_graph_places_from_the_command_line_with_graph_doppler(tmp_path) -> None:
    """graph=file read DOPPLER's comm_cost as activations too (1 TB for an op of chain_mm): every pipeline placer
    failed with out of memory; graph=doppler keeps them as transfer bytes alone, as the pipeline bench does."""
    import subprocess
    import sys

    path = GRAPHS / "doppler" / "chain_mm_112nodes.txt"
    heavy, light = load_doppler(path), load_doppler(path, activation_memory=False)
    assert max(heavy.output_bytes) >= 10**12 and max(light.output_bytes) == 0
    assert [e.bytes for e in light.edges()] == [e.bytes for e in heavy.edges()]
    proc = subprocess.run([sys.executable, "-m", "gplace", "place", "graph=doppler", f"graph.path={path}",
                           "cluster=modern_4gpu", "objective=pipeline", "method=ideal_dp",
                           f"hydra.run.dir={tmp_path / 'run'}"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "run" / "placement.json").is_file()
