"""Cluster device names that are no ``/CPU:i`` or ``/GPU:i`` (a Unicode digit, a trailing newline), and two names
that spell one TensorFlow device (found by a device-name probe: ``/CPU:０``, ``/CPU:٠`` and ``"/CPU:0\\n"`` were
CPU 0 and ``/GPU:١`` cuda:1; with ``["/CPU:0", "/cpu:00"]`` the write-back put every node on ``/device:CPU:0``)."""

from __future__ import annotations

import re

import pytest
import torch
from write_back_cases import one_line, tf_case, torch_case

from gplace.export import check_write_back
from gplace.ir import Cluster, Device, InvalidPlacementError
from gplace.runtime.base import ClusterMismatchError
from gplace.runtime.tf_runtime import tf_device
from gplace.runtime.torch_devices import torch_device
from gplace.testing import uniform_cluster

NOT_ASCII = ["/CPU:\uff10", "/CPU:\u0660", "/CPU:0\n", "/GPU:\u0661", "/job:a/device:GPU:1\n"]
MERGED = re.escape("cluster devices '/CPU:0' and '/cpu:00' all map to framework device '/device:CPU:0'")


@pytest.mark.parametrize("name", NOT_ASCII, ids=["fullwidth", "arabic-indic", "newline", "gpu", "full-newline"])
def test_a_name_without_an_ascii_index_at_its_end_maps_to_no_device(name):
    with pytest.raises(ValueError, match=re.escape(f"device {name!r} maps to no TensorFlow device")):
        tf_device(name)
    with pytest.raises(ValueError, match=re.escape(f"device {name!r} maps to no torch device")):
        torch_device(name)


def test_ascii_names_still_map():
    assert tf_device("/cpu:00") == "/device:CPU:0" and tf_device("/job:a/device:GPU:12") == "/device:GPU:12"
    assert torch_device("/GPU:1") == torch.device("cuda", 1) and torch_device("/CPU:3") == torch.device("cpu")


@pytest.fixture(scope="module")
def tf_function():
    return tf_case()


def _spelled_twice() -> Cluster:
    return Cluster.build([Device("/CPU:0", "cpu"), Device("/cpu:00", "cpu")], default_bandwidth=1e9)


@pytest.mark.tf
def test_tf_write_back_refuses_two_cluster_devices_on_one_tf_device(tf_function):
    from gplace.export.tensorflow import place_graph_def

    _, graph, _, placement = tf_function
    with pytest.raises(InvalidPlacementError, match=MERGED) as err:
        check_write_back(graph, _spelled_twice())
    one_line(err)
    with pytest.raises(InvalidPlacementError, match=MERGED):
        place_graph_def(graph, _spelled_twice(), placement)


@pytest.mark.tf
def test_a_device_map_entry_shares_a_tf_device_on_purpose(tf_function):
    from gplace.export.tensorflow import place_graph_def

    _, graph, _, placement = tf_function
    check_write_back(graph, _spelled_twice(), device_map={"/cpu:00": "/CPU:0"})
    placed = place_graph_def(graph, _spelled_twice(), placement, device_map={"/cpu:00": "/CPU:0"})
    assert {node.device for node in placed.node} == {"/device:CPU:0"}


@pytest.mark.tf
def test_tf_runtime_refuses_two_cluster_devices_on_one_tf_device(tf_function):
    from gplace.runtime.tf_runtime import TensorFlowRuntime

    _, graph, _, placement = tf_function
    runtime = TensorFlowRuntime(steps=1, warmup=0)
    with pytest.raises(ClusterMismatchError, match=MERGED):
        runtime.check_cluster(_spelled_twice())
    measured = runtime.measure(graph, _spelled_twice(), placement)
    assert not measured.ok and re.search(MERGED, measured.reason)


def test_torch_write_back_refuses_two_cluster_devices_on_one_gpu_but_not_on_cpu():
    _, _, graph, _ = torch_case()
    gpus = Cluster.build([Device("/GPU:0", "gpu"), Device("cuda:0", "gpu")], default_bandwidth=1e9)
    with pytest.raises(InvalidPlacementError, match=re.escape("'/GPU:0' and 'cuda:0' all map to framework device "
                                                              "'cuda:0'")):
        check_write_back(graph, gpus)
    check_write_back(graph, gpus, device_map={"/GPU:0": "meta", "cuda:0": "meta"})
    check_write_back(graph, uniform_cluster(2, kind="cpu"))  # /CPU:0 and /CPU:1: torch's one cpu
