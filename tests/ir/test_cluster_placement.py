"""Cluster and Placement validation: every error names the device or op at fault."""

import numpy as np
import pytest

from gplace.ir import Cluster, Device, Edge, GraphError, InvalidPlacementError, Link, Op, OpGraph, Placement
from gplace.ir.serialize import placement_to_dict
from gplace.testing import chain, cpu_gpu_cluster, uniform_cluster


def test_cluster_missing_link_names_pair():
    devs = [Device("a", "gpu"), Device("b", "gpu"), Device("c", "gpu")]
    with pytest.raises(GraphError, match="no link between 'a' and 'c'"):
        Cluster.build(devs, [Link("a", "b", 1e9), Link("b", "c", 1e9)])


def test_cluster_errors():
    with pytest.raises(GraphError, match="unknown device 'z'"):
        Cluster.build([Device("a", "gpu")], [Link("a", "z", 1.0)])
    with pytest.raises(GraphError, match="duplicate device name 'a'"):
        Cluster.build([Device("a", "gpu"), Device("a", "gpu")], default_bandwidth=1.0)
    with pytest.raises(GraphError, match="'a' has speed 0"):
        Cluster.build([Device("a", "gpu", speed=0)], default_bandwidth=1.0)
    with pytest.raises(GraphError, match="unknown device 'q'"):
        uniform_cluster(2).index("q")


@pytest.mark.parametrize(("links", "kwargs", "match"), [
    ([Link("a", "b", "1e9")], {}, "link a<->b bandwidth must be a number, got '1e9'"),  # a raw TypeError before
    ([Link("a", "b", 1e9, None)], {}, "link a<->b latency must be a number, got None"),
    ([], {"default_bandwidth": "1e9"}, "default_bandwidth must be a number"),  # it was converted silently
    ([Link("a", "b", 1e9), Link("b", "a", 1e6)], {}, "two links between 'b' and 'a' .*reverse_bandwidth"),  # last won
    ([Link("a", "a", 1e9)], {"default_bandwidth": 1.0}, "link a<->a joins a device to itself"),  # it was ignored
])
def test_links_of_the_wrong_type_or_repeated_are_named(links, kwargs, match):
    with pytest.raises(GraphError, match=match):
        Cluster.build([Device("a", "gpu"), Device("b", "gpu")], links, **kwargs)


def test_transfer_time():
    c = Cluster.build([Device("a", "gpu"), Device("b", "gpu")], [Link("a", "b", 100.0, 0.5)])
    assert c.transfer_time(200, 0, 1) == pytest.approx(2.5)
    assert c.transfer_time(200, 1, 1) == 0.0
    with pytest.raises(IndexError, match="src device index -1 is not in cluster"):
        c.transfer_time(200, -1, 0)  # it read the last device's link


def test_placement_wrong_length_and_unknown_device():
    g, c = chain(), uniform_cluster(2)
    with pytest.raises(InvalidPlacementError, match="2 entries but graph 'chain' has 3 ops"):
        Placement.for_graph(g, [0, 1]).validate(g, c)
    with pytest.raises(InvalidPlacementError, match="op 'a2' placed on device 5; .* has 2 devices"):
        Placement.for_graph(g, [0, 1, 5]).validate(g, c)
    with pytest.raises(InvalidPlacementError, match="not 'chain'"):
        Placement(np.zeros(3, dtype=int), "deadbeef").validate(g, c)


def test_colocation_split_and_pin_violation():
    ops = [Op("v", "Var", 1.0, colocation="v"), Op("upd", "Apply", 1.0, colocation="v"),
           Op("io", "Input", 1.0, pinned="cpu")]
    g = OpGraph.from_ops(ops, [Edge("v", "upd")])
    c = cpu_gpu_cluster(2)
    split = "colocation group 'v' split: op 'v' on '/GPU:0', op 'upd' on '/GPU:1'"
    with pytest.raises(InvalidPlacementError, match=split):
        Placement.for_graph(g, [1, 2, 0]).validate(g, c)
    with pytest.raises(InvalidPlacementError, match="'io' is pinned to kind 'cpu' but placed on '/GPU:0'"):
        Placement.for_graph(g, [1, 1, 1]).validate(g, c)
    Placement.for_graph(g, [1, 1, 0]).validate(g, c)


def test_from_names_round_trip_and_errors():
    g, c = chain(), uniform_cluster(2)
    p = Placement.for_graph(g, [0, 1, 1])
    assert Placement.from_names(g, c, p.to_names(g, c)) == p
    with pytest.raises(InvalidPlacementError, match="no device for op 'a2'"):
        Placement.from_names(g, c, {"a0": "/GPU:0", "a1": "/GPU:0"})
    with pytest.raises(InvalidPlacementError, match="unknown device '/TPU:0'"):
        Placement.from_names(g, c, {"a0": "/TPU:0", "a1": "/GPU:0", "a2": "/GPU:0"})
    big = chain(tuple(1.0 for _ in range(12)))
    with pytest.raises(InvalidPlacementError, match=r"11 ops of graph .* missing: 'a1', 'a2', 'a3', 'a4', 'a5' and 6 "
                                                    r"more"):
        Placement.from_names(big, c, {"a0": "/GPU:0"})  # only 'a1' was named
    with pytest.raises(InvalidPlacementError, match=r"unknown devices: \['/GPU:7', '/TPU:0'\]"):
        Placement.from_names(g, c, {"a0": "/TPU:0", "a1": "/GPU:7", "a2": "/GPU:0"})


def test_from_names_names_every_kind_of_problem_at_once():
    """A missing op hid an unknown device: the user fixed one, then met the other."""
    g, c = chain(), uniform_cluster(2)
    with pytest.raises(InvalidPlacementError, match=r"names op 'zz', not in graph .*; placement has no device for "
                                                    r"op 'a2' .*; op 'a0' placed on unknown device '/TPU:0'"):
        Placement.from_names(g, c, {"a0": "/TPU:0", "a1": "/GPU:0", "zz": "/GPU:0"})


def test_to_names_and_placement_to_dict_refuse_what_validate_refuses():
    """An index outside the cluster was written as another device (-1: the last) or raised IndexError."""
    g, c = chain(), uniform_cluster(2)
    with pytest.raises(InvalidPlacementError, match="op 'a0' placed on device -1"):
        placement_to_dict(Placement.for_graph(g, [-1, 0, 0]), g, c)
    with pytest.raises(InvalidPlacementError, match="op 'a1' placed on device 3"):
        Placement.for_graph(g, [0, 3, 0]).to_names(g, c)
    with pytest.raises(InvalidPlacementError, match="placement has 2 entries but graph"):
        Placement.for_graph(g, [0, 0]).to_names(g, c)


def test_placement_is_immutable_copy():
    src = np.array([0, 1, 0])
    p = Placement.for_graph(chain(), src)
    src[0] = 1
    assert p.devices[0] == 0
    with pytest.raises(ValueError):
        p.devices[0] = 1


def test_cluster_arrays_are_read_only():
    """Memory and speeds cannot change under the cluster's fingerprint (a write made measure and step_times differ)."""
    cluster = uniform_cluster(2)
    for arr in (cluster.memory, cluster.speeds, cluster.bandwidth, cluster.latency):
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = 1


def test_op_without_cost_for_the_device_kind():
    g = OpGraph.from_ops([Op("k", "Kernel", None, {"gpu": 1.0})], [])
    with pytest.raises(InvalidPlacementError, match="'k' has no cost for kind 'cpu' but is placed on '/CPU:0'"):
        Placement.for_graph(g, [0]).validate(g, cpu_gpu_cluster(1))
    Placement.for_graph(g, [1]).validate(g, cpu_gpu_cluster(1))


def test_fingerprint_includes_kind_names():
    a = OpGraph.from_ops([Op("k", "Kernel", None, {"gpu": 1.0})], [])
    b = OpGraph.from_ops([Op("k", "Kernel", None, {"cpu": 1.0})], [])
    assert a.fingerprint != b.fingerprint


def test_fingerprint_hashes_kind_costs_by_kind_name_not_insertion_order():
    """Per-kind costs were hashed in the order the kinds were added (``from_ops`` sorts, ``with_op_costs`` appends):
    cpu=1, gpu=5 and gpu=1 then cpu=5 shared a fingerprint (a shared simulator gave one graph's step time for the
    other), and the second graph's fingerprint changed when read back from JSON."""
    from gplace.ir import graph_from_dict, graph_to_dict
    from gplace.runtime.calibration import with_op_costs

    edges = [Edge("a", "b")]
    both = OpGraph.from_ops([Op(n, "T", None, {"cpu": 1.0, "gpu": 5.0}, output_bytes=8) for n in "ab"], edges)
    gpu_only = OpGraph.from_ops([Op(n, "T", None, {"gpu": 1.0}, output_bytes=8) for n in "ab"], edges)
    added = with_op_costs(gpu_only, "cpu", np.array([5.0, 5.0]))
    assert list(added.kind_cost) == ["gpu", "cpu"]
    assert added.fingerprint != both.fingerprint
    assert graph_from_dict(graph_to_dict(added)).fingerprint == added.fingerprint


def test_cluster_fingerprint_is_the_same_for_equal_numbers_of_any_type():
    """A speed of 1 and of 1.0 (or a NumPy scalar) hashed as different reprs: a run resumed with its cluster read
    back from JSON was refused as another cluster. Fingerprints of clusters of plain floats stay as they were."""
    def cluster(speed, memory, latency):
        return Cluster.build([Device("a", "gpu", speed, memory), Device("b", "gpu", 1.0, 10**9)],
                             [Link("a", "b", 1e9, latency)], name="c")

    plain = cluster(1.0, 10**9, 0.0)
    for speed, memory, latency in [(1, 10**9, 0), (np.float64(1.0), np.int64(10**9), np.float32(0.0)),
                                   (np.int32(1), 10**9, -0.0)]:
        assert cluster(speed, memory, latency).fingerprint == plain.fingerprint
    assert cluster(2, 10**9, 0.0).fingerprint != plain.fingerprint
    assert uniform_cluster(2).fingerprint == "3d97f223244796ed"
    assert cpu_gpu_cluster(2).fingerprint == "997700d7a364c50a"


@pytest.mark.parametrize("kwargs, match", [
    ({"bandwidth": 1e-300}, "every bandwidth must be at least 1e-09 bytes/s"),
    ({"latency": 1e308}, r"every latency must be in \[0, 1e\+12\] s"),
])
def test_rates_and_latencies_that_would_overflow_the_times_are_refused(kwargs, match):
    """A latency of 1e308 s gave step times of inf reported ok; a bandwidth of 1e-300 broke the pipeline ILP."""
    with pytest.raises(GraphError, match=match):
        uniform_cluster(2, **kwargs)
    with pytest.raises(GraphError, match=r"speed 1e-300, must be in \[1e-09, 1e\+09\]"):
        Cluster.build([Device("/GPU:0", "gpu", speed=1e-300)])


def test_costs_that_would_overflow_the_times_are_refused():
    """Costs of 1e308 s validated and simulated to an inf step time reported ok (1e76 s: NaN policy weights)."""
    with pytest.raises(GraphError, match=r"compute_cost add up to inf s, more than the 1e\+18 s"):
        chain((1e308, 1e308, 1.0))
    with pytest.raises(GraphError, match=r"add up to 1e\+76 s"):
        chain((1e76,))


def test_a_placement_of_the_wrong_length_is_refused_where_it_is_built():
    """Placement.for_graph(graph, [0, 1]) of a 3-op graph was accepted and failed only when measured or written."""
    g = chain()
    with pytest.raises(InvalidPlacementError, match="^placement has 2 entries but graph 'chain' has 3 ops$"):
        Placement.for_graph(g, [0, 1])


@pytest.mark.parametrize(("name", "kind"), [(" ", "gpu"), ("a", "\t"), ("", "gpu")])
def test_a_device_named_or_kinded_only_white_space_is_refused(name, kind):
    """A device named ``" "`` was accepted (and a kind ``"\\t"``, which no op is costed for)."""
    with pytest.raises(GraphError, match="needs a non-empty string name and kind"):
        Cluster.build([Device(name, kind), Device("b", "gpu")], [Link(name, "b", 1e9)])
