import torch

from gplace.importers.torch_export import from_torch
from gplace.ir import Placement
from gplace.pipeline.stages import pipeline_stages, placement_extras, split_spec
from gplace.testing import diamond, uniform_cluster


class Affine(torch.nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


def _graph():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Affine(), torch.nn.Sequential(torch.nn.ReLU(),
                                                                                      torch.nn.Linear(4, 2)))
    return from_torch(model, (torch.randn(3, 4),))


def _place(graph, device_of):
    return Placement.for_graph(graph, [device_of(name) for name in graph.op_names])


def test_split_at_a_module_boundary_names_the_outermost_module_beginning_there():
    g = _graph()
    paths = g.source.module_paths
    p = _place(g, lambda n: 1 if paths.get(n, "").startswith("2") else 0)
    spec = split_spec(g, p)
    assert spec.split_spec == {"2": "BEGINNING"} and spec.unaligned == [] and spec.stage_devices == [0, 1]
    assert placement_extras(g, uniform_cluster(2), p)["stage_devices"] == ["/GPU:0", "/GPU:1"]
    back = _place(g, lambda n: 1 if paths.get(n, "").startswith("1") else 0)  # devices 0, 1, 0: non-contiguous
    assert split_spec(g, back).stage_devices == [0, 1, 0]


def test_split_inside_a_module_is_reported_unaligned():
    g = _graph()
    paths = g.source.module_paths
    add = next(n for n in g.op_names if paths.get(n) == "1" and "add" in n)
    p = _place(g, lambda n: 1 if n == add or paths.get(n, "").startswith("2") else 0)
    spec = split_spec(g, p)
    assert spec.unaligned == [{"op": add, "module": "1"}]
    assert spec.split_spec == {}  # add and module "2" share device 1: one split, inside module "1"
    extras = placement_extras(g, uniform_cluster(2), p)
    assert extras["split_unaligned"] == spec.unaligned and set(extras["stages"]) == {"/GPU:0", "/GPU:1"}


def test_stages_list_each_device_in_order_and_graphs_without_modules_have_no_split_spec():
    g, c = diamond(), uniform_cluster(3)
    p = Placement.for_graph(g, [2, 0, 0, 2])
    assert pipeline_stages(g, c, p) == {"/GPU:2": ["src", "sink"], "/GPU:0": ["left", "right"]}
    assert split_spec(g, p) is None and "split_spec" not in placement_extras(g, c, p)
