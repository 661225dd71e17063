"""torch.export importer: ops with shapes, module paths, parameters as persistent memory, training graphs."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch_control_flow import AutocastOff, Branchy, Looping, Nested, NoGradInside  # noqa: E402

from gplace.costmodel import TensorSpec, op_flops, op_kind_costs, roofline_costs  # noqa: E402
from gplace.importers.torch_export import TorchSource, from_torch  # noqa: E402
from gplace.ir import UnsupportedGraphError  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


class ConvNet(nn.Module):
    """conv -> bn -> relu -> pool -> head.fc, with a nested module path."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential()
        self.head.add_module("fc", nn.Linear(4 * 3 * 3, 5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def _state_bytes(module: nn.Module) -> int:
    tensors = [*module.parameters(), *module.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


def _check_shapes(g) -> None:
    for name, shapes in zip(g.op_names, g.output_shapes, strict=True):
        assert all(d >= 0 for s in shapes for d in s), f"{name}: {shapes}"
    producers = {int(s) for s in g.edge_index[0]}
    assert all(g.output_shapes[i] for i in producers), "an op with readers has no output shape"


@pytest.fixture(scope="module")
def mlp_graph():
    return from_torch(_mlp(), (torch.randn(2, 8),))


def test_mlp_ops_shapes_and_module_paths(mlp_graph):
    """Each computing node is an op with its FakeTensor shape and the path of the module that owns it."""
    g = mlp_graph
    assert g.num_ops > 0
    _check_shapes(g)
    i = g.op_index["linear"]
    assert g.op_types[i] == "aten.linear.default" and g.output_shapes[i] == ((2, 16),)
    assert isinstance(g.source, TorchSource) and not g.source.training
    paths = g.source.module_paths
    assert (paths["linear"], paths["relu"], paths["linear_1"]) == ("0", "1", "2")
    edges = {(e.src, e.dst): e.bytes for e in g.edges()}
    assert edges[("input", "linear")] == 2 * 8 * 4 and edges[("linear", "relu")] == 2 * 16 * 4


def test_mlp_parameters_are_persistent_memory(mlp_graph):
    """Parameters fold into their one reader; the graph's persistent memory is the model's parameter bytes."""
    g = mlp_graph
    assert int(g.persistent_memory.sum()) == _state_bytes(_mlp())
    assert g.persistent_memory[g.op_index["linear"]] == (16 * 8 + 16) * 4


def test_linear_cost_is_the_roofline_of_its_flops(mlp_graph):
    """aten.linear counts 2*B*in*out + B*out FLOPs and reads input, weight and bias."""
    g = mlp_graph
    specs = [TensorSpec((2, 8), 64), TensorSpec((16, 8), 512), TensorSpec((16,), 64)]
    out = [TensorSpec((2, 16), 128)]
    flops = op_flops("aten.linear.default", specs, out)
    assert flops == 2 * 2 * 8 * 16 + 2 * 16
    expected = roofline_costs(flops, 64 + 512 + 64 + 128)
    for kind in ("gpu", "cpu"):
        assert g.kind_cost[kind][g.op_index["linear"]] == pytest.approx(expected[kind])


def test_conv_net_inference():
    """A conv net imports in eval mode with shapes, nested module paths and all parameters and buffers."""
    model = ConvNet().train()
    g = from_torch(model, torch.randn(2, 3, 8, 8))
    assert model.training and model.features[1].training  # modes restored
    _check_shapes(g)
    assert "aten.conv2d.default" in g.op_types
    paths = g.source.module_paths
    assert paths["conv2d"] == "features.0" and paths["linear"] == "head.fc"
    assert int(g.persistent_memory.sum()) == _state_bytes(model)
    assert g.kind_cost["gpu"][g.op_index["conv2d"]] > 0


def test_conv_net_training_graph():
    """training=True gives the joint forward+backward graph; backward ops inherit their forward module path."""
    model = ConvNet()
    g = from_torch(model, (torch.randn(2, 3, 8, 8),), training=True)
    assert g.source.training and g.name == "ConvNet_train"
    _check_shapes(g)
    assert "aten.convolution_backward.default" in g.op_types
    paths = g.source.module_paths
    assert paths["convolution_backward"] == "features.0"
    assert int(g.persistent_memory.sum()) == _state_bytes(model)
    assert g.op_types.count("Input") == 2  # the image and the gradient of the output
    backward = g.op_index["convolution_backward"]
    assert g.kind_cost["gpu"][backward] > g.kind_cost["gpu"][g.op_index["convolution"]]


def test_exported_program_needs_no_example_inputs():
    """An ExportedProgram imports as it is."""
    ep = torch.export.export(_mlp().eval(), (torch.randn(3, 8),))
    g = from_torch(ep, name="ep")
    assert g.name == "ep" and g.output_shapes[g.op_index["linear_1"]] == ((3, 4),)
    assert g.source.program is ep


class _DataDependent(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 if x.sum() > 0 else x


class _Mapped(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch._higher_order_ops.map import map as hop_map

        return hop_map(lambda t: t * 2, x)


def test_cond_is_one_op_reading_its_operands_with_its_dearer_branchs_cost():
    """torch.cond is one op: edges from its predicate's and operands' producers, the parameters only a branch
    reads folded into it, and the cost of its dearer branch (a linear layer and a product)."""
    g = from_torch(Branchy(), (torch.randn(4, 8),))
    assert g.op_types[g.op_index["cond"]] == "cond"
    assert {(e.src, e.dst) for e in g.edges()} >= {("gt", "cond"), ("relu", "cond"), ("cond", "add")}
    assert g.persistent_memory[g.op_index["cond"]] == (8 * 8 + 8) * 4  # second's weight and bias
    x = TensorSpec((4, 8), 128)
    product = op_kind_costs("aten.mul.Tensor", [x], [x])
    linear = {k: float(g.kind_cost[k][g.op_index["linear"]]) for k in product}  # the same shapes as second's
    assert {k: float(g.kind_cost[k][g.op_index["cond"]]) for k in product} == pytest.approx(
        {k: linear[k] + product[k] for k in product})


def test_nested_cond_costs_its_dearest_path():
    """A cond inside a cond's branch is costed inside it: the outer op costs that branch (the inner predicate's
    sum and comparison, then the inner cond's dearer branch, a product), dearer than the other (a difference)."""
    g = from_torch(Nested(), (torch.randn(4, 8),))
    assert g.op_types.count("cond") == 1
    x, total = TensorSpec((4, 8), 128), TensorSpec((), 4)
    steps = [op_kind_costs("aten.sum.default", [x], [total]),
             op_kind_costs("aten.gt.Scalar", [total], [TensorSpec((), 1)]), op_kind_costs("aten.mul.Tensor", [x], [x])]
    want = {k: sum(step[k] for step in steps) for k in steps[0]}
    assert {k: float(g.kind_cost[k][g.op_index["cond"]]) for k in want} == pytest.approx(want)


def test_while_loop_costs_its_passes_on_the_example_inputs(caplog):
    """torch.while_loop is one op costing its condition and body once per pass it makes on the example inputs:
    6 passes cost twice 3, with no warning."""
    with caplog.at_level("WARNING", logger="gplace.importers.torch_export"):
        three, six = (from_torch(Looping(n), (torch.randn(4, 8),)) for n in (3, 6))
    assert "trip count" not in caplog.text
    cost = [float(g.kind_cost["gpu"][g.op_index["while_loop"]]) for g in (three, six)]
    assert three.op_types[three.op_index["while_loop"]] == "while_loop" and cost[0] > 0
    assert cost[1] == pytest.approx(2 * cost[0])


def test_while_loop_without_example_inputs_costs_one_pass_and_warns(caplog):
    """An ExportedProgram without example inputs: the loop's cost counts one pass, with a warning naming it."""
    ep = torch.export.export(Looping(3), (torch.randn(4, 8),))
    counted = from_torch(ep)
    ep.example_inputs = None
    with caplog.at_level("WARNING", logger="gplace.importers.torch_export"):
        g = from_torch(ep)
    assert "node 'while_loop' (while_loop): its trip count depends on the data" in caplog.text
    one, three = (float(h.kind_cost["gpu"][h.op_index["while_loop"]]) for h in (g, counted))
    assert three == pytest.approx(3 * one)


def test_no_grad_and_autocast_regions_are_one_op_costing_one_pass():
    """A ``torch.no_grad()`` block inside ``forward`` is one op costing its calls once (a linear layer, as the
    one outside it, and a sigmoid); an ``autocast`` block is one op too."""
    g = from_torch(NoGradInside(), (torch.randn(4, 8),))
    block, outside = g.op_types.index("wrap_with_set_grad_enabled"), g.op_types.index("aten.linear.default")
    sigmoid = op_kind_costs("aten.sigmoid.default", [TensorSpec((4, 8), 128)], [TensorSpec((4, 8), 128)])
    for kind in ("gpu", "cpu"):
        assert float(g.kind_cost[kind][block]) == pytest.approx(float(g.kind_cost[kind][outside]) + sigmoid[kind])
    assert from_torch(AutocastOff(), (torch.randn(4, 8),)).op_types.count("wrap_with_autocast") == 1


class _SelfAttention(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.scaled_dot_product_attention(x, x, x)


class _Squares(nn.Module):
    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bij,bjk->bik", a, a)


def test_a_value_read_twice_counts_in_each_argument_position():
    """SDPA(x, x, x) and einsum(a, a) count their FLOPs as with distinct operands (the rules read positions),
    and their traffic with the repeated value once."""
    x, a = TensorSpec((2, 4, 128, 64), 2 * 4 * 128 * 64 * 4), TensorSpec((4, 128, 128), 4 * 128 * 128 * 4)
    cases = [(_SelfAttention(), x, [x, x, x], {}), (_Squares(), a, [a, a], {"equation": "bij,bjk->bik"})]
    for module, spec, positions, attrs in cases:
        g = from_torch(module, (torch.randn(spec.shape),))
        (i,) = [k for k, t in enumerate(g.op_types) if t != "Input"]
        want = op_kind_costs(g.op_types[i], positions, [spec], attrs, distinct=[spec])
        assert want["gpu"] > roofline_costs(0.0, 2 * spec.nbytes)["gpu"]  # compute-bound: the FLOPs count
        assert {k: float(g.kind_cost[k][i]) for k in want} == pytest.approx(want)


class _NonZero(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nonzero(x).float().sum(0)


@pytest.mark.parametrize("module, match", [
    (_DataDependent(), "torch.export could not trace _DataDependent"),
    (_Mapped(), "node 'map_impl'.*higher-order operator not handled"),
    (_NonZero(), "node 'nonzero'.*data-dependent"),
])
def test_unsupported_programs_raise_unsupported_graph_error(module, match):
    """Tracing failures, control flow and data-dependent shapes raise UnsupportedGraphError naming the cause."""
    with pytest.raises(UnsupportedGraphError, match=match):
        from_torch(module, (torch.randn(3),))


def test_bad_arguments():
    """A non-module or a module without example inputs is a usage error, not an import error."""
    with pytest.raises(TypeError, match="nn.Module"):
        from_torch(object(), (torch.randn(1),))
    with pytest.raises(ValueError, match="example_inputs"):
        from_torch(_mlp())


@pytest.mark.parametrize("kwargs, match", [
    ({"input_shapes": [[True, 8]]},
     r"input_shapes\[0\] must be a list of positive integers \(\[\] for a 0-d tensor\), got \[True, 8\]"),
    ({"input_shapes": [[2, 8]], "dtype": 5}, "dtype 5 is not a torch dtype"),
    # graph.align_to_modules=no aligned (a non-empty string is true); training=maybe was torch's unnamed error
    ({"input_shapes": [[2, 8]], "align_to_modules": "no"}, "align_to_modules must be true or false, got 'no'"),
    ({"input_shapes": [[2, 8]], "training": "maybe"}, "training must be true or false, got 'maybe'"),
])
def test_from_module_shapes_refuses_a_bool_dimension_and_a_dtype_that_is_no_name(kwargs, match):
    """Before, a True dimension reached torch.randn (a raw TypeError listing its overloads) and dtype=5 raised
    getattr's 'attribute name must be string'."""
    from gplace.importers.torch_export import from_module_shapes

    with pytest.raises(ValueError, match=match):
        from_module_shapes(_mlp(), **kwargs)

def test_aten_cost_rules():
    """ATen views cost nothing; convolution_backward counts twice the forward; a gather reads only its rows."""
    from gplace.costmodel import op_work

    assert op_kind_costs("aten.permute.default", [TensorSpec((4, 4), 64)], [TensorSpec((4, 4), 64)]) == {
        "gpu": 0.0, "cpu": 0.0}
    x, w, y = TensorSpec((1, 3, 8, 8), 768), TensorSpec((4, 3, 3, 3), 432), TensorSpec((1, 4, 6, 6), 576)
    fwd = op_flops("aten.convolution.default", [x, w], [y])
    assert op_flops("aten.convolution_backward.default", [y, x, w], [x, w]) == 2 * fwd
    table, idx, rows = TensorSpec((1000, 16), 64000), TensorSpec((5,), 40), TensorSpec((5, 16), 320)
    assert op_work("aten.embedding.default", [table, idx], [rows]).nbytes == 40 + 2 * 320
    assert np.isclose(op_flops("aten.lstm.input", [TensorSpec((4, 10, 16), 0), TensorSpec((32 * 4, 16), 0)],
                               [TensorSpec((4, 10, 32), 0)]), 2 * 40 * 128 * 16 + 12 * 40 * 32)


def test_addbmm_counts_every_product_and_fused_matmul_its_transposed_inner_dimension():
    """addbmm sums b matrix products and was counted as one (32x low); FusedMatMul with transA took K from M."""
    b, n, m, p = 4, 8, 16, 2
    out = TensorSpec((n, p), 4 * n * p)
    ins = [out, TensorSpec((b, n, m), 4 * b * n * m), TensorSpec((b, m, p), 4 * b * m * p)]
    assert op_flops("aten.addbmm.default", ins, [out]) == 2 * b * n * m * p + n * p
    a, w, y = TensorSpec((16, 2), 128), TensorSpec((16, 3), 192), TensorSpec((2, 3), 24)  # A is (K, M) = (16, 2)
    assert op_flops("com.microsoft::FusedMatMul", [a, w], [y], {"transA": 1}) == 2 * 2 * 3 * 16


class TiedLM(nn.Module):
    """An embedding and an output layer sharing one weight, as language models tie them."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.out = nn.Embedding(100, 16), nn.Linear(16, 100, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.out(self.emb(idx)).sum()


@pytest.mark.parametrize("training", [False, True])
def test_a_tied_weight_is_held_once_and_its_ops_colocated(training):
    """torch.export keeps a placeholder per name of a tied tensor: each was a Parameter op holding the whole weight
    (512,000 bytes for a 256,000-byte embedding), placeable on different devices."""
    graph = from_torch(TiedLM(), (torch.tensor([[1, 2, 3]]),), training=training)
    held = {op.name: op for op in graph.ops() if op.type == "Parameter"}
    assert graph.persistent_memory.sum() == _state_bytes(TiedLM()) == 100 * 16 * 4
    assert len(held) == 2 and len({op.colocation for op in held.values()}) == 1
    assert sorted(op.persistent_memory for op in held.values()) == [0, 100 * 16 * 4]


class _CallsTwice(nn.Module):
    """``l`` called twice in a row, then blocks held in an ``nn.ModuleList`` (never called itself)."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 4)
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.l(self.l(x))
        for block in self.blocks:
            x = block(x)
        return x.sum()


@pytest.mark.parametrize("training", [False, True])
def test_module_calls_tell_two_calls_of_a_module_apart(training):
    """Only the innermost path was kept: l(l(x))'s two calls looked like one, and the stack's modules were lost."""
    torch.set_num_threads(1)
    g = from_torch(_CallsTwice(), (torch.randn(2, 4),), training=training)
    paths, calls = g.source.module_paths, g.source.module_calls
    of_l = [stack for op, stack in calls.items() if paths[op] == "l"]
    assert {tuple(m for m, _ in stack) for stack in of_l} == {("", "l")}
    assert len({stack[-1] for stack in of_l}) == 2  # two calls of l
    called = {m for stack in calls.values() for m, _ in stack}
    assert called == {"", "l", "blocks.0", "blocks.1"}  # not the ModuleList "blocks"
    if training:
        backward = [i for i, f in enumerate(g.grad_of) if f >= 0 and g.op_names[f] in calls]
        assert backward and all(calls[g.op_names[i]] == calls[g.op_names[g.grad_of[i]]] for i in backward)


class _Doubled(nn.Module):
    """``(x * 2).sum()``, with ``to`` applied to ``x`` first (``None``: nothing)."""

    def __init__(self, to=None) -> None:
        super().__init__()
        self.to_ = to

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x if self.to_ is None else self.to_(x)) * 2).sum()


def _by_type(g, prefix: str) -> list[int]:
    return [i for i, t in enumerate(g.op_types) if t.startswith(prefix)]


def test_a_to_that_changes_nothing_and_its_metadata_assert_cost_nothing_and_hold_no_bytes():
    """x.to("cpu").to(float32) on a float32 CPU tensor returns x itself, yet each .to() was costed as a full copy
    (and each aten._assert_tensor_metadata that torch.export puts before it as a read of x)."""
    x = torch.randn(64, 64)
    plain = from_torch(_Doubled(), (x,))
    noop = from_torch(_Doubled(lambda t: t.to("cpu").to(torch.float32)), (x,))
    to, asserts = _by_type(noop, "aten.to."), _by_type(noop, "aten._assert_tensor_metadata")
    assert len(to) == 2 and len(asserts) == 2  # aten.to.dtype_layout, aten.to.dtype
    for i in to + asserts:
        assert all(noop.kind_cost[k][i] == 0.0 for k in noop.kind_cost), noop.op_names[i]
        assert noop.output_bytes[i] == 0
    assert noop.output_bytes.sum() == plain.output_bytes.sum()
    for k in plain.kind_cost:
        assert np.nansum(noop.kind_cost[k]) == pytest.approx(np.nansum(plain.kind_cost[k]))
    with torch.no_grad():  # what the costs model: torch returns x itself
        assert x.to("cpu").to(torch.float32).data_ptr() == x.data_ptr()


@pytest.mark.parametrize("convert, nbytes", [
    (lambda t: t.to(torch.float16), 64 * 64 * 2),  # a dtype change
    (lambda t: t.to(torch.float32, copy=True), 64 * 64 * 4),  # copy=True copies even without a change
    (lambda t: t.to(memory_format=torch.channels_last), 64 * 64 * 4),  # a layout the input does not have
])
def test_a_to_that_converts_still_costs_its_copy_and_carries_its_bytes(convert, nbytes):
    x = torch.randn(1, 4, 32, 32)
    g = from_torch(_Doubled(convert), (x,))
    (i,) = _by_type(g, "aten.to.")
    assert g.output_bytes[i] == nbytes
    expected = op_kind_costs(g.op_types[i], [TensorSpec(tuple(x.shape), x.numel() * 4)],
                             [TensorSpec(tuple(x.shape), nbytes)])
    assert all(expected[k] > 0 and g.kind_cost[k][i] == pytest.approx(expected[k]) for k in expected)


def test_a_to_in_the_memory_format_its_input_has_costs_nothing():
    g = from_torch(_Doubled(lambda t: t.to(memory_format=torch.contiguous_format)), (torch.randn(1, 4, 8, 8),))
    (i,) = _by_type(g, "aten.to.")
    assert g.output_bytes[i] == 0 and g.kind_cost["cpu"][i] == 0.0


def test_training_graphs_drop_a_no_op_to_and_cost_to_copy_as_a_copy():
    """A joint graph has no aten.to: a .to() that changes nothing is gone, a conversion is an aten._to_copy."""
    x = torch.randn(64, 64, requires_grad=False)
    g = from_torch(_Doubled(lambda t: t.to(torch.float32) + t.to(torch.float16).float()), (x,), training=True)
    assert not _by_type(g, "aten.to.")
    copies = _by_type(g, "aten._to_copy")
    assert copies and all(g.kind_cost["cpu"][i] > 0 and g.output_bytes[i] > 0 for i in copies)
    assert all(g.kind_cost["cpu"][i] == 0.0 for i in _by_type(g, "aten._assert_tensor_metadata"))


def test_a_no_op_to_aliases_its_input_and_a_conversion_is_storage_of_its_own():
    """The alias analysis: aten.to's schema lets its result alias its input; the shapes tell which it does."""
    from gplace.importers.torch_export import _aliases

    class Written(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            same, half = x.to(torch.float32), x.to(torch.float16)
            same.add_(1)  # writes x
            return same.sum() + half.float().sum()

    ep = torch.export.export(Written(), (torch.randn(4, 4),))
    aliases = _aliases(ep.graph_module)
    same, half, back = (n.name for n in ep.graph_module.graph.nodes if str(n.target).startswith("aten.to."))
    assert aliases.bases[same] == {"x"}  # what same.add_ writes
    assert aliases.bases[half] == {half} and aliases.bases[back] == {back}
    assert aliases.writes[next(n.name for n in ep.graph_module.graph.nodes if "add_" in str(n.target))] == {"x"}
    g = from_torch(ep)
    assert [int(g.output_bytes[g.op_names.index(n)]) for n in (same, half, back)] == [0, 4 * 4 * 2, 4 * 4 * 4]


class _Magnitude(nn.Module):
    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return z.abs()


def test_from_module_shapes_makes_complex_inputs_and_refuses_a_quantized_dtype_naming_it():
    """complex64 reached torch.randint (torch's raw "check_random_bounds" RuntimeError) and qint8 a
    NotImplementedError from its QuantizedCPU backend: complex inputs are normal values, and a dtype with no
    random inputs is a ValueError naming it."""
    from gplace.importers.torch_export import from_module_shapes

    graph = from_module_shapes(_Magnitude(), [[2, 3]], dtype="complex64")
    assert graph.num_ops == 2
    for dtype in ("qint8", "bits8"):
        with pytest.raises(ValueError, match=f"dtype '{dtype}'"):
            from_module_shapes(_Magnitude(), [[2, 3]], dtype=dtype)


class _Bilinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b = nn.Bilinear(32, 48, 40)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.b(x, y)


def test_a_training_bilinear_and_its_weight_gradient_cost_as_the_inference_bilinear():
    """A training graph's nn.Bilinear is aten._trilinear, and so is its weight's gradient (another layout): both
    counted 0 FLOPs, costed as their memory traffic alone; now each costs as aten.bilinear does."""
    torch.manual_seed(0)
    x, y = torch.randn(64, 32), torch.randn(64, 48)
    bilinear = [op for op in from_torch(_Bilinear().eval(), (x, y)).ops() if op.type == "aten.bilinear.default"]
    trilinear = [op for op in from_torch(_Bilinear(), (x, y), training=True).ops()
                 if op.type == "aten._trilinear.default"]
    assert len(bilinear) == 1 and len(trilinear) == 2
    for op in trilinear:
        assert op.kind_cost["cpu"] == pytest.approx(bilinear[0].kind_cost["cpu"], rel=0.01), op.name


def test_a_training_graph_on_a_torch_without_joint_tracing_names_the_version_it_needs(monkeypatch):
    """torch before 2.9 lacks aot_export_joint_with_descriptors (pyproject allows torch >= 2.5): the import of a
    training graph raised a raw ImportError from inside gplace."""
    import torch._functorch.aot_autograd as aot_autograd

    program = torch.export.export(nn.Linear(4, 2), (torch.randn(3, 4),))  # torch.export itself reads the name
    monkeypatch.delattr(aot_autograd, "aot_export_joint_with_descriptors")
    with pytest.raises(UnsupportedGraphError, match=r"training graph \(training=True\) needs torch >= 2.9"):
        from_torch(program, training=True)


def test_a_pickled_training_graph_leaves_its_program_out_and_a_deep_copy_keeps_it(caplog):
    """Pickled, a joint graph's GraphModule came back with other node names ('primals' for 'primals_1'): the copy,
    with the same fingerprint, failed on torch-v1 ('input primals has no value'), and a spawned worker could not
    load it at all. The copy now has no source (it places and simulates; torch-v1 says there is no program); a deep
    copy keeps the program."""
    import copy
    import logging
    import pickle

    from gplace.ir import Placement
    from gplace.runtime import Simulator, TorchRuntime
    from gplace.testing import uniform_cluster

    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    g, c = from_torch(model, (torch.randn(2, 8),), training=True), uniform_cluster(2, kind="cpu")
    p = Placement.single(g, 0)
    with caplog.at_level(logging.WARNING, logger="gplace.importers.torch_export"):
        pickled = pickle.loads(pickle.dumps(g))
    assert pickled.source is None and "left out when pickled" in caplog.text
    assert Simulator().measure(pickled, c, p).step_time == Simulator().measure(g, c, p).step_time
    with pytest.raises(UnsupportedGraphError, match="has no torch program to run"):
        TorchRuntime(steps=1, warmup=0).check_graph(pickled)
    copied = copy.deepcopy(g)
    assert [n.name for n in copied.source.program.graph.nodes] == [n.name for n in g.source.program.graph.nodes]
    assert TorchRuntime(steps=1, warmup=0).measure(copied, c, p).ok
