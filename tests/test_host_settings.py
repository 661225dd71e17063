"""gplace inside a host with its own torch settings: no_grad / inference_mode, warnings as errors, float64."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import numpy as np
import pytest
import torch

import gplace
from gplace.encoders import LSTMEncoder
from gplace.hierarchical import HierarchicalPlacer, LearnedGrouper
from gplace.importers.torch_export import UnsupportedGraphError
from gplace.methods import make_learner
from gplace.placer import PolicyPlacer
from gplace.policies import Seq2SeqPolicy
from gplace.pretrained import build, load_policy, save_policy
from gplace.runtime import Simulator
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import MultiGraphTrainer, PPOTrainer, ReinforceTrainer, finetune

GRAPH, CLUSTER = random_dag(8, seed=1), cpu_gpu_cluster(1)
NO_GRAD_MODES = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode,
                 "set_grad_enabled(False)": lambda: torch.set_grad_enabled(False)}


def _modules():
    torch.manual_seed(0)
    return LSTMEncoder(hidden_size=16), Seq2SeqPolicy(CLUSTER.num_devices, hidden_size=16, state_size=16)


ENTRIES = ["reinforce", "ppo", "hierarchical", "multigraph", "finetune", "place"]


def _prepared(entry: str):
    """A training entry point on a tiny task, its modules and placer made now (outside the host's mode)."""
    small = {"updates": 1, "samples_per_update": 2}
    encoder, policy = _modules()
    if entry in ("reinforce", "ppo", "hierarchical"):
        trainer = PPOTrainer(**small, epochs=2) if entry == "ppo" else ReinforceTrainer(**small)
        placer = HierarchicalPlacer(GRAPH, CLUSTER, LearnedGrouper(4), encoder, policy) if entry == "hierarchical" \
            else PolicyPlacer(GRAPH, CLUSTER, encoder, policy)
        return lambda: trainer.fit(placer, Simulator(), GRAPH, CLUSTER)
    if entry == "multigraph":
        return lambda: MultiGraphTrainer(**small).fit(encoder, policy, [(GRAPH, CLUSTER)], Simulator())
    if entry == "finetune":
        return lambda: finetune(encoder, policy, GRAPH, CLUSTER, Simulator(), trainer=ReinforceTrainer(**small))
    return lambda: gplace.place(GRAPH, CLUSTER, method="learned", budget="2 samples", seed=0)


@pytest.mark.parametrize("mode", NO_GRAD_MODES)
@pytest.mark.parametrize("entry", ENTRIES)
def test_training_runs_inside_the_callers_no_grad_mode_and_leaves_it_on(entry, mode):
    """Every training entry point trains under the host's no_grad / inference_mode, which is on again after."""
    train = _prepared(entry)
    with contextlib.ExitStack() as stack:
        if mode == "set_grad_enabled(False)":
            stack.callback(torch.set_grad_enabled, torch.is_grad_enabled())
        stack.enter_context(NO_GRAD_MODES[mode]())
        train()
        assert not torch.is_grad_enabled()
        assert torch.is_inference_mode_enabled() == (mode == "inference_mode")


def test_a_placer_made_in_inference_mode_is_refused_by_name():
    """Weights made under inference_mode cannot be trained: a RuntimeError says so, naming one."""
    with torch.inference_mode():
        placer = PolicyPlacer(GRAPH, CLUSTER, *_modules())
    with pytest.raises(RuntimeError, match=r"ReinforceTrainer.fit: .*tensor '.*' .*inference_mode"):
        ReinforceTrainer(updates=1, samples_per_update=2).fit(placer, Simulator(), GRAPH, CLUSTER)


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8)), torch.randn(2, 8)


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_a_torch_training_graph_has_its_backward_in_the_callers_no_grad_mode(mode):
    """from_torch(training=True) inside no_grad / inference_mode imports the same joint graph as outside."""
    net, x = _net()
    expected = gplace.from_torch(net, (x,), training=True)
    with NO_GRAD_MODES[mode]():
        graph = gplace.from_torch(net, (x,), training=True)
    assert graph.op_names == expected.op_names
    assert "backward" in set(graph.phase)


def test_a_torch_training_graph_of_inference_tensors_is_refused_by_name():
    """Weights or example inputs made under inference_mode cannot have a backward traced: the error names one."""
    net, x = _net()
    with torch.inference_mode():
        made, inputs = _net()
    with pytest.raises(UnsupportedGraphError, match=r"weight '0.weight' .*inference_mode"):
        gplace.from_torch(made, (x,), training=True)
    with pytest.raises(UnsupportedGraphError, match=r"input 0 .*inference_mode"):
        gplace.from_torch(net, (inputs,), training=True)


def test_a_torch_training_graph_left_without_backward_is_refused(monkeypatch):
    """Should the trace run without autograd recording (as in the caller's no_grad before), the training graph
    of trainable weights is refused, not returned forward-only; a frozen one stays forward-only."""
    from gplace.importers import torch_export

    net, x = _net()
    monkeypatch.setattr(torch_export, "gradients_on", contextlib.nullcontext)
    with torch.no_grad(), pytest.raises(UnsupportedGraphError, match="no backward op"):
        gplace.from_torch(net, (x,), training=True)
    frozen = gplace.from_torch(net.requires_grad_(False), (x,), training=True)
    assert "backward" not in set(frozen.phase)


@pytest.mark.parametrize("first", ["to_pyg(g)", "gplace.place(g, c, method='gdp', budget='2 samples')"])
def test_pyg_methods_run_with_warnings_as_errors(first):
    """Importing torch_geometric first from either module (to_pyg, a GNN encoder) under -W error raises none of
    its own deprecations."""
    code = ("import gplace; from gplace.ir.pyg import to_pyg; from gplace.testing import cpu_gpu_cluster, "
            f"random_dag; g, c = random_dag(6, seed=0), cpu_gpu_cluster(1); {first}")
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture
def float64_default():
    """The host's default dtype float64 for the test, float32 again after."""
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(torch.float32)


def _placement() -> list[int]:
    report = gplace.place(GRAPH, CLUSTER, method="learned", budget="4 samples", seed=0)
    return report.placement.devices.tolist()


def test_a_float64_default_learns_the_same_placement_with_float32_networks(request):
    """The host's torch.set_default_dtype(float64) changes neither a seed's placement nor the networks' dtype."""
    expected = _placement()
    request.getfixturevalue("float64_default")
    assert _placement() == expected
    encoder, policy = make_learner("gdp", 2)
    assert {p.dtype for p in [*encoder.parameters(), *policy.parameters()]} == {torch.float32}
    assert torch.get_default_dtype() == torch.float64  # the host's, given back


def test_a_policy_file_loads_as_float32_under_a_float64_default(tmp_path, request):
    """load_policy rebuilds a float32 file in float32 whatever the default dtype."""
    encoder = build(LSTMEncoder, hidden_size=8)
    policy = build(Seq2SeqPolicy, num_devices=2, hidden_size=8, state_size=8)
    save_policy(tmp_path / "p.pt", encoder, policy)
    request.getfixturevalue("float64_default")
    loaded = load_policy(tmp_path / "p.pt")
    assert {p.dtype for p in [*loaded.encoder.parameters(), *loaded.policy.parameters()]} == {torch.float32}
    assert np.allclose(loaded.encoder.state_dict()[next(iter(encoder.state_dict()))].numpy(),
                       next(iter(encoder.state_dict().values())).numpy())


@pytest.mark.parametrize("mode", NO_GRAD_MODES)
def test_conformance_checks_and_module_timing_run_in_a_host_that_infers(mode):
    """check_encoder/check_policy said 'no gradient reaches the encoder's parameters' and measure_modules raised
    torch's 'element 0 of tensors does not require grad' inside the caller's no_grad or inference_mode."""
    import torch.nn.functional as F

    from gplace.conformance import check_encoder, check_policy
    from gplace.pipeline.calibration import measure_modules

    encoder, policy = _modules()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    with NO_GRAD_MODES[mode]():
        assert check_encoder(encoder, GRAPH).shape[1] == 16
        check_policy(policy, GRAPH, CLUSTER, encoder=encoder)
        times = measure_modules(model, x, y, F.mse_loss, microbatches=2, repeats=1)
    assert torch.is_grad_enabled() and all(t.backward > 0 for t in times)


def test_float32_blocks_of_two_threads_do_not_restore_each_others_default():
    """The default dtype is the process's: thread A leaving its block restored the host's float64 while thread B was
    still building in its own, and B's exit then left float32 behind."""
    import threading
    import time

    from gplace.torch_modes import float32_default

    inside, a_left, seen = threading.Event(), threading.Event(), []

    def a():
        with float32_default():
            inside.set()
            time.sleep(0.2)
        a_left.set()

    def b():
        inside.wait()
        with float32_default():
            a_left.wait(timeout=5)
            seen.append(torch.get_default_dtype())

    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        threads = [threading.Thread(target=a), threading.Thread(target=b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert seen == [torch.float32] and torch.get_default_dtype() == torch.float64
    finally:
        torch.set_default_dtype(before)


def test_the_library_writes_no_log_line_until_the_host_configures_logging():
    """Without a handler of its own a gplace WARNING reached Python's last-resort handler: a host that configured no
    logging got HiGHS's time-limit line on stderr from ``place(method='ilp')``."""
    code = ("import logging, gplace; logging.getLogger('gplace.baselines.pipeline.ilp').warning('MARK'); "
            "logging.basicConfig(); logging.getLogger('gplace.x').warning('SEEN')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "MARK" not in proc.stderr and "SEEN" in proc.stderr, proc.stderr
