"""Cluster inputs: whole-number float memory, a full matrix's diagonal, and out-of-range links named."""

import math
import re

import numpy as np
import pytest

from gplace.ir import Cluster, Device, GraphError, Link, cluster_from_dict, cluster_to_dict
from gplace.zoo.clusters import modern_cluster, paper_cluster

DEVICES = (Device("a", "gpu"), Device("b", "gpu"))


def test_a_whole_number_float_memory_is_taken_as_an_int():
    """A config reads ``16e9`` as a float: it was refused, though the JSON reader takes ``1e18``."""
    assert paper_cluster(gpu_memory=1.2e10).memory.tolist() == [128 * 10**9, 12 * 10**9, 12 * 10**9]
    assert modern_cluster(gpu_memory=8e10).memory[1] == 80 * 10**9
    assert Device("a", "gpu", memory=np.float64(16e9)).memory == 16 * 10**9
    assert type(Device("a", "gpu", memory=16e9).memory) is int
    for memory in (1.5, math.inf, math.nan):
        with pytest.raises(GraphError, match="device 'a' memory must be a whole number of bytes"):
            Cluster.build([Device("a", "gpu", memory=memory)])


def test_a_full_matrix_keeps_its_fingerprint_through_json():
    """The diagonal of a matrix given in full was kept, the JSON left it out, and a resume refused the cluster."""
    c = Cluster(DEVICES, np.full((2, 2), 1e9), np.full((2, 2), 1e-5), name="full")
    assert c.bandwidth.diagonal().tolist() == [math.inf, math.inf]
    assert c.latency.diagonal().tolist() == [0.0, 0.0]
    assert cluster_from_dict(cluster_to_dict(c)).fingerprint == c.fingerprint
    built = Cluster.build(DEVICES, default_bandwidth=1e9, default_latency=1e-5, name="full")
    assert built.fingerprint == c.fingerprint


@pytest.mark.parametrize(("links", "kwargs", "match"), [
    ([Link("a", "b", 1e-10)], {}, r"link a<->b has bandwidth 1e-10, out of range: every bandwidth must be at least"),
    ([Link("a", "b", 1e9, 1e13)], {}, r"link a<->b has latency 1e\+13, out of range: every latency must be in"),
    ([Link("a", "b", 1e9, reverse_latency=-1.0)], {}, "link a<->b has reverse_latency -1, out of range"),
    ([Link("a", "b", 1e9, reverse_bandwidth=0)], {}, "link a<->b has reverse_bandwidth 0, out of range"),
    ([], {"default_bandwidth": 0}, "default_bandwidth is 0, out of range: every bandwidth must be at least"),
    ([], {"default_bandwidth": -1.0}, "default_bandwidth is -1, out of range"),
    ([], {"default_bandwidth": math.nan}, "default_bandwidth is nan, not a valid number"),
    ([], {"default_bandwidth": 1e9, "default_latency": -1}, "default_latency is -1, out of range"),
    ([], {"default_bandwidth": 1e9, "default_latency": math.nan}, "default_latency is nan, not a valid number"),
    ([], {"default_bandwidth": 1e9, "default_latency": math.inf}, "default_latency is inf, out of range"),
])
def test_an_out_of_range_link_or_default_is_named(links, kwargs, match):
    """A bad link was refused as ``every bandwidth must be ...`` without naming it; a NaN default as a missing one."""
    with pytest.raises(GraphError, match=f"cluster 'c': {match}"):
        Cluster.build(DEVICES, links, name="c", **kwargs)


@pytest.mark.parametrize(("label", "value", "match"), [
    ("bandwidth", 1e-10, "bandwidth from 'b' to 'a' is 1e-10, out of range: every bandwidth must be at least"),
    ("bandwidth", math.nan, "bandwidth from 'b' to 'a' is nan, not a valid number"),
    ("latency", 1e13, r"latency from 'b' to 'a' is 1e\+13, out of range: every latency must be in \[0, 1e\+12\] s"),
])
def test_validate_names_the_first_bad_pair_of_a_matrix(label, value, match):
    """A matrix given directly was refused without naming the (source, destination) pair at fault."""
    matrices = {"bandwidth": np.full((2, 2), 1e9), "latency": np.zeros((2, 2))}
    matrices[label][1, 0] = value
    with pytest.raises(GraphError, match=f"cluster 'm': {match}"):
        Cluster(DEVICES, matrices["bandwidth"], matrices["latency"], name="m")


def test_more_devices_than_a_cluster_may_hold_are_refused_before_anything_is_allocated():
    """100,000 devices (a cluster file, or cluster.num_gpus=100000) asked numpy for 75 GiB per link matrix and
    failed with its MemoryError (12.8 GB used first at 20,000); 10**8 GPUs gave no answer within a minute."""
    import resource

    from gplace.ir.cluster import MAX_DEVICES

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    devices = [Device(f"/GPU:{i}", "gpu") for i in range(100_000)]
    with pytest.raises(GraphError, match="cluster 'big': 100,000 devices, more than the 4,096 a cluster may hold"):
        Cluster.build(devices, default_bandwidth=1e9, name="big")
    with pytest.raises(GraphError, match="paper_cluster: 100,000,001 devices"):
        paper_cluster(num_gpus=10**8)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 1_000_000  # KiB
    assert Cluster.build(devices[:MAX_DEVICES], default_bandwidth=1e9).num_devices == MAX_DEVICES


def test_a_hydra_config_of_devices_and_links_builds_the_cluster():
    """Hydra turns a ``_target_: gplace.Device`` (a dataclass) inside a list into a config node of its fields:
    Cluster.build refused them ("devices must be gplace Device objects, got {'name': 'g0', ...}"), and links failed
    in Hydra ("Key 'directions' not in 'Link'") unless the config said ``_convert_: all``."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({
        "_target_": "gplace.Cluster.build", "default_bandwidth": 1e9, "name": "mine",
        "devices": [{"_target_": "gplace.Device", "name": "g0", "kind": "gpu"},
                    {"_target_": "gplace.Device", "name": "g1", "kind": "gpu", "memory": 12_000_000_000}],
        "links": [{"_target_": "gplace.Link", "a": "g0", "b": "g1", "bandwidth": 2e9}],
    })
    cluster = instantiate(cfg)
    assert cluster.device_names == ("g0", "g1") and cluster.memory.tolist()[1] == 12_000_000_000
    assert cluster.bandwidth[0, 1] == cluster.bandwidth[1, 0] == 2e9


@pytest.mark.parametrize("devices, links, message", [
    ([{"name": "g0"}], [], "device {'name': 'g0'} has no 'kind' (a Device's fields: name, kind, speed, memory)"),
    ([{"name": "g0", "kind": "gpu", "mem": 1}], [], "device {'name': 'g0', 'kind': 'gpu', 'mem': 1} has unknown "
                                                     "field 'mem'"),
    (["g0"], [], "device must be a gplace Device or a mapping of its fields, got 'g0'"),
    ([Device("a", "gpu"), Device("b", "gpu")], [("a", "b", 1e9)],
     "link must be a gplace Link or a mapping of its fields, got ('a', 'b', 1000000000.0)"),
    ([Device("a", "gpu"), Device("b", "gpu")], [{"a": "a", "b": "b"}], "link {'a': 'a', 'b': 'b'} has no "
                                                                        "'bandwidth'"),
])
def test_devices_and_links_of_the_wrong_kind_are_named(devices, links, message):
    """A tuple link failed with "AttributeError: 'tuple' object has no attribute 'a'"."""
    with pytest.raises(GraphError, match=re.escape(f"cluster 'cluster': {message}")):
        Cluster.build(devices, links, default_bandwidth=1e9)


def test_devices_and_links_may_be_mappings_of_their_fields():
    cluster = Cluster.build([{"name": "a", "kind": "gpu"}, {"name": "b", "kind": "cpu", "speed": 2.0}],
                            [{"a": "a", "b": "b", "bandwidth": 5e9, "latency": 1e-5}])
    assert cluster.devices[1] == Device("b", "cpu", 2.0) and cluster.latency[0, 1] == 1e-5


@pytest.mark.parametrize("links", [[Link("a", "b", 1e9)], []])
def test_a_device_name_given_twice_is_named_even_without_a_default_link(links):
    """Devices a, b, a with a link a<->b said "no link between 'a' and 'b' and no default_bandwidth", naming a pair
    that has one; two a's alone said "no link between 'a' and 'a'"."""
    devices = [*DEVICES, Device("a", "gpu")]
    with pytest.raises(GraphError, match="^cluster 'cluster': duplicate device name 'a'$"):
        Cluster.build(devices, links)


def test_links_of_none_are_no_links_and_a_links_value_that_is_no_sequence_is_named():
    """links=None raised "'NoneType' object is not iterable" (a cluster file's "links": null is taken as none)."""
    assert Cluster.build(DEVICES, None, default_bandwidth=1e9).bandwidth[0, 1] == 1e9
    for links in (5, "ab"):
        with pytest.raises(GraphError, match=f"^cluster 'cluster': links must be a sequence of Link, got {links!r}$"):
            Cluster.build(DEVICES, links, default_bandwidth=1e9)
