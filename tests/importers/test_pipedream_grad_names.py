"""``load_pipedream(phases=True)`` names each layer's backward op ``L/grad``; a file with a layer of that name
(``node1`` and ``node1/grad``) was refused as a "duplicate op name 'node1/grad'" it does not have."""

from gplace.importers.profiles import load_pipedream

GRAPH = """\
node1 -- Input -- forward_compute_time=0.000, backward_compute_time=0.000, activation_size=100.0, parameter_size=0.0
node1/grad -- Conv2d(3, 64) -- forward_compute_time=1.0, backward_compute_time=2.0, activation_size=100.0, \
parameter_size=10.0
node2 -- ReLU() -- forward_compute_time=1.0, backward_compute_time=2.0, activation_size=100.0, parameter_size=0.0
\tnode1 -- node1/grad
\tnode1/grad -- node2
"""


def test_a_layer_named_like_a_backward_op_keeps_its_name_and_gets_its_own_backward_op(tmp_path):
    path = tmp_path / "m" / "graph.txt"
    path.parent.mkdir()
    path.write_text(GRAPH)
    graph = load_pipedream(path, phases=True)
    ops = {op.name: op for op in graph.ops()}
    assert len(ops) == 6 and ops["node1/grad"].phase == "forward"
    assert ops["node1/grad_2"].grad_of == "node1" and ops["node1/grad/grad"].grad_of == "node1/grad"
    assert ops["node2/grad"].grad_of == "node2"
    edges = {(e.src, e.dst) for e in graph.edges()}
    assert ("node2/grad", "node1/grad/grad") in edges and ("node1/grad/grad", "node1/grad_2") in edges
