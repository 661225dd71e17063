from pathlib import Path

import pytest

from gplace.importers import load_pipedream
from gplace.ir import Placement
from gplace.pipeline import PipelineSimulator
from gplace.testing import uniform_cluster

NODES = [("node1", "Input0", 5.0, 0.0, 1000, 0), ("node2", "Conv2d(3, 8)", 2.0, 4.0, 2000, 300),
         ("node3", "ReLU(inplace)", 1.0, 0.5, 2000, 0), ("node4", "Linear(8, 2)", 3.0, 6.0, 80, 64)]
GRAPH_TXT = "".join(
    f"{n} -- {desc} -- forward_compute_time={f:.3f}, backward_compute_time={b:.3f}, "
    f"activation_size={a:.3f}, parameter_size={p:.3f}\n" for n, desc, f, b, a, p in NODES
) + "\tnode1 -- node2\n\tnode2 -- node3\n\tnode3 -- node4\n"


@pytest.fixture
def graph_txt(tmp_path) -> Path:
    path = tmp_path / "tiny" / "graph.txt"
    path.parent.mkdir()
    path.write_text(GRAPH_TXT)
    return path


def test_pipedream_phases_give_colocated_forward_and_backward_ops(graph_txt):
    g = load_pipedream(graph_txt, phases=True)
    assert g.num_ops == 8
    i = g.op_index
    assert g.phase[i["node2"]] == "forward" and g.phase[i["node2/grad"]] == "backward"
    assert g.grad_of[i["node2/grad"]] == i["node2"]
    assert g.colocation[i["node2"]] == g.colocation[i["node2/grad"]] == "node2"
    assert g.kind_cost["gpu"][i["node2/grad"]] == pytest.approx(4e-3)
    assert g.kind_cost["gpu"][i["node1"]] == 0.0  # data loading, as without phases
    edges = {(g.op_names[s], g.op_names[d]): int(b) for (s, d), b in zip(g.edge_index.T, g.edge_bytes, strict=True)}
    assert edges[("node3/grad", "node2/grad")] == 2000  # gradient of node2's activations
    assert edges[("node4", "node4/grad")] == 80
    total = load_pipedream(graph_txt).kind_cost["gpu"].sum()
    assert g.kind_cost["gpu"].sum() == pytest.approx(total)


def test_pipedream_phases_pipeline_over_two_gpus(graph_txt):
    g = load_pipedream(graph_txt, phases=True)
    c = uniform_cluster(2, bandwidth=1e9)
    one = PipelineSimulator(4, "1f1b").measure(g, c, Placement.single(g, 0)).step_time
    split = {"node1": 0, "node2": 0, "node3": 1, "node4": 1}
    p = Placement.for_graph(g, [split[n.split("/")[0]] for n in g.op_names])
    two = PipelineSimulator(4, "1f1b").measure(g, c, p).step_time
    assert one == pytest.approx(0.0165) and two < one


def test_torch_joint_graph_ops_carry_phases_from_the_partitioner_tags():
    import torch

    from gplace.importers.torch_export import from_torch

    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    g = from_torch(m, (torch.randn(3, 4),), training=True)
    i = g.op_index
    assert g.phase[i["addmm"]] == "forward" and g.phase[i["threshold_backward"]] == "backward"
    assert g.op_names[g.grad_of[i["threshold_backward"]]] == "relu"
    assert from_torch(m, (torch.randn(3, 4),)).phase == ()  # inference: no phases
    c = uniform_cluster(2, bandwidth=1e9)
    assert PipelineSimulator(4).measure(g, c, Placement.single(g, 0)).ok
