"""Threads of a host sharing torch's process-wide state through gplace: tracing, the global generators, a shared
policy's temperature; and a fork while a thread holds one of gplace's locks (found by a probe of concurrent use)."""

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from forking import assert_forked_child_passes

from gplace.importers.torch_export import from_torch
from gplace.ir import Placement
from gplace.ir.locks import ForkSafeLock
from gplace.methods import pretrained_path
from gplace.pretrained import load_policy, place_zero_shot
from gplace.runtime import CachedRuntime, Simulator
from gplace.testing import cpu_gpu_cluster, fork_join, random_dag, two_branches, uniform_cluster


def _in_threads(work, jobs, threads=4):
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(work, jobs))


class _MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return torch.relu(self.b(torch.relu(self.a(x)))).sum()


def test_from_torch_from_threads_imports_what_it_imports_alone():
    """Two exports at once failed in 10 of 10 trials ('_EXPORT_MODULE_HIERARCHY must not be None'), blaming the
    model; the joint graph of a training import likewise."""
    torch.manual_seed(0)
    modules, x = [_MLP() for _ in range(4)], torch.randn(2, 8)
    for training in (False, True):
        alone = [from_torch(m, x, training=training).fingerprint for m in modules]
        for _ in range(3):
            assert _in_threads(lambda m, t=training: from_torch(m, x, training=t).fingerprint, modules) == alone


def test_a_policy_shared_by_threads_samples_as_alone_and_keeps_its_temperature():
    """Redraws at a raised temperature on a shared policy: one thread restored what another had raised, leaving it
    16-256x hot, and 35 of 160 placements differed from the same calls made one after another."""
    encoder, policy, _ = load_policy(pretrained_path())
    jobs = [(g, c, s) for s in range(2) for g in (random_dag(10, seed=1), two_branches(length=2), fork_join(3))
            for c in (uniform_cluster(2), cpu_gpu_cluster(2))]

    def place(job):
        g, c, s = job
        return place_zero_shot(encoder, policy, g, c, samples=16, seed=s).devices.tolist()

    alone = [place(job) for job in jobs]
    for _ in range(3):
        assert _in_threads(place, jobs, threads=8) == alone
        assert policy.temperature == 1.0


def test_loading_policies_from_threads_leaves_the_callers_random_state():
    """Two threads' saved generator states were given back crosswise: the caller's draws changed in 10 of 10."""
    load_policy(pretrained_path())
    torch.manual_seed(123)
    before = torch.get_rng_state()
    for _ in range(3):
        _in_threads(lambda _: [load_policy(pretrained_path()) for _ in range(3)], range(2), threads=2)
        assert torch.equal(torch.get_rng_state(), before)


def test_torch_runtime_runs_from_threads_draw_the_steps_seed():
    """Each step's random ops draw from generators seeded with STEP_SEED: in threads, 27 of 100 dropout outputs
    differed from the run made alone (one step re-seeded the process's generator under another)."""
    from gplace.runtime.torch_runtime import TorchRuntime
    from gplace.zoo import local_cpu_cluster

    class Dropped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.drop = torch.nn.Linear(64, 64), torch.nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(torch.relu(self.a(x)))

    torch.manual_seed(0)
    g = from_torch(Dropped(), torch.randn(16, 64), training=True)
    c, runtime = local_cpu_cluster(2), TorchRuntime()
    p = Placement.single(g, 0)
    alone = [o for o in runtime.run(g, c, p) if o is not None]
    torch.manual_seed(1)
    before = torch.get_rng_state()
    runs = _in_threads(lambda _: [o for o in runtime.run(g, c, p) if o is not None], range(12), threads=3)
    for outputs in runs:
        assert all(torch.equal(a, b) for a, b in zip(alone, outputs, strict=True))
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_finds_gplace_s_locks_free():
    """A thread of the parent held the simulator's cache lock at the fork: the child's first measurement waited
    forever on it (1 fork in about 500 while threads shared a simulator); so with a CachedRuntime's lock (25 of 40
    forks beside a thread measuring through one)."""
    sim, g, c = Simulator(), random_dag(8, seed=0), uniform_cluster(2)
    cached = CachedRuntime(Simulator())
    plain, placement = ForkSafeLock(), Placement.single(g, 0)
    expected = sim.measure(g, c, placement).step_time

    def check() -> bool:
        with plain:
            pass
        return sim.measure(g, c, placement).step_time == cached.measure(g, c, placement).step_time == expected

    assert_forked_child_passes(lambda: _held(sim._lock, plain, cached._lock), check)


@contextlib.contextmanager
def _held(*locks):
    with contextlib.ExitStack() as stack:
        for lock in locks:
            stack.enter_context(lock)
        yield


def test_a_trace_excludes_other_threads_seeded_blocks():
    """A trace gives back the generator state it found when it ends: in the middle of another thread's seeded block,
    that put its draws back (119 of 1,300 network builds beside a from_torch differed from the build made alone)."""
    from gplace.torch_modes import forked_rng, tracing

    inside, leave, order = threading.Event(), threading.Event(), []

    def trace():
        with tracing():
            inside.set()
            leave.wait(10)
            order.append("trace left")

    def draw():
        with forked_rng(0):
            order.append("seeded block")

    tracer = threading.Thread(target=trace)
    tracer.start()
    inside.wait(10)
    drawer = threading.Thread(target=draw)
    drawer.start()
    drawer.join(0.5)
    leave.set()
    tracer.join(10)
    drawer.join(10)
    assert order == ["trace left", "seeded block"]


_COMPILE_DURING_A_TRACE = """
import threading
import torch
from gplace.importers.torch_export import from_torch
from gplace.ir import Placement
from gplace.runtime import Simulator
from gplace.testing import random_dag, uniform_cluster

inside, leave = threading.Event(), threading.Event()

class Slow(torch.nn.Module):
    def forward(self, x):
        inside.set()
        leave.wait(10)
        return x * 2

tracer = threading.Thread(target=lambda: from_torch(Slow(), torch.ones(2)))
tracer.start()
inside.wait(10)
result = []
g = random_dag(6)
worker = threading.Thread(target=lambda: result.append(Simulator().measure(g, uniform_cluster(2),
                                                                          Placement.single(g, 0)).ok))
worker.start()
worker.join(1.0)
leave.set()
tracer.join(30)
worker.join(60)
print(result)
assert result == [True]
"""


def test_gplace_kernels_load_while_another_thread_traces():
    """torch.export swaps math.pow, max and min for the whole process while it traces: numba's first kernel load in
    another thread then failed ("module 'torch._export.non_strict_utils' has no attribute '<lambda>'")."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _COMPILE_DURING_A_TRACE], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]


def test_a_policy_whose_sampling_places_with_another_does_not_hang():
    """The redraw lock was not re-entrant: a policy consulting a teacher through place_zero_shot hung forever."""
    encoder, teacher, _ = load_policy(pretrained_path())
    student_encoder, student, _ = load_policy(pretrained_path())
    g, c = random_dag(8, seed=2), uniform_cluster(2)
    sample = student.sample

    def consulting(*args, **kwargs):
        place_zero_shot(encoder, teacher, g, c, samples=2, seed=0)
        return sample(*args, **kwargs)

    student.sample = consulting
    done = []
    worker = threading.Thread(target=lambda: done.append(place_zero_shot(student_encoder, student, g, c, samples=4,
                                                                         seed=1)))
    worker.daemon = True
    worker.start()
    worker.join(60)
    assert done, "place_zero_shot hung"


def _fork_inside(lock: ForkSafeLock) -> int:
    """Fork while holding ``lock``; the child leaves the block and takes the lock again, exiting 0 if both work.
    The parent gets the child's pid."""
    pid = -1
    try:
        with lock:
            pid = os.fork()
    except BaseException:
        if pid == 0:
            os._exit(1)
        raise
    if pid == 0:
        code = 1
        try:
            with lock:
                code = 0
        finally:
            os._exit(code)
    return pid


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("reentrant", [False, True])
def test_a_thread_that_forks_while_holding_a_lock_releases_it_in_the_child(reentrant):
    """The child made every lock anew, the one its own thread held too: leaving the block raised 'release unlocked
    lock' there."""
    _, status = os.waitpid(_fork_inside(ForkSafeLock(reentrant=reentrant)), 0)
    assert os.waitstatus_to_exitcode(status) == 0
