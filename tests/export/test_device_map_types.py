"""A write-back device_map that is no mapping of cluster device names, or whose value is no device of the
framework (found by a type probe): refused in one line naming device_map or the entry, where it was ignored
("device 'fast' maps to no torch device"), or failed inside torch.device() or re."""

from __future__ import annotations

import pytest
import torch
from write_back_cases import named_cluster, one_line, tf_case, torch_case

from gplace.export import check_write_back
from gplace.export.torch import module_device_map, split_program
from gplace.ir import InvalidPlacementError


@pytest.fixture(scope="module")
def chain():
    return torch_case()


def _torch_write_backs(chain, device_map):
    """The torch write-backs of ``chain``'s placement on :func:`named_cluster` with ``device_map``, as calls."""
    _, _, graph, placement = chain
    cluster = named_cluster()
    return (lambda: module_device_map(graph, cluster, placement, device_map=device_map),
            lambda: split_program(graph, cluster, placement, device_map=device_map),
            lambda: check_write_back(graph, cluster, device_map=device_map))


@pytest.mark.parametrize("device_map", [[("fast", "cpu"), ("slow", "cpu")], "cpu", {0: "cpu"}],
                         ids=["pairs", "str", "int-key"])
def test_a_device_map_that_is_no_mapping_of_names_is_refused_naming_device_map(chain, device_map):
    for call in _torch_write_backs(chain, device_map):
        with pytest.raises(ValueError, match=r"^device_map must map cluster device names to torch devices") as err:
            call()
        assert repr(device_map) in one_line(err)


@pytest.mark.parametrize("value", [None, 0, 1.5], ids=["None", "int", "float"])
def test_a_device_map_value_that_is_no_torch_device_is_named_in_one_line(chain, value):
    """A None value raised torch's many-line TypeError; an int was read by torch as an accelerator's index."""
    _, _, graph, placement = chain
    device_map = {"fast": value, "slow": "cpu"}
    for call in (lambda: module_device_map(graph, named_cluster(), placement, device_map=device_map),
                 lambda: split_program(graph, named_cluster(), placement, device_map=device_map)):
        with pytest.raises(InvalidPlacementError, match=rf"^device_map\['fast'\] = {value!r} is not a torch device"
                           ) as err:
            call()
        one_line(err)


def test_a_torch_device_value_is_taken(chain):
    module, example, graph, placement = chain
    cluster = named_cluster()
    device_map = {"fast": torch.device("cpu"), "slow": "cpu"}
    assert set(module_device_map(graph, cluster, placement, device_map=device_map).values()) == {"cpu"}
    torch.testing.assert_close(split_program(graph, cluster, placement, device_map=device_map)(example),
                               module(example))


@pytest.fixture(scope="module")
def tf_function():
    return tf_case()


@pytest.mark.tf
def test_place_graph_def_takes_a_tf_device_spec(tf_function):
    """A tf.DeviceSpec raised re's 'expected string or bytes-like object'."""
    from gplace.export.tensorflow import place_graph_def

    tf, graph, cluster, placement = tf_function
    spec = tf.DeviceSpec(device_type="CPU", device_index=0)
    placed = place_graph_def(graph, cluster, placement, device_map={"/CPU:1": spec})
    assert {n.device for n in placed.node} == {"/device:CPU:0"}


@pytest.mark.tf
@pytest.mark.parametrize("value", [pytest.param(0, id="int"), pytest.param(torch.device("cpu"), id="torch.device"),
                                   pytest.param(None, id="None")])
def test_place_graph_def_names_a_device_map_value_that_is_no_tf_device(tf_function, value):
    from gplace.export.tensorflow import place_graph_def

    _, graph, cluster, placement = tf_function
    with pytest.raises(InvalidPlacementError, match=r"^device_map\['/CPU:1'\] = .* is not a TensorFlow") as err:
        place_graph_def(graph, cluster, placement, device_map={"/CPU:1": value})
    one_line(err)


@pytest.mark.tf
@pytest.mark.parametrize("device_map", [[("/CPU:1", "/CPU:0")], "cpu"], ids=["pairs", "str"])
def test_place_graph_def_refuses_a_device_map_that_is_no_mapping(tf_function, device_map):
    from gplace.export.tensorflow import place_graph_def

    _, graph, cluster, placement = tf_function
    with pytest.raises(ValueError, match=r"^device_map must map cluster device names to TensorFlow devices"):
        place_graph_def(graph, cluster, placement, device_map=device_map)
    with pytest.raises(ValueError, match=r"^device_map must map cluster device names to TensorFlow devices"):
        check_write_back(graph, cluster, device_map=device_map)


@pytest.mark.parametrize("device_map", [{"fast": "cpu", "slow": "cpu", "sloow": "meta"}, {"fats": "cpu"}],
                         ids=["extra", "misspelt"])
def test_a_device_map_key_that_names_no_cluster_device_is_refused_naming_it(chain, device_map):
    """A misspelt key was ignored: its device kept the default mapping (or was named as mapping to nothing)."""
    for call in _torch_write_backs(chain, device_map):
        with pytest.raises(InvalidPlacementError, match=r"^device_map names no device of cluster") as err:
            call()
        text = one_line(err)
        assert repr(next(k for k in device_map if k not in ("fast", "slow"))) in text and "'fast', 'slow'" in text
