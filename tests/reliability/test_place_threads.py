"""``gplace.place`` from several threads gives what the same calls give one after another, and leaves the caller's
torch random state as it was."""

import time
from concurrent.futures import ThreadPoolExecutor

import torch

import gplace
from gplace.policies import Seq2SeqPolicy
from gplace.testing import two_branches, uniform_cluster

GRAPH, CLUSTER = two_branches(length=3), uniform_cluster(2)


def _slow_policy(num_devices, state_size):
    """The seq2seq policy, built after a pause: another thread's place() gets to seed torch in between."""
    time.sleep(0.2)
    return Seq2SeqPolicy(num_devices, state_size=state_size)


def _place(seed, method="learned", policy=None):
    report = gplace.place(GRAPH, CLUSTER, method=method, budget="4 samples", seed=seed, policy=policy)
    return report.placement.devices.tolist(), report.measurement.step_time, report.train.history


def test_place_from_threads_gives_the_sequential_results():
    """4 threads, seeds 0-3, each building its policy after a pause: each call's result is the one it gives alone
    (the threads' seeds and draws interleaved on torch's global generator: other initial weights)."""
    seeds = range(4)
    sequential = [_place(seed, policy=_slow_policy) for seed in seeds]
    with ThreadPoolExecutor(len(seeds)) as pool:
        threaded = list(pool.map(lambda seed: _place(seed, policy=_slow_policy), seeds))
    assert threaded == sequential


def test_place_from_threads_with_a_methods_own_networks_gives_the_sequential_results():
    """method="gdp", one seed, 3 threads: each result is the sequential one."""
    sequential = _place(0, "gdp")
    with ThreadPoolExecutor(3) as pool:
        threaded = list(pool.map(lambda _: _place(0, "gdp"), range(3)))
    assert threaded == [sequential] * 3


def test_place_leaves_the_callers_torch_random_state_as_it_was():
    """A learned search seeds the networks it builds without reseeding the caller's generator (it was left at the
    search's seed: the caller's next draws were the same after every call)."""
    torch.manual_seed(123)
    before = torch.get_rng_state()
    _place(0)
    _place(1, "gdp")
    assert torch.equal(torch.get_rng_state(), before)
