"""The placement networks on a GPU: every encoder x policy pair samples and scores there as on the CPU, the
trainers learn there, and a run checkpointed on the GPU resumes on the CPU. Needs CUDA (``gpu`` marker)."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gplace.encoders import LSTMEncoder
from gplace.hierarchical import HierarchicalPlacer, LearnedGrouper
from gplace.placer import PolicyPlacer
from gplace.policies import Seq2SeqPolicy
from gplace.runtime import Simulator
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import MultiGraphTrainer, PPOTrainer, ReinforceTrainer, finetune

sys.path.insert(0, str(Path(__file__).parents[1]))
from small_networks import ENCODERS, POLICIES  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

GRAPH, CLUSTER = random_dag(24, seed=3), cpu_gpu_cluster(num_gpus=2)


def _pair(encoder: str, policy: str, device: str = "cpu") -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    return ENCODERS[encoder]().to(device), POLICIES[policy]().to(device)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("encoder", ENCODERS)
def test_every_pair_samples_and_scores_on_the_gpu_as_on_the_cpu(encoder, policy):
    cpu = PolicyPlacer(GRAPH, CLUSTER, *_pair(encoder, policy))
    gpu = PolicyPlacer(GRAPH, CLUSTER, *_pair(encoder, policy, "cuda"))
    assert gpu.allowed.is_cuda and all(p.is_cuda for p in gpu.parameters())

    a = cpu.sample(8, generator=torch.Generator().manual_seed(1))
    b = gpu.sample(8, generator=torch.Generator().manual_seed(1))  # one CPU generator draws the same noise
    assert b.log_prob.is_cuda and b.entropy.is_cuda
    assert (a.devices == b.devices).mean() > 0.95  # the same draws, but for near-ties float rounding breaks apart
    log_prob, entropy = gpu.evaluate(a.devices)
    torch.testing.assert_close(log_prob.cpu(), cpu.evaluate(a.devices)[0].detach(), rtol=1e-3, atol=1e-2)
    assert entropy.is_cuda and gpu.place(GRAPH, CLUSTER).devices.shape == (GRAPH.num_ops,)


@pytest.mark.parametrize("trainer", [ReinforceTrainer(updates=3, samples_per_update=4, self_imitation=0.5),
                                     ReinforceTrainer(updates=3, samples_per_update=4, risk_seeking=0.25),
                                     PPOTrainer(updates=3, samples_per_update=4, epochs=2, self_imitation=0.5)],
                         ids=["reinforce", "risk_seeking", "ppo"])
def test_a_search_trains_on_the_gpu_and_resumes_on_the_cpu(trainer, tmp_path):
    gpu = PolicyPlacer(GRAPH, CLUSTER, *_pair("lstm", "seq2seq", "cuda"))
    before = copy.deepcopy(gpu.state_dict())
    first = trainer.fit(gpu, Simulator(), GRAPH, CLUSTER, run_dir=tmp_path)
    assert first.best_measurement.ok and first.samples == 12
    assert any(not torch.equal(before[k], v) for k, v in gpu.state_dict().items())  # it learned, on the GPU
    assert all(p.is_cuda for p in gpu.parameters())

    cpu = PolicyPlacer(GRAPH, CLUSTER, *_pair("lstm", "seq2seq"))
    longer = dataclasses.replace(trainer, updates=5)
    resumed = longer.fit(cpu, Simulator(), GRAPH, CLUSTER, run_dir=tmp_path)
    assert resumed.samples == 20 and len(resumed.history) == 5  # 3 updates on the GPU, 2 more on the CPU
    assert resumed.best_step_time <= first.best_step_time


def test_pretraining_and_finetuning_run_on_the_gpu(tmp_path):
    encoder, policy = _pair("sage", "superposition", "cuda")
    tasks = [(random_dag(20, seed=s), CLUSTER) for s in range(3)]
    result = MultiGraphTrainer(updates=3, samples_per_update=4, tasks_per_update=2, self_imitation=0.5).fit(
        encoder, policy, tasks, Simulator(), run_dir=tmp_path)
    assert len(result.tasks) == 3 and all(p.is_cuda for p in policy.parameters())
    tuned = finetune(encoder, policy, GRAPH, CLUSTER, Simulator(), trainer=ReinforceTrainer(updates=2,
                     samples_per_update=4), conditioning_only=True)
    assert tuned.best_measurement.ok


def test_the_hierarchical_placer_samples_on_the_gpu():
    torch.manual_seed(0)
    placer = HierarchicalPlacer(GRAPH, CLUSTER, LearnedGrouper(8).cuda(), LSTMEncoder(hidden_size=32).cuda(),
                                Seq2SeqPolicy(3, hidden_size=32, state_size=32).cuda())
    out = placer.sample(3, generator=torch.Generator().manual_seed(0))
    assert out.devices.shape == (3, GRAPH.num_ops) and out.log_prob.is_cuda
    assert ReinforceTrainer(updates=2, samples_per_update=3).fit(placer, Simulator(), GRAPH, CLUSTER).samples == 6


def test_the_cli_trains_on_the_gpu_and_its_policy_loads_on_the_cpu(tmp_path):
    pytest.importorskip("hydra")
    from gplace.pretrained import load_policy

    out = tmp_path / "run"
    args = ["device=cuda", "logger=none", "trainer.updates=2", "trainer.samples_per_update=2", "trainer.progress=false",
            "graph.steps=2", "graph.hidden=64", "graph.vocab=100", f"hydra.run.dir={out}"]
    proc = subprocess.run([sys.executable, "-m", "gplace", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "WANDB_MODE": "disabled"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "placement.json").read_text())["step_time"] > 0
    encoder, policy, _ = load_policy(out / "policy.pt")
    assert all(not p.is_cuda for p in (*encoder.parameters(), *policy.parameters()))
    assert np.isfinite(float(next(iter(policy.parameters())).sum()))
