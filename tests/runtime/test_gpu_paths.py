"""The GPU paths of torch-v1, tf-v1, the pool and Ray (issue 15). Every test here is marked ``gpu``: on a machine
without enough CUDA devices it skips, and under ``GPLACE_REQUIRE_GPU=1`` that skip is a failure. Those needing one
GPU passed on an H200 and an H100 on 2026-11-26; those needing two or three, and TensorFlow's, have never run
(docs/runtimes.md, "What has run on a GPU")."""

from __future__ import annotations

import io
import time

import numpy as np
import pytest
import torch
from torch import nn

from gplace.importers.torch_export import from_torch
from gplace.ir import Cluster, Device, OpGraph, Placement
from gplace.runtime.base import ClusterMismatchError
from gplace.runtime.torch_runtime import Step, TorchRunError, TorchRuntime, execute_step, streams_restored

pytestmark = pytest.mark.gpu


def _gpus() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def needs_gpus(n: int) -> pytest.MarkDecorator:
    return pytest.mark.skipif(_gpus() < n, reason=f"needs {n} CUDA device(s)")


def _cluster(n: int, memory: int = 2**63 - 1) -> Cluster:
    return Cluster.build([Device(f"/GPU:{i}", "gpu", memory=memory) for i in range(n)], default_bandwidth=1e10)


def _output_ops(g: OpGraph) -> list[str]:
    """Names of the ops whose values the exported program returns."""
    output = g.source.program.graph.output_node()
    return [n.name for n in output.args[0] if isinstance(n, torch.fx.Node)]


def _wait_for(streams: dict[str, torch.cuda.Stream], limit: float = 30.0) -> dict[str, float]:
    """Seconds until each stream has finished its work, polled from the host."""
    start, done = time.perf_counter(), {}
    while len(done) < len(streams) and time.perf_counter() - start < limit:
        for name, stream in streams.items():
            if name not in done and stream.query():
                done[name] = time.perf_counter() - start
    return done


# ---------------------------------------------------------------------- copies and streams (findings 2, 8)
class SlowThenReuse(nn.Module):
    """A slow chain on one GPU, read once on another; the source's memory is then reused by new tensors."""

    def __init__(self, width: int = 2048, depth: int = 24) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(width, width) / width**0.5)
        self.depth = depth

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x
        for _ in range(self.depth):
            y = torch.tanh(y @ self.w)
        z = y @ self.w  # on the other GPU
        u = torch.full_like(x, 3.0) * 2  # allocated on the source while the copy may be pending
        return z, u


@needs_gpus(2)
def test_slow_producer_read_on_another_gpu_equals_one_gpu() -> None:
    """The consumer on /GPU:1 waits for the slow producer on /GPU:0 (events), and the producer's freed block,
    reused on /GPU:0 at once, is not overwritten before the copy ran (record_stream): outputs equal one GPU's."""
    module = SlowThenReuse()
    x = torch.randn(2048, 2048)
    g = from_torch(module, (x,))
    consumer = _output_ops(g)[0]
    split = Placement.for_graph(g, [1 if name == consumer else 0 for name in g.op_names])
    rt, cluster = TorchRuntime(steps=3, warmup=1), _cluster(2)
    want = rt.run(g, cluster, Placement.single(g, 0))
    for _ in range(5):
        got = rt.run(g, cluster, split)
        torch.testing.assert_close(got[0].cpu(), want[0].cpu(), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(got[1].cpu(), want[1].cpu())
    assert rt.measure(g, cluster, split).ok


class BusyAndIdle(nn.Module):
    """A long chain (for /GPU:2) next to a tiny producer (/GPU:0) read by a tiny consumer (/GPU:1)."""

    def __init__(self, width: int = 4096, depth: int = 40) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(width, width) / width**0.5)
        self.depth = depth

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x
        for _ in range(self.depth):
            y = torch.tanh(y @ self.w)
        small = s * 2  # producer
        return y, small + 1  # the busy chain's result, the consumer's


@needs_gpus(3)
def test_a_copy_to_an_idle_gpu_does_not_wait_for_a_busy_one() -> None:
    """The consumer on idle /GPU:1 finishes well before the busy /GPU:2 does: its copy from /GPU:0 waits only for
    its producer's event, not for every device (polled stream completion)."""
    g = from_torch(BusyAndIdle(), (torch.randn(4096, 4096), torch.randn(16)))
    busy, consumer = _output_ops(g)
    producer = next(n.args[0].name for n in g.source.program.graph.nodes if n.name == consumer)
    devices = [0 if name in (producer, "s") else 1 if name == consumer else 2 for name in g.op_names]
    rt = TorchRuntime(steps=1, warmup=1)
    with torch.no_grad():
        plan = rt.plan(g, _cluster(3), Placement.for_graph(g, devices), None)
        execute_step(plan, float("inf"))  # warm-up
        torch.cuda.synchronize()
        execute_step(plan, float("inf"))
        done = _wait_for({"idle": plan.streams[torch.device("cuda", 1)], "busy": plan.streams[torch.device("cuda", 2)]})
    assert done["idle"] < 0.5 * done["busy"], done


@needs_gpus(1)
def test_gpu_to_cpu_values_go_to_pinned_memory_without_blocking() -> None:
    """A value made on /GPU:0 and read by an op on /CPU:0 is sent into pinned memory as soon as it is made."""
    g = from_torch(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4)), (torch.randn(8, 64),))
    cluster = Cluster.build([Device("/GPU:0", "gpu"), Device("/CPU:0", "cpu")], default_bandwidth=1e10)
    last = g.op_names[-1]
    placement = Placement.for_graph(g, [1 if name == last else 0 for name in g.op_names])
    rt = TorchRuntime(steps=2, warmup=1)
    want = rt.run(g, cluster, Placement.single(g, 1))
    with torch.no_grad():
        plan = rt.plan(g, cluster, placement, None)
        step, sent = Step(plan), []
        with streams_restored(plan):
            for call in plan.calls:
                step.run(call)  # the copy is dropped once its last reader ran: look after each call
                sent += [copy for (_, dev), copy in step.copies.items() if dev.type == "cpu"]
    assert sent and all(c.value.is_pinned() for c in sent)
    torch.testing.assert_close(rt.run(g, cluster, placement)[0], want[0], rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------- compute streams set once per step
_streams_seen: list[int] = []


@torch.library.custom_op("gplace_test::note_stream", mutates_args=())
def _note_stream(x: torch.Tensor) -> torch.Tensor:
    """``x`` again; notes the current CUDA stream of ``x``'s device when it runs."""
    _streams_seen.append(torch.cuda.current_stream(x.device).stream_id)
    return x.clone()


@_note_stream.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class NotesStreams(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.gplace_test.note_stream(torch.relu(torch.ops.gplace_test.note_stream(x)) + 1)


@needs_gpus(1)
def test_ops_run_on_the_compute_stream_and_the_callers_stream_comes_back() -> None:
    """Every op of a step runs on the plan's compute stream of its GPU (made current once, not per op), and the
    caller's current stream and device are as before the step, also when the step fails."""
    g = from_torch(NotesStreams(), (torch.randn(4, 8),))
    rt = TorchRuntime(steps=1, warmup=0)
    mine = torch.cuda.Stream()
    with torch.no_grad():
        plan = rt.plan(g, _cluster(1), Placement.single(g, 0), None)
        compute = plan.streams[torch.device("cuda", 0)]
        _streams_seen.clear()
        with torch.cuda.stream(mine):
            execute_step(plan, float("inf"))
            assert torch.cuda.current_stream(0) == mine
            with pytest.raises(TorchRunError, match="time limit"):
                execute_step(plan, 0.0)  # fails after its first op
            assert torch.cuda.current_stream(0) == mine
    assert _streams_seen and set(_streams_seen) == {compute.stream_id}
    assert compute.stream_id != mine.stream_id


# ---------------------------------------------------------------------- ONNX programs without host syncs (finding 1)
def _onnx_graph(module: nn.Module, x: torch.Tensor) -> OpGraph:
    onnx = pytest.importorskip("onnx")
    from gplace.importers.onnx import from_onnx

    buffer = io.BytesIO()
    torch.onnx.export(module, (x,), buffer, dynamo=False, opset_version=17, input_names=["x"])
    return from_onnx(onnx.load_from_string(buffer.getvalue()))


@needs_gpus(1)
@pytest.mark.parametrize("name", ["transformer", "lstm"])
def test_onnx_programs_run_on_a_gpu_without_synchronising(name: str) -> None:
    """Exported transformer and bi-LSTM steps on /GPU:0 under torch.cuda.set_sync_debug_mode("error"): no op,
    shape input or copy synchronises the host with the device."""
    torch.manual_seed(0)
    if name == "transformer":
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        module, x = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval(), torch.randn(2, 5, 16)
    else:
        module, x = nn.LSTM(8, 6, num_layers=2, bidirectional=True), torch.randn(5, 2, 8)
    g = _onnx_graph(module, x)
    rt = TorchRuntime(steps=3, warmup=1)
    with torch.no_grad():
        plan = rt.plan(g, _cluster(1), Placement.single(g, 0), None)
        execute_step(plan, float("inf"))
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(3):
                execute_step(plan, float("inf"))
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
    assert rt.measure(g, _cluster(1), Placement.single(g, 0)).ok


# ---------------------------------------------------------------------- memory (findings 6, 7, 9)
class Huge(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.zeros(2**40, device=x.device).sum()  # 4 TiB of float32


@needs_gpus(1)
def test_out_of_memory_recovers() -> None:
    """After a CUDA out-of-memory failure, allocated memory is back at its level before, and the next
    measurement succeeds."""
    rt, cluster = TorchRuntime(steps=1, warmup=0), _cluster(1)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated(0)
    g = from_torch(Huge(), (torch.randn(2),))
    m = rt.measure(g, cluster, Placement.single(g, 0))
    assert not m.ok and "out of memory on /GPU:0 (cuda:0)" in m.reason
    assert torch.cuda.memory_allocated(0) == before
    small = from_torch(nn.Linear(8, 8), (torch.randn(4, 8),))
    assert rt.measure(small, cluster, Placement.single(small, 0)).ok


@needs_gpus(1)
def test_enforced_memory_fails_a_placement_too_big_for_the_modelled_device() -> None:
    """enforce_memory=True: a 64 MiB step fails on a cluster device modelled with 16 MiB, fits with 1 GiB."""
    g = from_torch(nn.Linear(2048, 2048), (torch.randn(2048, 2048),))
    rt = TorchRuntime(steps=1, warmup=0, enforce_memory=True)
    try:
        assert not rt.measure(g, _cluster(1, memory=16 * 2**20), Placement.single(g, 0)).ok
        assert rt.measure(g, _cluster(1, memory=2**30), Placement.single(g, 0)).ok
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, 0)


class Wide(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(1024, 4096), nn.Linear(4096, 1024)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


@needs_gpus(2)
def test_peak_memory_is_parameters_plus_activations_and_stable() -> None:
    """Peak memory per device is about its parameters plus activations (within 2x), and identical over 40
    measurements (streams reused, peaks taken after warm-up, other tensors not counted)."""
    x = torch.randn(256, 1024)
    g = from_torch(Wide(), (x,))
    paths = g.source.module_paths
    split = Placement.for_graph(g, [1 if paths.get(name, "").startswith("b") else 0 for name in g.op_names])
    rt, cluster = TorchRuntime(steps=2, warmup=1), _cluster(2)
    keep = torch.empty(2**28, dtype=torch.uint8, device="cuda:0")  # 256 MiB that is not the placement's
    peaks = [rt.measure(g, cluster, split).peak_memory for _ in range(40)]
    del keep
    assert all(np.array_equal(p, peaks[0]) for p in peaks), peaks[:3]
    floats = 4
    first = (1024 * 4096 + 4096 + 256 * 1024 + 2 * 256 * 4096) * floats  # a: weights, input, output, relu
    second = (4096 * 1024 + 1024 + 256 * 4096 + 256 * 1024) * floats
    for peak, expected in zip(peaks[0], (first, second), strict=True):
        assert expected / 2 <= peak <= 2 * expected, (peaks[0], first, second)


@needs_gpus(1)
def test_a_cluster_larger_than_the_machine_is_rejected_once() -> None:
    """One more GPU than the machine has, or two task devices on one GPU: check_cluster raises, naming them."""
    n = _gpus()
    with pytest.raises(ClusterMismatchError, match=f"/GPU:{n} \\(cuda:{n}\\)"):
        TorchRuntime().check_cluster(_cluster(n + 1))
    shared = Cluster.build([Device(f"/job:w/task:{t}/device:GPU:0", "gpu") for t in range(2)], default_bandwidth=1e9)
    with pytest.raises(ClusterMismatchError, match="all map to cuda:0"):
        TorchRuntime().check_cluster(shared)
    TorchRuntime().check_cluster(_cluster(n))


class OutOfRange(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.e = nn.Embedding(4, 2)

    def forward(self, i: torch.Tensor) -> torch.Tensor:
        return self.e(i + 10)  # a device-side assert on CUDA: a sticky error


@needs_gpus(1)
def test_a_pool_worker_with_a_dead_context_is_replaced() -> None:
    """A device-side assert kills the worker's CUDA context; the worker is replaced and the next placement runs."""
    from gplace.runtime.parallel import PoolRuntime

    bad = from_torch(OutOfRange(), (torch.zeros(3, dtype=torch.long),))
    good = from_torch(nn.Linear(8, 8), (torch.randn(4, 8),))
    with PoolRuntime(TorchRuntime(steps=1, warmup=0), workers=1) as pool:
        first = pool.measure(bad, _cluster(1), Placement.single(bad, 0))
        second = pool.measure(good, _cluster(1), Placement.single(good, 0))
    assert not first.ok and second.ok, (first.reason, second.reason)


# ---------------------------------------------------------------------- workers and their GPUs (findings 3, 4)
class _DeviceName(TorchRuntime):
    """Reports the name of the GPU its process sees as cuda:0."""

    def _measure(self, graph, cluster, placement):
        from gplace.runtime.base import Measurement

        props = torch.cuda.get_device_properties(0)
        return Measurement.failure(self.id, f"{torch.cuda.device_count()}:{props.uuid}")


@needs_gpus(2)
def test_pool_and_ray_workers_each_see_their_own_gpus() -> None:
    """gpus_per_worker=1 and Ray actors of {"GPU": 1}: each worker sees one GPU, a different one."""
    from gplace.runtime.parallel import PoolRuntime
    from gplace.runtime.ray_runtime import RayRuntime

    g = from_torch(nn.Linear(2, 2), (torch.randn(1, 2),))
    placements = [Placement.single(g, 0)] * 4
    with PoolRuntime(_DeviceName(), gpus_per_worker=1, workers=2) as pool:
        seen = {m.reason for m in pool.measure_many(g, _cluster(1), placements)}
    assert len(seen) == 2 and all(s.startswith("1:") for s in seen), seen
    ray = pytest.importorskip("ray")

    class DeviceName(_DeviceName):  # defined here: travels to the actors by value (cloudpickle)
        pass

    ray.init(num_gpus=2, include_dashboard=False)
    try:
        with RayRuntime(DeviceName(), resources_per_actor={"GPU": 1}) as actors:
            seen = {m.reason for m in actors.measure_many(g, _cluster(1), placements)}
    finally:
        ray.shutdown()
    assert len(seen) == 2 and all(s.startswith("1:") for s in seen), seen


# ---------------------------------------------------------------------- TensorFlow (finding 5)
def test_tensorflow_leaves_gpu_memory_free_and_runs_ops_where_placed() -> None:
    """After importing TensorFlow through gplace and one tf-v1 measurement on /GPU:0 (which reports the GPU's
    peak memory), most of the GPU's memory is still free; a traced step shows every op on its placed device."""
    tf = pytest.importorskip("tensorflow")
    from gplace.importers.tensorflow import from_tensorflow
    from gplace.runtime.tf_runtime import TensorFlowRuntime
    from gplace.tensorflow_setup import import_tensorflow

    if not import_tensorflow().config.list_physical_devices("GPU") or _gpus() < 1:
        pytest.skip("needs a GPU that TensorFlow and torch see")

    @tf.function(input_signature=[tf.TensorSpec([64, 64], tf.float32, name="x")])
    def chain(x):
        return tf.tanh(tf.matmul(x, x))

    g = from_tensorflow(chain)
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/GPU:0", "gpu")], default_bandwidth=1e9)
    placement = Placement.for_graph(g, [1] * g.num_ops)
    runtime = TensorFlowRuntime(steps=2, warmup=1)
    m = runtime.measure(g, cluster, placement)
    assert m.ok and m.peak_memory is not None and m.peak_memory[0] == 0 and m.peak_memory[1] >= 2 * 64 * 64 * 4
    free, total = torch.cuda.mem_get_info(0)
    assert free > total / 2, (free, total)
    step = runtime._open(g, cluster, placement, None, time.perf_counter() + 30)
    try:
        metadata = tf.compat.v1.RunMetadata()
        step.call(*step.feed_values, options=tf.compat.v1.RunOptions(trace_level=3), run_metadata=metadata)
    finally:
        step.close()
    ran = {node.node_name: dev.device for dev in metadata.step_stats.dev_stats for node in dev.node_stats}
    fed = {name.split(":")[0] for name in g.source.inputs}
    for name in g.op_names:
        if name not in fed:
            assert ran[name].endswith("/device:GPU:0"), (name, ran.get(name))
