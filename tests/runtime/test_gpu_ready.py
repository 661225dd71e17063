"""Readiness for a GPU machine, checked on CPU: GPLACE_REQUIRE_GPU=1 makes every skipped gpu test fail."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gplace.ir import Cluster, Device, Placement

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_required_gpu_turns_skips_into_failures() -> None:
    """Under GPLACE_REQUIRE_GPU=1 each gpu-marked test of torch-v1, tf-v1, torch-pipeline-v1, the GPU paths,
    training, the torch write-back and module timing on a GPU fails here (no CUDA), naming the variable, whether it
    skips by a marker or from inside the test."""
    env = {**os.environ, "GPLACE_REQUIRE_GPU": "1", "PYTHONPATH": str(ROOT)}
    files = [f"tests/runtime/{name}.py"
             for name in ("test_torch_runtime", "test_gpu_paths", "test_tf_runtime", "test_torch_pipeline")]
    files += ["tests/training/test_gpu_training.py", "tests/export/test_torch_export.py",
              "tests/pipeline/test_calibration_modules.py"]
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", "-rfE", *files]
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    failed = sum(int(n) for n in re.findall(r"(\d+) (?:failed|errors?)\b", out))  # a skip at set-up is an error
    assert failed == 7 + 13 + 2 + 4 + 30 + 6 + 1 and not re.search(r"\d+ (?:passed|skipped)", out), out
    assert "GPLACE_REQUIRE_GPU=1, but this gpu test was skipped: Skipped: needs a CUDA device" in out, out
    assert "this gpu test was skipped: Skipped: needs a GPU that TensorFlow" in out, out  # pytest.skip() inside


# ---------------------------------------------------------------------- a cluster that does not fit (finding 7)
def _tiny_graph():
    from gplace.importers.torch_export import from_torch

    return from_torch(torch.nn.Linear(2, 2), (torch.randn(1, 2),))


def test_a_cluster_larger_than_the_machine_is_rejected_up_front_naming_the_devices() -> None:
    """check_cluster names every missing GPU and every GPU two task devices share; place() calls it first."""
    from gplace.experiment import place
    from gplace.ir import Cluster, Device
    from gplace.runtime.base import ClusterMismatchError
    from gplace.runtime.torch_runtime import TorchRuntime

    devices = [Device("/CPU:0", "cpu"), Device("/GPU:99", "gpu"), Device("/job:w/task:0/device:GPU:0", "gpu"),
               Device("/job:w/task:1/device:GPU:0", "gpu")]
    cluster = Cluster.build(devices, default_bandwidth=1e9, name="too-big")
    with pytest.raises(ClusterMismatchError) as raised:
        TorchRuntime().check_cluster(cluster)
    message = str(raised.value)
    assert message.startswith("cluster 'too-big' does not fit this machine: ") and "/GPU:99 (cuda:99)" in message
    assert "/job:w/task:0/device:GPU:0 and /job:w/task:1/device:GPU:0 all map to cuda:0" in message
    with pytest.raises(ClusterMismatchError, match="/GPU:99"):
        place(_tiny_graph(), cluster, runtime=TorchRuntime())


def test_sharing_a_gpu_on_purpose_and_cpu_clusters_pass() -> None:
    """device_map entries for both devices make sharing deliberate; logical CPUs always fit."""
    from gplace.ir import Cluster, Device
    from gplace.runtime.torch_runtime import TorchRuntime, cluster_problems

    gpus = Cluster.build([Device("/GPU:0", "gpu"), Device("/GPU:1", "gpu")], default_bandwidth=1e9)
    assert not any("all map to" in p for p in cluster_problems(gpus, {"/GPU:0": "cuda:0", "/GPU:1": "cuda:0"}))
    assert any("all map to cuda:0" in p for p in cluster_problems(gpus, {"/GPU:1": "cuda:0"}))
    cpus = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)
    TorchRuntime().check_cluster(cpus)


# ---------------------------------------------------------------------- workers and their GPUs (findings 3, 4, 9)
def test_pool_workers_each_see_their_own_gpus() -> None:
    """gpus_per_worker=1 over GPU ids 0 and 1: two workers, each with CUDA_VISIBLE_DEVICES set to its own id."""
    import gpu_helpers

    from gplace.runtime.parallel import PoolRuntime
    from gplace.testing import chain, uniform_cluster

    g, c = chain(), uniform_cluster(2)
    seen: dict[str, set[str]] = {}
    deadline = time.monotonic() + 120  # a worker that starts late leaves the first batches to the other
    with PoolRuntime(gpu_helpers.VisibleGpus(), gpus_per_worker=1, gpus=["0", "1"]) as pool:
        assert pool.workers == 2
        while len(seen) < 2 and time.monotonic() < deadline:
            for m in pool.measure_many(g, c, [Placement.single(g, 0)] * 6):
                pid, gpus = m.reason.split(":")
                seen.setdefault(pid, set()).add(gpus)
    assert sorted(sorted(ids) for ids in seen.values()) == [["0"], ["1"]], seen  # one GPU each, never the same
    with pytest.raises(ValueError, match="need 4 GPUs; there are 2"):
        PoolRuntime(gpu_helpers.VisibleGpus(), workers=2, gpus_per_worker=2, gpus=["0", "1"])


def test_a_worker_left_unusable_is_replaced() -> None:
    """After a measurement that kills its CUDA context, the worker exits on its next placement, which a fresh
    worker measures: only the placement that broke it fails."""
    import gpu_helpers

    from gplace.runtime.parallel import PoolRuntime

    g = _tiny_graph()
    c = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)
    placements = [Placement.for_graph(g, [1] + [0] * (g.num_ops - 1)), Placement.single(g, 0),
                  Placement.single(g, 0)]
    with PoolRuntime(gpu_helpers.StickyError(), workers=1) as pool:
        got = pool.measure_many(g, c, placements)
    assert [m.ok for m in got] == [False, True, True], [m.reason for m in got]
    assert "illegal memory access" in got[0].reason


def test_usable_synchronises_only_the_gpus_its_measurements_used(monkeypatch) -> None:
    """On a machine that (as the test tells torch) has four GPUs, a runtime whose placements used /GPU:1 checks
    cuda:1 alone: synchronising the other three would give each a CUDA context it never needed. A failure there
    (the sticky error again) makes it unusable."""
    from gplace.runtime.torch_runtime import TorchRuntime

    synced = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append(str(device)))
    g = _tiny_graph()
    c = Cluster.build([Device("/CPU:0", "cpu"), Device("/GPU:1", "gpu"), Device("/GPU:2", "gpu")],
                      default_bandwidth=1e9)
    rt = TorchRuntime()
    assert rt.usable() and synced == []  # nothing measured yet: no GPU to check
    rt._devices(c, Placement.for_graph(g, [1] + [0] * (g.num_ops - 1)))  # what a measurement does first
    assert rt.usable() and synced == ["cuda:1"]

    def sticky(device=None):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.cuda, "synchronize", sticky)
    assert not rt.usable()


def test_ray_actors_reserve_their_gpus() -> None:
    """On a Ray node declaring 2 GPUs, the per-node actor reserves both (Ray shows it CUDA_VISIBLE_DEVICES=0,1
    instead of none) and actors of {"GPU": 1} get one each."""
    ray = pytest.importorskip("ray")
    from gplace.runtime.base import Measurement, Runtime
    from gplace.runtime.ray_runtime import RayRuntime
    from gplace.testing import chain, uniform_cluster

    class VisibleGpus(Runtime):  # defined here: travels to the actors by value (cloudpickle)
        id = "visible-gpus"

        def _measure(self, graph, cluster, placement):
            return Measurement.failure(self.id, f"{os.getpid()}:{os.environ.get('CUDA_VISIBLE_DEVICES')}")

    if ray.is_initialized():
        pytest.skip("needs a Ray instance of its own")
    g, c = chain(), uniform_cluster(2)
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        with RayRuntime(VisibleGpus()) as per_node:
            (m,) = per_node.measure_many(g, c, [Placement.single(g, 0)])
        assert m.reason.split(":")[1] == "0,1", m.reason
        with RayRuntime(VisibleGpus(), resources_per_actor={"GPU": 1}) as per_gpu:
            got = per_gpu.measure_many(g, c, [Placement.single(g, 0)] * 4)
        assert sorted({m.reason.split(":")[1] for m in got}) == ["0", "1"], [m.reason for m in got]
    finally:
        ray.shutdown()


# ---------------------------------------------------------------------- TensorFlow (finding 5, calibration note)
def test_tensorflow_is_imported_with_memory_growth_and_no_auto_jit() -> None:
    """Every gplace TensorFlow import asks for memory growth before TF's runtime starts, and tf-v1's sessions
    turn XLA auto-clustering off."""
    pytest.importorskip("tensorflow")
    from gplace.ir import Cluster, Device
    from gplace.runtime.tf_runtime import TensorFlowRuntime
    from gplace.tensorflow_setup import import_tensorflow

    tf = import_tensorflow()
    assert all(tf.config.experimental.get_memory_growth(g) for g in tf.config.list_physical_devices("GPU"))
    cluster = Cluster.build([Device("/CPU:0", "cpu")], default_bandwidth=1e9)
    config = TensorFlowRuntime()._config(tf, cluster, {0: "/device:CPU:0"})
    assert config.graph_options.optimizer_options.global_jit_level == tf.compat.v1.OptimizerOptions.OFF


def test_importing_tensorflow_through_gplace_sets_only_memory_growth_in_the_environment() -> None:
    """The library also set TF_CPP_MIN_LOG_LEVEL=2 and TF_ENABLE_ONEDNN_OPTS=0, which turned oneDNN off for a caller's
    own TensorFlow work in the process (and its children) and hid TensorFlow's warnings from it."""
    pytest.importorskip("tensorflow")
    code = ("import os, json; before = dict(os.environ); import gplace.tensorflow_setup as s; s.import_tensorflow();"
            "from tensorflow.python.util import _pywrap_util_port as port;"
            "print(json.dumps([sorted(k for k in os.environ if os.environ.get(k) != before.get(k)), "
            "port.IsMklEnabled()]))")
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS", "TF_FORCE_GPU_ALLOW_GROWTH")}
    done = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=300)
    changed, onednn = json.loads(done.stdout.strip().splitlines()[-1])
    assert changed == ["TF_FORCE_GPU_ALLOW_GROWTH"], done.stderr[-2000:]
    plain = subprocess.run([sys.executable, "-c", "import tensorflow; from tensorflow.python.util import "
                            "_pywrap_util_port as port; print(port.IsMklEnabled())"], env=env, capture_output=True,
                           text=True, timeout=300)
    assert onednn == (plain.stdout.strip().splitlines()[-1] == "True")  # a plain import's (it depends on the CPU)


def test_tensorflow_imported_before_gplace_leaves_the_environment_as_it_was() -> None:
    """Set after TensorFlow's import, TF_FORCE_GPU_ALLOW_GROWTH does nothing in the process but was left for every
    child process the caller started (found by a probe of gplace inside a caller's process)."""
    pytest.importorskip("tensorflow")
    code = ("import os, json; import tensorflow; before = dict(os.environ); import gplace.tensorflow_setup as s;"
            "s.import_tensorflow(); print(json.dumps(sorted(k for k in os.environ if os.environ.get(k) != "
            "before.get(k))))")
    env = {k: v for k, v in os.environ.items() if k != "TF_FORCE_GPU_ALLOW_GROWTH"}
    done = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=300)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [], done.stderr[-2000:]


def test_tf_v1_rejects_a_cluster_with_gpus_tensorflow_does_not_see() -> None:
    """tf-v1's check_cluster names the GPUs TensorFlow lacks (all of them with tensorflow-cpu)."""
    pytest.importorskip("tensorflow")
    from gplace.runtime.base import ClusterMismatchError
    from gplace.runtime.tf_runtime import TensorFlowRuntime

    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/GPU:99", "gpu")], default_bandwidth=1e9, name="c")
    with pytest.raises(ClusterMismatchError, match=r"cluster 'c' does not fit this machine: /GPU:99 \(/device:GPU:99\) "
                                                   r"not available \(TensorFlow sees \d+ GPU"):
        TensorFlowRuntime().check_cluster(cluster)
    TensorFlowRuntime().check_cluster(Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")],
                                                    default_bandwidth=1e9))
