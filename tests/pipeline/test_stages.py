import numpy as np
import pytest
import torch

from gplace.importers.torch_export import from_torch
from gplace.ir import GraphError, InvalidPlacementError, Placement
from gplace.pipeline.stages import align_to_modules, pipeline_stages, placement_extras, split_spec
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


class _StateHeld(torch.nn.Module):
    """A batch norm (eval: its ``num_batches_tracked`` read by no op) and a weight tied between the first and last
    layer: both become ``Parameter`` ops, sources that come first in topological order."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 4)
        self.c.weight = self.a.weight

    def forward(self, x):
        return self.c(self.b(self.a(x)))


def test_parameter_ops_holding_state_do_not_split_the_pipeline():
    """A Parameter op on the device of the module owning its tensor (here a later one) is no forward op: it split
    a two-stage placement into stages [1, 0, 1] and the split inside module "b"."""
    g = from_torch(_StateHeld().eval(), (torch.randn(3, 4),))
    paths = g.source.module_paths
    held = [n for i, n in enumerate(g.op_names) if g.op_types[i] == "Parameter"]
    assert {paths[n] for n in held} >= {"b"} and len(held) >= 2
    p = _place(g, lambda n: int(paths.get(n, "") in ("b", "c")))
    spec = split_spec(g, p)
    assert spec.split_spec == {"b": "BEGINNING"} and spec.unaligned == [] and spec.stage_devices == [0, 1]
    aligned = align_to_modules(g)
    computing = [i for i, n in enumerate(g.op_names) if n in paths and g.op_types[i] != "Parameter"]
    assert len(computing) == 3  # one op per module: each its own segment, so no colocation joins them
    assert [aligned.colocation[i] for i in computing] == [None] * 3


def test_stages_list_each_device_in_order_and_graphs_without_modules_have_no_split_spec():
    g, c = diamond(), uniform_cluster(3)
    p = Placement.for_graph(g, [2, 0, 0, 2])
    assert pipeline_stages(g, c, p) == {"/GPU:2": ["src", "sink"], "/GPU:0": ["left", "right"]}
    assert split_spec(g, p) is None and "split_spec" not in placement_extras(g, c, p)


def _encoder_stack():
    torch.manual_seed(0)
    layers = [torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0) for _ in range(3)]
    model, x = torch.nn.Sequential(*layers).eval(), torch.randn(4, 8, 32)
    return model, x, from_torch(model, (x,))


def test_an_aligned_graph_splits_only_where_a_module_begins():
    from gplace.baselines.pipeline import GPipePartitioner
    from gplace.export.torch import pipeline_split

    model, x, graph = _encoder_stack()
    aligned, cluster = align_to_modules(graph), uniform_cluster(4)
    assert split_spec(graph, GPipePartitioner(microbatches=4).place(graph, cluster)).unaligned  # inside a module
    placement = GPipePartitioner(microbatches=4).place(aligned, cluster)
    spec = split_spec(aligned, placement)
    assert spec.unaligned == [] and len(spec.stage_devices) == 4
    stages = pipeline_split(aligned, cluster, placement, model, (x,))
    with torch.no_grad():
        out = stages.pipe(x)
        torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, model(x))
    rng = np.random.default_rng(0)
    groups = sorted({g for g in aligned.colocation if g is not None})
    for _ in range(20):  # any placement that keeps the groups whole, however scattered
        device_of = dict(zip(groups, rng.integers(0, 4, len(groups)).tolist(), strict=True))
        devices = [device_of[g] if g is not None else int(rng.integers(4)) for g in aligned.colocation]
        assert split_spec(aligned, Placement.for_graph(aligned, devices)).unaligned == []


def test_aligning_keeps_backward_ops_with_their_forward_ops_and_needs_module_paths():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    graph = from_torch(model, (torch.randn(3, 4),), training=True)
    split = Placement.for_graph(graph, [int(p == "backward") for p in graph.phase])  # backward ops on device 1
    away = sum(f >= 0 for f in graph.grad_of)
    assert split_spec(graph, split).backward_away == away > 0
    assert placement_extras(graph, uniform_cluster(2), split)["split_backward_away"] == away
    aligned = align_to_modules(graph)
    backward = [i for i, f in enumerate(aligned.grad_of) if f >= 0]
    assert backward and all(aligned.colocation[i] == aligned.colocation[aligned.grad_of[i]] for i in backward)
    assert {aligned.colocation[i] for i in backward} == {"module:0", "module:1", "module:2"}
    with pytest.raises(GraphError, match="graph 'diamond' has no module paths"):
        align_to_modules(diamond())


def test_the_config_importer_aligns_on_request():
    from gplace.importers import from_module_shapes

    model = _encoder_stack()[0]
    assert all(g is None for g in from_module_shapes(model, [[4, 8, 32]]).colocation)
    aligned = from_module_shapes(model, [[4, 8, 32]], align_to_modules=True)
    assert {"module:0.self_attn", "module:2.linear1"} <= set(aligned.colocation)


def test_a_pipeline_run_warns_when_its_split_falls_inside_a_module(tmp_path, caplog):
    import gplace
    from gplace.pipeline import PipelineSimulator

    graph = _encoder_stack()[2]
    for g, run in ((graph, "plain"), (align_to_modules(graph), "aligned")):
        gplace.place(g, uniform_cluster(4), method="gpipe", runtime=PipelineSimulator(4, "1f1b"),
                     run_dir=tmp_path / run)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "falls inside module '2.self_attn'" in warnings[0]
    assert "align_to_modules" in warnings[0]


class _Shared(torch.nn.Module):
    """``a`` is called twice: b -> a -> c -> a."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.a(self.c(self.a(self.b(x))))


def test_a_module_called_twice_is_no_split_point_and_stages_start_where_compute_does():
    """A split at a's first call gave {'a': BEGINNING}, which torch splits before both calls: 3 stages for 2
    devices, and the pipelined run crashed in gloo. The stages listed the device of a's weight first."""
    from gplace.export.torch import pipeline_split

    model, x = _Shared().eval(), torch.randn(4, 8)
    graph, cluster = from_torch(model, (x,)), uniform_cluster(2, kind="cpu")
    paths = graph.source.module_paths
    at_a = Placement.for_graph(graph, [1 if paths.get(op) in ("a", "c") else 0 for op in graph.op_names])
    spec = split_spec(graph, at_a)
    assert spec.split_spec == {} and spec.unaligned == [{"op": "linear_1", "module": "a"}]
    with pytest.raises(InvalidPlacementError, match="inside module 'a'"):
        pipeline_split(graph, cluster, at_a, model, (x,))
    assert list(pipeline_stages(graph, cluster, at_a)) == ["/CPU:0", "/CPU:1"]  # /CPU:1 (p_a_weight) first before
    aligned = align_to_modules(graph)  # a's first call joins b's segment, its second c's
    assert aligned.colocation[4] == aligned.colocation[3] and aligned.colocation[6] == aligned.colocation[5]
    placement = Placement.for_graph(aligned, [0, 0, 0, 0, 0, 1, 1])  # b, a | c, a
    assert split_spec(aligned, placement).split_spec == {"c": "BEGINNING"}
    split = pipeline_split(aligned, cluster, placement, model, (x,))
    assert split.pipe.num_stages == 2
    with torch.no_grad():
        out = split.pipe(x)
        torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, model(x))


def test_a_module_without_the_split_path_is_named():
    from gplace.export.torch import pipeline_split

    model, x = _Shared().eval(), torch.randn(4, 8)
    graph, cluster = from_torch(model, (x,)), uniform_cluster(2, kind="cpu")
    paths = graph.source.module_paths
    at_c = Placement.for_graph(graph, [1 if paths.get(op) == "c" or op == "linear_3" else 0
                                       for op in graph.op_names])
    assert split_spec(graph, at_c).split_spec == {"c": "BEGINNING"}
    with pytest.raises(InvalidPlacementError, match="the split is at module 'c', which Linear lacks"):
        pipeline_split(graph, cluster, at_c, torch.nn.Linear(8, 8), (x,))  # torch's AttributeError before


class _TwiceInARow(torch.nn.Module):
    """``l`` is called twice in a row: a -> l -> l -> c."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.l, self.c = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.c(self.l(self.l(self.a(x))))


def _check_pipeline(graph, placement, model, x, stages):
    from gplace.export.torch import pipeline_split

    split = pipeline_split(graph, uniform_cluster(2, kind="cpu"), placement, model, (x,))
    assert split.pipe.num_stages == stages
    with torch.no_grad():
        out = split.pipe(x)
        torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, model(x))


def test_a_module_called_twice_in_a_row_is_no_split_point():
    """l(l(x)) was not entered twice (its ops' paths are the same): {'l': BEGINNING}, which torch splits before
    both calls, and pipeline_split failed (3 stages for 2 devices), on an aligned graph too."""
    from gplace.export.torch import pipeline_split

    torch.set_num_threads(1)
    model, x = _TwiceInARow().eval(), torch.randn(4, 8)
    graph = from_torch(model, (x,))
    paths = graph.source.module_paths
    at_l = _place(graph, lambda n: int(paths.get(n) in ("l", "c")))
    spec = split_spec(graph, at_l)
    assert spec.split_spec == {} and spec.unaligned == [{"op": "linear_1", "module": "l"}]
    with pytest.raises(InvalidPlacementError, match="inside module 'l'"):
        pipeline_split(graph, uniform_cluster(2, kind="cpu"), at_l, model, (x,))
    aligned = align_to_modules(graph)  # both calls of l join a's segment
    a, l1, l2, c = (aligned.op_index[n] for n in ("linear", "linear_1", "linear_2", "linear_3"))
    assert aligned.colocation[a] == aligned.colocation[l1] == aligned.colocation[l2] != aligned.colocation[c]
    at_c = _place(aligned, lambda n: int(paths.get(n) == "c"))
    assert split_spec(aligned, at_c).split_spec == {"c": "BEGINNING"}
    _check_pipeline(aligned, at_c, model, x, 2)


class _Listed(torch.nn.Module):
    """An input layer, then blocks held in an ``nn.ModuleList``, which torch never calls."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = torch.nn.Linear(8, 8)
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))

    def forward(self, x):
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return x


@pytest.mark.parametrize("aligned", [False, True])
def test_a_module_list_is_no_split_point_its_first_block_is(aligned):
    """The split named the ModuleList ({'blocks': BEGINNING}), whose forward never runs: torch made no split and
    pipeline_split failed (1 stage for 2 devices)."""
    torch.set_num_threads(1)
    model, x = _Listed().eval(), torch.randn(4, 8)
    graph = from_torch(model, (x,))
    graph = align_to_modules(graph) if aligned else graph
    paths = graph.source.module_paths
    placement = _place(graph, lambda n: int(paths.get(n, "").startswith("blocks")))
    spec = split_spec(graph, placement)
    assert spec.split_spec == {"blocks.0": "BEGINNING"} and spec.unaligned == [] and spec.stage_devices == [0, 1]
    _check_pipeline(graph, placement, model, x, 2)
