"""Per-module timing for pipe-v3's calibration: what it measures, and the micro-batch counts it refuses."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gplace.pipeline.calibration import ModuleTimes, measure_modules, module_training_graph, stage_placement


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def test_each_module_is_timed_on_one_micro_batch():
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    times = measure_modules(_model(), x, y, F.mse_loss, microbatches=4, repeats=2)
    assert [t.name for t in times] == ["0", "1", "2"]
    assert [(t.input_bytes, t.output_bytes) for t in times] == [(2 * 4 * 4, 2 * 8 * 4), (64, 64), (64, 2 * 2 * 4)]
    assert times[0].parameter_bytes == (4 * 8 + 8) * 4 and all(t.forward > 0 and t.backward > 0 for t in times)
    assert module_training_graph(times, microbatches=4).num_ops == 6


@pytest.mark.parametrize(("microbatches", "match"), [
    (16, "16 micro-batches of a batch of 8 would be empty"),  # each module measured an empty tensor, silently
    (0, "microbatches must be a whole number >= 1, got 0"),  # ZeroDivisionError
    (-1, "microbatches must be a whole number >= 1, got -1"),  # an empty slice, silently
])
def test_micro_batch_counts_that_leave_nothing_to_time_are_refused(microbatches, match):
    with pytest.raises(ValueError, match=match):
        measure_modules(_model(), torch.randn(8, 4), torch.randn(8, 2), F.mse_loss, microbatches=microbatches)


def test_timing_leaves_the_callers_module_and_random_state_as_they_were():
    """Timing ran training steps on the caller's module: gradients on every parameter, BatchNorm's statistics and
    count moved (0 -> 5), and the caller's generator drew; a Dropout in train mode was refused as 'does not run its
    top-level modules one after another' (two runs, two masks). Found by a probe of gplace inside a host."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 2))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(7)
    state = torch.get_rng_state()
    x, y = (torch.randn(16, n, generator=torch.Generator().manual_seed(0)) for n in (8, 2))
    times = measure_modules(model, x, y, F.mse_loss, microbatches=4, repeats=2)
    assert len(times) == 4 and torch.equal(torch.get_rng_state(), state)
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_timing_copies_leaves_the_callers_random_state():
    from gplace.runtime.calibration import time_copies

    torch.manual_seed(7)
    state = torch.get_rng_state()
    time_copies(torch.device("cpu"), torch.device("cpu"), [64, 4096], repeats=1)
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # torch's own deprecation of the old weight_norm
def test_a_module_deepcopy_refuses_is_timed_and_given_back():
    """Timing on a deepcopy refused a weight-normed Linear after one forward ('Only Tensors created explicitly by
    the user support the deepcopy protocol'): the module's state is saved and given back instead."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.utils.weight_norm(nn.Linear(8, 8)), nn.ReLU(), nn.Linear(8, 2))
    model(torch.randn(4, 8))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    times = measure_modules(model, torch.randn(16, 8), torch.randn(16, 2), F.mse_loss, microbatches=4, repeats=1)
    assert len(times) == 3 and all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_timing_ops_seeds_its_steps_and_leaves_the_callers_random_state():
    """The instrumented steps of time_ops drew from the caller's generator (its Dropout masks unseeded)."""
    from gplace.importers.torch_export import from_torch
    from gplace.runtime.calibration import time_ops
    from gplace.zoo import local_cpu_cluster

    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    graph = from_torch(model, torch.randn(4, 8, generator=torch.Generator().manual_seed(0)), training=True)
    torch.manual_seed(7)
    state = torch.get_rng_state()
    assert time_ops(graph, local_cpu_cluster(1), repeats=1, warmup=0).shape == (graph.num_ops,)
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_gpu_module_is_timed_to_the_end_of_its_kernels_not_their_launch():
    """On a GPU each module's forward and backward are timed once its kernels are done: without waiting, a forward
    was timed at its launches (tens of microseconds for a 1 TFLOP matmul). The caller's CUDA generator is left
    where it was, with a Dropout drawing on the GPU."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4096, 4096), nn.Dropout(0.1), nn.Linear(4096, 8)).cuda()
    x, y = torch.randn(8192, 4096, device="cuda"), torch.randn(8192, 8, device="cuda")
    with torch.no_grad():
        model[0](x)  # warm up
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        model[0](x)
        end.record()
        torch.cuda.synchronize()
    kernel_seconds = start.elapsed_time(end) / 1e3
    state = torch.cuda.get_rng_state()
    times = measure_modules(model, x, y, F.mse_loss, microbatches=1, repeats=3)
    assert times[0].forward >= 0.5 * kernel_seconds, (times[0].forward, kernel_seconds)
    assert times[0].backward >= 0.5 * kernel_seconds, (times[0].backward, kernel_seconds)
    assert torch.equal(torch.cuda.get_rng_state(), state)


@pytest.mark.parametrize("microbatches", [0, -1, 2.5, True])
def test_a_module_graph_of_no_whole_micro_batch_count_is_refused_naming_it(microbatches):
    """microbatches=0 built a graph of zero costs, 2.5 and True graphs named modules_m2.5 and modules_mTrue, and -1
    a GraphError about op 'fwd/0's negative cost."""
    times = [ModuleTimes("a", 0.1, 0.2, 1000, 1000, 0), ModuleTimes("b", 0.1, 0.2, 1000, 1000, 0)]
    with pytest.raises(ValueError, match=f"^module_training_graph: microbatches must be a whole number >= 1, got "
                                         f"{microbatches!r}$"):
        module_training_graph(times, microbatches=microbatches)


def test_a_stage_map_lacking_a_module_is_named():
    """stage_of without module 'b' raised a bare KeyError: 'b', from the graph and from stage_placement alike."""
    times = [ModuleTimes("a", 0.1, 0.2, 1000, 1000, 0), ModuleTimes("b", 0.1, 0.2, 1000, 1000, 0)]
    match = r"^stage_of gives no stage for module 'b' \(it names \['a'\]\)$"
    with pytest.raises(ValueError, match=match):
        module_training_graph(times, microbatches=2, stage_of={"a": 0})
    graph = module_training_graph(times, microbatches=2)
    with pytest.raises(ValueError, match=match):
        stage_placement(graph, {"a": 0})
    assert stage_placement(graph, {"a": 0, "b": 1}) == [0, 0, 1, 1]
