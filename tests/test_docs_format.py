"""docs/format.md's examples are documents gplace reads: the graph, the cluster and a placement of the one on the
other, whose step times are what sim-v1 measures (the placement named another graph's fingerprint and older times)."""

import json
import re
from pathlib import Path

import pytest

from gplace.baselines import SingleDevice
from gplace.ir.serialize import cluster_from_dict, graph_from_dict, placement_from_dict
from gplace.runtime import Simulator

DOC = Path(__file__).resolve().parents[1] / "docs" / "format.md"


def _examples() -> dict[str, dict]:
    """The first JSON block of each format in docs/format.md."""
    found: dict[str, dict] = {}
    for block in re.findall(r"```json\n(.*?)```", DOC.read_text(), re.S):
        doc = json.loads(block)
        if isinstance(doc, dict) and "format" in doc:
            found.setdefault(doc["format"], doc)
    return found


def test_the_placement_example_places_the_graph_example_on_the_cluster_example():
    docs = _examples()
    graph, cluster = graph_from_dict(docs["gplace.graph"]), cluster_from_dict(docs["gplace.cluster"])
    placement = placement_from_dict(docs["gplace.placement"], graph, cluster)
    sim = Simulator()
    assert sim.measure(graph, cluster, placement).step_time == pytest.approx(docs["gplace.placement"]["step_time"],
                                                                             rel=1e-2)
    for device, seconds in docs["gplace.placement"]["baselines"].items():
        alone = SingleDevice(device=cluster.device_names.index(device)).place(graph, cluster)  # pins stay
        assert sim.measure(graph, cluster, alone).step_time == pytest.approx(seconds, rel=1e-2), device
