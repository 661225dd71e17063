"""A policy with a fixed device count picks devices by position: reused on a cluster listing its kinds in another
order it put the work on the CPU (387.5 ms against 94.5 ms for lstm_lm on paper_2gpu reordered), without a word."""

from __future__ import annotations

import logging

import torch

from gplace.encoders import GNNEncoder
from gplace.ir import Cluster, Device
from gplace.policies import DeviceAwarePolicy, MLPPolicy
from gplace.pretrained import build, place_with_pretrained, save_policy
from gplace.testing import random_dag

ENCODER = {"conv": "sage", "hidden_size": 16, "num_layers": 2, "type_embedding": 8, "projection": 8}


def _cluster(kinds):
    return Cluster.build([Device(f"/{k.upper()}:{i}", k) for i, k in enumerate(kinds)], default_bandwidth=1e9,
                         name="-".join(kinds))


def _saved(tmp_path, policy, kinds):
    torch.manual_seed(0)
    return save_policy(tmp_path / "policy.pt", build(GNNEncoder, **ENCODER), policy,
                       meta={"max_groups": 16, "device_kinds": list(kinds)})


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "by position" in r.getMessage()]


def test_a_fixed_size_policy_on_devices_listed_in_another_order_warns(tmp_path, caplog):
    path = _saved(tmp_path, build(MLPPolicy, num_devices=3, hidden_size=16, state_size=16), ["cpu", "gpu", "gpu"])
    graph = random_dag(12, seed=0)
    with caplog.at_level(logging.WARNING):
        place_with_pretrained(graph, _cluster(["cpu", "gpu", "gpu"]), path)
    assert _warnings(caplog) == []
    with caplog.at_level(logging.WARNING):
        place_with_pretrained(graph, _cluster(["gpu", "gpu", "cpu"]), path)
    (message,) = _warnings(caplog)
    assert "trained on devices of kinds ['cpu', 'gpu', 'gpu']" in message and "lists ['gpu', 'gpu', 'cpu']" in message


def test_a_device_aware_policy_places_on_any_order_without_a_warning(tmp_path, caplog):
    path = _saved(tmp_path, build(DeviceAwarePolicy, hidden_size=16), ["cpu", "gpu", "gpu"])
    with caplog.at_level(logging.WARNING):
        place_with_pretrained(random_dag(12, seed=0), _cluster(["gpu", "cpu"]), path)
    assert _warnings(caplog) == []
