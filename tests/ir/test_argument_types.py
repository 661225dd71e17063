"""What a library user plausibly passes instead of the documented type: taken alike, or refused naming it."""

from __future__ import annotations

import numpy as np
import pytest

import gplace
from gplace.importers.load import load_cluster, load_graph
from gplace.ir import Cluster, Device, GraphError, Placement, cluster_to_dict, graph_to_dict, save_json
from gplace.profiling import ProfileError, with_measured_costs
from gplace.runtime import Simulator
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.zoo import modern_cluster, paper_cluster

DEVICES = [Device("/CPU:0", "cpu", 1.0, 10**9), Device("/GPU:0", "gpu", 1.0, 10**9)]


def test_a_cluster_keeps_its_own_devices():
    """The caller's list stayed the cluster's: a device changed or appended after the checks changed it (a 3-device
    cluster with 2 x 2 links, an invalid device never checked, the fingerprint unchanged)."""
    given = list(DEVICES)
    built, direct = Cluster.build(given, default_bandwidth=1e9), Cluster(given, np.ones((2, 2)), np.zeros((2, 2)))
    given[1] = Device("/GPU:9", "gpu", -5.0, -1)
    given.append(DEVICES[0])
    assert built.devices == direct.devices == tuple(DEVICES)
    assert Cluster.build(iter(DEVICES), default_bandwidth=1e9).num_devices == 2  # was len() of a generator


@pytest.mark.parametrize("devices", [None, "cpu", [1, 2]])
def test_devices_that_are_no_devices_are_named(devices):
    with pytest.raises(GraphError, match="devices must be"):
        Cluster(devices, np.ones((2, 2)), np.zeros((2, 2)))


@pytest.mark.parametrize("name", [None, "", gplace.ir.Placement])
def test_a_cluster_name_is_a_string_where_it_is_built(name):
    """``name=None`` was written to a file its reader refused; a ``Path`` failed in a run's JSON encoder."""
    with pytest.raises(GraphError, match="cluster's name must be a non-empty string"):
        Cluster.build(DEVICES, default_bandwidth=1e9, name=name)


def test_transfer_time_takes_indices_and_says_so():
    """Device names gave ``'<=' not supported between 'int' and 'str'``, float indices numpy's IndexError."""
    c = cpu_gpu_cluster(1)
    assert c.transfer_time(np.float32(1e6), np.int64(0), 1) == c.transfer_time(1e6, 0, 1)
    with pytest.raises(TypeError, match=r"src must be a device index \(cluster.index\(name\)"):
        c.transfer_time(1e6, "/CPU:0", "/GPU:0")
    with pytest.raises(TypeError, match="dst must be a device index"):
        c.transfer_time(1e6, 0, 1.0)
    with pytest.raises(TypeError, match="nbytes must be a number"):
        c.transfer_time("1e6", 0, 1)


def test_from_names_takes_a_mapping_only():
    """A list of (op, device) pairs was read as op names: 'placement names op ('a', '/GPU:0'), not in graph'."""
    g, c = random_dag(5), cpu_gpu_cluster(1)
    pairs = [(op, "/CPU:0") for op in g.op_names]
    assert Placement.from_names(g, c, dict(pairs)) == Placement.single(g, 0)
    with pytest.raises(TypeError, match=r"mapping must be a mapping .*dict\(pairs\)"):
        Placement.from_names(g, c, pairs)


def test_measured_costs_that_are_no_numbers_name_the_op():
    """``None`` or ``"0.001"`` raised math.isfinite's bare TypeError, without the op its docstring promises."""
    g = random_dag(5)
    op = g.op_names[0]
    for value in (None, "0.001", True):
        with pytest.raises(ProfileError, match=f"op {op!r}: measured time"):
            with_measured_costs(g, {op: value})
    with pytest.raises(TypeError, match="seconds must be a mapping"):
        with_measured_costs(g, [(op, 0.001)])


@pytest.mark.parametrize("size", [None, "4", 2.5, True])
def test_cache_size_is_a_whole_number(size):
    with pytest.raises(ValueError, match="cache_size must be a whole number >= 1"):
        Simulator(cache_size=size)
    assert Simulator(cache_size=np.int64(2))._cache_size == 2


def test_numpy_scalars_are_refused_saying_how_to_pass_them():
    """``np.int64(4)`` read as a contradiction: 'num_gpus must be a whole number >= 1, got np.int64(4)'."""
    with pytest.raises(ValueError, match=r"got np.int64\(4\) \(a Python int or bool: convert .* int\(x\)"):
        paper_cluster(np.int64(4))
    with pytest.raises(ValueError, match=r"nvlink must be true or false, got np.True_ \(a Python int or bool"):
        modern_cluster(4, nvlink=np.True_)
    with pytest.raises(ValueError, match=r"pcie_bandwidth must be a finite number > 0, got None"):
        paper_cluster(2, pcie_bandwidth=None)  # was '>' not supported between NoneType and int


def test_paths_as_bytes_are_read_and_documents_are_refused(tmp_path):
    """``bytes`` paths failed 6-10 frames deep in pathlib; a dict read from a file failed in ``open``."""
    g, c = random_dag(6), cpu_gpu_cluster(1)
    save_json(graph_to_dict(g), tmp_path / "g.json")
    save_json(cluster_to_dict(c), tmp_path / "c.json")
    assert load_graph(bytes(tmp_path / "g.json")).fingerprint == g.fingerprint
    assert load_cluster(bytes(tmp_path / "c.json")).fingerprint == c.fingerprint
    with pytest.raises(TypeError, match=r"load_graph: path must be a path .*got dict \(graph_from_dict"):
        load_graph(graph_to_dict(g))
    with pytest.raises(TypeError, match=r"load_cluster: path must be a path .*got NoneType"):
        load_cluster(None)
    gplace.place(g, c, method="heft", run_dir=bytes(tmp_path / "run"))
    assert (tmp_path / "run" / "placement.json").is_file()
    with pytest.raises(TypeError, match="place: run_dir must be a path"):
        gplace.place(g, c, method="heft", run_dir=3)


def test_write_back_names_an_out_dir_that_is_no_path(tmp_path):
    """An int or a document as ``out_dir`` failed inside pathlib, naming no parameter."""
    from gplace.export import write_back

    g, c = random_dag(6), cpu_gpu_cluster(1)
    assert write_back(g, c, Placement.single(g, 0), bytes(tmp_path / "out")) == []  # no program: nothing written
    with pytest.raises(TypeError, match="write_back: out_dir must be a path"):
        write_back(g, c, Placement.single(g, 0), 3)


def test_serialisation_and_from_names_name_an_argument_of_the_wrong_type():
    """Swapped or wrong arguments failed with AttributeError ('Placement' object has no attribute 'name'), or a
    cluster given as the graph was read as a graph of another fingerprint (OtherGraphError)."""
    from gplace.ir import placement_from_dict, placement_to_dict

    graph = random_dag(5, seed=0)
    cluster = cpu_gpu_cluster()
    placement = Placement.single(graph, 0)
    doc = placement_to_dict(placement, graph, cluster)
    calls = [
        ("placement must be", lambda: placement_to_dict(graph, cluster, placement)),
        ("graph must be", lambda: graph_to_dict(cluster)),
        ("cluster must be", lambda: cluster_to_dict(graph)),
        ("cluster must be", lambda: Placement.from_names(graph, None, {})),
        ("graph must be", lambda: placement_from_dict(doc, cluster, graph)),
    ]
    for words, call in calls:
        with pytest.raises(TypeError, match=words):
            call()
