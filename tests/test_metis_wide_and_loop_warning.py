"""METIS on clusters wider than the graph's units allow, and the torch importer's warning for uncounted loops."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gplace.ir.serialize as serialize
from gplace import testing
from gplace.baselines import METIS
from gplace.ir import Cluster, Device, OpGraph


def _layered_with_groups() -> OpGraph:
    """layered_dag(200, width=20) with every 7th op after the first layer in one of 3 colocation groups (177 units):
    each group weighs about 9 ops, more than a part's share of the work on 64 or more equal devices."""
    record = serialize.graph_to_dict(testing.layered_dag(200, width=20))
    for i, op in enumerate(record["ops"]):
        if i >= 20 and i % 7 == 0:
            op["colocation"] = f"grp{i % 3}"
    return serialize.graph_from_dict(record)


def _wide_cluster(num_devices: int) -> Cluster:
    devices = [Device(f"/GPU:{i}", "gpu", 1.0, 10**12) for i in range(num_devices)]
    return Cluster.build(devices, default_bandwidth=1e10, name="wide")


def _check_groups_kept(graph: OpGraph, devices: np.ndarray, num_devices: int) -> None:
    assert devices.shape == (graph.num_ops,) and devices.min() >= 0 and devices.max() < num_devices
    for group in {g for g in graph.colocation if g is not None}:
        assert len({int(d) for d, g in zip(devices, graph.colocation, strict=True) if g == group}) == 1, group


@pytest.fixture
def pymetis():
    return pytest.importorskip("pymetis")


def test_metis_on_a_wide_cluster_with_heavy_groups_prints_nothing_to_stdout(pymetis, capfd, caplog) -> None:
    """On 128 devices METIS printed "***Cannot bisect a graph with 0 vertices!" (8 lines) to fd 1, corrupting
    the stdout of a tool wrapping gplace: its C library's output now goes to the DEBUG log."""
    graph = _layered_with_groups()
    with caplog.at_level(logging.DEBUG, logger="gplace.baselines.metis"):
        devices = METIS().place(graph, _wide_cluster(128)).devices
    assert capfd.readouterr().out == ""
    assert "METIS printed: ***Cannot bisect a graph with 0 vertices!" in caplog.text
    _check_groups_kept(graph, devices, 128)


def test_what_c_code_left_unflushed_before_metis_stays_on_stdout(pymetis) -> None:
    """Text C code wrote to stdout and had not flushed (C's stdout to a pipe is fully buffered) was flushed into
    METIS's redirection, so it left stdout for the DEBUG log. Run in a child without PYTHONUNBUFFERED, which makes
    C's stdout unbuffered (as it may be in this process)."""
    script = textwrap.dedent("""
        import ctypes, logging
        from gplace.baselines import METIS
        from gplace.testing import random_dag, uniform_cluster
        logging.basicConfig(level=logging.DEBUG)
        libc = ctypes.CDLL(None)
        libc.printf(b"written before METIS")  # no newline: still in the C library's buffer
        METIS().place(random_dag(24, seed=3), uniform_cluster(2))
        libc.fflush(None)
    """)
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                           check=True)
    assert "written before METIS" in child.stdout and "written before METIS" not in child.stderr, child.stderr


def test_a_while_loop_nested_in_a_cond_is_warned_as_not_counted_naming_the_graph_and_the_cond(caplog) -> None:
    """A constant 3-pass loop inside a cond was warned as "its trip count depends on the data", in two identical
    lines for two such conds: the warning now says it is nested (not counted) and names the graph and the cond."""
    torch = pytest.importorskip("torch")
    from torch_control_flow import Looping

    from gplace.importers.torch_export import from_torch

    class LoopInCond(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.loop = Looping(3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cond(x.sum() > 0, lambda y: self.loop(y), lambda y: y - 1, (x,))

    twice = torch.nn.Sequential(LoopInCond(), LoopInCond())
    with caplog.at_level(logging.WARNING, logger="gplace.importers.torch_export"):
        from_torch(twice, (torch.randn(4, 8),), name="twice")
    assert "depends on the data" not in caplog.text
    for cond in ("cond", "cond_1"):
        assert (f"torch program 'twice': node 'while_loop' (while_loop), nested in top-level node {cond!r} (cond): "
                "its trip count is not counted; its cost counts one pass") in caplog.text
