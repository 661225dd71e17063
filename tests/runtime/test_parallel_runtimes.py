"""Runtimes that wrap another (process pool, Ray, cache) honour the runtime contract and change no result."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import math
import os
import pickle
import re
import sqlite3
import time
import types

import numpy as np
import pytest
from forking import assert_forked_child_passes

from gplace.ir import Cluster, OpGraph, Placement
from gplace.runtime import Measurement, Simulator
from gplace.runtime.cache import CachedRuntime
from gplace.runtime.conformance import check_failure, check_runtime
from gplace.runtime.parallel import PoolRuntime, Worker, pickle_for_workers, pickled_runtime
from gplace.testing import diamond, random_dag, uniform_cluster

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")

CPU_MAP = {"/CPU:0": "cpu", "/CPU:1": "cpu"}
FIELDS = ("ok", "step_time", "runtime", "reason", "spread", "bytes_moved")
ARRAYS = ("busy_time", "peak_memory", "op_start", "op_end")


def _placements(graph: OpGraph, count: int, seed: int = 0) -> list[Placement]:
    rng = np.random.default_rng(seed)
    return [Placement.single(graph, 0), *(Placement.for_graph(graph, rng.integers(0, 2, graph.num_ops))
                                          for _ in range(count - 1))]


def _assert_same(a: Measurement, b: Measurement, arrays: tuple[str, ...] = ARRAYS) -> None:
    for name in FIELDS:
        assert getattr(a, name) == getattr(b, name), name
    for name in arrays:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None and y is None) or np.array_equal(x, y), name


class _Crashing(Simulator):
    """Kills its worker process when op 1 is on device 1; raises when op 2 is on device 1 (and op 1 is not)."""

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        if placement.devices[1] == 1:
            os._exit(3)
        if placement.devices[2] == 1:
            raise RuntimeError("kernel bug")
        return super()._measure(graph, cluster, placement)


class _Counting(Simulator):
    """Counts the placements it measures."""

    def __init__(self, cache_size: int = 16) -> None:
        super().__init__(cache_size)
        self.calls = 0

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        self.calls += 1
        return super()._measure(graph, cluster, placement)


class _RunsItsSource(Simulator):
    """Fails a graph whose program (``graph.source``, left out of the fingerprint) does not run, as torch-v1 does."""

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        if not graph.source.runs:
            return Measurement.failure(self.id, "the program does not run")
        return super()._measure(graph, cluster, placement)


def _two_programs(source: type = argparse.Namespace) -> tuple[OpGraph, OpGraph]:
    """Two graphs with one fingerprint: the first's program runs, the second's does not."""
    g = diamond()
    return dataclasses.replace(g, source=source(runs=True)), dataclasses.replace(g, source=source(runs=False))


class _Noisy(Simulator):
    """A runtime that declares itself non-deterministic."""

    id = "noisy-v0"
    deterministic = False


@pytest.fixture(scope="module")
def pool():
    with PoolRuntime(Simulator(), workers=2) as runtime:
        yield runtime


# ---------------------------------------------------------------------- process pool
def test_pool_conforms(pool: PoolRuntime) -> None:
    """The pool passes the conformance suite, failures (out of memory) included, with the simulator's id."""
    g = diamond()
    check_runtime(pool, g, uniform_cluster(2), _placements(g, 4))
    check_failure(pool, g, uniform_cluster(2, memory=1000), Placement.single(g, 0))
    assert (pool.id, pool.deterministic) == ("sim-v1", True)


def test_pool_equals_the_simulator_in_order(pool: PoolRuntime) -> None:
    """Every measurement of a batch equals the in-process simulator's, arrays included, in placement order."""
    g, c = random_dag(30, seed=1), uniform_cluster(2)
    placements = _placements(g, 16)
    for got, want in zip(pool.measure_many(g, c, placements), Simulator().measure_many(g, c, placements),
                         strict=True):
        _assert_same(got, want)


def test_pool_writes_each_graph_once(pool: PoolRuntime) -> None:
    """A (graph, cluster) pair is pickled to one file, once; later batches send only placements."""
    g, c = random_dag(12, seed=2), uniform_cluster(2)
    pool.measure_many(g, c, _placements(g, 4))
    path = pool._payloads[(g.fingerprint, c.fingerprint)]
    stamp = path.stat().st_mtime_ns
    pool.measure_many(g, c, _placements(g, 4, seed=1))
    assert path.stat().st_mtime_ns == stamp
    assert sum(key == (g.fingerprint, c.fingerprint) for key in pool._payloads) == 1


def test_pool_ships_a_graph_with_another_program_anew() -> None:
    """Graphs were keyed by fingerprint alone: after the pool measured the first, the second (another program, one
    fingerprint) was measured by running the first's program."""
    first, second = _two_programs()
    c, p = uniform_cluster(2), Placement.single(first, 0)
    with PoolRuntime(_RunsItsSource(), workers=1) as pool:
        assert pool.measure(first, c, p).ok
        assert pool.measure(second, c, p).reason == "the program does not run"
        assert pool.measure(first, c, p).ok


@pytest.mark.parametrize("source", [argparse.Namespace, types.SimpleNamespace])  # weakly held, held
def test_problem_keys_never_reuse_a_programs_key(source: type) -> None:
    """A program's key is its own while it lives, even after others with the same id (freed ones) came and went."""
    from gplace.runtime.parallel import ProblemKeys

    keys, c = ProblemKeys(), uniform_cluster(2)
    first, _ = _two_programs(source)
    assert keys(first, c) == keys(dataclasses.replace(first), c) != (first.fingerprint, c.fingerprint)
    assert len({keys(_two_programs(source)[0], c) for _ in range(20)} | {keys(first, c)}) == 21
    assert keys(diamond(), c) == (first.fingerprint, c.fingerprint)


def test_worker_keeps_the_graph_it_read(tmp_path) -> None:
    """A worker reads a (graph, cluster) file the first time only: it measures after the file is gone."""
    g, c = diamond(), uniform_cluster(2)
    path = tmp_path / "problem.pkl"
    path.write_bytes(pickle_for_workers((g, c)))
    worker = Worker(pickled_runtime(Simulator()))
    key = (g.fingerprint, c.fingerprint)
    first = worker.measure(key, str(path), np.zeros(4, dtype=np.int64))
    path.unlink()
    again = worker.measure(key, str(path), np.zeros(4, dtype=np.int64))
    _assert_same(first, again)
    assert first.ok


def test_a_crashing_runtime_gives_failed_measurements() -> None:
    """A worker that dies fails only its own placement; an exception in the runtime is a failure too."""
    g, c = diamond(), uniform_cluster(2)
    good = Placement.for_graph(g, [0, 0, 0, 1])
    dies = Placement.for_graph(g, [0, 1, 0, 0])
    raises = Placement.for_graph(g, [0, 0, 1, 0])
    with PoolRuntime(_Crashing(), workers=2) as runtime:
        got = runtime.measure_many(g, c, [good, dies, raises, good])
        after = runtime.measure(g, c, good)  # the pool recovers
    assert [m.ok for m in got] == [True, False, False, True]
    assert "worker process died" in got[1].reason
    assert "RuntimeError" in got[2].reason and "kernel bug" in got[2].reason
    assert all(m.runtime == "sim-v1" and m.step_time == math.inf for m in got[1:3])
    _assert_same(got[0], Simulator().measure(g, c, good))
    _assert_same(after, got[0])


def test_the_shared_gpu_warning_is_for_runtimes_on_real_devices_only(caplog: pytest.LogCaptureFixture) -> None:
    """A pooled simulator (runtime=simulator_pool) on a cluster with GPUs was told to use gpus_per_worker, which
    raises on a machine without GPUs, though the simulator runs on none; a non-deterministic runtime is warned."""
    from gplace.testing import cpu_gpu_cluster

    g, c = diamond(), cpu_gpu_cluster()
    warned = {}
    for runtime in (Simulator(), _Noisy()):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="gplace.runtime.parallel"), \
                PoolRuntime(runtime, workers=2) as pool:
            assert all(m.ok for m in pool.measure_many(g, c, _placements(g, 2)))
        warned[runtime.id] = "gpus_per_worker" in caplog.text
    assert warned == {"sim-v1": False, "noisy-v0": True}


def test_trainer_runs_with_a_pool(pool: PoolRuntime) -> None:
    """Two REINFORCE updates through the pool give the history of two updates through the simulator."""
    torch = pytest.importorskip("torch")
    from gplace.encoders import LSTMEncoder
    from gplace.grouping import group_ops
    from gplace.placer import PolicyPlacer
    from gplace.policies import Seq2SeqPolicy
    from gplace.testing import two_branches
    from gplace.training import ReinforceTrainer

    graph, cluster = two_branches(length=3), uniform_cluster(2)

    def fit(runtime):
        torch.manual_seed(0)
        placer = PolicyPlacer(graph, cluster, LSTMEncoder(hidden_size=16, type_embedding=4),
                              Seq2SeqPolicy(2, hidden_size=16, attention_size=8), grouping=group_ops(graph))
        return ReinforceTrainer(updates=2, samples_per_update=4, seed=0).fit(placer, runtime, graph, cluster)

    pooled, serial = fit(pool), fit(Simulator())
    assert pooled.samples == 8
    assert [h["rollout/mean_step_time"] for h in pooled.history] == [h["rollout/mean_step_time"]
                                                                      for h in serial.history]
    assert pooled.best_step_time == serial.best_step_time < math.inf


def test_pool_pickles_without_its_workers(pool: PoolRuntime) -> None:
    """A pickled pool carries its settings and runtime, not processes or files."""
    g = diamond()
    pool.measure(g, uniform_cluster(2), Placement.single(g, 0))
    copy = pickle.loads(pickle.dumps(pool))
    assert copy._pool is None and copy._payloads == {} and copy.workers == 2
    assert isinstance(copy.runtime, Simulator)


def test_pool_rejects_fork() -> None:
    with pytest.raises(ValueError, match="fork"):
        PoolRuntime(Simulator(), context="fork")  # type: ignore[arg-type]


def _torch_case():
    torch = pytest.importorskip("torch")
    from gplace.ir import Device
    from gplace.runtime.torch_runtime import TorchRuntime

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)
    return model, torch.randn(2, 8), cluster, TorchRuntime(steps=2, warmup=1, device_map=CPU_MAP)


def test_pool_runs_torch_programs(caplog: pytest.LogCaptureFixture) -> None:
    """The torch runtime conforms through the pool (its ExportedProgram travels through torch.export.save);
    a joint training graph, which cannot travel, is measured in the calling process with a warning."""
    from gplace.importers.torch_export import from_torch

    model, x, cluster, runtime = _torch_case()
    g = from_torch(model, (x,))
    runtime.measure(g, cluster, Placement.single(g, 0))  # the caller's caches do not travel
    with PoolRuntime(runtime, workers=2) as pooled:
        alternating = Placement.for_graph(g, [i % 2 for i in range(g.num_ops)])
        got = check_runtime(pooled, g, cluster, [Placement.single(g, 0), Placement.single(g, 1), alternating])
        assert [m.bytes_moved > 0 for m in got] == [False, False, True]
        train = from_torch(model, (x,), training=True)
        with caplog.at_level(logging.WARNING, logger="gplace.runtime.parallel"):
            m = pooled.measure(train, cluster, Placement.single(train, 0))
        assert m.ok and "measuring it in this process" in caplog.text
        assert pooled._pool is not None


# ---------------------------------------------------------------------- Ray
@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    yield ray
    ray.shutdown()


def test_ray_conforms_and_equals_the_simulator(ray_local) -> None:
    """Round robin over two actors: the conformance suite passes and results equal the simulator's, in order."""
    from gplace.runtime.ray_runtime import RayRuntime

    g, c = random_dag(20, seed=3), uniform_cluster(2)
    placements = _placements(g, 9)
    with RayRuntime(Simulator(), num_actors=2) as runtime:
        check_runtime(runtime, g, c, placements[:3])
        check_failure(runtime, diamond(), uniform_cluster(2, memory=1000), Placement.single(diamond(), 0))
        got = runtime.measure_many(g, c, placements)
        assert len(runtime._actors) == 2 and len(runtime._refs) == 2  # one object per (graph, cluster)
    for a, b in zip(got, Simulator().measure_many(g, c, placements), strict=True):
        _assert_same(a, b)
    assert ray_local.is_initialized()  # a Ray this object did not start stays up


def test_ray_actor_death_fails_only_its_placement(ray_local) -> None:
    """An actor that dies gives its placement a failed measurement; the placements queued behind it succeed."""
    from gplace.runtime.ray_runtime import RayRuntime

    class Dying(Simulator):  # defined here: travels to the actors by value (cloudpickle)
        def _measure(self, graph, cluster, placement):
            if placement.devices[1] == 1:
                os._exit(3)
            return super()._measure(graph, cluster, placement)

    g, c = diamond(), uniform_cluster(2)
    good, dies = Placement.for_graph(g, [0, 0, 1, 0]), Placement.for_graph(g, [0, 1, 0, 0])
    with RayRuntime(Dying(), num_actors=2) as runtime:
        got = runtime.measure_many(g, c, [good, dies, good, good])
    assert [m.ok for m in got] == [True, False, True, True]
    assert "Ray actor died" in got[1].reason


def test_ray_ships_a_graph_with_another_program_anew(ray_local) -> None:
    """As for the pool: the second graph (one fingerprint, another program) was measured by the first's program."""
    from gplace.runtime.ray_runtime import RayRuntime

    class RunsItsSource(Simulator):  # defined here: travels to the actors by value (cloudpickle)
        def _measure(self, graph, cluster, placement):
            if not graph.source.runs:
                return Measurement.failure(self.id, "the program does not run")
            return super()._measure(graph, cluster, placement)

    first, second = _two_programs()
    c, p = uniform_cluster(2), Placement.single(first, 0)
    with RayRuntime(RunsItsSource(), num_actors=1) as runtime:
        assert runtime.measure(first, c, p).ok
        assert runtime.measure(second, c, p).reason == "the program does not run"


def test_a_ray_error_is_transient_so_a_cache_measures_again(ray_local, tmp_path) -> None:
    """A result lost once on its way back (RaySystemError) was a lasting failure: a cache kept it for good. It is
    transient: the cache does not keep it, and the runtime measures the placement once more (a search charged it a
    failed placement's penalty)."""
    from gplace.runtime.ray_runtime import RayRuntime

    flag = tmp_path / "lose-the-next-result"
    flag.touch()

    def arrive(value):  # runs here, as the result is unpickled: fails while the flag is there
        if flag.exists():
            flag.unlink()
            raise RuntimeError("result lost")
        return value

    class Lost(float):
        def __reduce__(self):
            return arrive, (float(self),)

    class LosesAResult(Simulator):  # defined here: travels to the actors by value (cloudpickle)
        def _measure(self, graph, cluster, placement):
            return dataclasses.replace(super()._measure(graph, cluster, placement), spread=Lost(0.0))

    g, c = diamond(), uniform_cluster(2)
    with RayRuntime(LosesAResult(), num_actors=1) as runtime:
        cache = CachedRuntime(runtime)
        assert cache.measure(g, c, Placement.single(g, 0)).ok and cache.misses == 2  # lost, then measured again
        assert cache.measure(g, c, Placement.single(g, 0)).ok and cache.misses == 2  # kept


def test_a_ray_actors_first_call_set_up_is_not_timed(ray_local) -> None:
    """As for the pool: an actor's first measurement (sim-v1 loading numba's kernels, seconds) was timed, so a
    short timeout failed it, and every replacement actor paid it again. Each actor now warms up untimed."""
    from gplace.runtime.ray_runtime import RayRuntime

    class SlowFirstCall(Simulator):  # defined here: travels to the actors by value (cloudpickle)
        def _measure(self, graph, cluster, placement):
            if not getattr(self, "set_up", False):
                time.sleep(2.0)
                self.set_up = True
            return Measurement(ok=True, step_time=float(placement.devices.sum()), runtime=self.id)

    g, c = diamond(), uniform_cluster(2)
    placements = [Placement.for_graph(g, d) for d in ([0, 1, 0, 1], [1, 1, 0, 0], [1, 0, 1, 1])]
    with RayRuntime(SlowFirstCall(), num_actors=1, timeout=1.0) as runtime:
        got = runtime.measure_many(g, c, placements)
    assert [(m.ok, m.reason, m.step_time) for m in got] == [(True, "", 2.0), (True, "", 2.0), (True, "", 3.0)]


def test_a_ray_actor_replaced_after_a_timeout_warms_up_again(ray_local) -> None:
    """The actor that replaces a timed-out one is a fresh process: it warms up before its timed calls too (which
    actors had read a graph was kept by ``id()`` of the actor handle, which a new handle may reuse)."""
    from gplace.runtime.ray_runtime import RayRuntime

    class SlowFirstCallHangsOnDevice1(Simulator):  # defined here: travels to the actors by value (cloudpickle)
        def _measure(self, graph, cluster, placement):
            if not getattr(self, "set_up", False):
                time.sleep(2.0)
                self.set_up = True
            if placement.devices.all():
                time.sleep(60)
            return Measurement(ok=True, step_time=float(placement.devices.sum()), runtime=self.id)

    g, c = diamond(), uniform_cluster(2)
    placements = [Placement.for_graph(g, d) for d in ([1, 1, 1, 1], [0, 1, 0, 1], [1, 0, 0, 0])]
    with RayRuntime(SlowFirstCallHangsOnDevice1(), num_actors=1, timeout=1.0) as runtime:
        got = runtime.measure_many(g, c, placements)
        assert len(runtime._loaded) == 1 and runtime._loaded[0]  # the replacement's own record
    assert [m.ok for m in got] == [False, True, True] and "timed out" in got[0].reason


def test_a_ray_warm_up_that_kills_its_actor_is_dropped_for_that_graph(ray_local, caplog) -> None:
    """An actor dying on its warm-up (every op on device 0) is replaced and the graph measured without a warm-up."""
    from gplace.runtime.ray_runtime import RayRuntime

    class DiesOnDevice0(Simulator):  # defined here: travels to the actors by value (cloudpickle)
        def _measure(self, graph, cluster, placement):
            if not placement.devices.any():
                os._exit(3)
            return super()._measure(graph, cluster, placement)

    g, c = diamond(), uniform_cluster(2)
    placements = [Placement.for_graph(g, d) for d in ([0, 1, 0, 1], [1, 1, 0, 0])]
    with caplog.at_level(logging.WARNING), RayRuntime(DiesOnDevice0(), num_actors=1, timeout=30) as runtime:
        got = runtime.measure_many(g, c, placements)
    assert [m.ok for m in got] == [True, True]
    assert "measuring it without a warm-up" in caplog.text


# ---------------------------------------------------------------------- cache
def test_cache_conforms() -> None:
    g = diamond()
    runtime = CachedRuntime(Simulator())
    check_runtime(runtime, g, uniform_cluster(2), _placements(g, 4))
    check_failure(runtime, g, uniform_cluster(2, memory=1000), Placement.single(g, 0))
    assert (runtime.id, runtime.deterministic) == ("sim-v1", True)


def test_cache_measures_each_placement_once() -> None:
    """Repeats within a batch and across batches are hits; the inner runtime sees each placement once."""
    g, c = random_dag(10), uniform_cluster(2)
    a, b = _placements(g, 2)
    inner = _Counting()
    runtime = CachedRuntime(inner)
    first = runtime.measure_many(g, c, [a, b, a])
    second = runtime.measure_many(g, c, [b, a])
    assert inner.calls == 2 and (runtime.misses, runtime.hits) == (2, 3)
    assert first[0] is first[2] is second[1]
    _assert_same(first[1], Simulator().measure(g, c, b), arrays=("busy_time", "peak_memory"))
    assert first[1].op_start is None  # dropped unless keep_op_times


def test_cache_persists_across_runs(tmp_path) -> None:
    """Measurements written to the sqlite file come back equal in a new process's cache, failures included."""
    g, c = random_dag(10), uniform_cluster(2)
    tiny = uniform_cluster(2, memory=1000)
    placements = _placements(g, 5)
    with CachedRuntime(Simulator(), tmp_path / "m.sqlite", keep_op_times=True) as runtime:
        before = runtime.measure_many(g, c, placements)
        failed = runtime.measure(g, tiny, placements[0])
    inner = _Counting()
    with CachedRuntime(inner, tmp_path / "m.sqlite", keep_op_times=True) as resumed:
        after = resumed.measure_many(g, c, placements)
        failed_again = resumed.measure(g, tiny, placements[0])
    assert inner.calls == 0 and resumed.hits == 6
    for x, y in zip(before, after, strict=True):
        _assert_same(x, y)
    _assert_same(failed, failed_again)
    assert not failed_again.ok and failed_again.step_time == math.inf and "out of memory" in failed_again.reason


def test_cache_key_has_the_runtime_id(tmp_path) -> None:
    """Another runtime id never reads the entries of the first."""
    g, c = diamond(), uniform_cluster(2)
    with CachedRuntime(Simulator(), tmp_path / "m.sqlite") as runtime:
        runtime.measure(g, c, Placement.single(g, 0))
    other = _Noisy()
    with CachedRuntime(other, tmp_path / "m.sqlite", cache_nondeterministic=True) as runtime:
        m = runtime.measure(g, c, Placement.single(g, 0))
        assert (runtime.misses, runtime.hits, m.runtime) == (1, 0, "noisy-v0")


def test_cache_skips_nondeterministic_runtimes_unless_asked() -> None:
    g, c = diamond(), uniform_cluster(2)
    p = Placement.single(g, 0)
    plain = CachedRuntime(_Noisy())
    plain.measure(g, c, p)
    plain.measure(g, c, p)
    assert (plain.hits, plain.misses, plain.size, plain.caching) == (0, 0, 0, False)
    asked = CachedRuntime(_Noisy(), cache_nondeterministic=True)
    assert asked.measure(g, c, p) is asked.measure(g, c, p)
    assert (asked.hits, asked.misses, asked.deterministic) == (1, 1, False)


def test_cache_memory_is_bounded() -> None:
    g, c = random_dag(10), uniform_cluster(2)
    runtime = CachedRuntime(Simulator(), max_entries=3)
    runtime.measure_many(g, c, _placements(g, 8))
    assert runtime.size == 3 and runtime.misses == 8


def test_cache_in_front_of_a_pool(pool: PoolRuntime) -> None:
    """The misses of a batch go to the pool in one measure_many; the results equal the simulator's."""
    g, c = random_dag(15, seed=4), uniform_cluster(2)
    placements = _placements(g, 6)
    runtime = CachedRuntime(pool)
    got = runtime.measure_many(g, c, placements + placements)
    assert (runtime.misses, runtime.hits) == (6, 6)
    for x, y in zip(got, Simulator().measure_many(g, c, placements + placements), strict=True):
        _assert_same(x, y, arrays=("busy_time", "peak_memory"))


class _FlakyOnce(_Counting):
    """Fails its first measurement as a pool's timeout does (transient), then measures."""

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        measured = super()._measure(graph, cluster, placement)
        if self.calls == 1:
            return Measurement.failure(self.id, "timed out: no result after 1 s in a worker", transient=True)
        return measured


def test_cache_does_not_keep_a_transient_failure(tmp_path) -> None:
    """A pool's timeout was stored for good (in the sqlite file too), so a longer timeout never measured it."""
    g, c = diamond(), uniform_cluster(2)
    p = Placement.for_graph(g, [0, 1, 1, 0])
    with CachedRuntime(_FlakyOnce(), path=tmp_path / "m.sqlite") as cache:
        assert cache.measure(g, c, p).ok and cache.runtime.calls == 2  # the timeout not kept: measured once more
        assert cache.measure(g, c, p).ok and cache.runtime.calls == 2
    with CachedRuntime(Simulator(), path=tmp_path / "m.sqlite") as cache:
        assert cache.measure(g, c, p).ok and cache.hits == 1


def _damaged_cache(path, damage: str) -> None:
    if damage == "directory":
        path.mkdir()
    elif damage == "garbage":
        path.write_bytes(b"not a sqlite file" * 64)
    elif damage == "truncated":
        g = diamond()
        with CachedRuntime(Simulator(), path=path) as cache:
            cache.measure_many(g, uniform_cluster(2), _placements(g, 16))
        path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    else:
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE measurements (graph TEXT, ok INTEGER)" if damage == "other layout" else
                   "CREATE TABLE users (name TEXT)")
        db.commit()
        db.close()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "other layout", "another program's", "directory"])
def test_a_file_that_is_not_a_cache_is_an_error_naming_it(tmp_path, damage: str) -> None:
    """sqlite's own error named no file ("file is not a database", "no such column: runtime"; a traceback through
    the CLI); now a ValueError (OSError: cannot be opened) names it, and the file is left as it was."""
    g, path = diamond(), tmp_path / "m.sqlite"
    _damaged_cache(path, damage)
    before = path.read_bytes() if path.is_file() else None
    error, named = OSError if damage == "directory" else ValueError, re.escape(f"measurement cache {path} ")
    with pytest.raises(error, match=named), CachedRuntime(Simulator(), path=path) as cache:
        cache.measure(g, uniform_cluster(2), Placement.single(g, 0))
    assert (path.read_bytes() if path.is_file() else None) == before


def test_an_interrupted_batch_kills_the_workers_so_the_next_starts_clean(monkeypatch) -> None:
    """After Ctrl-C the workers went on with the abandoned calls, ahead of the next batch (which then timed out)."""
    import gplace.runtime.parallel as parallel

    g, c = diamond(), uniform_cluster(2)
    with PoolRuntime(Simulator(), workers=1) as pool:
        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(parallel, "wait", interrupted)
        with pytest.raises(KeyboardInterrupt):
            pool.measure_many(g, c, _placements(g, 3))
        assert pool._pool is None  # killed: the next call starts new workers
        monkeypatch.undo()
        assert [m.ok for m in pool.measure_many(g, c, _placements(g, 3))] == [True] * 3


def test_a_pool_inherited_by_a_forked_child_starts_its_own_workers() -> None:
    """The child submitted to the parent's executor and hung for ever."""
    g, c = diamond(), uniform_cluster(2)
    p = Placement.for_graph(g, [0, 1, 1, 0])
    with PoolRuntime(Simulator(), workers=1) as pool:
        expected = pool.measure(g, c, p).step_time
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only if it measures the same, within the alarm
            import signal

            signal.alarm(60)
            os._exit(0 if pool.measure(g, c, p).step_time == expected else 1)
        assert os.waitpid(pid, 0)[1] == 0


def test_a_forked_child_finds_the_pool_s_lock_and_slots_free() -> None:
    """Another thread of the parent held the pool's lock and its one slot at the fork (a placement in flight):
    the child waited for ever on both (its threads are not there to free them)."""
    g, c = diamond(), uniform_cluster(2)
    p = Placement.for_graph(g, [0, 1, 1, 0])
    with PoolRuntime(Simulator(), workers=1) as pool:
        expected = pool.measure(g, c, p).step_time

        @contextlib.contextmanager
        def in_flight():
            with pool._lock, pool._payload_lock:
                pool._slots.acquire()
                yield
            pool._slots.release()

        assert_forked_child_passes(in_flight, lambda: pool.measure(g, c, p).step_time == expected)


def test_wrapper_settings_and_iterators() -> None:
    g, c = diamond(), uniform_cluster(2)
    placements = _placements(g, 2)
    assert len(CachedRuntime(Simulator()).measure_many(g, c, iter(placements))) == 2  # [] before
    assert PoolRuntime(Simulator(), timeout=math.inf).timeout is None  # every measurement raised OverflowError
    for bad in (lambda: PoolRuntime(Simulator(), workers=2.5), lambda: PoolRuntime(Simulator(), workers="2"),
                lambda: CachedRuntime(Simulator(), max_entries=2.5)):
        with pytest.raises(ValueError, match="must be a whole number >= 1"):
            bad()
    with pytest.raises(ValueError, match="timeout must be a number of seconds > 0"):
        PoolRuntime(Simulator(), timeout="1")
    with pytest.raises(TypeError, match="CachedRuntime wraps a gplace Runtime, got NoneType"):
        CachedRuntime(None)
    with pytest.raises(ValueError, match="path must name a file"):
        CachedRuntime(Simulator(), path="")
