"""PipeDream phases: a gradient edge carries the gradient of its forward edge's source activations (the
``load_pipedream`` docstring), told apart here by giving the two layers different activation sizes."""

from __future__ import annotations

from pathlib import Path

from gplace.importers.profiles import load_pipedream

GRAPH_TXT = (
    "node1 -- Input -- forward_compute_time=5.000, backward_compute_time=0.000, activation_size=100.000, "
    "parameter_size=0.000\n"
    "node2 -- Conv2d(3, 8) -- forward_compute_time=1.500, backward_compute_time=2.500, "
    "activation_size=30.000, parameter_size=64.000\n"
    "\tnode1 -- node2\n"
)


def test_gradient_edge_carries_the_source_layers_activation_bytes(tmp_path: Path) -> None:
    """node1 (100 B) -> node2 (30 B): node2/grad -> node1/grad carries 100 B, node1 -> node2 100 B, and each layer's
    forward op keeps its activations for its backward op (node2 -> node2/grad: 30 B)."""
    path = tmp_path / "graph.txt"
    path.write_text(GRAPH_TXT)
    g = load_pipedream(path, phases=True)
    edges = {(g.op_names[s], g.op_names[d]): int(b) for (s, d), b in zip(g.edge_index.T, g.edge_bytes, strict=True)}
    assert edges[("node2/grad", "node1/grad")] == 100
    assert edges[("node1", "node2")] == 100 and edges[("node2", "node2/grad")] == 30
