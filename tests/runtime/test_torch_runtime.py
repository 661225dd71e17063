"""The ``torch-v1`` runtime (gplace.runtime.torch_runtime): placed execution equals single-device execution."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch_control_flow import AutocastOff, Branchy, Counter, Looping, MutatesInput, Nested, NoGradInside  # noqa: E402

from gplace.importers.torch_export import from_torch  # noqa: E402
from gplace.ir import Cluster, Device, InvalidPlacementError, OpGraph, Placement, UnsupportedGraphError  # noqa: E402
from gplace.runtime.torch_runtime import (  # noqa: E402
    TorchRunError,
    TorchRuntime,
    _step_statistics,
    torch_device,
)
from gplace.testing import diamond, uniform_cluster  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

CPU_MAP = {"/CPU:0": "cpu", "/CPU:1": "cpu"}
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
needs_two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")


@torch.library.custom_op("gplace_test::oom", mutates_args=())
def _oom(x: torch.Tensor) -> torch.Tensor:
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 TiB")


@_oom.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op("gplace_test::column_major", mutates_args=())
def _column_major(x: torch.Tensor) -> torch.Tensor:
    """``x``'s values laid out column-major, as some CUDA kernels return what the CPU returns row-major."""
    return x.t().contiguous().t()


@_column_major.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)  # row-major: what torch.export traces


class ViewAfterLayout(nn.Module):
    """A ``view`` of an op's output, valid for the traced (row-major) layout only."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _column_major(x).view(-1) * 2


class ConvNet(nn.Module):
    """conv -> bn -> relu -> pool -> linear."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2))
        self.fc = nn.Linear(4 * 3 * 3, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).flatten(1))


class Fan(nn.Module):
    """One hidden value read by two linears: where both sit on another device it is sent once."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(x)
        return self.a(h) + self.b(h)


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))


def _cpus(n: int = 2) -> Cluster:
    return Cluster.build([Device(f"/CPU:{i}", "cpu") for i in range(n)], default_bandwidth=1e9, name=f"{n}xcpu")


def _halves(g: OpGraph) -> Placement:
    return Placement.for_graph(g, [int(i >= g.num_ops // 2) for i in range(g.num_ops)])


def _alternate(g: OpGraph, devices: tuple[int, ...] = (0, 1)) -> Placement:
    """Ops on ``devices`` in turn; a colocation group (a tensor written in place and its writers) on its first
    op's device."""
    first: dict[str, int] = {}
    return Placement.for_graph(g, [devices[i % len(devices)] if op.colocation is None
                                   else first.setdefault(op.colocation, devices[i % len(devices)])
                                   for i, op in enumerate(g.ops())])


def _assert_same(got: tuple, want: tuple, atol: float = 1e-6) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.allclose(a.cpu(), b.cpu(), atol=atol), (a, b)


@pytest.fixture(scope="module")
def runtime() -> TorchRuntime:
    return TorchRuntime(steps=3, warmup=1, device_map=CPU_MAP)


@pytest.fixture(scope="module")
def mlp_graph() -> OpGraph:
    return from_torch(_mlp(), (torch.randn(3, 8),))


@pytest.fixture(scope="module")
def conv_graph() -> OpGraph:
    torch.manual_seed(1)
    return from_torch(ConvNet(), (torch.randn(2, 3, 8, 8),))


@pytest.fixture(scope="module")
def train_graph() -> OpGraph:
    torch.manual_seed(2)
    return from_torch(ConvNet(), (torch.randn(2, 3, 8, 8),), training=True)


# ---------------------------------------------------------------------- device names
@pytest.mark.parametrize(("name", "want"), [
    ("/CPU:0", "cpu"), ("/CPU:3", "cpu"), ("/GPU:0", "cuda:0"), ("/GPU:2", "cuda:2"),
    ("/job:localhost/replica:0/task:0/device:GPU:1", "cuda:1"), ("cpu", "cpu"), ("cuda", "cuda:0"),
    ("cuda:1", "cuda:1"),
])
def test_device_names_map_to_torch_devices(name: str, want: str) -> None:
    """TF-style names map to cpu / cuda:i; a torch device string is used as it is."""
    assert str(torch_device(name)) == want


def test_device_map_overrides_and_unknown_names_fail() -> None:
    """device_map wins over the default mapping; a name that maps nowhere is a ValueError."""
    assert str(torch_device("/GPU:0", {"/GPU:0": "cpu"})) == "cpu"
    with pytest.raises(ValueError, match="TPU"):
        torch_device("/TPU:0")
    # runtime.device_map=abc failed on str.items(): AttributeError, a traceback from inside Hydra's instantiate
    with pytest.raises(ValueError, match=r"^device_map must map cluster device names to torch devices.*got 'abc'"):
        TorchRuntime(device_map="abc")


# ---------------------------------------------------------------------- equal outputs
def test_mlp_split_equals_single_device(runtime: TorchRuntime, mlp_graph: OpGraph) -> None:
    """An MLP split in halves, or alternating op by op, over two CPU devices computes the same outputs."""
    c = _cpus()
    want = runtime.run(mlp_graph, c, Placement.single(mlp_graph, 0))
    assert want[0].shape == (3, 4)
    _assert_same(runtime.run(mlp_graph, c, _halves(mlp_graph)), want)
    _assert_same(runtime.run(mlp_graph, c, _alternate(mlp_graph)), want)


def test_outputs_equal_the_exported_module(runtime: TorchRuntime, conv_graph: OpGraph) -> None:
    """A conv net split over two devices computes what the exported program computes."""
    ep = conv_graph.source.program
    (x,), _ = ep.example_inputs
    want = ep.module()(x)
    (got,) = runtime.run(conv_graph, _cpus(), _alternate(conv_graph))
    assert torch.allclose(got, want, atol=1e-6)


def test_run_takes_other_inputs(runtime: TorchRuntime, conv_graph: OpGraph) -> None:
    """run() takes user inputs positionally or by placeholder name."""
    x = torch.randn(2, 3, 8, 8)
    want = conv_graph.source.program.module()(x)
    c, p = _cpus(), _halves(conv_graph)
    _assert_same(runtime.run(conv_graph, c, p, inputs=(x,)), (want,))
    _assert_same(runtime.run(conv_graph, c, p, inputs={"x": x}), (want,))
    with pytest.raises(ValueError, match="takes 1"):
        runtime.run(conv_graph, c, p, inputs=(x, x))


class _Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, n: int, flag: bool) -> torch.Tensor:
        h = self.a(x) * n
        return h.relu() if flag else h


def test_run_refuses_another_value_for_an_input_traced_as_a_constant(runtime: TorchRuntime) -> None:
    """An int or bool input is a constant of the exported program: run() with n=5 gave the results of the traced n=3
    without a word (ExportedProgram.module() refuses it)."""
    module, x = _Scaled(), torch.randn(3, 4)
    graph = from_torch(module, (x, 3, False))
    c, p = _cpus(), _alternate(graph)
    _assert_same(runtime.run(graph, c, p, inputs=(x, 3, False)), (module(x, 3, False),))
    with pytest.raises(ValueError, match="^input 1 was traced as the constant 3, .* got 5"):
        runtime.run(graph, c, p, inputs=(x, 5, False))
    with pytest.raises(ValueError, match="^input 'flag' was traced as the constant False, .* got True"):
        runtime.run(graph, c, p, inputs={"x": x, "n": 3, "flag": True})
    with pytest.raises(ValueError, match="^input 1 was traced as the constant 3, .* got None"):
        runtime.run(graph, c, p, inputs=(x, None, False))  # pytree keeps None as a leaf: the count matched
    for n, flag in ((torch.tensor(3), np.bool_(False)), (np.int64(3), 0), (3.0, False)):  # module() takes these
        _assert_same(runtime.run(graph, c, p, inputs=(x, n, flag)), (module(x, 3, False),))


def test_training_graph_runs_split(runtime: TorchRuntime, train_graph: OpGraph) -> None:
    """The joint forward+backward graph runs; split outputs and gradients equal single-device ones."""
    c = _cpus()
    want = runtime.run(train_graph, c, Placement.single(train_graph, 0))
    assert any(t is not None and t.shape == (4, 3, 3, 3) for t in want)  # the conv weight's gradient
    _assert_same(runtime.run(train_graph, c, _alternate(train_graph)), want)
    m = runtime.measure(train_graph, c, _halves(train_graph))
    assert m.ok and m.bytes_moved > 0


def test_training_graph_runs_the_module_s_own_weights_and_inputs(runtime: TorchRuntime) -> None:
    """A joint graph runs on the module's parameters and the example inputs, not made-up values (with which a
    deep model's activations can overflow to nan): its forward output is the module's."""
    torch.manual_seed(4)
    model, x = _mlp(), torch.randn(3, 8)
    graph = from_torch(model, (x,), training=True)
    want = model(x).detach()
    outputs = runtime.run(graph, _cpus(), _halves(graph))
    assert any(t is not None and t.shape == want.shape and torch.allclose(t.cpu(), want, atol=1e-6) for t in outputs)


class Flagged(nn.Module):
    """A keyword flag the forward pass reads at trace time only (as Hugging Face models take ``use_cache``)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, use_cache: bool = True) -> torch.Tensor:
        return self.fc(x) if use_cache else torch.relu(self.fc(x))


def test_training_graph_with_a_flag_argument_runs(runtime: TorchRuntime) -> None:
    """The joint graph keeps an input for the flag that nothing reads and that has no value: it runs without it."""
    torch.manual_seed(3)
    graph = from_torch(Flagged(), {"x": torch.randn(2, 4), "use_cache": False}, training=True)
    c = _cpus()
    want = runtime.run(graph, c, Placement.single(graph, 0))
    _assert_same(runtime.run(graph, c, _alternate(graph)), want)
    assert runtime.measure(graph, c, _halves(graph)).ok


# ---------------------------------------------------------------------- timing and transfers
@pytest.mark.parametrize("module, x", [
    (Branchy(), torch.ones(4, 8)), (Branchy(), -100 * torch.ones(4, 8)), (Looping(), torch.randn(4, 8)),
    (Nested(), torch.ones(4, 8)), (NoGradInside(), torch.randn(4, 8)), (AutocastOff(), torch.randn(4, 8)),
], ids=["cond-true", "cond-false", "while_loop", "nested-cond", "no_grad-block", "autocast-block"])
def test_control_flow_runs_split_like_the_module(runtime: TorchRuntime, module: nn.Module, x: torch.Tensor) -> None:
    """torch.cond (either branch) and torch.while_loop, each one op, run on their device under a split
    placement and give the module's output."""
    g = from_torch(module, (x,))
    with torch.no_grad():
        _assert_same(runtime.run(g, _cpus(), _alternate(g), inputs=[x]), (module(x),), atol=1e-5)


def test_a_training_graph_with_cond_runs_split(runtime: TorchRuntime) -> None:
    """The joint training graph of a module with torch.cond (a cond forward, another backward) runs split."""
    torch.manual_seed(3)
    g = from_torch(Branchy(), (torch.randn(4, 8),), training=True)
    assert g.op_types.count("cond") == 2
    m = runtime.measure(g, _cpus(), _alternate(g))
    assert m.ok and m.step_time > 0, m.reason


def test_step_time_is_positive_with_a_spread(runtime: TorchRuntime, conv_graph: OpGraph) -> None:
    """A measurement reports a finite positive median step time and a finite spread >= 0."""
    m = runtime.measure(conv_graph, _cpus(), _halves(conv_graph))
    assert m.ok and m.runtime == "torch-v1" and m.reason == ""
    assert 0 < m.step_time < math.inf and 0 <= m.spread < math.inf


def test_step_statistics_are_median_and_relative_range() -> None:
    """spread = (max - min) / median."""
    assert _step_statistics([4.0, 1.0, 2.0]) == (2.0, 1.5)
    assert _step_statistics([3.0]) == (3.0, 0.0)


def test_a_value_is_sent_once_per_device(runtime: TorchRuntime) -> None:
    """relu's output, read by two linears on the other device, counts once in bytes_moved."""
    g = from_torch(Fan(), (torch.randn(4, 8),))
    c = _cpus()
    devices = {name: 0 for name in g.op_names}
    devices["linear"] = devices["linear_1"] = devices["add"] = 1
    m = runtime.measure(g, c, Placement.from_names(g, c, {k: c.device_names[d] for k, d in devices.items()}))
    assert m.ok and m.bytes_moved == 4 * 8 * 4  # one (4, 8) float32 tensor
    _assert_same(runtime.run(g, c, Placement.from_names(g, c, {k: "/CPU:1" for k in g.op_names})),
                 runtime.run(g, c, Placement.single(g, 0)))


# ---------------------------------------------------------------------- failures
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_gpu_on_a_cpu_machine_fails_naming_the_device(runtime: TorchRuntime, mlp_graph: OpGraph) -> None:
    """An op placed on /GPU:0 without CUDA: ok=False, the reason names the device."""
    c = Cluster.build([Device("/CPU:0", "cpu"), Device("/GPU:0", "gpu")], default_bandwidth=1e9)
    m = runtime.measure(mlp_graph, c, _halves(mlp_graph))
    assert not m.ok and m.step_time == math.inf
    assert "device /GPU:0 (cuda:0) is not available" in m.reason


def test_failing_op_is_named(runtime: TorchRuntime) -> None:
    """An embedding index out of range fails inside the op: ok=False, the reason names the op."""
    g = from_torch(nn.Embedding(4, 3), (torch.tensor([7]),))  # export runs on fake tensors: no range check
    m = runtime.measure(g, _cpus(), Placement.single(g, 1))
    assert not m.ok
    assert "op 'embedding'" in m.reason and "/CPU:1 (cpu)" in m.reason and "IndexError" in m.reason
    with pytest.raises(TorchRunError, match="embedding"):
        runtime.run(g, _cpus(), Placement.single(g, 0))


def test_out_of_memory_is_a_failure(runtime: TorchRuntime) -> None:
    """torch.OutOfMemoryError inside an op: ok=False, the reason says out of memory and names the op."""

    class Oom(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.gplace_test.oom(x + 1)

    g = from_torch(Oom(), (torch.randn(2),))
    m = runtime.measure(g, _cpus(), Placement.single(g, 0))
    assert not m.ok and m.reason.startswith("out of memory on /CPU:0 (cpu) in op 'oom'")


def test_time_limit_is_a_failure(mlp_graph: OpGraph) -> None:
    """A measurement past its time limit is ok=False with a reason."""
    m = TorchRuntime(time_limit=1e-9).measure(mlp_graph, _cpus(), Placement.single(mlp_graph, 0))
    assert not m.ok and "time limit of 1e-09 s exceeded" in m.reason


def test_graph_without_a_torch_program_fails(runtime: TorchRuntime) -> None:
    """A graph that does not come from from_torch is a failed measurement, not an exception."""
    g = diamond()
    m = runtime.measure(g, uniform_cluster(2), Placement.single(g, 0))
    assert not m.ok and "has no torch program" in m.reason


def test_a_graph_without_a_torch_program_is_refused_before_a_search(runtime: TorchRuntime, mlp_graph) -> None:
    """check_graph refuses it up front, and gplace.place with this runtime fails there, naming the graph, instead
    of measuring every placement as a failure."""
    import gplace

    runtime.check_graph(mlp_graph)
    g = diamond()
    with pytest.raises(UnsupportedGraphError, match="graph 'diamond' has no torch program to run"):
        runtime.check_graph(g)
    with pytest.raises(UnsupportedGraphError, match="has no torch program to run"):
        gplace.place(g, _cpus(), method="heft", runtime=runtime)


def test_running_a_program_leaves_its_buffers_as_they_were(runtime: TorchRuntime) -> None:
    """A buffer the program updates in place: torch-v1's runs update their own copy, not the user's program."""
    g = from_torch(Counter().eval(), (torch.randn(3, 4),))
    for _ in range(3):
        runtime.run(g, _cpus(), _alternate(g))
    assert float(g.source.program.state_dict["calls"]) == 0.0


class _ParamMut(nn.Module):
    """Doubles a parameter in place under no_grad (a ``wrap_with_set_grad_enabled`` subgraph), and a view of its
    input."""

    def __init__(self) -> None:
        super().__init__()
        self.p = nn.Parameter(torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.p.mul_(2)
        x.view(3).add_(1)
        return x * self.p


def test_in_place_ops_leave_the_user_s_tensors_as_they_were_and_every_run_alike(runtime: TorchRuntime) -> None:
    """In-place writes to inputs and parameters go to the step's own copies: each run and measurement starts
    from the user's values, so outputs equal the unplaced module's and its tensors and the stored example inputs
    are unchanged."""
    for module in (MutatesInput(), _ParamMut()):
        example = torch.ones(3)
        g = from_torch(module, (example,))
        stored = g.source.program.example_inputs[0][0]
        state = {k: v.detach().clone() for k, v in module.state_dict().items()}
        want = type(module)()(torch.ones(3))
        outs = [runtime.run(g, _cpus(), _alternate(g))[-1] for _ in range(2)]
        assert runtime.measure(g, _cpus(), _alternate(g)).ok
        outs.append(runtime.run(g, _cpus(), _alternate(g))[-1])
        for out in outs:
            assert torch.equal(out, want), (type(module).__name__, outs, want)
        assert torch.equal(stored, torch.ones(3)) and torch.equal(example, torch.ones(3))
        for k, v in module.state_dict().items():
            assert torch.equal(v, state[k]), k
        given = torch.ones(3)
        assert torch.equal(runtime.run(g, _cpus(), _alternate(g), inputs=given)[-1], want)
        assert torch.equal(given, torch.ones(3))


def test_a_buffer_counter_restarts_from_the_program_s_value_each_run() -> None:
    """A counter buffer updated in place counts one call in every run of one runtime, measurements between."""
    torch.manual_seed(0)
    module = Counter().eval()
    x = torch.randn(3, 4)
    g = from_torch(module, (x,))
    want = module.layer(x) * (float(g.source.program.state_dict["calls"]) + 1)
    rt = TorchRuntime(steps=2, warmup=1, device_map=CPU_MAP)
    for _ in range(2):
        assert torch.allclose(rt.run(g, _cpus(), _alternate(g))[-1], want)
    assert rt.measure(g, _cpus(), _alternate(g)).ok
    assert torch.allclose(rt.run(g, _cpus(), _alternate(g))[-1], want)


class _Dropped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.layer(x)).sum()


def test_dropout_is_seeded_and_leaves_the_caller_s_random_state() -> None:
    """A training graph's dropout draws from generators seeded for each step: two runs give the same outputs,
    and neither runs nor measurements advance the caller's random state."""
    torch.manual_seed(3)
    g = from_torch(_Dropped(), (torch.randn(4, 8),), training=True)
    rt = TorchRuntime(steps=2, warmup=0, device_map=CPU_MAP)
    state = torch.random.get_rng_state()
    first = rt.run(g, _cpus(), _alternate(g))
    assert rt.measure(g, _cpus(), _alternate(g)).ok
    _assert_same(rt.run(g, _cpus(), _alternate(g)), first, atol=0.0)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_invalid_placement_raises(runtime: TorchRuntime, mlp_graph: OpGraph) -> None:
    """Like every runtime, an invalid placement raises before anything runs."""
    with pytest.raises(InvalidPlacementError):
        runtime.run(mlp_graph, _cpus(), Placement.for_graph(mlp_graph, [2] * mlp_graph.num_ops))


def test_bad_arguments_are_rejected() -> None:
    """steps >= 1, warmup >= 0, time_limit > 0, device_map values are torch devices."""
    for kwargs in ({"steps": 0}, {"warmup": -1}, {"time_limit": 0.0}):
        with pytest.raises(ValueError):
            TorchRuntime(**kwargs)
    with pytest.raises(ValueError, match="nonsense"):
        TorchRuntime(device_map={"/CPU:0": "nonsense"})
    with pytest.raises(ValueError, match="holds no data"):
        TorchRuntime(device_map={"/CPU:0": "meta"})


# ---------------------------------------------------------------------- GPU
def _gpu_cluster(n: int, cpu: bool = False) -> Cluster:
    devices = [Device("/CPU:0", "cpu")] if cpu else []
    devices += [Device(f"/GPU:{i}", "gpu") for i in range(n)]
    return Cluster.build(devices, default_bandwidth=1e10)


@pytest.mark.gpu
@needs_cuda
def test_gpu_outputs_equal_cpu(mlp_graph: OpGraph, conv_graph: OpGraph) -> None:
    """On /GPU:0, and split between /CPU:0 and /GPU:0, outputs equal CPU outputs."""
    rt, c = TorchRuntime(steps=2, warmup=1), _gpu_cluster(1, cpu=True)
    for g in (mlp_graph, conv_graph):
        want = rt.run(g, c, Placement.single(g, 0))
        _assert_same(rt.run(g, c, Placement.single(g, 1)), want, atol=1e-3)
        _assert_same(rt.run(g, c, _alternate(g)), want, atol=1e-3)
        assert rt.measure(g, c, _alternate(g)).ok


@pytest.mark.gpu
@needs_cuda
def test_logical_gpus_on_one_device(train_graph: OpGraph) -> None:
    """Two logical GPUs on one CUDA device (device_map) run a split training graph correctly."""
    rt = TorchRuntime(steps=2, warmup=1, device_map={"/GPU:0": "cuda:0", "/GPU:1": "cuda:0"})
    c = _gpu_cluster(2)
    want = rt.run(train_graph, c, Placement.single(train_graph, 0))
    _assert_same(rt.run(train_graph, c, _alternate(train_graph)), want, atol=1e-4)


@pytest.mark.gpu
@needs_cuda
def test_gpu_out_of_memory_is_a_failure() -> None:
    """A real CUDA out-of-memory error is a failed measurement naming the device."""

    class Huge(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.zeros(2**40, device=x.device).sum()  # 4 TiB of float32

    g = from_torch(Huge(), (torch.randn(2),))
    m = TorchRuntime(steps=1, warmup=0).measure(g, _gpu_cluster(1), Placement.single(g, 0))
    assert not m.ok and "out of memory on /GPU:0 (cuda:0)" in m.reason


@pytest.mark.gpu
@needs_cuda
def test_gpu_dropout_is_seeded_and_leaves_the_caller_s_cpu_and_cuda_random_states() -> None:
    """Dropout on the GPU (and split over the CPU and the GPU) draws from the step's seeded CUDA generator: two runs
    give the same outputs, and the caller's CPU and CUDA generators are where they were."""
    torch.manual_seed(3)
    g = from_torch(_Dropped(), (torch.randn(4, 8),), training=True)
    rt, c = TorchRuntime(steps=2, warmup=0), _gpu_cluster(1, cpu=True)
    torch.cuda.manual_seed(5)
    cpu_state, cuda_state = torch.random.get_rng_state(), torch.cuda.get_rng_state(0)
    for placement in (Placement.single(g, 1), _alternate(g)):
        first = rt.run(g, c, placement)
        assert rt.measure(g, c, placement).ok
        _assert_same(rt.run(g, c, placement), first, atol=0.0)
    assert torch.equal(torch.random.get_rng_state(), cpu_state)
    assert torch.equal(torch.cuda.get_rng_state(0), cuda_state)


@pytest.mark.gpu
@needs_two_gpus
def test_two_gpu_split_equals_single(mlp_graph: OpGraph, train_graph: OpGraph) -> None:
    """Split over /GPU:0 and /GPU:1 (copies between streams, ordered by events), outputs equal one GPU's."""
    rt, c = TorchRuntime(steps=2, warmup=1), _gpu_cluster(2)
    for g in (mlp_graph, train_graph):
        want = rt.run(g, c, Placement.single(g, 0))
        _assert_same(rt.run(g, c, _alternate(g)), want, atol=1e-4)
        _assert_same(rt.run(g, c, _halves(g)), want, atol=1e-4)
        m = rt.measure(g, c, _alternate(g))
        assert m.ok and m.peak_memory is not None and m.peak_memory.shape == (2,)


class TwoBranches(nn.Module):
    """Two independent chains of large matmuls, summed at the end."""

    def __init__(self, width: int = 4096, depth: int = 8) -> None:
        super().__init__()
        self.left = nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(depth)])
        self.right = nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(depth)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.left(x) + self.right(x)


@pytest.mark.gpu
@needs_two_gpus
def test_two_gpus_run_concurrently() -> None:
    """One branch per GPU takes clearly less than both branches on one GPU."""
    g = from_torch(TwoBranches(), (torch.randn(4096, 4096),))
    paths = g.source.module_paths
    split = [1 if paths.get(name, "").startswith("right") else 0 for name in g.op_names]
    rt, c = TorchRuntime(steps=5, warmup=2), _gpu_cluster(2)
    one = rt.measure(g, c, Placement.single(g, 0))
    two = rt.measure(g, c, Placement.for_graph(g, split))
    assert one.ok and two.ok
    assert two.step_time < 0.75 * one.step_time, (one.step_time, two.step_time)


def test_a_view_of_an_output_laid_out_otherwise_than_traced_still_runs() -> None:
    """Found on the first GPU run: nn.Transformer exported on the CPU failed on a GPU at a ``view`` whose input the
    GPU's attention kernel had laid out otherwise. The executor runs ``view`` as ``reshape`` (same values)."""
    x = torch.randn(4, 6)
    g = from_torch(ViewAfterLayout(), (x,))
    assert any(n.target is torch.ops.aten.view.default for n in g.source.program.graph.nodes)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        ViewAfterLayout()(x)  # eager fails too: the layout is the op's, not the executor's
    cpu = Cluster.build([Device("/CPU:0", "cpu")])
    got = TorchRuntime(steps=1, warmup=0).run(g, cpu, Placement.single(g, 0), inputs=(x,))
    torch.testing.assert_close(got[0] if isinstance(got, list | tuple) else got, x.reshape(-1) * 2)


def test_the_split_program_for_compilers_runs_such_a_view_too() -> None:
    """``gplace.export.torch.split_program`` (the placed program a compiler runs) swaps ``view`` the same way."""
    from gplace.export.torch import split_program

    x = torch.randn(4, 6)
    g = from_torch(ViewAfterLayout(), (x,))
    cpu = Cluster.build([Device("/CPU:0", "cpu")])
    torch.testing.assert_close(split_program(g, cpu, Placement.single(g, 0))(x), x.reshape(-1) * 2)


def test_the_first_measurement_on_a_gpu_runs_warm_up_steps_once(monkeypatch):
    """Before a runtime's first timed steps on a GPU, steps run back to back for GPU_WARMUP_SECONDS; later
    measurements take the usual warm-up only. A CPU stands in for the GPU here (``_cold_gpus`` is told so)."""
    from gplace.runtime import torch_runtime

    model = _mlp()
    g = from_torch(model, (torch.randn(2, 8),))
    rt = TorchRuntime(steps=2, warmup=1, device_map=CPU_MAP)
    steps, real = [], torch_runtime.execute_step
    monkeypatch.setattr(torch_runtime, "execute_step", lambda *a, **k: steps.append(1) or real(*a, **k))
    monkeypatch.setattr(torch_runtime, "GPU_WARMUP_SECONDS", 0.2)
    monkeypatch.setattr(rt, "_cold_gpus", lambda plan: {torch.device("cpu")} - rt._warm_gpus)
    start = time.perf_counter()
    assert rt.measure(g, _cpus(), _halves(g)).ok
    assert time.perf_counter() - start >= 0.2 and len(steps) > 3
    steps.clear()
    assert rt.measure(g, _cpus(), _halves(g)).ok and len(steps) == 3  # warm now: 1 warm-up + 2 timed steps
    cpu_only = TorchRuntime(device_map=CPU_MAP)
    assert cpu_only._cold_gpus(cpu_only.plan(g, _cpus(), _halves(g), None)) == set()  # no GPU, no warm-up


@pytest.mark.parametrize("warmup", [0, 2])
def test_peaks_are_reset_after_every_warm_up_step(monkeypatch, warmup):
    """Peak memory counts the timed steps only: the peaks are last reset after the GPU warm-up's steps and the
    ``warmup`` ones (with warmup=0 they were reset before the GPU warm-up, whose library workspaces then counted).
    A CPU stands in for the GPU (``_cold_gpus``); the resets and steps are recorded in order."""
    from gplace.runtime import torch_runtime

    g = from_torch(_mlp(), (torch.randn(2, 8),))
    rt = TorchRuntime(steps=2, warmup=warmup, device_map=CPU_MAP)
    events, real = [], torch_runtime.execute_step
    monkeypatch.setattr(torch_runtime, "execute_step", lambda *a, **k: events.append("step") or real(*a, **k))
    monkeypatch.setattr(torch_runtime, "_reset_peaks", lambda plan: events.append("reset") or {})
    monkeypatch.setattr(torch_runtime, "GPU_WARMUP_SECONDS", 0.05)
    monkeypatch.setattr(rt, "_cold_gpus", lambda plan: {torch.device("cpu")} - rt._warm_gpus)
    assert rt.measure(g, _cpus(), _halves(g)).ok
    last = len(events) - 1 - events[::-1].index("reset")
    assert events[last + 1:] == ["step", "step"] and events[:last].count("step") > warmup, events


def test_run_names_a_list_placement_a_spent_time_limit_and_fractional_steps():
    """run() raised AttributeError for a list, and the private _TimeUp; steps=2.5 failed when measuring."""

    class Affine(nn.Module):
        def forward(self, x):
            return x * 2 + 1

    graph, cluster = from_torch(Affine(), (torch.randn(3),)), uniform_cluster(2, kind="cpu")
    with pytest.raises(TypeError, match="must be a gplace Placement"):
        TorchRuntime().run(graph, cluster, [0] * graph.num_ops)
    with pytest.raises(TorchRunError, match=r"time limit of 1e-09 s exceeded during the step") as caught:
        TorchRuntime(time_limit=1e-9).run(graph, cluster, Placement.single(graph, 0))
    assert type(caught.value) is TorchRunError
    with pytest.raises(ValueError, match="TorchRuntime: steps must be a whole number >= 1, got 2.5"):
        TorchRuntime(steps=2.5)


def test_ops_that_write_in_place_are_marked_to_wait_for_their_devices_copies():
    """On a GPU a value is copied to its readers elsewhere on the device's copy stream, after its producer; an op of
    that device writing it in place later (``relu_``, kept by torch.export) ran on the compute stream without waiting,
    so the copy could read the overwritten value. Such calls are marked, and wait (CUDA only: never run on a GPU
    here; on the CPU the mark is checked)."""
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True))
    g = from_torch(model, (torch.randn(2, 4),))
    plan = TorchRuntime(device_map=CPU_MAP).plan(g, _cpus(), _halves(g), None)
    marked = {str(call.node.target) for call in plan.calls if call.writes}
    assert marked == {"aten.relu_.default"}, marked


# ---------------------------------------------------------------------- enforce_memory is lifted; run's outputs
@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-side (a GPU runs cuda:0): the GPU test below runs the calls")
def test_enforced_memory_is_lifted_after_each_measurement_and_run_even_a_failed_one(monkeypatch):
    """enforce_memory capped the process (set_per_process_memory_fraction) and never lifted it: after a measurement
    the caller's own tensors stayed capped at the last cluster device's memory. The cap is now given back, to what
    torch reports the process had, after a measurement or run that fails too. The CUDA calls are recorded (no CUDA
    here: placing the inputs on cuda:0 fails, which is the failed measurement); the GPU test below runs them."""
    from gplace.runtime import torch_runtime

    fractions, calls = {0: 0.7}, []

    def set_fraction(fraction, device):
        calls.append((fraction, str(device)))
        fractions[torch.device(device).index] = fraction

    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda device: fractions[device.index])
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", set_fraction)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: type("P", (), {"total_memory": 1000}))
    monkeypatch.setattr(torch_runtime, "runnable_reason", lambda device: "")  # /GPU:0 passes the device checks
    g = from_torch(_mlp(), (torch.randn(2, 8),))
    cluster = Cluster.build([Device("/GPU:0", "gpu", memory=100)], default_bandwidth=1e9)
    rt = TorchRuntime(steps=1, warmup=0, enforce_memory=True)
    m = rt.measure(g, cluster, Placement.single(g, 0))
    assert not m.ok and "cuda:0" in m.reason
    assert calls == [(0.1, "cuda:0"), (0.7, "cuda:0")] and fractions == {0: 0.7}
    calls.clear()
    with pytest.raises(TorchRunError):
        rt.run(g, cluster, Placement.single(g, 0))
    assert calls == [(0.1, "cuda:0"), (0.7, "cuda:0")] and fractions == {0: 0.7}
    calls.clear()
    assert not TorchRuntime(steps=1, warmup=0).measure(g, cluster, Placement.single(g, 0)).ok
    assert calls == []  # without enforce_memory the process's cap is not touched

    monkeypatch.delattr(torch.cuda, "get_per_process_memory_fraction")  # a torch that cannot read it: 1.0
    with pytest.raises(RuntimeError, match="inside"), torch_runtime.memory_fractions({torch.device("cuda", 0): 0.25}):
        raise RuntimeError("inside")
    assert calls == [(0.25, "cuda:0"), (1.0, "cuda:0")]


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-side (a GPU runs cuda:0)")
def test_enforced_memory_of_cluster_devices_sharing_a_gpu_is_their_sum(monkeypatch):
    """Two cluster devices a device_map puts on one GPU: the last one's memory was the GPU's cap (0.1 of it, not
    0.2), so placements the model fitted ran out of memory. The CUDA calls are recorded, as above."""
    from gplace.runtime import torch_runtime

    calls = []
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda device: 1.0)
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction",
                        lambda fraction, device: calls.append((round(fraction, 9), str(device))))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: type("P", (), {"total_memory": 1000}))
    monkeypatch.setattr(torch_runtime, "runnable_reason", lambda device: "")
    g = from_torch(_mlp(), (torch.randn(2, 8),))
    cluster = Cluster.build([Device(f"/GPU:{i}", "gpu", memory=100) for i in range(2)], default_bandwidth=1e9)
    rt = TorchRuntime(steps=1, warmup=0, enforce_memory=True,
                      device_map={"/GPU:0": "cuda:0", "/GPU:1": "cuda:0"})
    assert not rt.measure(g, cluster, _halves(g)).ok  # no CUDA here: placing the inputs fails
    assert calls[0] == (0.2, "cuda:0"), calls


@needs_cuda
@pytest.mark.gpu
def test_gpu_enforced_memory_cap_is_given_back() -> None:
    """On a GPU: the process's own cap (0.5 here) is back after a measurement that fails under a 16 MiB cluster
    device and after a run that fits 1 GiB (never run on a GPU)."""
    g = from_torch(nn.Linear(2048, 2048), (torch.randn(2048, 2048),))
    rt = TorchRuntime(steps=1, warmup=0, enforce_memory=True)
    small = Cluster.build([Device("/GPU:0", "gpu", memory=16 * 2**20)], default_bandwidth=1e9)
    large = Cluster.build([Device("/GPU:0", "gpu", memory=2**30)], default_bandwidth=1e9)
    torch.cuda.set_per_process_memory_fraction(0.5, 0)
    try:
        assert not rt.measure(g, small, Placement.single(g, 0)).ok
        assert torch.cuda.get_per_process_memory_fraction(0) == 0.5
        rt.run(g, large, Placement.single(g, 0))
        assert torch.cuda.get_per_process_memory_fraction(0) == 0.5
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, 0)
