"""torch-pipeline-v1: a pipeline placement run for real with torch.distributed.pipelining, one process per stage
(gloo on this machine's CPU): the loss and every gradient equal the unsplit model's; failures are measurements."""

from __future__ import annotations

import math
import multiprocessing
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pipeline_models import MODELS, Branching, CalledTwice, Counter, Normed, Tied, dying_loss, hanging_loss
from torch import nn

from gplace.importers.torch_export import from_torch
from gplace.ir import Cluster, Device, InvalidPlacementError, Placement, UnsupportedGraphError
from gplace.pipeline.stages import align_to_modules, split_spec
from gplace.runtime import torch_pipeline
from gplace.runtime.torch_pipeline import TorchPipelineRuntime

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning",
                                                           "ignore::UserWarning")]
BATCH, M = 8, 4


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))


def _batch(model: nn.Module, width: int):
    """A mini-batch (8 inputs, ``width`` targets) for ``model``, its graph and two CPU devices."""
    x = torch.randn(BATCH, 8, generator=torch.Generator().manual_seed(1))
    y = torch.randn(BATCH, width, generator=torch.Generator().manual_seed(2))
    graph = from_torch(model, (x[: BATCH // M],))
    return x, y, graph, Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)


def _assert_like_unsplit(run, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    """The run's loss within 1e-5 (relative) and every gradient within 1e-5 (relative) + 1e-6 (absolute) of the
    unsplit model's on the whole mini-batch."""
    loss = F.mse_loss(model(x), y)
    loss.backward()
    assert run.loss == pytest.approx(loss.item(), rel=1e-5)
    for n, p in model.named_parameters():
        torch.testing.assert_close(torch.from_numpy(run.grads[n]), p.grad, rtol=1e-5, atol=1e-6)


def _problem(stage_of: dict[str, int]):
    model = _model()
    x, y, graph, cluster = _batch(model, 4)
    paths = graph.source.module_paths
    placement = Placement.for_graph(graph, [stage_of.get(paths.get(op, ""), 0) for op in graph.op_names])
    return model, x, y, graph, cluster, placement


def _staged(name: str, stages: int):
    """A model of ``pipeline_models``, a mini-batch, its graph, ``stages`` CPU devices and a placement giving each
    device a contiguous run of the model's top-level modules."""
    build, x_shape, y_shape, modules = MODELS[name]
    torch.manual_seed(0)
    model = build()
    x = torch.randn(x_shape, generator=torch.Generator().manual_seed(1))
    y = torch.randn(y_shape, generator=torch.Generator().manual_seed(2))
    graph = from_torch(model, (x[: BATCH // M],))
    cluster = Cluster.build([Device(f"/CPU:{i}", "cpu") for i in range(stages)], default_bandwidth=1e9)
    stage_of = {m: i for i, chunk in enumerate(np.array_split(np.arange(len(modules)), stages)) for m in
                (modules[j] for j in chunk)}
    paths = graph.source.module_paths
    devices = [stage_of.get(paths.get(op, "").split(".")[0], 0) for op in graph.op_names]
    return model, x, y, graph, cluster, Placement.for_graph(graph, devices)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("name", list(MODELS))
def test_pipelined_steps_give_the_unsplit_models_loss_and_gradients(name, stages, schedule) -> None:
    """Loss within 1e-5 (relative) and every gradient within 1e-5 (relative) + 1e-6 (absolute) of the unsplit
    model's on the whole mini-batch."""
    model, x, y, graph, cluster, placement = _staged(name, stages)
    assert len(set(placement.devices.tolist())) == stages
    runtime = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=M, schedule=schedule, steps=1, warmup=0)
    run = runtime.run(graph, cluster, placement)
    _assert_like_unsplit(run, model, x, y)
    assert set(run.grads) == {n for n, _ in model.named_parameters()}
    assert len(run.times) == 1 and run.times[0] > 0 and run.processes == stages


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("stage_of", "devices", "microbatches"), [
    ({"2": 1}, 2, M),  # modules 0-1 and 3-4 on /CPU:0, module 2 on /CPU:1: stages on devices 0, 1, 0
    ({"1": 1, "2": 2, "3": 1}, 3, 2),  # devices 0, 1, 2, 1, 0: five stages, fewer micro-batches than stages
])
def test_a_non_contiguous_placement_runs_each_devices_stages_in_one_process(stage_of, devices, microbatches,
                                                                            schedule) -> None:
    """A device holding several stages is one process (as NCCL needs: one process per GPU) running them in the
    order of ``stage_orders``; the loss and gradients still equal the unsplit model's."""
    model, x, y, graph, _, _ = _problem({})
    cluster = Cluster.build([Device(f"/CPU:{i}", "cpu") for i in range(devices)], default_bandwidth=1e9)
    paths = graph.source.module_paths
    placement = Placement.for_graph(graph, [stage_of.get(paths.get(op, ""), 0) for op in graph.op_names])
    assert len(split_spec(graph, placement).split_spec) == 2 * devices - 2
    run = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=microbatches, schedule=schedule, steps=1,
                               warmup=0).run(graph, cluster, placement)
    assert run.processes == devices
    _assert_like_unsplit(run, model, x, y)


def test_a_weight_tied_across_stages_gets_the_sum_of_its_stages_gradients() -> None:
    """``inp`` on /CPU:0, ``mid`` and ``out`` (sharing ``inp``'s weight) on /CPU:1: each stage holds a copy of the
    weight; its gradient is the sum of both (the last stage's alone overwrote the first's)."""
    torch.manual_seed(0)
    model = Tied()
    x, y, graph, cluster = _batch(model, 8)
    paths = graph.source.module_paths
    order = graph.topological_order.tolist()
    start = order.index(next(i for i in order if paths.get(graph.op_names[i]) == "mid"))
    devices = [0] * graph.num_ops
    for i in order[start:]:
        devices[i] = 1
    placement = Placement.for_graph(graph, devices)
    assert split_spec(graph, placement).stage_devices == [0, 1]
    run = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=M, steps=1, warmup=0).run(graph, cluster,
                                                                                               placement)
    F.mse_loss(model(x), y).backward()
    assert set(run.grads) == {n for n, _ in model.named_parameters()}  # "out.weight" is "inp.weight"
    for n, p in model.named_parameters():
        torch.testing.assert_close(torch.from_numpy(run.grads[n]), p.grad, rtol=1e-5, atol=1e-6)


def _split_at(model: nn.Module, module: str, width: int):
    """A mini-batch of 8 for ``model`` (inputs (8, 8), ``width`` targets), its graph (micro-batches of 4), two CPU
    devices and a placement putting the first op of ``module`` and every op after it (topological order) on
    /CPU:1."""
    x = torch.randn(BATCH, 8, generator=torch.Generator().manual_seed(1))
    y = torch.randn(BATCH, width, generator=torch.Generator().manual_seed(2))
    graph = from_torch(model, (x[: BATCH // 2],))
    paths = graph.source.module_paths
    order = graph.topological_order.tolist()
    start = order.index(next(i for i in order if paths.get(graph.op_names[i]) == module))
    devices = [0] * graph.num_ops
    for i in order[start:]:
        devices[i] = 1
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)
    return x, y, graph, cluster, Placement.for_graph(graph, devices)


def test_a_module_called_in_two_stages_gets_the_sum_of_both_calls_gradients() -> None:
    """``s`` runs in stage 0 and again in stage 1 (after ``b``), where torch names its copy ``s@1``: the gradient
    under ``s.weight`` is the sum of both calls' (it held stage 0's alone, and ``s@1.weight`` appeared)."""
    torch.manual_seed(0)
    model = CalledTwice()
    x, y, graph, cluster, placement = _split_at(model, "b", 8)
    assert split_spec(graph, placement).split_spec == {"b": "BEGINNING"}
    run = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=2, steps=1, warmup=0).run(graph, cluster,
                                                                                               placement)
    F.mse_loss(model(x), y).backward()
    assert set(run.grads) == {n for n, _ in model.named_parameters()}
    for n, p in model.named_parameters():
        torch.testing.assert_close(torch.from_numpy(run.grads[n]), p.grad, rtol=1e-5, atol=1e-6)


class _Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.rnn, self.head = nn.Linear(8, 6), nn.LSTM(6, 5, batch_first=True), nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.emb(x))
        return self.head(out)


def test_a_stage_boundary_after_an_lstm_runs_like_the_unsplit_model() -> None:
    """An nn.LSTM(batch_first=True)'s output is not contiguous, and gloo sends and receives only contiguous
    tensors: every placement that cut right after it failed ("input tensor has to be contiguous")."""
    torch.manual_seed(0)
    model = _Recurrent()
    x = torch.randn(BATCH, 5, 8, generator=torch.Generator().manual_seed(1))
    y = torch.randn(BATCH, 5, 3, generator=torch.Generator().manual_seed(2))
    graph = from_torch(model, (x[: BATCH // 2],))
    paths = graph.source.module_paths
    placement = Placement.for_graph(graph, [int(paths.get(op, "") == "head") for op in graph.op_names])
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)
    run = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=2, steps=1, warmup=0).run(graph, cluster,
                                                                                               placement)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    assert run.loss == pytest.approx(loss.item(), rel=1e-5)
    for n, p in model.named_parameters():
        torch.testing.assert_close(torch.from_numpy(run.grads[n]), p.grad, rtol=1e-5, atol=1e-6)


def test_a_model_with_dropout_gives_the_same_loss_every_run() -> None:
    """Each stage process drew Dropout's masks from an unseeded generator: two runs of one placement gave losses
    1.406 and 1.478 (torch-v1 seeds every step)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 4)).train()
    x, y, graph, cluster = _batch(model, 4)
    paths = graph.source.module_paths
    placement = Placement.for_graph(graph, [int(paths.get(op, "") == "2") for op in graph.op_names])
    runtime = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=M, steps=1, warmup=0)
    first, second = runtime.run(graph, cluster, placement), runtime.run(graph, cluster, placement)
    assert first.loss == second.loss and all((first.grads[n] == second.grads[n]).all() for n in first.grads)


def test_measuring_leaves_the_callers_module_and_tensors_as_they_were() -> None:
    """The stage processes ran the caller's module, sent to them in shared memory: BatchNorm's running statistics
    moved with every measurement (later ones started from another state), and stayed in shared memory."""
    torch.manual_seed(0)
    model = Normed()
    x, y, graph, cluster, placement = _split_at(model, "out", 4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    m = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=2, steps=1, warmup=0).measure(graph, cluster,
                                                                                                 placement)
    assert m.ok, m.reason
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]) and not v.is_shared(), k
    assert not x.is_shared() and not y.is_shared()


def test_a_training_graph_aligned_to_modules_runs_like_its_module() -> None:
    """A training graph's placement (aligned to modules) runs: pipeline_split needs module paths, not an inference
    program (it refused every training graph)."""
    model = _model()
    x, y, _, cluster, _ = _split_at(model, "2", 4)
    graph = align_to_modules(from_torch(model, (x[: BATCH // 2],), training=True))
    paths = graph.source.module_paths
    placement = Placement.for_graph(graph, [int(paths.get(op) in ("2", "3", "4")) for op in graph.op_names])
    assert split_spec(graph, placement).split_spec == {"2": "BEGINNING"}
    run = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=2, steps=1, warmup=0).run(graph, cluster,
                                                                                               placement)
    _assert_like_unsplit(run, model, x, y)


def test_a_module_torch_cannot_trace_is_refused_up_front_and_a_failed_measurement() -> None:
    """torch's pipelining cannot trace a ``torch.cond``: check_graph refuses the graph once, naming the module's
    class and torch's reason, and a measurement fails so (torch's RuntimeError was raised from deep inside)."""
    torch.manual_seed(0)
    model = Branching()
    x, y, graph, cluster, placement = _split_at(model, "c", 8)
    runtime = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=2, steps=1, warmup=0)
    with pytest.raises(UnsupportedGraphError, match="cannot trace Branching .*nn_module_stack"):
        runtime.check_graph(graph)
    m = runtime.measure(graph, cluster, placement)
    assert not m.ok and "cannot trace Branching" in m.reason, m.reason
    assert not multiprocessing.active_children()


def test_a_graph_not_from_torch_still_raises_and_copies_sent_are_on_the_cpu() -> None:
    """Failed trace measurements caught every UnsupportedGraphError, so measuring a graph not imported from torch
    returned a failed measurement instead of raising. The copies sent to the stage processes are made on the CPU
    (a CUDA module was cloned on its GPU first), tied weights kept tied."""
    from gplace.testing import chain

    torch.manual_seed(0)
    model = _model()
    x, y, _, cluster = _batch(model, 4)
    graph = chain((1.0, 1.0))
    runtime = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=2, steps=1, warmup=0)
    with pytest.raises(UnsupportedGraphError, match="not imported from a torch module"):
        runtime.measure(graph, cluster, Placement.for_graph(graph, [0, 1]))
    tied = Tied()
    copied = torch_pipeline._cpu_copy(tied)
    pairs = list(zip(tied.state_dict(keep_vars=True).values(), copied.state_dict(keep_vars=True).values(),
                     strict=True))
    assert all(torch.equal(a, b) and a.data_ptr() != b.data_ptr() and b.device.type == "cpu" for a, b in pairs)
    assert len({id(p) for p in copied.parameters()}) == len({id(p) for p in tied.parameters()})  # still tied


def test_a_stage_that_torchs_pipelining_fails_in_is_named_and_says_so() -> None:
    """A root buffer written in place, with module ``a`` alone on /CPU:0: torch's stages fail with a bare "zip()
    argument 2 is longer than argument 1"; the reason names the stage (whichever process reports first) and torch's
    pipelining."""
    torch.manual_seed(0)
    model = Counter()
    x, y, graph, cluster, _ = _split_at(model, "b", 8)
    paths = graph.source.module_paths
    placement = Placement.for_graph(graph, [int(paths.get(op) != "a") for op in graph.op_names])
    m = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=2, steps=1, warmup=0, time_limit=60).measure(
        graph, cluster, placement)
    assert not m.ok and re.match(r"pipeline stages? [\d, ]+( \(one process\))? failed: "
                                 r"torch.distributed.pipelining raised ValueError", m.reason), m.reason


def test_1f1b_with_fewer_microbatches_than_stages_runs_in_the_stage_order() -> None:
    """torch's Schedule1F1B refuses M < stages; the stage order (in-flight bound min(M, S - r)) runs it."""
    model, x, y, graph, cluster, placement = _staged("mlp", 4)
    run = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=2, schedule="1f1b", steps=1, warmup=0).run(
        graph, cluster, placement)
    assert run.processes == 4
    F.mse_loss(model(x), y).backward()
    for n, p in model.named_parameters():
        torch.testing.assert_close(torch.from_numpy(run.grads[n]), p.grad, rtol=1e-5, atol=1e-6)


def test_the_runtime_id_names_its_schedule_and_microbatches() -> None:
    """The id was torch-pipeline-v1 for every setting: a cache answered M=8 gpipe with M=2 1f1b's time, and a run
    directory measured with one resumed with the other without a word (pipe-v2's ids name both)."""
    model, x, y, *_ = _staged("mlp", 2)
    ids = {TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=m, schedule=s).id
           for m in (2, 4) for s in ("gpipe", "1f1b")}
    assert ids == {"torch-pipeline-v1/gpipe/m2", "torch-pipeline-v1/1f1b/m2", "torch-pipeline-v1/gpipe/m4",
                   "torch-pipeline-v1/1f1b/m4"}


def test_a_measurement_reports_the_median_and_spread() -> None:
    model, x, y, graph, cluster, placement = _staged("mlp", 2)
    m = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=M, steps=3, warmup=1).measure(
        graph, cluster, placement)
    assert m.ok and m.runtime == f"torch-pipeline-v1/1f1b/m{M}" and 0 < m.step_time < math.inf and m.spread >= 0
    cut = {(e.src, e.dst): e.bytes for e in graph.edges()
           if placement.devices[graph.op_index[e.src]] != placement.devices[graph.op_index[e.dst]]}
    assert len(cut) == 1 and m.bytes_moved == M * next(iter(cut.values())) > 0  # M micro-batches' activations
    assert not multiprocessing.active_children()  # every stage process was joined


@pytest.mark.parametrize(("stage_of", "words"), [({"2": 1, "3": 1, "4": 1}, "pipeline stage 1 failed"),
                                                  ({"2": 1}, "pipeline stages 0, 2 (one process) failed")])
def test_a_stage_that_fails_is_a_failed_measurement_naming_it(stage_of, words) -> None:
    model, x, y, graph, cluster, placement = _problem(stage_of)
    wrong = torch.randn(BATCH, 5)  # the loss cannot compare (2, 4) outputs with (2, 5) targets
    m = TorchPipelineRuntime(model, x, wrong, F.mse_loss, microbatches=M, steps=1, warmup=0, time_limit=60).measure(
        graph, cluster, placement)
    assert not m.ok and words in m.reason and m.step_time == math.inf, m.reason
    assert not multiprocessing.active_children()  # no orphan stage processes


class _Scaled(nn.Module):
    """Two ops of its own (relu, mul) besides its Linear: a device change between them is inside the module."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x)) * 2


@pytest.mark.parametrize(("loss_fn", "limit", "words"), [(dying_loss, 120, "pipeline stage 1 died"),
                                                        (hanging_loss, 10, "pipeline timed out after 10 s")])
def test_a_stage_that_dies_or_hangs_is_a_failed_measurement_and_leaves_no_process(loss_fn, limit, words) -> None:
    """The dying stage's limit is wide: starting the stage processes counts against it, and a loaded machine can
    take over 10 s to reach the stage's death (this test failed once here under load and passed alone)."""
    model, x, y, graph, cluster, placement = _staged("mlp", 2)
    m = TorchPipelineRuntime(model, x, y, loss_fn, microbatches=M, steps=1, warmup=0, time_limit=limit).measure(
        graph, cluster, placement)
    assert not m.ok and words in m.reason, m.reason
    assert not multiprocessing.active_children()


def test_ctrl_c_between_two_stage_starts_stops_the_stage_started(monkeypatch) -> None:
    """The starts were outside the try that kills and joins the stages: the first ran on, then stayed a zombie."""
    started = []
    real_start = multiprocessing.process.BaseProcess.start

    def start(process) -> None:
        if started:
            raise KeyboardInterrupt
        real_start(process)
        started.append(process)

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    model, x, y, graph, cluster, placement = _staged("mlp", 2)
    with pytest.raises(KeyboardInterrupt):
        TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=M, steps=1, warmup=0).measure(
            graph, cluster, placement)
    assert len(started) == 1 and started[0].exitcode is not None and not multiprocessing.active_children()


def test_a_placement_that_splits_a_module_is_refused_up_front() -> None:
    """run raises before any process starts; measure fails the placement, saying to align the graph (it raised,
    and ended a search that sampled one)."""
    model, x = _Scaled(), torch.randn(BATCH, 8)
    graph = from_torch(model, (x[: BATCH // M],))
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)
    own = [i for i, op in enumerate(graph.op_names) if graph.source.module_paths.get(op) == ""]
    devices = [0] * graph.num_ops
    devices[own[-1]] = 1  # relu on /CPU:0, mul on /CPU:1
    runtime = TorchPipelineRuntime(model, x, torch.zeros(BATCH, 4), F.mse_loss, microbatches=M)
    with pytest.raises(InvalidPlacementError, match="inside module"):
        runtime.run(graph, cluster, Placement.for_graph(graph, devices))
    measured = runtime.measure(graph, cluster, Placement.for_graph(graph, devices))
    assert not measured.ok and "inside module" in measured.reason and "align_to_modules" in measured.reason


def test_settings_are_checked() -> None:
    model, x, y, *_ = _problem({})
    with pytest.raises(ValueError, match="must divide the batch"):
        TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=3)
    with pytest.raises(ValueError, match="schedule"):
        TorchPipelineRuntime(model, x, y, F.mse_loss, schedule="interleaved")
    for bad in (0, 2.5, "4"):
        with pytest.raises(ValueError, match="microbatches must be an integer from 1 to"):
            TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=bad)
    with pytest.raises(ValueError, match=r"target has a batch of 4 but inputs\[0\] has a batch of 8"):
        TorchPipelineRuntime(model, x, y[:4], F.mse_loss)  # it failed inside the last stage's process
    with pytest.raises(ValueError, match=r"target has no batch dimension but inputs\[0\] has a batch of 8"):
        TorchPipelineRuntime(model, x, torch.tensor(0.0), F.mse_loss)
    with pytest.raises(ValueError, match=r"inputs\[1\] has a batch of 4 but inputs\[0\] has a batch of 8"):
        TorchPipelineRuntime(model, (x, x[:4]), y, F.mse_loss)  # its micro-batches would differ from the first's
    for inputs in ((), torch.tensor(1.0)):
        with pytest.raises(ValueError, match=r"inputs\[0\] must be a tensor with a batch dimension"):
            TorchPipelineRuntime(model, inputs, y, F.mse_loss)
    with pytest.raises(TypeError, match=r"inputs\[1\] must be a torch.Tensor, got list"):
        TorchPipelineRuntime(model, (x, [1, 2]), y, F.mse_loss)


def test_a_loss_fn_that_is_no_function_or_does_not_pickle_and_bad_threads_are_refused_up_front() -> None:
    """loss_fn=None failed every measurement after spawning ("Expecting 4 losses but got 0"), a lambda escaped
    measure as multiprocessing's pickling AttributeError, and threads_per_stage=0 failed in each stage's
    set_num_threads."""
    model, x, y, *_ = _problem({})
    for bad in (None, "mse"):
        with pytest.raises(TypeError, match=rf"^loss_fn must be a function loss_fn\(output, target\) -> scalar, got "
                                            rf"{bad!r}$"):
            TorchPipelineRuntime(model, x, y, bad)
    with pytest.raises(TypeError, match=r"^loss_fn must pickle, to be sent to the stage processes .*lambda"):
        TorchPipelineRuntime(model, x, y, lambda out, target: F.mse_loss(out, target))
    def local(out, target):
        return F.mse_loss(out, target)

    with pytest.raises(TypeError, match=r"^loss_fn must pickle"):
        TorchPipelineRuntime(model, x, y, local)
    TorchPipelineRuntime(model, x, y, lambda out, target: F.mse_loss(out, target), processes="torchrun")
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match=rf"threads_per_stage must be a whole number >= 1, got {bad!r}"):
            TorchPipelineRuntime(model, x, y, F.mse_loss, threads_per_stage=bad)


def test_the_backend_follows_the_stage_devices_unless_given() -> None:
    """No backend given: gloo for CPU stages, nccl for CUDA stages, a mix of both refused naming the stages; a
    backend given is used as it is."""
    cpu, gpu0, gpu1 = torch.device("cpu"), torch.device("cuda", 0), torch.device("cuda", 1)
    assert torch_pipeline._backend(None, [cpu, cpu, cpu], ["/CPU:0", "/CPU:1", "/CPU:0"]) == "gloo"
    assert torch_pipeline._backend(None, [gpu0, gpu1], ["/GPU:0", "/GPU:1"]) == "nccl"
    with pytest.raises(InvalidPlacementError, match=r"stage 0 on /CPU:0 \(cpu\), stage 1 on /GPU:1 \(cuda:1\)"):
        torch_pipeline._backend(None, [cpu, gpu1], ["/CPU:0", "/GPU:1"])
    assert torch_pipeline._backend("gloo", [gpu0, gpu1], ["/GPU:0", "/GPU:1"]) == "gloo"
    assert torch_pipeline._backend("nccl", [cpu, gpu1], ["/CPU:0", "/GPU:1"]) == "nccl"


def test_the_default_backend_is_chosen_before_any_process_starts(monkeypatch) -> None:
    """run() hands the stage processes gloo for a CPU placement, and refuses CPU and CUDA stages without starting
    any (the default was gloo whatever the devices)."""
    jobs = []
    monkeypatch.setattr(torch_pipeline, "_run_stages", lambda job: jobs.append(job))
    model, x, y, graph, cluster, placement = _problem({"2": 1, "3": 1, "4": 1})
    TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=M).run(graph, cluster, placement)
    assert [job.backend for job in jobs] == ["gloo"]
    mixed = Cluster.build([Device("/CPU:0", "cpu"), Device("/GPU:0", "gpu")], default_bandwidth=1e9)
    runtime, both = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=M), r"stage 0 on /CPU:0 \(cpu\), " \
        r"stage 1 on /GPU:0 \(cuda:0\)"
    with pytest.raises(InvalidPlacementError, match=both):
        runtime.run(graph, mixed, Placement.for_graph(graph, placement.devices))
    measured = runtime.measure(graph, mixed, Placement.for_graph(graph, placement.devices))  # a failed measurement
    assert not measured.ok and re.search(both, measured.reason), measured.reason
    assert len(jobs) == 1


def _never_spawned(job) -> None:
    raise AssertionError("stage processes were started")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_a_gpu_this_machine_lacks_fails_the_measurement_before_any_process_starts(monkeypatch) -> None:
    """Stages on /GPU:0 and /GPU:1 on a machine without CUDA: a failed measurement naming each device and its
    stages (torch-v1's check), no stage process; check_cluster refuses the cluster up front."""
    from gplace.runtime.base import ClusterMismatchError
    from gplace.runtime.torch_runtime import TorchRunError

    monkeypatch.setattr(torch_pipeline, "_run_stages", _never_spawned)
    model, x, y, graph, _, placement = _problem({"2": 1, "3": 1, "4": 1})
    gpus = Cluster.build([Device("/GPU:0", "gpu"), Device("/GPU:1", "gpu")], default_bandwidth=1e10, name="gpus")
    on_gpus = Placement.for_graph(graph, placement.devices)
    runtime = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=M)
    m = runtime.measure(graph, gpus, on_gpus)
    assert not m.ok and m.step_time == math.inf
    assert "device /GPU:0 (cuda:0) of stage 0 is not available (torch sees 0 CUDA device(s))" in m.reason, m.reason
    assert "device /GPU:1 (cuda:1) of stage 1 is not available" in m.reason, m.reason
    with pytest.raises(TorchRunError, match="/GPU:1"):
        runtime.run(graph, gpus, on_gpus)
    with pytest.raises(ClusterMismatchError, match=r"cluster 'gpus' does not fit this machine: .*/GPU:1 \(cuda:1\)"):
        runtime.check_cluster(gpus)
    runtime.check_cluster(Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9))


def test_two_cluster_devices_on_one_gpu_are_refused_before_any_process_starts(monkeypatch) -> None:
    """Two task devices on cuda:0 would be two NCCL ranks on one GPU: refused, with device_map entries too (as if
    the GPU were there: the availability check is told so); with a backend that is not nccl, entries allow it."""
    from gplace.runtime import torch_runtime

    monkeypatch.setattr(torch_pipeline, "_run_stages", _never_spawned)
    monkeypatch.setattr(torch_runtime, "unavailable_reason", lambda device: "")
    model, x, y, graph, _, placement = _problem({"2": 1, "3": 1, "4": 1})
    names = [f"/job:w/task:{t}/device:GPU:0" for t in range(2)]
    shared = Cluster.build([Device(name, "gpu") for name in names], default_bandwidth=1e10)
    on_both = Placement.for_graph(graph, placement.devices)
    for device_map in (None, dict.fromkeys(names, "cuda:0")):
        m = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=M, device_map=device_map).measure(
            graph, shared, on_both)
        assert not m.ok and f"{names[0]} and {names[1]} all map to cuda:0: give each its own GPU" in m.reason
        assert "NCCL refuses two on one GPU" in m.reason, m.reason
    jobs = []
    monkeypatch.setattr(torch_pipeline, "_run_stages", lambda job: jobs.append(job))
    TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=M, backend="gloo",
                         device_map=dict.fromkeys(names, "cuda:0")).run(graph, shared, on_both)
    assert [job.devices for job in jobs] == [("cuda:0", "cuda:0")]


def _job(devices: tuple[str, ...], backend: str) -> torch_pipeline._Job:
    """A job of one stage per device (nothing in it runs: the process-group calls are recorded)."""
    return torch_pipeline._Job(nn.Linear(2, 2), (torch.zeros(4, 2),), torch.zeros(4, 2), F.mse_loss, (), devices,
                               tuple(range(len(devices))), 2, "gpipe", backend, 1, 0, 10.0, None)


def _recorded(monkeypatch) -> list:
    """torch.cuda.set_device and init_process_group replaced by recorders (no CUDA here), in call order."""
    import torch.distributed as dist

    calls: list = []

    def init(backend, **kw) -> None:
        bound = kw.get("device_id")
        calls.append(("init", backend, None if bound is None else str(torch.device(bound)), kw.get("rank")))

    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append(("set_device", str(device))))
    monkeypatch.setattr(dist, "init_process_group", init)
    monkeypatch.setattr(torch_pipeline, "_run_stage",
                        lambda rank, job: {"times": [0.1], "loss": 0.5, "grads": {}})
    return calls


@pytest.mark.parametrize(("devices", "backend", "want"), [
    (("cuda:0", "cuda:1"), "nccl", [("set_device", "cuda:1"), ("init", "nccl", "cuda:1", 1)]),
    (("cuda:0", "cuda:1"), "gloo", [("set_device", "cuda:1"), ("init", "gloo", None, 1)]),
    (("cpu", "cpu"), "gloo", [("init", "gloo", None, 1)]),
])
def test_a_stage_process_sets_its_gpu_before_joining_and_binds_it_under_nccl(monkeypatch, devices, backend,
                                                                             want) -> None:
    """Rank 1 of stages on cuda:0 and cuda:1 makes cuda:1 current before init_process_group, and under NCCL passes
    it as device_id (barriers then use it); CPU stages join as before. Only the order and arguments are checked
    here: these calls have never run on a GPU."""
    calls, results = _recorded(monkeypatch), []
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")

    class Results:
        put = results.append

    torch_pipeline._stage_main(1, 2, 1, _job(devices, backend), Results())
    assert [r.get("error") for r in results] == [None]
    assert calls == want


def test_a_torchrun_rank_sets_its_gpu_before_joining_and_binds_it_under_nccl(monkeypatch) -> None:
    """Under torchrun, rank 1 makes its first stage's GPU current before it makes the process group, and binds it
    under NCCL (order and arguments only: never run on a GPU)."""
    import atexit

    import torch.distributed as dist

    calls = _recorded(monkeypatch)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(atexit, "register", lambda fn: None)
    monkeypatch.setattr(dist, "all_gather_object",
                        lambda out, obj: out.__setitem__(slice(None), [{**obj, "rank": r} for r in range(2)]))
    run = torch_pipeline._run_launched(_job(("cuda:0", "cuda:1"), "nccl"))
    assert run.processes == 2 and run.loss == 0.5
    assert calls == [("set_device", "cuda:1"), ("init", "nccl", "cuda:1", None)]


def test_a_rank_whose_process_group_is_bound_to_another_gpu_is_refused_naming_both(monkeypatch) -> None:
    """Under torchrun the group may be bound to a GPU that is not the rank's stages' (the caller's group, or the one
    kept from an earlier measurement that gave the rank another GPU): rank 1 of stages on cuda:0 and cuda:1 under a
    group bound to cuda:0 fails the measurement, naming the rank, the expected and the bound device, before its
    device is made current or a stage is built. The bound device is read back from a real one-rank gloo group; the
    refusal runs with recorded process-group calls (never run on a GPU)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert torch_pipeline._bound_device() is None
        dist.group.WORLD.bound_device_id = torch.device("cuda", 0)  # what init_process_group(device_id=) sets
        assert torch_pipeline._bound_device() == torch.device("cuda", 0)
    finally:
        dist.destroy_process_group()
    assert torch_pipeline._bound_device() is None
    cuda0, cuda1 = torch.device("cuda", 0), torch.device("cuda", 1)
    assert torch_pipeline._group_device_problem(1, [1], cuda1, cuda1) == ""
    assert torch_pipeline._group_device_problem(0, [0], torch.device("cpu"), None) == ""
    assert torch_pipeline._group_device_problem(0, [0, 2], cuda1, torch.device("cuda")).startswith(
        "rank 0's process group is bound to cuda:0 (init_process_group(device_id=...)) but its stages 0, 2 run on "
        "cuda:1: expected cuda:1, got cuda:0")

    calls: list = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append(str(device)))
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(dist, "is_initialized", lambda: True)  # the caller made the group
    monkeypatch.setattr(torch_pipeline, "_bound_device", lambda: cuda0)
    monkeypatch.setattr(dist, "all_gather_object",
                        lambda out, obj: out.__setitem__(slice(None), [{**obj, "rank": r} for r in range(2)]))
    with pytest.raises(torch_pipeline._StageError) as caught:
        torch_pipeline._run_launched(_job(("cuda:0", "cuda:1"), "nccl"))
    assert "rank 1's process group is bound to cuda:0" in str(caught.value)
    assert "but its stage 1 runs on cuda:1: expected cuda:1, got cuda:0" in str(caught.value)
    assert calls == []


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_one_gpu_stage_over_nccl_gives_the_unsplit_gradients(schedule) -> None:
    """The whole model as one stage on one CUDA device, NCCL with one rank: the GPU path of the multi-GPU tests
    (each process sets its device, the stage and micro-batches live there, gradients come back) on one GPU."""
    model, x, y, graph, _, _ = _problem({})
    gpu = Cluster.build([Device("/GPU:0", "gpu")], default_bandwidth=1e10)
    on_gpu = Placement.for_graph(graph, np.zeros(graph.num_ops, dtype=np.int64))
    runtime = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=M, schedule=schedule, backend="nccl",
                                   steps=2, warmup=1)
    run = runtime.run(graph, gpu, on_gpu)
    assert run.processes == 1 and len(run.times) == 2
    F.mse_loss(model(x), y).backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(torch.from_numpy(run.grads[name]), p.grad, rtol=1e-4, atol=1e-5)
    assert runtime.measure(graph, gpu, on_gpu).ok


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_two_gpu_stages_over_nccl_give_the_unsplit_gradients() -> None:
    """The same check with one CUDA device per stage and NCCL (never run: no GPU has been lent)."""
    model, x, y, graph, _, placement = _problem({"2": 1, "3": 1, "4": 1})
    gpus = Cluster.build([Device("/GPU:0", "gpu"), Device("/GPU:1", "gpu")], default_bandwidth=1e10)
    runtime = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=M, backend="nccl", steps=2, warmup=1)
    run = runtime.run(graph, gpus, Placement.for_graph(graph, placement.devices))
    F.mse_loss(model(x), y).backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(torch.from_numpy(run.grads[name]), p.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_a_non_contiguous_placement_over_nccl_runs_one_process_per_gpu() -> None:
    """Stages on GPUs 0, 1, 0: NCCL refuses two ranks on one GPU, so GPU 0's two stages share one process
    (never run: no two GPUs have been lent)."""
    model, x, y, graph, _, placement = _problem({"2": 1})
    gpus = Cluster.build([Device("/GPU:0", "gpu"), Device("/GPU:1", "gpu")], default_bandwidth=1e10)
    for schedule in ("gpipe", "1f1b"):
        runtime = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=M, schedule=schedule, backend="nccl",
                                       steps=2, warmup=1)
        run = runtime.run(graph, gpus, Placement.for_graph(graph, placement.devices))
        assert run.processes == 2
        model.zero_grad()
        F.mse_loss(model(x), y).backward()
        for name, p in model.named_parameters():
            torch.testing.assert_close(torch.from_numpy(run.grads[name]), p.grad, rtol=1e-4, atol=1e-5)


def test_no_time_limit_measures() -> None:
    """time_limit=None (no limit, as documented) failed in every stage: the process group took timedelta(inf)."""
    torch.manual_seed(0)
    model = Normed()
    x, y, graph, cluster, placement = _split_at(model, "out", 4)
    m = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=2, steps=1, warmup=0, time_limit=None).measure(
        graph, cluster, placement)
    assert m.ok, m.reason
