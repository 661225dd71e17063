"""The versioned JSON formats: round trips and errors that name the field."""

import json
import logging
import pickle

import numpy as np
import pytest

from gplace.ir import (
    Cluster,
    Device,
    Edge,
    GraphError,
    InvalidPlacementError,
    Op,
    OpGraph,
    OtherGraphError,
    Placement,
    cluster_from_dict,
    cluster_to_dict,
    graph_from_dict,
    graph_to_dict,
    load_json,
    placement_from_dict,
    placement_to_dict,
    save_json,
)
from gplace.ir.serialize import write_text_atomic
from gplace.testing import cpu_gpu_cluster, random_dag


def _rich_graph():
    ops = [Op("x", "Placeholder", 1e-6, output_bytes=64, output_shapes=((4, -1),), pinned="cpu"),
           Op("w", "VariableV2", 1e-6, persistent_memory=128, output_bytes=128, colocation="w"),
           Op("mm", "MatMul", None, {"gpu": 2e-5, "cpu": 3e-4}, temporary_memory=16, output_bytes=64)]
    return OpGraph.from_ops(ops, [Edge("x", "mm", 64), Edge("w", "mm")], name="mlp")


@pytest.mark.parametrize("graph", [_rich_graph(), random_dag(30, seed=1)])
def test_graph_round_trip_through_a_file(tmp_path, graph):
    path = save_json(graph_to_dict(graph), tmp_path / "g.json")
    back = graph_from_dict(load_json(path))
    assert back.fingerprint == graph.fingerprint
    assert back.ops() == graph.ops() and back.edges() == graph.edges()


def test_every_graph_from_ops_accepts_round_trips_or_is_refused_up_front(tmp_path):
    """A per-kind cost of None (unknown) round-trips; what JSON cannot keep (an empty type, a non-string kind or
    name) is refused by from_ops, not by the reader later; a cost of -0.0 fingerprints as 0.0."""
    unknown = OpGraph.from_ops([Op("a", "t", 1.0, {"gpu": None})], [])
    assert graph_from_dict(load_json(save_json(graph_to_dict(unknown), tmp_path / "g.json"))).fingerprint == \
        unknown.fingerprint == OpGraph.from_ops([Op("a", "t", 1.0)], []).fingerprint
    with pytest.raises(GraphError, match="op 'a' type must be a non-empty string"):
        OpGraph.from_ops([Op("a", "", 1.0)], [])
    with pytest.raises(GraphError, match="op 'a' kind_cost must map device kinds"):
        OpGraph.from_ops([Op("a", "t", 1.0, {3: 2.0})], [])
    with pytest.raises(TypeError, match="a graph's name must be a string, got int 5"):
        OpGraph.from_ops([Op("a", "t", 1.0)], [], name=5)
    signed, plain = (OpGraph.from_ops([Op("a", "t", zero)], []) for zero in (-0.0, 0.0))
    assert signed.fingerprint == plain.fingerprint


def test_cluster_and_placement_round_trip(tmp_path):
    g, c = _rich_graph(), cpu_gpu_cluster(2)
    c2 = cluster_from_dict(json.loads(json.dumps(cluster_to_dict(c))))
    assert c2.fingerprint == c.fingerprint
    p = Placement.for_graph(g, [0, 1, 1])
    doc = placement_to_dict(p, g, c, step_time=0.5, baselines={"/CPU:0": float("inf")})
    doc = json.loads(json.dumps(doc))
    assert doc["baselines"]["/CPU:0"] is None and doc["step_time"] == 0.5
    assert placement_from_dict(doc, g, c2) == p


def test_a_cluster_of_numpy_numbers_saves_as_plain_json(tmp_path):
    """Cluster.validate accepts NumPy speeds and memory; saving such a cluster raised 'int64 is not JSON
    serializable'."""
    devices = [Device("a", "gpu", np.float64(2.0), np.int64(10**9)), Device("b", "gpu", np.int32(1), 10**9)]
    cluster = Cluster.build(devices, default_bandwidth=np.float64(1e9), name="np")
    path = save_json(cluster_to_dict(cluster), tmp_path / "c.json")
    doc = load_json(path)
    assert [(d["speed"], d["memory"]) for d in doc["devices"]] == [(2.0, 10**9), (1.0, 10**9)]
    assert cluster_from_dict(doc).fingerprint == cluster.fingerprint


def test_a_cluster_whose_link_directions_differ_round_trips(tmp_path):
    """A calibrated cluster fits each direction of a link on its own; its JSON kept one record per pair from the
    upper triangle, so a read-back GPU->CPU copy of 1 MB took the CPU->GPU 0.11 ms instead of 1.05 ms."""
    from gplace.runtime.calibration import LinkFit, with_link_costs

    cluster = with_link_costs(cpu_gpu_cluster(2), [LinkFit(1, 0, 1e-9, 5e-5), LinkFit(0, 1, 1e-10, 1e-5)])
    doc = json.loads(json.dumps(cluster_to_dict(cluster)))
    assert doc["version"] == 2 and doc["links"][0]["reverse_bandwidth"] == pytest.approx(1e9)
    back = cluster_from_dict(doc)
    assert back.transfer_time(10**6, 1, 0) == cluster.transfer_time(10**6, 1, 0) == pytest.approx(1.05e-3)
    assert back.fingerprint == cluster.fingerprint
    assert cluster_to_dict(cpu_gpu_cluster(2))["version"] == 1  # alike both ways: the old format
    doc["version"] = 1
    with pytest.raises(GraphError, match=r"links\[0\]: unknown field\(s\) \['reverse_bandwidth'"):
        cluster_from_dict(doc)


def test_an_infinite_bandwidth_is_written_as_strict_json_and_read_back(tmp_path):
    """A free link (calibration's LinkFit gives one) was written as the token Infinity, which strict JSON readers
    refuse; it is now "inf", and files holding Infinity still read."""
    from gplace.ir import Link

    devices = [Device("/CPU:0", "cpu"), Device("/GPU:0", "gpu"), Device("/GPU:1", "gpu")]
    links = [Link("/CPU:0", "/GPU:0", float("inf"), reverse_bandwidth=1e9), Link("/GPU:0", "/GPU:1", 1e10)]
    cluster = Cluster.build(devices, links, default_bandwidth=float("inf"), name="free")
    text = save_json(cluster_to_dict(cluster), tmp_path / "c.json").read_text()
    doc = json.loads(text, parse_constant=lambda token: pytest.fail(f"non-JSON token {token}"))
    assert doc["links"][0]["bandwidth"] == "inf" and doc["links"][0]["reverse_bandwidth"] == 1e9
    assert doc["links"][1] == {"a": "/CPU:0", "b": "/GPU:1", "bandwidth": "inf", "latency": 0.0}  # the default
    assert cluster_from_dict(doc).fingerprint == cluster.fingerprint
    old = tmp_path / "old.json"
    old.write_text(text.replace('"inf"', "Infinity"))
    assert cluster_from_dict(load_json(old)).fingerprint == cluster.fingerprint
    doc["default_link"] = {"bandwidth": "inf"}
    assert cluster_from_dict(doc).fingerprint == cluster.fingerprint


def test_non_finite_numbers_are_written_as_null_or_refused_naming_the_field(tmp_path):
    """placement_to_dict wrote extra={...: inf} as the non-JSON token Infinity; an extra's NaN or infinity at any
    depth is now null, as a failed step time is, and save_json refuses one naming where it is."""
    g, c = _rich_graph(), cpu_gpu_cluster(2)
    extra = {"search_seconds": float("inf"), "per_device": {"/GPU:0": {"bubble": float("nan"), "ops": 2}},
             "times": [1.0, float("-inf")]}
    doc = placement_to_dict(Placement.for_graph(g, [0, 1, 1]), g, c, extra=extra)
    assert doc["search_seconds"] is None and doc["per_device"] == {"/GPU:0": {"bubble": None, "ops": 2}}
    assert doc["times"] == [1.0, None] and extra["times"][1] == float("-inf")
    json.loads(save_json(doc, tmp_path / "p.json").read_text(), parse_constant=pytest.fail)
    with pytest.raises(ValueError, match=r"bad.json: per_device./GPU:0.peak\[1\] is not a finite number"):
        save_json({"per_device": {"/GPU:0": {"peak": [1.0, float("nan")]}}}, tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()


def test_placement_for_other_graph_is_refused():
    g, c = _rich_graph(), cpu_gpu_cluster(2)
    doc = placement_to_dict(Placement.for_graph(g, [0, 1, 1]), g, c)
    with pytest.raises(OtherGraphError, match="not 'random_dag") as refused:
        placement_from_dict(doc, random_dag(3), c)
    err = refused.value  # what a caller needs to word its own advice, and it crosses processes whole
    assert isinstance(err, InvalidPlacementError) and err.placed == "'mlp'" and err.graph == random_dag(3).name
    assert (err.placed_fingerprint, err.graph_fingerprint) == (g.fingerprint, random_dag(3).fingerprint)
    assert str(err) == f"{err.facts}; by_name=True places a graph with the same op names by name"
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), str(again), again.facts) == (OtherGraphError, str(err), err.facts)


def test_a_placement_of_another_version_of_the_graph_is_taken_by_op_name_only_when_asked(caplog):
    """A compiler re-importing its exported program got another fingerprint (other costs or sizes), so the first
    import's placement.json was refused with no way to apply it by op name, as the CLI's warm start does."""
    g, c = _rich_graph(), cpu_gpu_cluster(2)
    doc = placement_to_dict(Placement.for_graph(g, [0, 1, 1]), g, c)
    reprofiled = graph_from_dict({**graph_to_dict(g), "ops": [{**op, "cost": 2e-3} for op in graph_to_dict(g)["ops"]]})
    assert reprofiled.fingerprint != g.fingerprint and reprofiled.op_names == g.op_names
    with pytest.raises(InvalidPlacementError, match="by_name=True places a graph with the same op names"):
        placement_from_dict(doc, reprofiled, c)
    with caplog.at_level(logging.WARNING, logger="gplace"):
        assert placement_from_dict(doc, reprofiled, c, by_name=True).devices.tolist() == [0, 1, 1]
    assert "placing 'mlp' by op name" in caplog.text
    with pytest.raises(InvalidPlacementError, match="placement names op 'mm', not in graph 'random_dag"):
        placement_from_dict(doc, random_dag(3), c, by_name=True)


def test_a_placement_without_a_fingerprint_is_read_by_op_name_with_a_warning(caplog):
    """It was read against any graph of the same op names, silently (docs/format.md: against another graph, an
    error)."""
    g, c = _rich_graph(), cpu_gpu_cluster(2)
    doc = placement_to_dict(Placement.for_graph(g, [0, 1, 1]), g, c)
    del doc["graph_fingerprint"]
    with caplog.at_level(logging.WARNING, logger="gplace"):
        assert placement_from_dict(doc, g, c).devices.tolist() == [0, 1, 1]
    assert "no graph_fingerprint: placing 'mlp' by op name, unchecked" in caplog.text


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.update(version=9), "version 9 is not supported"),
    (lambda d: d.update(version=True), "version True is not supported"),  # it read as version 1
    (lambda d: d.update(format="onnx"), "expected format 'gplace.graph'"),
    (lambda d: d["ops"][1].update(cost="fast"), "op 'w'.cost must be a number"),
    (lambda d: d["ops"][0].update(flops=3), "op 'x': unknown field\\(s\\) \\['flops'\\]"),
    (lambda d: d["ops"][2].update(output_bytes=1.5), "op 'mm'.output_bytes must be an integer"),
    (lambda d: d["edges"].append({"src": "x"}), "edges\\[2\\] must be an object with 'src' and 'dst'"),
    (lambda d: d["edges"].append({"src": "x", "dst": "nope"}), "missing op 'nope'"),
    (lambda d: d["edges"][0].update(byte=4), r"edges\[0\] \('x' -> 'mm'\): unknown field\(s\) \['byte'\]"),
    (lambda d: d.update(edge=[]), r"graph 'mlp': unknown field\(s\) \['edge'\]"),
])
def test_graph_document_errors_name_the_field(mutate, match):
    doc = graph_to_dict(_rich_graph())
    mutate(doc)
    with pytest.raises(GraphError, match=match):
        graph_from_dict(doc)


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d["devices"][1].update(memroy=1000), r"devices\[1\]: unknown field\(s\) \['memroy'\]"),
    (lambda d: d["links"][0].update(bandwith=1e9), r"links\[0\]: unknown field\(s\) \['bandwith'\]"),
    (lambda d: d.update(default=1), r"unknown field\(s\) \['default'\]"),
    (lambda d: d.update(default_link={"bandwidth": 1e9, "latancy": 1e-5}),
     r"default_link: unknown field\(s\) \['latancy'\]; known: \['bandwidth', 'latency'\]"),
    (lambda d: d.update(default_link=[]), r"default_link must be an object"),
    (lambda d: d.update(devices=5), r"field 'devices' must be a list, got int"),  # a raw TypeError before
    (lambda d: d.update(links=3), r"field 'links' must be a list, got int"),
    (lambda d: d["devices"].append(5), r"devices\[3\] must be an object, got int 5"),
    (lambda d: d["devices"][1].pop("kind"), r"devices\[1\] lacks field\(s\) \['kind'\]"),  # "KeyError('kind')"
    (lambda d: d["links"][0].pop("bandwidth"), r"links\[0\] lacks field\(s\) \['bandwidth'\]"),
])
def test_cluster_document_errors_name_the_field(mutate, match):
    """A misspelt device, link, default_link or cluster field is refused by name; before, a device's misspelt memory
    loaded as unlimited memory, and a misspelt default_link latency as latency 0."""
    doc = cluster_to_dict(cpu_gpu_cluster(2))
    mutate(doc)
    with pytest.raises(GraphError, match=match):
        cluster_from_dict(doc)


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d["devices"][1].update(speed="2"), "device '/GPU:0' speed must be a number, got '2'"),
    (lambda d: d["devices"][1].update(speed=True), "device '/GPU:0' speed must be a number, got True"),
    (lambda d: d["devices"][0].update(memory="1000"), "device '/CPU:0' memory must be an integer, got '1000'"),
    (lambda d: d["links"][0].update(bandwidth="1e9"), "link /CPU:0<->/GPU:0 bandwidth must be a number, got '1e9'"),
    (lambda d: d["links"][2].update(latency=True), "link /GPU:0<->/GPU:1 latency must be a number, got True"),
    (lambda d: d["links"][2].update(bandwidth=None), "link /GPU:0<->/GPU:1 bandwidth must be a number, got None"),
    (lambda d: d.update(links=[], default_link={"bandwidth": "1e9"}),
     "default_link's bandwidth must be a number, got '1e9'"),
    (lambda d: d.update(links=[], default_link={"bandwidth": 1e9, "latency": False}),
     "default_link's latency must be a number, got False"),
])
def test_cluster_numbers_given_as_strings_or_booleans_are_refused(mutate, match):
    """Graph documents refuse "2" or true for a number; cluster documents read them as 2.0 and 1.0."""
    doc = cluster_to_dict(cpu_gpu_cluster(2))
    mutate(doc)
    with pytest.raises(GraphError, match=f"cluster 'cpu\\+2gpu': {match}"):
        cluster_from_dict(doc)


def test_bad_json_file_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(GraphError, match="broken.json: not valid JSON"):
        load_json(path)


def test_a_number_too_long_for_python_to_read_names_the_file(tmp_path):
    """A number literal of more than 4,300 digits raised Python's bare int-conversion ValueError, naming neither
    the file nor the field."""
    path = tmp_path / "long.json"
    path.write_text('{"format": "gplace.graph", "version": 1, "ops": [{"name": "a", "output_bytes": ' + "9" * 5000
                    + "}], \"edges\": []}")
    with pytest.raises(GraphError, match="long.json: not valid JSON for gplace: a number in it has more than 4300 "
                                         "digits"):
        load_json(path)


def test_a_file_starting_with_a_byte_order_mark_reads(tmp_path):
    """Editors on Windows write UTF-8 with a BOM; json.loads refuses it, load_json reads past it."""
    graph = random_dag(5, seed=2)
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(graph_to_dict(graph)).encode())
    assert graph_from_dict(load_json(path)).op_names == graph.op_names


@pytest.mark.parametrize("dims", [[32.5], [True, 4], "32"])
def test_a_dimension_that_is_not_a_whole_number_is_named(dims):
    doc = graph_to_dict(random_dag(3, seed=1))
    doc["ops"][0]["output_shapes"] = [dims]
    with pytest.raises(GraphError, match=r"output_shapes\[0\] must be a list of whole numbers"):
        graph_from_dict(doc)


@pytest.mark.parametrize("where", ["cost", "output_bytes", "speed", "memory"])
def test_an_integer_too_large_for_a_float_is_named(where):
    """A JSON integer of 401 digits escaped graph_from_dict and cluster_from_dict as a raw OverflowError."""
    from gplace.testing import chain

    if where in ("cost", "output_bytes"):
        doc = graph_to_dict(chain())
        doc["ops"][0][where] = 10**400
        load, match = graph_from_dict, f"op 'a0'.{where} is too large for a float \\(401 digits\\)"
    else:
        doc = cluster_to_dict(cpu_gpu_cluster(2))
        doc["devices"][1][where] = 10**400
        load, match = cluster_from_dict, f"device '/GPU:0' {where} is too large for a float \\(401 digits\\)"
    with pytest.raises(GraphError, match=match):
        load(doc)


def test_files_that_are_not_utf8_or_nest_too_deeply_and_names_that_are_not_strings_are_named(tmp_path):
    """A raw UnicodeDecodeError or RecursionError without the file; name null became the name 'None', an edge's
    src 1 matched an op named '1'."""
    from gplace.ir import load_json

    binary, deep = tmp_path / "bin.json", tmp_path / "deep.json"
    binary.write_bytes(b"\xff\xfe{}")
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(GraphError, match="bin.json: not UTF-8 text"):
        load_json(binary)
    with pytest.raises(GraphError, match="deep.json: JSON nested too deeply"):
        load_json(deep)
    doc = graph_to_dict(random_dag(4, seed=0))  # two edges
    for change, words in ((lambda d: d.update(name=None), "the graph's name must be a non-empty string"),
                          (lambda d: d["edges"][0].update(src=1), r"edges\[0\].src must be a non-empty string")):
        broken = json.loads(json.dumps(doc))
        change(broken)
        with pytest.raises(GraphError, match=words):
            graph_from_dict(broken)
    cluster = cluster_to_dict(cpu_gpu_cluster(1))
    cluster["links"] = [{"a": 0, "b": "/GPU:0", "bandwidth": 1e9}]
    with pytest.raises(GraphError, match="a link's 'a' must be a non-empty string"):
        cluster_from_dict(cluster)


def test_two_writers_of_one_file_each_write_whole_through_their_own_temporary(tmp_path):
    """Two runs filling one zoo cache entry at once shared the temporary name 'graph.json.tmp': one truncated the
    other's half-written file and the later rename failed (FileNotFoundError), or could rename a torn file. Here
    a second writer runs in the middle of the first's write."""
    path = tmp_path / "graph.json"

    def first():
        yield '{"writer": '
        write_text_atomic(path, '{"writer": "second"}')  # another process, between two pieces of ours
        yield '"first"}'

    write_text_atomic(path, first())
    assert load_json(path) == {"writer": "first"} and [p.name for p in tmp_path.iterdir()] == ["graph.json"]


def test_a_killed_writers_temporary_is_removed_an_hour_later_and_long_names_still_write(tmp_path):
    """Each writer's temporary has its own name, so one a killed writer left was never written over again: they
    piled up. And the longer temporary name failed for a file name of 237-251 bytes that wrote before."""
    import os
    import time

    path = tmp_path / "graph.json"
    stale, fresh = tmp_path / "graph.json.123-abcd0123.tmp", tmp_path / "graph.json.456-abcd0456.tmp"
    for left in (stale, fresh):
        left.write_text("half")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    write_text_atomic(path, "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.json", fresh.name]  # a live writer's is kept
    long = tmp_path / ("g" * 245 + ".json")
    assert write_text_atomic(long, "{}").read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["graph.json", fresh.name, long.name])
