"""From a probe of the simulator, baselines and hand-written files: HEFT, m-ETF, m-SCT and m-TOPO said "out of
memory, no placement fits" of a chain that fits one device (their ledger holds every output for the whole step);
a device kind spelt "GPU" ran the ops' generic cost without a word; ``gplace show`` dropped the readers' warnings
and printed "None on None"; a missing "edges" field read as "must be a list, got NoneType"."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gplace.baselines import HEFT, METF, MSCT, MTopo
from gplace.ir import Cluster, Device, Edge, GraphError, Op, OpGraph, graph_from_dict
from gplace.ir.cluster import misspelt_kinds
from gplace.runtime import Simulator

ROOT = Path(__file__).resolve().parents[1]
GB = 10**9


def _chain_of_large_outputs() -> OpGraph:
    """Eight ops of 1 GB outputs in a chain: sim-v1 holds two at a time, the ledger all eight."""
    ops = [Op(f"l{i}", "X", 0.01, output_bytes=GB) for i in range(8)]
    return OpGraph.from_ops(ops, [Edge(f"l{i}", f"l{i + 1}") for i in range(7)], name="chain8")


@pytest.mark.parametrize("placer", [HEFT(), METF(), MSCT(), MTopo()], ids=lambda p: p.name)
def test_a_memory_aware_pass_that_finds_no_room_falls_back_to_one_device_that_fits(placer, caplog):
    graph = _chain_of_large_outputs()
    cluster = Cluster.build([Device("g0", "gpu", memory=3 * GB), Device("g1", "gpu", memory=3 * GB)],
                            default_bandwidth=1e10, default_latency=1e-5)
    with caplog.at_level(logging.WARNING):
        placement = placer.place(graph, cluster)
    assert Simulator().measure(graph, cluster, placement).ok
    assert "fits the graph on one device" in caplog.text


def test_a_kind_spelt_otherwise_is_named_also_where_a_generic_cost_runs_its_ops():
    ops = [Op(f"a{i}", "X", 1.0, kind_cost={"gpu": 0.1}) for i in range(2)]
    graph = OpGraph.from_ops(ops, [Edge("a0", "a1")], name="g")
    cluster = Cluster.build([Device("cpu", "cpu"), Device("g0", "GPU")], default_bandwidth=1e10, name="c")
    assert misspelt_kinds(cluster, graph) == [
        "cluster c: g0 run the ops of graph g at their generic cost, not their cost for 'gpu': their kind 'GPU' is "
        "not the ops' 'gpu' (kinds are compared as written)"]


def test_a_missing_list_is_named_missing():
    with pytest.raises(GraphError, match="missing field 'edges'"):
        graph_from_dict({"format": "gplace.graph", "version": 1, "name": "g", "ops": [{"name": "a", "cost": 1.0}]})


def test_show_logs_the_readers_warnings_and_names_no_none(tmp_path):
    graph = {"format": "gplace.graph", "version": 1, "name": "g", "ops": [{"name": "a", "cost": 1.0}], "edges": []}
    (tmp_path / "g.json").write_text(json.dumps(graph))
    cluster = {"format": "gplace.cluster", "version": 1, "name": "c", "devices": [{"name": "d0", "kind": "cpu"}]}
    (tmp_path / "c.json").write_text(json.dumps(cluster))
    (tmp_path / "p.json").write_text(json.dumps({"format": "gplace.placement", "version": 1,
                                                 "placement": {"a": "d0"}}))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shown = subprocess.run([sys.executable, "-m", "gplace", "show", "p.json", "--graph", "g.json", "--cluster",
                            "c.json"], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "no graph_fingerprint" in shown.stderr and "WARNING" in shown.stderr
    assert "None" not in shown.stdout and "the file's own run" not in shown.stdout
    bare = subprocess.run([sys.executable, "-m", "gplace", "show", "p.json"], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert bare.returncode == 0 and "an unnamed graph on an unnamed cluster" in bare.stdout, bare.stderr
