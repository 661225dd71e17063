"""Placements, measurements and schedules stay read-only values; graphs and clusters never take the caller's arrays;
a placement that splits a group or uses a barred device is refused naming where."""

import copy
import dataclasses
import pickle

import numpy as np
import pytest
import torch

from gplace import Cluster, Device, Edge, Op, OpGraph, Placement
from gplace.ir import InvalidPlacementError
from gplace.methods import make_learner
from gplace.placer import PolicyPlacer
from gplace.policies.base import check_devices
from gplace.runtime import Simulator
from gplace.testing import chain, uniform_cluster

ROUND_TRIPS = pytest.mark.parametrize("round_trip", [lambda x: pickle.loads(pickle.dumps(x)), copy.deepcopy],
                                      ids=["pickle", "deepcopy"])


@ROUND_TRIPS
def test_a_copied_placement_stays_read_only_and_keeps_its_hash(round_trip):
    """numpy restores arrays writable: a copied placement could be changed in place, changing its hash in a dict."""
    p = round_trip(Placement.for_graph(chain(), [0, 1, 0]))
    seen = {p: 1}
    with pytest.raises(ValueError, match="read-only"):
        p.devices[0] = 1
    assert p in seen


@ROUND_TRIPS
def test_a_copied_measurement_and_schedule_stay_read_only(round_trip):
    """A measurement from a worker process (pickled) or a deep copy keeps the simulator's read-only arrays."""
    g, c = chain(), uniform_cluster(2)
    p = Placement.for_graph(g, [0, 1, 0])
    m, s = round_trip(Simulator().measure(g, c, p)), round_trip(Simulator().schedule(g, c, p))
    for name, arr in [*vars(m).items(), *vars(s).items()]:
        if isinstance(arr, np.ndarray):
            assert not arr.flags.writeable, name


@ROUND_TRIPS
def test_a_copied_pipeline_schedule_stays_read_only(round_trip):
    """pipe-v3's timeline, as the step-time simulator's: its arrays stay read-only when pickled or copied."""
    from gplace.pipeline import PipelineSimulator

    g, c = chain(), uniform_cluster(2)
    s = round_trip(PipelineSimulator(2, "gpipe").simulate(g, c, Placement.for_graph(g, [0, 1, 0])))
    arrays = {name: arr for name, arr in vars(s).items() if isinstance(arr, np.ndarray)}
    assert arrays and not any(arr.flags.writeable for arr in arrays.values())


@ROUND_TRIPS
def test_a_copied_grouping_and_its_features_stay_read_only(round_trip):
    """A grouping (a pickled placer carries one) and its features came back writable: writing its op_group moved
    every op of the expanded placement."""
    from gplace.features import featurize
    from gplace.grouping import group_ops

    grouping = group_ops(chain((1.0, 2.0, 3.0, 4.0)), 2)
    features = featurize(chain((1.0, 2.0, 3.0, 4.0)), grouping)
    copies = round_trip(grouping), round_trip(features)
    arrays = {name: arr for obj in copies for name, arr in vars(obj).items() if isinstance(arr, np.ndarray)}
    assert len(arrays) == 11 and not any(arr.flags.writeable for arr in arrays.values())


def test_a_placement_from_out_of_band_buffers_owns_its_devices():
    """Unpickled from protocol-5 buffers, a placement viewed the receiver's buffer: reusing it changed the
    placement, and its hash, under a set holding it."""
    p = Placement.for_graph(chain(), [0, 1, 0])
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(p, protocol=5, buffer_callback=buffers.append)
    received = [bytearray(b.raw()) for b in buffers]
    copy_ = pickle.loads(data, buffers=received)
    seen = {copy_}
    for buf in received:
        np.frombuffer(buf, dtype=np.uint8)[:] = 7
    assert copy_ == p and copy_ in seen and not copy_.devices.flags.writeable


def test_a_cluster_copies_the_callers_arrays():
    """Cluster() froze the caller's own bandwidth matrix in place and shared it: the caller could not reuse it,
    and re-enabling writes changed the cluster under its fingerprint."""
    bw = np.full((2, 2), 1e9)
    np.fill_diagonal(bw, np.inf)
    c = Cluster((Device("a", "gpu"), Device("b", "gpu")), bw, np.zeros((2, 2)), "mine")
    assert bw.flags.writeable
    bw[0, 1] = 1e3
    assert c.bandwidth[0, 1] == 1e9 and not c.bandwidth.flags.writeable


def test_a_graph_copies_the_callers_arrays():
    """Building an OpGraph leaves the caller's cost array writable and unshared."""
    cost = np.array([1.0, 2.0, 3.0])
    g = dataclasses.replace(chain(), compute_cost=cost)
    cost[0] = 9.0
    assert g.compute_cost[0] == 1.0 and not g.compute_cost.flags.writeable
    assert g.compute_cost.dtype == np.float64


def test_evaluate_names_the_row_and_ops_of_a_split_group():
    """A placement splitting a colocation group raised a bare ValueError naming nothing."""
    ops = [Op("a", "MatMul", 1.0, colocation="g"), Op("b", "MatMul", 1.0, colocation="g"), Op("c", "Relu", 1.0)]
    g = OpGraph.from_ops(ops, [Edge("a", "b"), Edge("b", "c")], name="coloc")
    encoder, policy = make_learner("seq2seq", 2)
    placer = PolicyPlacer(g, uniform_cluster(2), encoder, policy)
    with pytest.raises(InvalidPlacementError, match=r"row 1 .*'a' on device 0, op 'b' on device 1"):
        placer.evaluate(np.array([[1, 1, 1], [0, 1, 0]]))


def test_check_devices_names_the_row_position_and_device():
    """A barred or out-of-range device is refused naming its row, group position and device."""
    allowed = torch.tensor([[True, False], [True, True]])
    with pytest.raises(InvalidPlacementError, match="row 1 puts the group at position 0 on device 1, which it is not"):
        check_devices(torch.tensor([[0, 1], [1, 0]]), allowed)
    with pytest.raises(InvalidPlacementError, match=r"row 0 puts the group at position 1 on device 5; .*\[0, 2\)"):
        check_devices(torch.tensor([[0, 5]]), allowed)


@pytest.mark.parametrize("devices", [torch.tensor([[0.9, 1.5]]), torch.tensor([[-0.7, 0.0]]),
                                     torch.tensor([[True, False]])])
def test_check_devices_refuses_devices_that_are_not_integers(devices):
    """Float devices were truncated (0.9 -> 0, 1.5 -> 1, -0.7 -> 0), so a policy's evaluate scored probabilities or
    float actions as plausible placements instead of refusing them."""
    with pytest.raises(InvalidPlacementError, match=f"integer device indices, got dtype {devices.dtype}"):
        check_devices(devices, torch.ones(2, 2, dtype=torch.bool))
