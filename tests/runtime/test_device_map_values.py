"""A runtime device_map whose value is no device of the framework, or that is no mapping (found by a type probe):
refused in one line naming the entry or device_map, where torch.device() raised a many-line TypeError, re raised
'expected string or bytes-like object', or a str device_map was searched with `in`."""

from __future__ import annotations

import pytest
import torch

from gplace.runtime import TorchRuntime
from gplace.runtime.tf_runtime import TensorFlowRuntime, tf_device
from gplace.runtime.torch_devices import torch_device


@pytest.mark.parametrize("value", [None, 0, 1.5], ids=["None", "int", "float"])
def test_torch_runtime_names_a_device_map_value_that_is_no_torch_device(value):
    with pytest.raises(ValueError, match=rf"^device_map\['/GPU:0'\] = {value!r} is not a torch device") as err:
        TorchRuntime(device_map={"/GPU:0": value})
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=rf"^device_map\['/GPU:0'\] = {value!r} is not a torch device"):
        torch_device("/GPU:0", {"/GPU:0": value})


def test_torch_runtime_takes_a_torch_device_value():
    assert TorchRuntime(device_map={"/GPU:0": torch.device("cpu")}).device_map == {"/GPU:0": "cpu"}


def test_torch_device_refuses_a_device_map_that_is_no_mapping():
    for device_map in ("cpu", [("/GPU:0", "cpu")]):
        with pytest.raises(ValueError, match=r"^device_map must map cluster device names to torch devices"):
            torch_device("c", device_map)


@pytest.mark.parametrize("value", [0, None, pytest.param(torch.device("cpu"), id="torch.device")])
def test_tf_device_map_values_that_are_no_tf_device_are_named(value):
    with pytest.raises(ValueError, match=r"^device_map\['fast'\] = .* is not a TensorFlow CPU or GPU device") as err:
        tf_device("fast", {"fast": value})
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"^device_map\['fast'\] = .* is not a TensorFlow CPU or GPU device"):
        TensorFlowRuntime(device_map={"fast": value})


def test_tf_device_map_must_be_a_mapping():
    with pytest.raises(ValueError, match=r"^device_map must map cluster device names to TensorFlow devices"):
        TensorFlowRuntime(device_map=[("fast", "/CPU:0")])
    with pytest.raises(ValueError, match=r"^device_map must map cluster device names to TensorFlow devices"):
        tf_device("c", "/CPU:0")


@pytest.mark.tf
def test_tf_device_takes_a_tf_device_spec():
    tf = pytest.importorskip("tensorflow")
    spec = tf.DeviceSpec(device_type="GPU", device_index=1)
    assert tf_device("fast", {"fast": spec}) == "/device:GPU:1"
    assert TensorFlowRuntime(device_map={"fast": spec}).device_map == {"fast": "/device:GPU:1"}
