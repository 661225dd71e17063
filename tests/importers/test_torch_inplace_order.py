"""In-place ops in a torch.export program (``fill_``, ``add_``, ``mul_``, ``copy_``, ``relu_`` ...): the importer
orders each write after the earlier reads of the tensor it writes and before the later ones (0-byte edges), and
colocates the tensor's producer, its views and its writers where a write placed elsewhere would write a copy its
readers miss (state, an input, a read through an alias older than the write), so that every placement a placer
may return splits into a program that computes what the module does, even where every move is a copy."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils import _pytree as pytree

import gplace.export.torch as export_torch
from gplace import InvalidPlacementError, Placement, from_torch
from gplace.export.torch import split_program
from gplace.importers import torch_export
from gplace.testing import cpu_gpu_cluster, uniform_cluster


class ViewWrite(nn.Module):
    """``z[0] = 5`` writes through a view (``select`` -> ``fill_``) of a tensor read afterwards."""

    def forward(self, x):
        z = x.clone()
        z[0] = 5.0
        return z * 2


class BufferTwice(nn.Module):
    """A buffer written in place twice, read in between."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("b", torch.zeros(4))

    def forward(self, x):
        self.b.add_(x.sum(0))
        y = self.b * 2  # after the add_
        self.b.mul_(0.5)  # after y
        return y + self.b


class KVCache(nn.Module):
    """A write into a slice of a buffer (``slice`` -> ``copy_``), then reads of the whole buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.k, self.q = nn.Linear(4, 4), nn.Linear(4, 4)
        self.register_buffer("cache", torch.zeros(6, 4))

    def forward(self, x):
        self.cache[2:2 + x.shape[0]] = self.k(x)
        att = (self.q(x) @ self.cache.T).softmax(-1)
        return att @ self.cache


class ReadThenWrite(nn.Module):
    """A read whose result is only returned, then a write: nothing but the order links the two."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("b", torch.ones(4))

    def forward(self, x):
        y = self.b * 2
        self.b.add_(x.sum(0))
        return y


class SharedBuffers(nn.Module):
    """Two buffers holding one tensor (tied state), written in place."""

    def __init__(self) -> None:
        super().__init__()
        t = torch.zeros(4)
        self.register_buffer("a", t)
        self.register_buffer("b", t)

    def forward(self, x):
        y = self.a * x
        self.b.add_(1.0)
        return y + self.a, self.b * 2


class Residual(nn.Module):
    """torchvision's basic block: ``ReLU(inplace=True)`` and ``out += identity``."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(4, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1)
        self.b1, self.b2 = nn.BatchNorm2d(4), nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.b1(self.c1(x)))
        out = self.b2(self.c2(out))
        out += x
        return self.relu(out)


class InPlaceStream(nn.Module):
    """A residual stream written in place (``x += layer(x)``): every later read goes through the last ``add_``."""

    def __init__(self) -> None:
        super().__init__()
        self.inp, self.out = nn.Linear(4, 8), nn.Linear(8, 2)
        self.layers = nn.ModuleList(nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 8)) for _ in range(4))

    def forward(self, x):
        x = self.inp(x)
        for layer in self.layers:
            x += layer(x)
        return self.out(x)


class EarlierView(nn.Module):
    """A view taken before an in-place write to its tensor and read after it: the read does not go through the
    writer's result."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 4)

    def forward(self, x):
        y = self.l(x)
        first = y[0]
        y.relu_()
        return first * 2, y.sum(0)


class MutatedInput(nn.Module):
    """A user input written in place."""

    def forward(self, x):
        x.mul_(2.0)
        return x + 1


class TwoTower(nn.Module):
    """No in-place op."""

    def __init__(self) -> None:
        super().__init__()
        self.left, self.right, self.head = nn.Linear(4, 8), nn.Linear(4, 8), nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.left(x).relu() + self.right(x).sigmoid()).split(1, dim=1)[0]


class ConvNet(nn.Module):
    """No in-place op: a convolution, a batch norm and an out-of-place ReLU."""

    def __init__(self) -> None:
        super().__init__()
        self.c, self.bn, self.l = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Linear(4, 2)

    def forward(self, x):
        return self.l(torch.relu(self.bn(self.c(x))).mean((2, 3)))


class TiedLM(nn.Module):
    """No in-place op; an embedding tied to the output layer."""

    def __init__(self) -> None:
        super().__init__()
        self.e, self.o = nn.Embedding(10, 4), nn.Linear(4, 10, bias=False)
        self.o.weight = self.e.weight

    def forward(self, t):
        return self.o(self.e(t))


X = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
IMAGE = torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(1))
GROUPED = [ViewWrite, BufferTwice, KVCache, ReadThenWrite, EarlierView, MutatedInput]
"""Modules with a written tensor whose producer, views and writers form a colocation group."""
UNGROUPED = [Residual, InPlaceStream]
"""Modules whose every read after a write goes through the writer's result: ordering edges, no group."""
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _model(cls: type[nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return cls().eval()


def _input(cls: type[nn.Module]) -> torch.Tensor:
    return IMAGE if cls is Residual else X


def _wrong(cls: type[nn.Module], num_devices: int, most: int = 150) -> Iterator[dict[str, int]]:
    """The placements keeping the colocation groups whole (all, or ``most`` drawn) whose split program's outputs
    differ from the module's, by op."""
    model, x = _model(cls), _input(cls)
    graph = from_torch(copy.deepcopy(model), (x.clone(),))
    state = {k: v.detach().clone() for k, v in graph.source.program.state_dict.items()}
    cluster = uniform_cluster(num_devices, kind="cpu", bandwidth=100e9)
    for placement in _placements(graph, num_devices, most):
        if not _same_outputs(graph, cluster, placement, model, x, state):
            yield _by_op(graph, placement.devices.tolist())


@pytest.fixture
def every_move_copies(monkeypatch):
    """Every move into a part is a copy, as between a CPU and a GPU or two GPUs (on CPU devices it is the same
    tensor): a write placed on another part's device then writes the copy."""
    monkeypatch.setattr(export_torch, "to_device", lambda value, device, non_blocking=False: pytree.tree_map_only(
        torch.Tensor, lambda t: t.clone(), value))


def _units(graph) -> tuple[list[int], list[int]]:
    """Each op's unit (the first op of its colocation group, else itself), and the units."""
    first: dict[str, int] = {}
    unit = [i if group is None else first.setdefault(group, i) for i, group in enumerate(graph.colocation)]
    return unit, sorted(set(unit))


def _placements(graph, num_devices: int, most: int = 150):
    """Every placement that keeps colocation groups whole, or ``most`` of them drawn at random."""
    unit, units = _units(graph)
    if num_devices ** len(units) <= most:
        choices = itertools.product(range(num_devices), repeat=len(units))
    else:
        rng = np.random.default_rng(0)
        choices = (rng.integers(0, num_devices, len(units)).tolist() for _ in range(most))
    for choice in choices:
        device = dict(zip(units, choice, strict=True))
        yield Placement.for_graph(graph, [device[u] for u in unit])


def _fresh_state(graph, state: dict[str, torch.Tensor]) -> None:
    """Put the program's buffers back as they were (a split program updates them in place)."""
    with torch.no_grad():
        for name, value in state.items():
            graph.source.program.state_dict[name].copy_(value)


def _same_outputs(graph, cluster, placement, model: nn.Module, x: torch.Tensor, state) -> bool:
    _fresh_state(graph, state)
    reference = copy.deepcopy(model)
    with torch.no_grad():
        got, want = split_program(graph, cluster, placement)(x.clone()), reference(x.clone())
    got, want = pytree.tree_leaves(got), pytree.tree_leaves(want)
    return len(got) == len(want) and all(torch.allclose(g.cpu(), w) for g, w in zip(got, want, strict=True))


def _edge(graph, src: str, dst: str) -> int | None:
    """Bytes of the edge ``src -> dst``, or None where there is none."""
    i, j = graph.op_index[src], graph.op_index[dst]
    hits = np.flatnonzero((graph.edge_index[0] == i) & (graph.edge_index[1] == j))
    return int(graph.edge_bytes[hits[0]]) if hits.size else None


def _by_op(graph, devices: list[int]) -> dict[str, int]:
    return dict(zip(graph.op_names, devices, strict=True))


def _group(graph, op: str) -> str | None:
    return graph.colocation[graph.op_index[op]]


def _named(graph, devices: dict[str, int]) -> Placement:
    return Placement.for_graph(graph, [devices.get(op, 0) for op in graph.op_names])


# ---------------------------------------------------------------------- (a) every placement computes the module
@pytest.mark.parametrize("cls", GROUPED + UNGROUPED)
@pytest.mark.parametrize("num_devices", [2, 3])
def test_every_placement_that_keeps_colocation_splits_into_the_modules_numbers(cls, num_devices):
    """The split program ran each part in the order of the data it passes only, so a write in place ran after a
    later read (``fill_`` after ``mul``), or before an earlier one; now every placement that keeps the colocation
    groups whole gives the module's outputs."""
    wrong = list(_wrong(cls, num_devices))
    assert not wrong, f"{len(wrong)} placements give other numbers, e.g. {wrong[0]}"


@pytest.mark.parametrize("cls", GROUPED + UNGROUPED)
@pytest.mark.parametrize("num_devices", [2, 3])
def test_every_placement_that_keeps_colocation_is_right_where_every_move_copies(cls, num_devices, every_move_copies):
    """Where a move is a copy, a write away from its tensor writes the copy: the groups kept (state, inputs, a read
    through an alias older than the write) keep such writes home; without a group (``relu_``, ``+=`` read through
    their results) the readers read the copy written."""
    wrong = list(_wrong(cls, num_devices, most=60))
    assert not wrong, f"{len(wrong)} placements give other numbers, e.g. {wrong[0]}"


@pytest.mark.parametrize("cls", [ViewWrite, KVCache, EarlierView])
def test_without_their_groups_a_copying_move_gives_other_numbers(cls, every_move_copies, monkeypatch):
    """The groups kept are needed (and the copying moves above can tell): with the same ordering edges but no
    group, some placement writes a copy that a later read misses."""
    monkeypatch.setattr(torch_export, "_colocated_bases", lambda gm, aliases: set())
    assert next(_wrong(cls, 3, most=60), None) is not None


@pytest.mark.parametrize("cls, devices", [
    (ViewWrite, {"fill_": 1}),
    (ViewWrite, {"clone": 1, "select": 1, "fill_": 1}),
    (BufferTwice, {"mul": 1}),
    (KVCache, {"b_cache": 1, "linear_1": 1, "numpy_t": 1, "matmul": 1}),
    (KVCache, {"b_cache": 1, "x": 1, "linear": 1, "slice_1": 1, "copy_": 2, "linear_1": 1, "numpy_t": 1,
               "matmul": 1, "softmax": 1, "matmul_1": 2}),
], ids=["view-fill-alone", "view-group-moved", "buffer-read-moved", "kv-cache-moved", "kv-copy-moved"])
def test_the_probes_failing_placements_are_refused_or_now_right(cls, devices):
    """The placements the probe found wrong: one that moves a write away from the tensor it writes (its views, its
    producer) splits a colocation group and is refused; the others now compute the module's numbers."""
    model = _model(cls)
    graph = from_torch(copy.deepcopy(model), (X,))
    state = {k: v.detach().clone() for k, v in graph.source.program.state_dict.items()}
    cluster = uniform_cluster(3, kind="cpu", bandwidth=100e9)
    placement = _named(graph, devices)
    unit, _ = _units(graph)
    if any(placement.devices[i] != placement.devices[u] for i, u in enumerate(unit)):
        with pytest.raises(InvalidPlacementError, match="colocation group"):
            split_program(graph, cluster, placement)
        kept = Placement.for_graph(graph, [int(placement.devices[u]) for u in unit])  # each group where it starts
        assert _same_outputs(graph, cluster, kept, model, X, state)
    else:
        assert _same_outputs(graph, cluster, placement, model, X, state)


# ---------------------------------------------------------------------- (b) the edges and the groups
def test_a_write_through_a_view_precedes_the_later_read_and_stays_with_the_tensor_and_view():
    graph = from_torch(_model(ViewWrite), (X,))
    assert _edge(graph, "fill_", "mul") == 0  # mul reads clone (a data edge), after fill_ wrote into its view
    assert _edge(graph, "clone", "mul") > 0
    assert {op: group for op, group in zip(graph.op_names, graph.colocation, strict=True) if group} == {
        "clone": "clone", "select": "clone", "fill_": "clone"}


def test_a_write_follows_the_earlier_read_and_the_writers_of_a_buffer_share_a_device():
    graph = from_torch(_model(BufferTwice), (X,))
    assert _edge(graph, "mul", "mul_") == 0  # y = b * 2 reads b before b.mul_(0.5)
    assert _edge(graph, "add_", "mul") > 0 and _edge(graph, "add_", "mul_") > 0  # data: after the first write
    assert _edge(graph, "mul_", "mul") is None
    assert _group(graph, "add_") == _group(graph, "mul_") == "add_"  # the buffer is folded into add_
    assert _group(graph, "mul") is None and _group(graph, "add") is None


def test_a_read_that_only_feeds_an_output_still_precedes_the_write():
    graph = from_torch(_model(ReadThenWrite), (X,))
    assert _edge(graph, "mul", "add_") == 0
    assert _group(graph, "b_b") == _group(graph, "add_") == "b_b" and _group(graph, "mul") is None


def test_a_slice_write_into_a_buffer_precedes_its_readers_and_colocates_the_buffer_its_views_and_the_write():
    graph = from_torch(_model(KVCache), (X,))
    assert _edge(graph, "copy_", "numpy_t") == 0 and _edge(graph, "copy_", "matmul_1") == 0
    assert _edge(graph, "b_cache", "matmul_1") > 0
    grouped = {op: group for op, group in zip(graph.op_names, graph.colocation, strict=True) if group}
    assert grouped == dict.fromkeys(["b_cache", "slice_1", "copy_", "numpy_t"], "b_cache")
    order = {op: k for k, op in enumerate(graph.op_names[i] for i in graph.topological_order)}
    assert order["copy_"] < order["numpy_t"] < order["matmul"]


def test_in_place_relu_and_add_read_through_their_results_get_ordering_edges_and_no_group():
    """torchvision's ``ReLU(inplace=True)`` and ``out += identity``: every later read of the written tensor goes
    through the writer's result, so a write placed elsewhere writes a copy that its readers then read; no group
    (one per chain made placers split a ResNet worse)."""
    graph = from_torch(_model(Residual), (IMAGE,))
    assert not any(graph.colocation)
    assert all(_edge(graph, a, b) is not None for a, b in [("batch_norm_1", "add_"), ("add_", "relu__1")])


def test_an_in_place_residual_stream_gets_ordering_edges_and_no_group():
    """``x += layer(x)``: each ``add_`` follows the layer norm reading the stream before it (a 0-byte edge) and the
    next layer reads its result; nothing is colocated (all the adds of the stream were one group)."""
    graph = from_torch(_model(InPlaceStream), (X,))
    assert not any(graph.colocation)
    writes = ["add_", "add__1", "add__2", "add__3"]
    assert all(_edge(graph, norm, add) == 0 for norm, add in zip(["layer_norm", "layer_norm_1", "layer_norm_2",
                                                                  "layer_norm_3"], writes, strict=True))
    assert all(_edge(graph, a, b) > 0 for a, b in itertools.pairwise(["linear", *writes]))


def test_a_view_taken_before_a_write_and_read_after_it_keeps_the_tensor_its_view_and_the_write_together():
    graph = from_torch(_model(EarlierView), (X,))
    assert {op: group for op, group in zip(graph.op_names, graph.colocation, strict=True) if group} == dict.fromkeys(
        ["linear", "select", "relu_"], "linear")
    assert _edge(graph, "select", "relu_") == 0 and _edge(graph, "relu_", "mul") == 0


def test_a_user_input_written_in_place_stays_with_its_writer():
    graph = from_torch(_model(MutatedInput), (X.clone(),))
    assert _group(graph, "x") == _group(graph, "mul_") == "x" and _group(graph, "add") is None


def test_a_tied_buffer_written_in_place_keeps_its_group_and_takes_the_writer_in():
    model = _model(SharedBuffers)
    graph = from_torch(copy.deepcopy(model), (torch.ones(4),))
    assert _group(graph, "b_a") == _group(graph, "b_b") == _group(graph, "add_") == "b_a"
    assert _group(graph, "mul") is None and _edge(graph, "mul", "add_") == 0


def test_the_ordering_edges_run_forward_in_node_order():
    """Every 0-byte edge goes from an earlier FX node to a later one (no cycle can appear)."""
    for cls in (ViewWrite, BufferTwice, KVCache, ReadThenWrite):
        graph = from_torch(_model(cls), (X,))
        position = {n.name: k for k, n in enumerate(graph.source.program.graph_module.graph.nodes)}
        zero = [(graph.op_names[a], graph.op_names[b])
                for (a, b), nbytes in zip(graph.edge_index.T.tolist(), graph.edge_bytes.tolist(), strict=True)
                if nbytes == 0]
        assert zero and all(position[a] < position[b] for a, b in zero)


# ---------------------------------------------------------------------- (c) no in-place op: the graph as before
@pytest.mark.parametrize("cls, x, training", [
    (TwoTower, X, False), (ConvNet, torch.randn(2, 3, 8, 8), False), (ConvNet, torch.randn(2, 3, 8, 8), True),
    (TiedLM, torch.randint(0, 10, (2, 3)), False), (Residual, torch.randn(2, 4, 8, 8), True),
], ids=["two-tower", "conv", "conv-train", "tied", "residual-train"])
def test_a_graph_without_in_place_writes_is_imported_as_before(cls, x, training, monkeypatch):
    """Same ops, edges, colocation and fingerprint as with the in-place pass switched off; no 0-byte edge (a joint
    training graph is functional: its ``relu_`` and ``+=`` are gone)."""
    graph = from_torch(_model(cls), (x,), training=training)
    monkeypatch.setattr(torch_export._FxBuilder, "_in_place", lambda self: None)
    before = from_torch(_model(cls), (x,), training=training)
    assert graph.fingerprint == before.fingerprint
    assert np.array_equal(graph.edge_index, before.edge_index) and np.array_equal(graph.edge_bytes, before.edge_bytes)
    assert graph.colocation == before.colocation
    assert (graph.edge_bytes > 0).all()
    assert set(graph.colocation) <= ({None, "p_e_weight"} if cls is TiedLM else {None})


# ---------------------------------------------------------------------- on a GPU (/CPU:0 and /GPU:0)
@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("cls", [ViewWrite, BufferTwice, KVCache, ReadThenWrite])
def test_every_placement_over_the_cpu_and_the_gpu_gives_the_modules_numbers(cls):
    """A write placed on another device than its tensor would write a moved copy; the colocation groups keep it
    on the tensor's device, so every placement that keeps them whole is right."""
    model = _model(cls)
    graph = from_torch(copy.deepcopy(model), (X,))
    state = {k: v.detach().clone() for k, v in graph.source.program.state_dict.items()}
    cluster = cpu_gpu_cluster(num_gpus=1)
    wrong = [placement.devices.tolist() for placement in _placements(graph, 2)
             if not _same_outputs(graph, cluster, placement, model, X, state)]
    assert not wrong, f"{len(wrong)} placements give other numbers, e.g. {_by_op(graph, wrong[0])}"
