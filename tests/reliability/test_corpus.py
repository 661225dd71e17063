"""The bad-input corpus (``tests/corpus/``, made by ``make_corpus.py``): every importer, run over every file, ends
in gplace's own typed error naming what is wrong, never a raw exception; and the in-code cases (placements,
pins, colocation, policy files, a one-device cluster) end in a typed error or a correct result."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from gplace.baselines import HEFT, PlacementInfeasibleError, SingleDevice
from gplace.importers import (
    from_onnx,
    from_tensorflow,
    load_cluster,
    load_doppler,
    load_giph_graph,
    load_graph,
    load_pipedream,
)
from gplace.ir import Cluster, Device, GraphError, InvalidPlacementError, Op, OpGraph, Placement, UnsupportedGraphError
from gplace.pretrained import load_policy, save_policy
from gplace.runtime import Simulator
from gplace.testing import chain, cpu_gpu_cluster, random_dag

CORPUS = Path(__file__).parents[1] / "corpus"
GRAPH_FILES = sorted([*CORPUS.glob("graphs/*.json"), *CORPUS.glob("raw/*")])
TYPED = (GraphError, UnsupportedGraphError)
IMPORTERS = [load_graph, from_onnx, from_tensorflow, load_pipedream, load_doppler, load_giph_graph]

NAMES = {  # corpus graph -> what its error message must name
    "cycle": r"cycle through ops 'b' -> 'a'", "duplicate_names": r"duplicate op name 'a'",
    "edge_to_missing_op": r"missing op 'ghost'", "fractional_bytes": r"'a'.*output_bytes",
    "huge_edge_bytes": r"edge 'a' -> 'b' bytes", "huge_output_bytes": r"'a' output_bytes",
    "huge_persistent_memory": r"'a' persistent_memory", "huge_shape": r"'a' output_shapes",
    "infinite_cost": r"'a' cost is inf", "infinite_kind_cost": r"'a' kind_cost\['gpu'\]",
    "kind_cost_not_a_map": r"'a'", "list_pinned": r"'a' pinned", "nan_cost": r"'a' cost is nan",
    "negative_cost": r"'a' has negative compute_cost", "negative_temporary_memory": r"'a' has negative temporary",
    "no_cost": r"'a' .*no compute cost", "null_type": r"'a'.type", "numeric_colocation": r"'a' colocation",
    "numeric_name": r"ops\[0\].name", "ops_not_a_list": r"'ops'", "self_loop": r"self-loop on op 'a'",
    "shape_not_a_list": r"'a'", "string_cost": r"'a'.cost", "unknown_field": r"'a'.*flops",
    "version_99": r"version 99", "wrong_format": r"format 'gplace.cluster'",
}


def test_every_corpus_graph_names_what_is_wrong():
    assert set(NAMES) == {p.stem for p in CORPUS.glob("graphs/*.json")}


@pytest.mark.parametrize("path", GRAPH_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.parametrize("importer", IMPORTERS, ids=lambda f: f.__name__)
def test_every_importer_refuses_every_corpus_file_with_a_typed_error(importer, path):
    if importer is from_tensorflow:
        pytest.importorskip("tensorflow")
    with pytest.raises(TYPED) as err:
        importer(path)
    assert path.name in str(err.value), "the error must name the file"
    if importer is load_graph and path.stem in NAMES:
        assert re.search(NAMES[path.stem], str(err.value)), str(err.value)


CLUSTER_NAMES = {
    "default_link_not_an_object": "default_link", "default_link_not_a_number": "default_link's bandwidth",
    "duplicate_device": "duplicate device name '/GPU:0'", "huge_memory": "'/CPU:0' has memory",
    "infinite_latency": "link /CPU:0<->/GPU:0", "infinite_speed": "'/CPU:0' has speed inf",
    "link_to_unknown_device": "'/TPU:0'", "nan_bandwidth": "link /CPU:0<->/GPU:0 has bandwidth nan",
    "negative_bandwidth": "link /CPU:0<->/GPU:0", "no_devices": "no devices", "numeric_kind": "devices[0].kind",
    "zero_memory": "'/CPU:0' has memory 0", "zero_speed": "'/CPU:0' has speed 0",
}


@pytest.mark.parametrize("path", sorted(CORPUS.glob("clusters/*.json")), ids=lambda p: p.stem)
def test_every_corpus_cluster_is_refused_naming_the_device_or_link(path):
    with pytest.raises(GraphError) as err:
        load_cluster(path)
    assert CLUSTER_NAMES[path.stem] in str(err.value)


# ---------------------------------------------------------------------- in-code cases
GRAPH, CLUSTER = random_dag(12, seed=1), cpu_gpu_cluster(num_gpus=2)


@pytest.mark.parametrize("devices, match", [
    (np.zeros(5, dtype=np.int64), "5 entries but graph"),
    (np.full(12, 7), "placed on device 7"),
])
def test_bad_placements_are_named(devices, match):
    with pytest.raises(InvalidPlacementError, match=match):
        Simulator().measure(GRAPH, CLUSTER, Placement.for_graph(GRAPH, devices))


def test_a_placement_for_another_graph_is_refused():
    other = Placement.for_graph(random_dag(12, seed=2), np.zeros(12, dtype=np.int64))
    with pytest.raises(InvalidPlacementError, match="made for graph"):
        Simulator().measure(GRAPH, CLUSTER, other)


def test_an_op_pinned_to_a_kind_the_cluster_lacks_is_named():
    graph = OpGraph.from_ops([Op("a", "X", 1.0, pinned="tpu"), Op("b", "X", 1.0)], [], name="pins")
    with pytest.raises(GraphError, match="'a'.*tpu|tpu.*'a'"):
        HEFT().place(graph, CLUSTER)


def test_a_colocation_group_too_large_for_any_device_is_named():
    ops = [Op(f"w{i}", "Var", 1.0, persistent_memory=10**9, colocation="weights") for i in range(3)]
    small = Cluster.build([Device("/GPU:0", "gpu", memory=2 * 10**9), Device("/GPU:1", "gpu", memory=2 * 10**9)],
                          default_bandwidth=1e9)
    with pytest.raises(PlacementInfeasibleError, match="weights|w0"):
        HEFT().place(OpGraph.from_ops(ops, [], name="big"), small)


def test_a_one_device_cluster_places_everything_there():
    one = Cluster.build([Device("/CPU:0", "cpu")], name="one")
    graph = chain()
    placement = HEFT().place(graph, one)
    assert placement.devices.tolist() == [0, 0, 0]
    assert Simulator().measure(graph, one, placement).step_time == pytest.approx(6.0)
    assert SingleDevice(0).place(graph, one) == placement


def test_policy_files_of_another_version_or_shape_are_named(tmp_path):
    from gplace.encoders import GNNEncoder
    from gplace.policies import DeviceAwarePolicy

    path = save_policy(tmp_path / "p.pt", GNNEncoder(hidden_size=16), DeviceAwarePolicy(16, state_size=16))
    doc = torch.load(path, weights_only=True)
    torch.save({**doc, "version": 99}, tmp_path / "v99.pt")
    with pytest.raises(ValueError, match="v99.pt is a gplace.policy file of version 99"):
        load_policy(tmp_path / "v99.pt")
    doc["encoder"]["kwargs"]["hidden_size"] = 32
    torch.save(doc, tmp_path / "shape.pt")
    with pytest.raises(ValueError, match="shape.pt: the weights do not fit"):
        load_policy(tmp_path / "shape.pt")
    with pytest.raises(ValueError, match="garbage.pt is not a gplace.policy file"):
        load_policy(CORPUS / "raw" / "garbage.pt")
