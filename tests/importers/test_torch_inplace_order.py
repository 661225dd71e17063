"""In-place ops in a torch.export program (``fill_``, ``add_``, ``mul_``, ``copy_``, ``relu_`` ...): the importer
orders each write after the earlier reads of the tensor it writes and before the later ones (0-byte edges), and
colocates the tensor's producer, its views and its writers where a write placed elsewhere would write a copy its
readers miss (state, an input, a read through an alias older than the write), so that every placement a placer
may return splits into a program that computes what the module does, even where a move between devices is a copy
(emulated on the CPU by :class:`CopyingDevices`)."""

from __future__ import annotations

import copy
import itertools
import pickle
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils import _pytree as pytree

from gplace import InvalidPlacementError, Placement, from_torch
from gplace.export.torch import OnDevice, Transfers, split_program
from gplace.importers import torch_export
from gplace.runtime.torch_runtime import to_device
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


class _LinearAndCache(nn.Module):
    """A linear layer ``l`` and a (6, 4) buffer ``cache`` of ``FILL``."""

    FILL = 0.0

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 4)
        self.register_buffer("cache", torch.full((6, 4), self.FILL))


class ViewTakenFirst(_LinearAndCache):
    """A view of a buffer taken before the value written through it is made, then a read of the buffer."""

    def forward(self, x):
        window = self.cache[1:4]
        window.copy_(self.l(x))
        return self.cache * 2


class ViewReadToMakeItsWrite(_LinearAndCache):
    """A view of a buffer read to make the value then written through it: where the read is placed on another
    device, no part order keeps the buffer's group in one part."""

    def forward(self, x):
        window = self.cache[1:4]
        window.copy_(self.l(window + x))
        return self.cache * 2


class ViewReadAfterItsBufferWritten(_LinearAndCache):
    """A view of a buffer taken, the buffer written in place with a value made from the view (and the buffer: it
    is read on two devices, so moved into each part), then the view read."""

    FILL = 1.0

    def forward(self, x):
        window = self.cache[0:3]
        self.cache.add_(self.l(window + x).sum() + self.cache.sum())
        return window * 2, self.cache + 1


class InputWindow(nn.Module):
    """A user input written through a view with a value made from another view of it."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 4)

    def forward(self, x):
        window = x[1:3]
        window.copy_(self.l(x[0:2]))
        return x * 2


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


CONTEXT, START = 6, 2
"""The k/v caches' length, and the position of the first token of the step."""


class CachedAttention(nn.Module):
    """One attention head over a k/v cache: this step's keys written at positions ``pos`` (``index_put_``), its
    values into a slice (``slice`` -> ``copy_``); then the whole caches read (earlier steps' entries too)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.register_buffer("k_cache", torch.randn(CONTEXT, dim))
        self.register_buffer("v_cache", torch.randn(CONTEXT, dim))

    def forward(self, h, pos):
        q, k, v = self.qkv(h).chunk(3, -1)
        self.k_cache[pos] = k
        self.v_cache[START:START + h.shape[0]] = v
        seen = torch.arange(CONTEXT) <= pos[:, None]
        att = (q @ self.k_cache.T / q.shape[-1] ** 0.5).masked_fill(~seen, float("-inf")).softmax(-1)
        return self.proj(att @ self.v_cache)


class CachedBlock(nn.Module):
    """A pre-norm transformer block: cached attention, then an MLP."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.ln1, self.att, self.ln2 = nn.LayerNorm(dim), CachedAttention(dim), nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, h, pos):
        h = h + self.att(self.ln1(h), pos)
        return h + self.mlp(self.ln2(h))


class KVCacheGPT(nn.Module):
    """A GPT-like decoding step: token and position embeddings, 2 blocks writing their k/v caches, an LM head."""

    def __init__(self, vocab: int = 11, dim: int = 8) -> None:
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, dim), nn.Embedding(CONTEXT, dim)
        self.blocks = nn.ModuleList(CachedBlock(dim) for _ in range(2))
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens, pos):
        h = self.emb(tokens) + self.pos(pos)
        for block in self.blocks:
            h = block(h, pos)
        return self.head(h)


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


def _inputs(cls: type[nn.Module]) -> tuple[torch.Tensor, ...]:
    if cls is KVCacheGPT:
        return torch.tensor([3, 7]), torch.tensor([START, START + 1])
    return (IMAGE if cls is Residual else X,)


class CopyingDevices:
    """Distinct devices on one CPU, so that a move between them is a copy as between a CPU and a GPU or two GPUs.

    Cluster device ``k`` maps (:meth:`device_map`) to torch device ``cpu:k`` (tensors made there land on ``cpu``),
    or the host's ``cpu`` for the one named ``host``. Each storage has an emulated home: the host for what the
    test makes (the program's inputs and state, as torch puts them), the target for the copy a move made, the
    part's device for a part's outputs (:meth:`settle`). While installed (the ``copying_moves`` fixture),
    ``Tensor.to`` onto a CPU device returns the tensor itself where it is at home there and a copy elsewhere,
    each tensor on its own as torch moves them (a base and its view moved to another device in one ``to_device``
    become two unrelated copies; to their own device, the same two tensors). So ``to_device`` (a part's inputs),
    ``module.to`` (an ``OnDevice``'s own weights) and ``_home_weights`` move exactly as on distinct devices."""

    HOST = torch.device("cpu")

    def __init__(self) -> None:
        self._homes: dict[int, tuple[torch.device, torch.Tensor]] = {}
        """Storage address -> its home, and a tensor that keeps the storage (and so the address) alive."""

    def home(self, t: torch.Tensor) -> torch.device:
        return self._homes.get(t.untyped_storage().data_ptr(), (self.HOST,))[0]

    def settle(self, t: torch.Tensor, device: torch.device) -> None:
        """``t``'s storage (its views' too) is now at home on ``device``."""
        self._homes[t.untyped_storage().data_ptr()] = (torch.device(device), t)

    def device_map(self, cluster, host: int | None = None) -> dict[str, str]:
        """``split_program``'s ``device_map``: a torch device of its own for each cluster device."""
        return {name: "cpu" if k == host else f"cpu:{k}" for k, name in enumerate(cluster.device_names)}

    def to(self, real_to, t: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        """``t.to(*args, **kwargs)``, a copy exactly where a move between distinct devices copies."""
        copy = kwargs.pop("copy", False)
        device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
        if device is None or device.type != "cpu" or type(t) not in (torch.Tensor, nn.Parameter):
            return real_to(t, *args, copy=copy, **kwargs)  # no device, another kind, or a fake tensor (tracing)
        moves = self.home(t) != device
        out = real_to(t, self.HOST, dtype, non_blocking, copy=moves or copy,
                      memory_format=memory_format or torch.preserve_format)
        if moves or out.untyped_storage().data_ptr() != t.untyped_storage().data_ptr():
            self.settle(out, device)
        return out


@pytest.fixture
def copying_moves(monkeypatch) -> CopyingDevices:
    """:class:`CopyingDevices` installed: ``Tensor.to`` emulated, each part's outputs settled on its device."""
    devices, real_to, real_forward = CopyingDevices(), torch.Tensor.to, OnDevice.forward

    def forward(self, *args, **kwargs):
        out = real_forward(self, *args, **kwargs)
        for leaf in pytree.tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                devices.settle(leaf, self.device)
        return out

    monkeypatch.setattr(torch.Tensor, "to", lambda t, *args, **kwargs: devices.to(real_to, t, *args, **kwargs))
    monkeypatch.setattr(OnDevice, "forward", forward)
    return devices


def _wrong(cls: type[nn.Module], num_devices: int, most: int = 150, devices: CopyingDevices | None = None,
           host: int | None = None) -> Iterator[dict[str, int]]:
    """The placements keeping the colocation groups whole (all, or ``most`` drawn) whose split program's outputs
    differ from the module's, by op; on ``devices`` (their ``host`` device), else on one CPU."""
    model, args = _model(cls), _inputs(cls)
    graph = from_torch(copy.deepcopy(model), tuple(a.clone() for a in args))
    state = {k: v.detach().clone() for k, v in graph.source.program.state_dict.items()}
    cluster = uniform_cluster(num_devices, kind="cpu", bandwidth=100e9)
    device_map = devices.device_map(cluster, host) if devices else None
    for placement in _placements(graph, num_devices, most):
        if not _same_outputs(graph, cluster, placement, model, args, state, device_map):
            yield _by_op(graph, placement.devices.tolist())


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


def _same_outputs(graph, cluster, placement, model: nn.Module, args: tuple[torch.Tensor, ...], state,
                  device_map: dict[str, str] | None = None) -> bool:
    _fresh_state(graph, state)
    reference = copy.deepcopy(model)
    with torch.no_grad():
        got = split_program(graph, cluster, placement, device_map=device_map)(*(a.clone() for a in args))
        want = reference(*(a.clone() for a in args))
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
@pytest.mark.parametrize("num_devices, host", [(2, None), (3, None), (2, 0)], ids=["2-gpus", "3-gpus", "cpu-gpu"])
def test_every_placement_that_keeps_colocation_is_right_where_a_move_copies(cls, num_devices, host, copying_moves):
    """Where a move is a copy, a write away from its tensor writes the copy: the groups kept (state, inputs, a read
    through an alias older than the write) keep such writes home; without a group (``relu_``, ``+=`` read through
    their results) the readers read the copy written. On devices none of which holds the program's inputs and
    state (GPUs), and on a host (device 0) and a GPU."""
    wrong = list(_wrong(cls, num_devices, most=60, devices=copying_moves, host=host))
    assert not wrong, f"{len(wrong)} placements give other numbers, e.g. {wrong[0]}"


@pytest.mark.parametrize("cls", [ViewWrite, KVCache, EarlierView])
def test_without_their_groups_a_copying_move_gives_other_numbers(cls, copying_moves, monkeypatch):
    """The groups kept are needed (and the copying moves above can tell): with the same ordering edges but no
    group, some placement writes a copy that a later read misses."""
    monkeypatch.setattr(torch_export, "_colocated_bases", lambda gm, aliases: set())
    assert next(_wrong(cls, 3, most=60, devices=copying_moves), None) is not None


CUT = {"b_cache": 1, "slice_1": 1, "copy_": 1}
"""``ViewTakenFirst``'s group on device 1, ``linear`` and the read ``mul`` on device 0: parts [slice_1] [linear]
[copy_] [mul] (the buffer, read on both devices, stays where it is and is moved into the parts reading it)."""


@pytest.mark.parametrize("host", [None, 0], ids=["gpus", "cpu-gpu"])
def test_a_group_cut_into_two_parts_of_its_device_keeps_its_write_where_a_move_copies(host, copying_moves):
    """The part of ``slice_1`` moves the buffer in and returns a view of that copy; the later part of ``copy_``,
    on the same device, writes through the view (no move) and ``mul`` read the buffer unwritten. The split program
    now follows the copy while the view lives and copies the write back after the part that made it."""
    model = _model(ViewTakenFirst)
    graph = from_torch(copy.deepcopy(model), (X,))
    state = {k: v.detach().clone() for k, v in graph.source.program.state_dict.items()}
    cluster = uniform_cluster(2, kind="cpu", bandwidth=100e9)
    device_map = copying_moves.device_map(cluster, host)
    assert _same_outputs(graph, cluster, _named(graph, CUT), model, (X,), state, device_map)


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copied_or_pickled_split_program_keeps_the_write_of_a_cut_group(how, copying_moves):
    """Each call's :class:`Transfers` is made by a node of the split graph: a copy, and a pickled program (which
    torch.fx traces again), hand it to their parts too."""
    model = _model(ViewTakenFirst)
    graph = from_torch(copy.deepcopy(model), (X,))
    cluster = uniform_cluster(2, kind="cpu", bandwidth=100e9)
    split = split_program(graph, cluster, _named(graph, CUT), device_map=copying_moves.device_map(cluster))
    split = copy.deepcopy(split) if how == "deepcopy" else pickle.loads(pickle.dumps(split))
    with torch.no_grad():
        torch.testing.assert_close(split(X.clone()), model(X.clone()))


@pytest.mark.parametrize("num_devices", [2, 3])
def test_every_placement_of_a_kv_cache_gpt_that_keeps_colocation_is_right_where_a_move_copies(num_devices,
                                                                                              copying_moves):
    """A GPT-like decoding step writing its k/v caches (``index_put_`` at the positions, ``copy_`` into a slice):
    some placements cut a cache's group into two parts of its device (``slice_1`` in a part before the part of
    another device that makes the values ``copy_`` writes), as in the test above; those lost the write."""
    wrong = next(_wrong(KVCacheGPT, num_devices, most=30, devices=copying_moves), None)
    assert wrong is None, f"a placement gives other numbers: {wrong}"


CUT_BY_A_PATH = [ViewReadToMakeItsWrite, ViewReadAfterItsBufferWritten, InputWindow]
"""Modules with a group that a path through another device's ops leaves and comes back into."""


@pytest.mark.parametrize("cls", CUT_BY_A_PATH)
@pytest.mark.parametrize("num_devices, host", [(2, None), (3, None), (2, 0)], ids=["2-gpus", "3-gpus", "cpu-gpu"])
def test_every_placement_of_a_group_cut_by_another_devices_ops_is_right_where_a_move_copies(cls, num_devices, host,
                                                                                             copying_moves):
    """Such a group runs in two parts of its device: a view of a moved copy returned by the first is written (or
    read after its tensor is written) in the second. The write was lost, or the read saw the tensor unwritten."""
    wrong = list(_wrong(cls, num_devices, most=60, devices=copying_moves, host=host))
    assert not wrong, f"{len(wrong)} placements give other numbers, e.g. {wrong[0]}"


class _Add(nn.Module):
    def forward(self, t):
        return t.add_(1.0)


def test_the_parts_of_one_call_follow_a_moved_copy_while_a_view_of_it_lives(copying_moves):
    """With one :class:`Transfers` (one call of a split program): a write through a view of a copy, in a later
    part, lands on the tensor moved; that tensor moved there again gives the same copy; a write to the tensor
    refreshes the copy."""
    host, device = CopyingDevices.HOST, torch.device("cpu", 1)
    transfers, base = Transfers(), torch.arange(6.0)
    window = OnDevice(_Window(), device)(base, transfers=transfers)  # a view of base's copy on device
    assert not _shares(window, base)
    OnDevice(_Fill(), device)(window, transfers=transfers)  # on its device: no move, written where it is
    assert base.tolist() == [0, 1, 7, 7, 4, 5]
    assert _shares(OnDevice(_Window(), device)(base, transfers=transfers), window)
    OnDevice(_Add(), host)(base, transfers=transfers)  # written at home
    assert window.tolist() == [8, 8] and base.tolist() == [1, 2, 8, 8, 5, 6]


def test_a_moved_copy_is_forgotten_once_no_view_of_it_lives():
    """The copies are held weakly (a copy kept to the end of the call would hold memory on its device): a part's
    copy is forgotten after the part unless a view of it lives on. (On meta: :class:`CopyingDevices` keeps every
    tensor it made.)"""
    transfers, base = Transfers(), torch.arange(6.0)
    OnDevice(nn.ReLU(), "meta")(base, transfers=transfers)
    assert not transfers.copies
    window = OnDevice(_Window(), "meta")(base, transfers=transfers)
    assert len(transfers.copies) == 1
    del window
    OnDevice(nn.ReLU(), "cpu")(base, transfers=transfers)
    assert not transfers.copies


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


class _Window(nn.Module):
    def forward(self, t):
        return t[2:4]


class _Fill(nn.Module):
    def forward(self, t):
        return t.fill_(7.0)


class _Holder(nn.Module):
    def __init__(self, buffer: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("b", buffer)


def _moves(host: torch.device, device: torch.device) -> list[str]:
    """What ``to_device`` and ``OnDevice`` do with tensors made on ``host``, moved to ``device``: the statements
    below that do not hold."""
    base = torch.arange(6.0, device=host)
    view = base[2:4]
    base_there, view_there = to_device((base, view), device)
    base_again, view_again = to_device((base_there, view_there), device)
    window = OnDevice(_Window(), device)(base)  # a view of the copy moved in
    OnDevice(_Fill(), device)(window)  # on its own device: written where it is
    untouched = base.tolist() == [0, 1, 2, 3, 4, 5]
    OnDevice(_Fill(), device)(view)  # moved, written there, copied back
    shared = torch.zeros(2, device=host)
    away, home = OnDevice(_Holder(shared), device).module, OnDevice(_Holder(shared), host).module
    holds = {"moved: a copy": not _shares(base_there, base),
             "a base and its view moved together: two storages": not _shares(view_there, base_there),
             "to their own device: the same tensors": base_again is base_there and view_again is view_there,
             "a part's output written on its device: written in place": window.tolist() == [7, 7],
             "... not in the tensor it was moved from": untouched,
             "a moved input written: copied back": base.tolist() == [0, 1, 7, 7, 4, 5],
             "module.to: a buffer moved away": not _shares(away.b, shared), "... or kept at home": home.b is shared}
    return [statement for statement, true in holds.items() if not true]


def test_the_emulated_devices_copy_a_move_exactly_where_distinct_devices_would(copying_moves):
    """A move to the device a tensor is at home on returns it (a base and its view stay one storage), a move
    elsewhere copies each tensor on its own (a base and its view become unrelated copies, as ``Tensor.to`` makes
    them on a GPU), a part's outputs are at home on its device, and ``module.to`` moves an ``OnDevice``'s own
    buffers: one tensor shared by two modules becomes two. (The GPU test below checks a real GPU does the same.)"""
    assert _moves(CopyingDevices.HOST, torch.device("cpu", 1)) == []


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
        assert _same_outputs(graph, cluster, kept, model, (X,), state)
    else:
        assert _same_outputs(graph, cluster, placement, model, (X,), state)


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
    monkeypatch.setattr(torch_export._FxBuilder, "_in_place", lambda self, aliases: None)
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
             if not _same_outputs(graph, cluster, placement, model, (X,), state)]
    assert not wrong, f"{len(wrong)} placements give other numbers, e.g. {_by_op(graph, wrong[0])}"


@pytest.mark.gpu
@needs_cuda
def test_a_cpu_and_a_gpu_move_tensors_as_the_emulated_devices_do():
    """What :class:`CopyingDevices` emulates, on a real GPU."""
    assert _moves(torch.device("cpu"), torch.device("cuda", 0)) == []


@pytest.mark.gpu
@needs_cuda
def test_a_group_cut_into_two_parts_of_the_gpu_keeps_its_write():
    """The emulated case above, on a CPU (device 0) and a GPU (device 1)."""
    model = _model(ViewTakenFirst)
    graph = from_torch(copy.deepcopy(model), (X,))
    state = {k: v.detach().clone() for k, v in graph.source.program.state_dict.items()}
    assert _same_outputs(graph, cpu_gpu_cluster(num_gpus=1), _named(graph, CUT), model, (X,), state)
