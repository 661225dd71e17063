"""PyTorch write-back: a torch.export program split into per-device submodules, and a module device_map."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch_control_flow import AutocastOff, Branchy, Counter, Looping, MutatesInput, NoGradInside

from gplace import InvalidPlacementError, Placement, UnsupportedGraphError, from_torch
from gplace.export.torch import OnDevice, dispatch, module_device_map, split_program
from gplace.testing import cpu_gpu_cluster, random_dag, uniform_cluster


class TwoTower(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.left, self.right, self.head = nn.Linear(4, 8), nn.Linear(4, 8), nn.Linear(8, 3)

    def forward(self, x):
        left, right = self.left(x).relu(), self.right(x).sigmoid()
        return self.head(left + right + torch.ones(8)).split(1, dim=1)[0]


X = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(scope="module")
def imported():
    torch.manual_seed(0)
    model = TwoTower().eval()
    return model, from_torch(model, (X,)), uniform_cluster(2, kind="cpu")


def _by_module(graph, cluster, devices: dict[str, int]) -> Placement:
    paths = graph.source.module_paths
    return Placement.for_graph(graph, [devices.get(paths.get(op, ""), 0) for op in graph.op_names])


@pytest.mark.parametrize("devices, parts", [({"right": 1}, 2), ({"left": 1, "right": 1}, 2)])
def test_split_program_runs_each_part_on_its_device_with_the_same_outputs(imported, devices, parts):
    model, graph, cluster = imported
    split = split_program(graph, cluster, _by_module(graph, cluster, devices))
    subs = [m for name, m in split.named_children() if name.startswith("submod_")]
    assert len(subs) == parts and all(isinstance(m, OnDevice) and m.device.type == "cpu" for m in subs)
    with torch.no_grad():
        torch.testing.assert_close(split(X), model(X))


def test_an_interleaved_placement_is_split_further_and_still_runs(imported):
    model, graph, cluster = imported
    placement = Placement.for_graph(graph, np.arange(graph.num_ops) % 2)
    split = split_program(graph, cluster, placement)
    assert sum(name.startswith("submod_") for name, _ in split.named_children()) > 2
    with torch.no_grad():
        torch.testing.assert_close(split(X), model(X))


def test_module_device_map_puts_each_module_where_its_ops_run_and_dispatch_accepts_it(imported):
    model, graph, cluster = imported
    device_map = module_device_map(graph, cluster, _by_module(graph, cluster, {"right": 1}))
    assert set(device_map) == {"left", "right", "head"} and set(device_map.values()) == {"cpu"}
    torch.manual_seed(0)
    copy = TwoTower().eval()
    copy.load_state_dict(model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(dispatch(copy, device_map)(X), model(X))
    with pytest.raises(InvalidPlacementError, match="names module 'tail'"):
        dispatch(copy, {"tail": "cpu"})


@pytest.mark.parametrize("module, x", [
    (Branchy(), torch.ones(4, 8)), (Branchy(), -100 * torch.ones(4, 8)), (Looping(), torch.randn(4, 8)),
    (NoGradInside(), torch.randn(4, 8)), (AutocastOff(), torch.randn(4, 8)),
], ids=["cond-true", "cond-false", "while_loop", "no_grad-block", "autocast-block"])
def test_a_program_with_control_flow_splits_and_runs_like_the_module(module, x):
    """torch.cond and torch.while_loop stay whole in the part of their device; the split program gives the
    module's output."""
    graph, cluster = from_torch(module, (x,)), uniform_cluster(2, kind="cpu")
    split = split_program(graph, cluster, Placement.for_graph(graph, [i % 2 for i in range(graph.num_ops)]))
    with torch.no_grad():
        torch.testing.assert_close(split(x), module(x))


def test_bad_inputs_are_named(imported):
    _, graph, cluster = imported
    with pytest.raises(InvalidPlacementError, match="placement was made for graph"):
        split_program(graph, cluster, Placement.single(random_dag(graph.num_ops), 0))
    with pytest.raises(InvalidPlacementError, match=r"device_map\['/CPU:1'\] = 'weird' is not a torch device"):
        odd = uniform_cluster(2, kind="cpu")
        split_program(graph, odd, Placement.single(graph, 0), device_map={"/CPU:1": "weird"})
    other = random_dag(3)
    with pytest.raises(UnsupportedGraphError, match="not imported from a torch.export"):
        split_program(other, cluster, Placement.single(other, 0))


class Twice(nn.Module):
    def forward(self, x):
        return (x * 2).tanh()


class Chain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.mid, self.c = nn.Linear(4, 8), nn.Linear(8, 8), Twice(), nn.Linear(8, 2)

    def forward(self, x):
        return self.c(self.mid(self.b(self.a(x).relu())))


def _two_stage_chain(cluster):
    """A ``Chain``, its graph, ``cluster``, and a placement with modules a on device 0 and b, mid, c on device 1."""
    torch.manual_seed(0)
    model = Chain().eval()
    graph = from_torch(model, (X,))
    return model, graph, cluster, _by_module(graph, cluster, {"b": 1, "mid": 1, "c": 1})


def test_a_pipeline_placement_becomes_torch_pipelining_stages_that_run(imported):
    from gplace.export.torch import pipeline_split

    model, graph, cluster, placement = _two_stage_chain(imported[2])
    paths = graph.source.module_paths
    split = pipeline_split(graph, cluster, placement, model, (X,))
    assert split.pipe.num_stages == 2 and [d.type for d in split.devices] == ["cpu", "cpu"]
    assert split.cluster_devices == [0, 1]  # both "cpu" in torch, two devices of the cluster
    assert split.split_points == ["b"]  # stage 1 begins at module 'b'
    with torch.no_grad():
        out = split.pipe(X)
    torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, model(X))

    mid_ops = [i for i, op in enumerate(graph.op_names) if paths.get(op) == "mid"]
    inside = placement.devices.copy()
    inside[mid_ops[-1]] = 0  # device changes between the two ops of module 'mid'
    with pytest.raises(InvalidPlacementError, match="inside module 'mid'"):
        pipeline_split(graph, cluster, Placement.for_graph(graph, inside), model, (X,))


def test_a_training_graph_aligned_to_modules_is_split_as_its_inference_graph(imported):
    """pipeline_split needs module paths, not an inference program: it refused every training graph, though
    align_to_modules on one gives the split it takes; a graph of no torch module is still refused."""
    from gplace.export.torch import pipeline_split
    from gplace.pipeline.stages import align_to_modules

    model, _, cluster, _ = _two_stage_chain(imported[2])
    graph = align_to_modules(from_torch(model, (X,), training=True))
    paths = graph.source.module_paths
    placement = Placement.for_graph(graph, [int(paths.get(op) in ("b", "mid", "c")) for op in graph.op_names])
    split = pipeline_split(graph, cluster, placement, model, (X,))
    assert split.split_points == ["b"] and split.cluster_devices == [0, 1]
    with torch.no_grad():
        out = split.pipe(X)
    torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, model(X))
    other = random_dag(3)
    with pytest.raises(UnsupportedGraphError, match="not imported from a torch module"):
        pipeline_split(other, cluster, Placement.single(other, 0), model, (X,))


class EncoderDecoder(nn.Module):
    """Two keyword inputs, as Hugging Face encoder-decoder models take them (the decoder's is not positional 2)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder, self.decoder = nn.Linear(4, 8), nn.Linear(8, 8)

    def forward(self, input_ids=None, mask=None, decoder_input_ids=None):
        return self.decoder(self.encoder(input_ids).relu() + decoder_input_ids)


def test_a_pipeline_split_takes_keyword_inputs_and_a_bare_tensor(imported):
    """Example inputs as from_torch takes them: a dict of keyword inputs (an encoder-decoder's), or one tensor
    (not unpacked along its batch dimension)."""
    from gplace.export.torch import pipeline_split

    cluster = imported[2]
    torch.manual_seed(0)
    model = EncoderDecoder().eval()
    kw = {"input_ids": X, "decoder_input_ids": torch.randn(2, 8, generator=torch.Generator().manual_seed(1))}
    graph = from_torch(model, kw)
    split = pipeline_split(graph, cluster, _by_module(graph, cluster, {"decoder": 1}), model, kw)
    assert split.pipe.num_stages == 2 and split.split_points == ["decoder"]
    with torch.no_grad():
        out = split.pipe(**kw)
    torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, model(**kw))
    model, graph, cluster, placement = _two_stage_chain(cluster)
    with torch.no_grad():
        out = pipeline_split(graph, cluster, placement, model, X).pipe(X)
    torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, model(X))


def test_a_module_can_be_split_again_and_is_left_as_it_was(imported):
    """torch's pipeline() patches the modules it traces (a module traced twice keeps the first split's points
    too); pipeline_split traces a copy, so a second split of the same module has its own stages."""
    from gplace.export.torch import pipeline_split

    model, graph, cluster, placement = _two_stage_chain(imported[2])
    assert pipeline_split(graph, cluster, placement, model, (X,)).pipe.num_stages == 2
    back = _by_module(graph, cluster, {"b": 1})  # a on 0, b on 1, mid and c on 0: three stages
    split = pipeline_split(graph, cluster, back, model, (X,))
    assert split.pipe.num_stages == 3 and split.cluster_devices == [0, 1, 0]
    with torch.no_grad():
        out = split.pipe(X)
    torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, model(X))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_a_gpu_this_machine_lacks_is_named_before_anything_moves(imported):
    """split_program and dispatch raised torch's bare 'Torch not compiled with CUDA enabled' from inside, dispatch
    with the model half moved."""
    model, graph, _ = imported
    gpus = uniform_cluster(2, kind="gpu")
    with pytest.raises(InvalidPlacementError, match="cluster device '/GPU:0' maps to torch device 'cuda:0', which "
                                                     "this machine cannot use .torch sees 0 CUDA device"):
        split_program(graph, gpus, _by_module(graph, gpus, {"right": 1}))
    with pytest.raises(InvalidPlacementError, match="module 'right' maps to torch device 'cuda'"):
        dispatch(model, {"left": "cpu", "right": "cuda"})
    assert {p.device.type for p in model.parameters()} == {"cpu"}


class _Bump(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        return x * 2


def test_an_in_place_write_to_a_moved_input_is_written_back_to_the_callers_tensor():
    """A part on another device wrote a buffer update or a mutated input into its own copy, so the caller's tensor
    never changed. The write-back is shown here by its attempt from the meta device (which holds no data to copy:
    this machine has one CPU device, and copies between real devices never ran here); a part that writes nothing
    in place copies nothing back."""
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        OnDevice(_Bump(), "meta")(torch.zeros(3))
    assert OnDevice(nn.ReLU(), "meta")(torch.zeros(3)).device.type == "meta"
    same = torch.zeros(3)
    OnDevice(_Bump(), "cpu")(same)  # no copy on one device: the write lands on the caller's tensor itself
    assert same.tolist() == [1.0, 1.0, 1.0]


class _CondWithOnes(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: t + torch.ones(8), lambda t: t * 2, (x,))


def test_tensors_made_inside_a_branch_are_made_on_the_control_flow_ops_device():
    """Only the top-level graph's factory ops followed the placement: torch.ones inside a torch.cond branch placed
    on another device stayed device=cpu (a device mismatch on a GPU)."""
    graph = from_torch(_CondWithOnes(), (torch.randn(2, 8),))
    cluster = uniform_cluster(2, kind="cpu")
    split = split_program(graph, cluster, Placement.for_graph(graph, [1] * graph.num_ops),
                          device_map={"/CPU:1": "meta"})
    made = [node.kwargs["device"] for module in split.modules() if isinstance(module, torch.fx.GraphModule)
            for node in module.graph.nodes if node.op == "call_function" and "device" in node.kwargs]
    assert made and {torch.device(d).type for d in made} == {"meta"}


class _Rotary(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("inv_freq", torch.arange(4.0), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.inv_freq


def test_module_device_map_names_a_module_holding_only_a_non_persistent_buffer():
    """The map listed the modules of ExportedProgram.state_dict, which lacks non-persistent buffers (a rotary
    embedding's inv_freq): dispatch left such a module where it was, whatever the placement."""
    net = nn.Sequential(nn.Linear(4, 4), _Rotary()).eval()
    graph = from_torch(net, (torch.randn(2, 4),))
    assert graph.source.module_paths["mul"] == "1"
    cluster = uniform_cluster(2, kind="gpu")
    placement = Placement.for_graph(graph, [int(op == "mul") for op in graph.op_names])
    assert module_device_map(graph, cluster, placement) == {"0": "cuda:0", "1": "cuda:1"}


def test_module_device_map_names_each_modules_gpu(imported):
    _, graph, _ = imported
    gpus = uniform_cluster(2, kind="gpu")
    device_map = module_device_map(graph, gpus, _by_module(graph, gpus, {"right": 1}))
    assert device_map == {"left": "cuda:0", "right": "cuda:1", "head": "cuda:0"}


def test_weights_move_once_to_their_parts_device_and_the_exported_program_keeps_its_own(imported):
    _, graph, cluster = imported
    split = split_program(graph, cluster, _by_module(graph, cluster, {"right": 1}), device_map={"/CPU:1": "meta"})
    assert split.right.weight.device.type == "meta" and split.left.weight.device.type == "cpu"
    assert isinstance(split.right.weight, nn.Parameter)
    assert graph.source.program.state_dict["right.weight"].device.type == "cpu"


def test_a_placement_file_rebuilds_the_pipeline_stages_without_the_graph(imported, tmp_path):
    """placement.json's split_spec is enough: pipeline_from_file gives the stages pipeline_split gives."""
    from gplace.export.torch import pipeline_from_file
    from gplace.ir.serialize import placement_to_dict, save_json
    from gplace.pipeline.stages import placement_extras

    model, graph, cluster, placement = _two_stage_chain(imported[2])
    path = save_json(placement_to_dict(placement, graph, cluster, extra=placement_extras(graph, cluster, placement)),
                     tmp_path / "placement.json")
    pipe = pipeline_from_file(path, model, (X,))
    assert pipe.num_stages == 2
    with torch.no_grad():
        out = pipe(X)
    torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, model(X))
    no_spec = save_json(placement_to_dict(placement, graph, cluster), tmp_path / "plain.json")
    with pytest.raises(ValueError, match="plain.json has no split_spec"):
        pipeline_from_file(no_spec, model, (X,))


# ---------------------------------------------------------------------- on a GPU (/CPU:0 and /GPU:0)
@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("devices", [{"right": 1}, {"left": 1, "right": 1}, {"head": 1},
                                     {"": 1, "left": 1, "right": 1, "head": 1}], ids=["right", "towers", "head", "all"])
def test_split_program_runs_its_parts_on_the_gpu_with_the_cpu_outputs(imported, devices):
    """``TwoTower``'s ``torch.ones`` (a factory op on the CPU in the trace) is retargeted to its part's device."""
    model, graph, _ = imported
    cluster = cpu_gpu_cluster(num_gpus=1)
    split = split_program(graph, cluster, _by_module(graph, cluster, devices))
    assert "cuda" in {m.device.type for m in split.children() if isinstance(m, OnDevice)}
    with torch.no_grad():
        out = split(X)
        torch.testing.assert_close(out.cpu(), model(X), rtol=1e-5, atol=1e-5)
    assert out.device.type == ("cuda" if "" in devices else "cpu")  # the last op (split) is the parent's


@pytest.mark.gpu
@needs_cuda
def test_an_interleaved_placement_runs_over_the_cpu_and_the_gpu(imported):
    model, graph, _ = imported
    split = split_program(graph, cpu_gpu_cluster(num_gpus=1), Placement.for_graph(graph, np.arange(graph.num_ops) % 2))
    with torch.no_grad():
        torch.testing.assert_close(split(X).cpu(), model(X), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@needs_cuda
def test_a_dispatched_chain_runs_each_layer_on_its_device():
    """Module-level placement of a chain (each module's inputs moved by its pre-hook): CPU, GPU, CPU."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3)).eval()
    graph, cluster = from_torch(model, (X,)), cpu_gpu_cluster(num_gpus=1)
    device_map = module_device_map(graph, cluster, _by_module(graph, cluster, {"0": 0, "2": 1, "4": 1}))
    assert device_map == {"0": "cpu", "2": "cuda:0", "4": "cuda:0"}
    with torch.no_grad():
        expected = model(X)
        out = dispatch(model, {**device_map, "4": "cpu"})(X)
    assert model[2].weight.is_cuda and not model[4].weight.is_cuda
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


class _TwoNoGradBlocks(nn.Module):
    """Two ``torch.no_grad()`` blocks: torch names their bodies ``submod_1`` and ``submod_3`` in the module."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.middle, self.last = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            h = self.first(x).relu()
        g = self.middle(h)
        with torch.no_grad():
            g = self.last(g).tanh()
        return g + x


class _NamedLikeParts(nn.Module):
    """A model's own children named as split_module names its parts."""

    def __init__(self) -> None:
        super().__init__()
        self.submod_0, self.submod_1 = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.submod_1(self.submod_0(x).relu())


def _placements(graph) -> list[list[int]]:
    n = graph.num_ops
    return [[0] * n, [1] * n, [int(i >= n // 2) for i in range(n)], [i % 2 for i in range(n)]]


@pytest.mark.parametrize("make", [NoGradInside, AutocastOff, _TwoNoGradBlocks, _NamedLikeParts],
                         ids=["no_grad-block", "autocast-block", "two-no_grad-blocks", "children-named-submod"])
def test_a_program_with_children_named_submod_splits_for_every_placement(make):
    """torch names a no_grad or autocast block's body submod_<k> in the program's module, as a model may name its
    own children: the split wrapped those as parts (IndexError: a part number past the last part) or replaced them
    with its parts (AttributeError). Its parts are numbered after them, and every placement gives the outputs."""
    torch.manual_seed(0)
    module, x = make().eval(), torch.randn(4, 8)
    graph, cluster = from_torch(module, (x,)), uniform_cluster(2, kind="cpu")
    for devices in _placements(graph):
        split = split_program(graph, cluster, Placement.for_graph(graph, devices))
        assert any(isinstance(sub, OnDevice) for sub in split.children())
        with torch.no_grad():
            torch.testing.assert_close(split(x), module(x))


def test_a_split_program_imported_again_splits_again(imported):
    """A split program fed back to from_torch: its module holds a no_grad body named submod_1, which the second
    split took for its part 1 (IndexError with one part)."""
    model, graph, cluster = imported
    split = split_program(graph, cluster, Placement.for_graph(graph, [i % 2 for i in range(graph.num_ops)]))
    again = from_torch(split, (X,))
    for devices in _placements(again):
        with torch.no_grad():
            resplit = split_program(again, cluster, Placement.for_graph(again, devices))
            torch.testing.assert_close(resplit(X), model(X))


class _ReadsBeforeAndAfter(nn.Module):
    """Reads its buffer's old value, updates it, then reads the new one: the write-back must follow every part
    that reads the old value."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("b", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        before = self.b * 2
        self.b.add_(x)
        return before.cos() + self.b.sin() + self.b[:2].sum()


@pytest.mark.parametrize("make, x, samples", [
    (Counter, torch.randn(3, 4), None), (MutatesInput, torch.randn(4), None),
    (_ReadsBeforeAndAfter, torch.randn(4), 48),
], ids=["buffer", "input", "old-and-new-value"])
def test_a_decomposed_program_writes_back_its_buffer_and_input_updates(make, x, samples):
    """run_decompositions() makes a functional program; ExportedProgram.module() writes its new buffer and input
    values back with copy_ nodes that are no ops of the graph, which split_program refused ("not an op of
    graph"). They run in the last part, after every read of the old value: outputs, inputs and buffers match
    the module's for every placement (a seeded sample where there are too many)."""
    torch.manual_seed(0)
    program = torch.export.export(make(), (x,)).run_decompositions()
    n = from_torch(program).num_ops
    everything = [[(k >> i) & 1 for i in range(n)] for k in range(2 ** n)]
    chosen = everything if samples is None else [everything[k] for k in
                                                 np.random.default_rng(0).choice(len(everything), samples)]
    cluster = uniform_cluster(2, kind="cpu")
    for devices in chosen:
        reference, work = copy.deepcopy(program).module(), copy.deepcopy(program)
        graph = from_torch(work)
        split = split_program(graph, cluster, Placement.for_graph(graph, devices))
        for _ in range(2):
            want_in, got_in = x.clone(), x.clone()
            with torch.no_grad():
                torch.testing.assert_close(split(got_in), reference(want_in))
            torch.testing.assert_close(got_in, want_in)
        buffers = dict(reference.named_buffers())
        torch.testing.assert_close({k: v for k, v in work.state_dict.items() if k in buffers}, buffers)
