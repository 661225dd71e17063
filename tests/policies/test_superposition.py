"""GDP's superposition network: an untrained one places as GDPPolicy does; the graph's embedding modulates each
layer; fine-tuning only the conditioning leaves every other weight as pretrained."""

from __future__ import annotations

import re

import pytest
import torch

from gplace.encoders import GNNEncoder
from gplace.policies import GDPPolicy, SuperpositionPolicy
from gplace.runtime import Simulator
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import ReinforceTrainer, finetune


def _pair() -> tuple[GDPPolicy, SuperpositionPolicy]:
    torch.manual_seed(0)
    plain = GDPPolicy(3, hidden_size=16, segment_size=4)
    superposed = SuperpositionPolicy(3, hidden_size=16, segment_size=4)
    missing, unexpected = superposed.load_state_dict(plain.state_dict(), strict=False)
    assert all(k.startswith("conditioning.") for k in missing) and not unexpected
    return plain, superposed


def test_an_untrained_superposition_network_places_as_gdp() -> None:
    plain, superposed = _pair()
    states, allowed = torch.randn(10, 16), torch.ones(10, 3, dtype=torch.bool)
    assert torch.allclose(plain.log_probs(states, allowed), superposed.log_probs(states, allowed))


def test_the_graph_embedding_modulates_every_layer() -> None:
    plain, superposed = _pair()
    torch.nn.init.normal_(superposed.conditioning[-1].weight, std=0.5)
    allowed = torch.ones(10, 3, dtype=torch.bool)
    states = torch.randn(10, 16)
    shifted = states.clone()
    shifted[9] += 5.0  # another graph: another mean; the first segment (groups 0-3) never attends to group 9
    gap = (superposed.log_probs(states, allowed) - plain.log_probs(states, allowed)).abs().max()
    moved = (superposed.log_probs(states, allowed)[:4] - superposed.log_probs(shifted, allowed)[:4]).abs().max()
    unmoved = (plain.log_probs(states, allowed)[:4] - plain.log_probs(shifted, allowed)[:4]).abs().max()
    assert gap > 1e-3 and moved > 1e-3 and unmoved < 1e-6


def test_fine_tuning_only_the_conditioning_freezes_the_rest() -> None:
    graph, cluster = random_dag(20, seed=1), cpu_gpu_cluster(num_gpus=2)
    torch.manual_seed(0)
    encoder, policy = GNNEncoder("sage", hidden_size=16), SuperpositionPolicy(3, hidden_size=16, segment_size=8)
    before = {**{f"encoder.{k}": v.clone() for k, v in encoder.state_dict().items()},
              **{f"policy.{k}": v.clone() for k, v in policy.state_dict().items()}}
    trainer = ReinforceTrainer(updates=3, samples_per_update=4, lr=1e-2)
    finetune(encoder, policy, graph, cluster, Simulator(), trainer=trainer, copy_modules=False,
             conditioning_only=True)
    after = {**{f"encoder.{k}": v for k, v in encoder.state_dict().items()},
             **{f"policy.{k}": v for k, v in policy.state_dict().items()}}
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith("policy.conditioning.") for k in changed), changed


def test_conditioning_only_needs_a_superposition_policy() -> None:
    graph, cluster = random_dag(10, seed=1), cpu_gpu_cluster(num_gpus=2)
    with pytest.raises(ValueError, match="conditioning_parameters"):
        finetune(GNNEncoder("sage", hidden_size=16), GDPPolicy(3, hidden_size=16), graph, cluster, Simulator(),
                 conditioning_only=True)


def test_a_full_fine_tune_after_a_conditioning_only_one_trains_every_weight() -> None:
    """A conditioning-only fine-tune left the given modules frozen, so a later full fine-tune of them (or of
    copies, which keep the flags) trained the conditioning alone with nothing said."""
    graph, cluster = random_dag(20, seed=1), cpu_gpu_cluster(num_gpus=2)
    torch.manual_seed(0)
    encoder, policy = GNNEncoder("sage", hidden_size=16), SuperpositionPolicy(3, hidden_size=16, segment_size=8)
    trainer = ReinforceTrainer(updates=3, samples_per_update=4, lr=1e-2)
    finetune(encoder, policy, graph, cluster, Simulator(), trainer=trainer, copy_modules=False,
             conditioning_only=True)
    assert all(p.requires_grad for p in [*encoder.parameters(), *policy.parameters()])  # as they were
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    finetune(encoder, policy, graph, cluster, Simulator(), trainer=trainer, copy_modules=False)
    changed = [k for k, v in before.items() if not torch.equal(v, encoder.state_dict()[k])]
    assert len(changed) > len(before) // 2, changed  # none changed before


def test_resuming_a_fine_tune_with_other_trained_parameters_warns(tmp_path, caplog) -> None:
    """A conditioning-only fine-tune resumed as a full one (or the other way) trained other weights than the
    checkpoint's run, with nothing said; other settings warned."""
    import logging

    graph, cluster = random_dag(20, seed=1), cpu_gpu_cluster(num_gpus=2)
    torch.manual_seed(0)
    encoder, policy = GNNEncoder("sage", hidden_size=16), SuperpositionPolicy(3, hidden_size=16, segment_size=8)
    finetune(encoder, policy, graph, cluster, Simulator(), trainer=ReinforceTrainer(updates=2, samples_per_update=4),
             conditioning_only=True, run_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="gplace"):
        finetune(encoder, policy, graph, cluster, Simulator(),
                 trainer=ReinforceTrainer(updates=3, samples_per_update=4), run_dir=tmp_path)
    assert re.search(r"with other settings than its run's \(parameters\.frozen: '\d+ of \d+ tensors \(\w+\)' -> "
                     r"'none'\)", caplog.text), caplog.text
