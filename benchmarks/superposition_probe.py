"""Probe where the pretrained superposition network's greedy placement lands, for a pretraining length and seed.

Run from the repository root with the shared graphs next to it (``../shared``)::

    python benchmarks/superposition_probe.py --updates 12000 --seed 1

It pretrains ``SuperpositionPolicy`` (and its GNN encoder) exactly as ``generalization.py`` does (same 36 GiPH
graphs, K = 16, lr, entropy), only with ``--updates`` multi-graph updates of ``--tasks-per-update`` graphs,
``--seed`` for the weights and the task draws and ``--self-imitation W`` for the pretraining's, then prints, per
held-out graph, the zero-shot greedy placement (its devices and its step time over the best single device's)
and the best of greedy + 16 samples. No from-scratch or fine-tuning run: compare with the from-scratch column of
``generalization_superposition.md`` (the same graphs and simulator). Takes about 40 s per 4,000 updates of one
graph on this machine (60 s with self-imitation).

With ``--validate LR [LR ...]`` it then runs the benchmark's from-scratch search and fine-tuning (all weights, or
with ``--conditioning-only`` only the graph conditioning) with each learning rate on 8 validation graphs, a
seeded draw from the GiPH graphs that are neither pretraining nor held-out graphs, and prints on how many
fine-tuning reached the from-scratch result with >= 10x fewer samples (about 2 minutes per learning rate).

With ``--ensemble SEED [SEED ...]`` it pretrains one policy per seed instead and, on the held-out and validation
graphs (and with ``--confirm N`` N graphs drawn from the GiPH graphs in neither set nor pretraining; ``--sets``
picks the sets), fine-tunes the one :func:`gplace.pretrained.pick_pretrained` picks, beside each one alone (about
25 minutes for 3 seeds and the 32 graphs, in two processes split by ``--sets``).
"""

from __future__ import annotations

import argparse
import copy

import generalization as bench
import numpy as np
import torch

from gplace.importers import load_giph_graph, load_giph_network
from gplace.placer import PolicyPlacer
from gplace.pretrained import pick_pretrained, place_zero_shot
from gplace.runtime import Simulator
from gplace.training import PPOTrainer
from gplace.training.multigraph import MultiGraphTrainer, finetune, reference_step_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=bench.Settings.pretrain_updates)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--entropy", type=float, default=bench.Settings.entropy_coef)
    parser.add_argument("--self-imitation", type=float, default=bench.Settings.pretrain_self_imitation,
                        help="the pretraining's self_imitation weight (default: %(default)s)")
    parser.add_argument("--tasks-per-update", type=int, default=1, help="graphs drawn per pretraining update")
    parser.add_argument("--heft-starts", action="store_true",
                        help="each pretraining graph's best placement starts from HEFT's (imitated with "
                             "--self-imitation)")
    parser.add_argument("--finetune-risk-seeking", type=float, default=None,
                        help="risk_seeking of the fine-tuning on the validation graphs (from scratch: without)")
    parser.add_argument("--finetune-temperature", type=float, default=1.0,
                        help="the policy's temperature while fine-tuning on the validation graphs")
    parser.add_argument("--finetune-samples", type=int, default=bench.K,
                        help="samples per update of the fine-tuning on the validation graphs (the same samples in all)")
    parser.add_argument("--finetune-fresh-head", action="store_true",
                        help="fine-tune on the validation graphs with the policy's output layer re-initialised (the "
                             "zero-shot greedy placement, sample 1, still from the pretrained one)")
    parser.add_argument("--more-graphs", action="store_true",
                        help="also pretrain on the GiPH graphs that are neither held out nor validation graphs")
    parser.add_argument("--conditioning-only", action="store_true",
                        help="with --validate, fine-tune only the policy's graph conditioning (the rest frozen)")
    parser.add_argument("--ppo", type=int, default=0, metavar="EPOCHS",
                        help="with --validate, also fine-tune with PPO (EPOCHS passes per batch), counted against "
                             "the REINFORCE and a PPO from-scratch search")
    parser.add_argument("--validate", type=float, nargs="+", default=[], metavar="LR",
                        help="fine-tuning learning rates to compare on the validation graphs")
    parser.add_argument("--ensemble", type=int, nargs="+", default=[], metavar="SEED",
                        help="pretrain one policy per seed, then on the held-out and validation graphs fine-tune the "
                             "one whose greedy placement is fastest (see _ensemble)")
    parser.add_argument("--confirm", type=int, default=0, metavar="N",
                        help="with --ensemble, also N graphs drawn from the GiPH graphs that are neither pretraining, "
                             "held-out nor validation graphs")
    parser.add_argument("--sets", nargs="+", default=["held-out", "validation", "confirmation"],
                        help="with --ensemble, the graph sets to run (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    settings = bench.Settings(finetune_risk_seeking=args.finetune_risk_seeking)
    cluster = load_giph_network(bench.GIPH / "device_network_20.json")
    train, held = bench._split(settings.held_out)
    if args.more_graphs:
        train += [load_giph_graph(f) for f in _unused_files()[1]]
    sim = Simulator()
    if args.ensemble:
        return _ensemble(args, settings, cluster, train, held, sim)
    starts = bench._heft_starts(train, cluster) if args.heft_starts else None
    encoder, policy, result = _pretrained(args, args.seed, settings, cluster, train, sim, starts)
    print(f"{len(train)} pretraining graphs, {args.updates} updates x {args.tasks_per_update} graphs, "
          f"seed {args.seed}, entropy {args.entropy}, "
          f"self-imitation {args.self_imitation}{' from HEFT' if args.heft_starts else ''}: "
          f"{result.seconds:.0f} s; training graphs' greedy / best single "
          f"device {result.mean_greedy_ratio:.3f}")
    for graph in held:
        step = bench._step_time(sim, graph, cluster)
        single = reference_step_time(graph, cluster, sim)
        greedy = place_zero_shot(encoder, policy, graph, cluster)
        best16 = place_zero_shot(encoder, policy, graph, cluster, samples=bench.K, runtime=sim)
        print(f"{graph.name}: greedy on devices {np.unique(greedy.devices).tolist()}, "
              f"{step(greedy) / single:.3f}x the best single device ({single:,.0f}); "
              f"best of greedy + 16 samples {step(best16):,.0f}")
    if args.validate and args.ppo:
        return _validate_ppo(encoder, policy, cluster, sim, settings, args.validate, args.ppo)
    if args.validate:
        _validate(encoder, policy, cluster, sim, settings, args.validate, args.finetune_temperature,
                  args.finetune_samples, args.finetune_fresh_head, args.conditioning_only)


def _unused_files(count: int = 8) -> tuple[list, list]:
    """The GiPH graph files neither in pretraining nor held out: ``count`` validation graphs (a seeded draw), and
    the others."""
    unused = bench._not_held_out(pretraining=False)
    chosen = set(np.random.default_rng(1).permutation(len(unused))[:count].tolist())
    return ([f for i, f in enumerate(unused) if i in chosen], [f for i, f in enumerate(unused) if i not in chosen])


def _validation_graphs() -> list:
    """The validation graphs of :func:`_unused_files`."""
    return [load_giph_graph(f) for f in _unused_files()[0]]


def _validate(encoder, policy, cluster, sim, settings, rates: list[float], temperature: float = 1.0,
              samples: int = bench.K, fresh_head: bool = False, conditioning_only: bool = False) -> None:
    """From scratch and fine-tuned with each learning rate (at ``temperature``, ``samples`` per update; all weights
    or only the graph conditioning) on the validation graphs, as the benchmark counts."""
    reached = {lr: 0 for lr in rates}
    pretrained_temperature, policy.temperature = policy.temperature, temperature  # fine-tune copies it
    for i, graph in enumerate(_validation_graphs()):
        scratch = bench._scratch("superposition", graph, cluster, sim, settings, i)
        target, needed = scratch.best_step_time, bench._samples_to_reach(scratch, scratch.best_step_time)
        greedy_time = bench._step_time(sim, graph, cluster)(place_zero_shot(encoder, policy, graph, cluster))
        single = reference_step_time(graph, cluster, sim)
        for lr in rates:
            start = policy
            if fresh_head:
                start = copy.deepcopy(policy)
                torch.manual_seed(i)
                start.out.reset_parameters()
            search = bench._search(settings, lr, i, settings.finetune_risk_seeking, samples)
            tuned = finetune(encoder, start, graph, cluster, sim, trainer=search, conditioning_only=conditioning_only)
            took = bench._finetune_samples_to_reach(tuned, target, greedy_time)
            reached[lr] += bool(took and needed / took >= 10)
            print(f"{graph.name}: from scratch {needed} samples ({target / single:.3f}x the best single device), "
                  f"fine-tuned with lr {lr}: {took} ({tuned.best_step_time / single:.3f}x)")
    policy.temperature = pretrained_temperature
    for lr, count in reached.items():
        print(f"fine-tuning lr {lr}: >= 10x fewer samples on {count} of 8 validation graphs")


def _validate_ppo(encoder, policy, cluster, sim, settings, rates: list[float], epochs: int) -> None:
    """On the validation graphs, fine-tuning with REINFORCE (the benchmark's) and with PPO (``epochs`` passes per
    batch, the same samples and lr), counted against the REINFORCE from-scratch search; and PPO fine-tuning
    against a PPO from-scratch search (with the same lr)."""
    def ppo(seed: int, lr: float) -> PPOTrainer:
        return PPOTrainer(updates=settings.scratch_updates, samples_per_update=bench.K, lr=lr, epochs=epochs,
                          entropy_coef=settings.entropy_coef, checkpoint_every=10**9, seed=seed)

    counts = {lr: {"reinforce": 0, "ppo": 0, "ppo against ppo": 0} for lr in rates}
    for i, graph in enumerate(_validation_graphs()):
        greedy = bench._step_time(sim, graph, cluster)(place_zero_shot(encoder, policy, graph, cluster))
        reinforce_scratch = bench._scratch("superposition", graph, cluster, sim, settings, i)  # lr of its own
        for lr in rates:
            scratch = {"reinforce": reinforce_scratch,
                       "ppo": ppo(i, lr).fit(PolicyPlacer(graph, cluster, *bench._modules(
                           "superposition", cluster.num_devices, seed=100 + i)), sim, graph, cluster)}
            tuned = {"reinforce": finetune(encoder, policy, graph, cluster, sim,
                                           trainer=bench._search(settings, lr, i)),
                     "ppo": finetune(encoder, policy, graph, cluster, sim, trainer=ppo(i, lr))}
            line = []
            for name, (against, tune) in {"reinforce": ("reinforce", "reinforce"), "ppo": ("reinforce", "ppo"),
                                          "ppo against ppo": ("ppo", "ppo")}.items():
                target = scratch[against].best_step_time
                needed = bench._samples_to_reach(scratch[against], target)
                took = bench._finetune_samples_to_reach(tuned[tune], target, greedy)
                counts[lr][name] += bool(took and needed / took >= 10)
                line.append(f"{name}: {took} against {needed}")
            print(f"{graph.name} (lr {lr}): " + "; ".join(line), flush=True)
    for lr, count in counts.items():
        print(f"lr {lr}, PPO {epochs} epochs: >= 10x fewer samples on 8 validation graphs: {count}")


def _pretrained(args, seed: int, settings, cluster, train, sim, starts=None):
    """``(encoder, policy, TrainResult)`` pretrained with ``seed`` and the options of ``args``."""
    encoder, policy = bench._modules("superposition", cluster.num_devices, seed=seed)
    trainer = MultiGraphTrainer(updates=args.updates, samples_per_update=bench.K, lr=settings.pretrain_lr,
                                entropy_coef=args.entropy, checkpoint_every=10**9, seed=seed,
                                self_imitation=args.self_imitation, tasks_per_update=args.tasks_per_update)
    return encoder, policy, trainer.fit(encoder, policy, [(g, cluster) for g in train], sim, starts=starts)


def _ensemble(args, settings, cluster, train, held, sim) -> None:
    """One pretrained policy per seed of ``--ensemble``, ranked by their training graphs' greedy ratio (best first).
    On each held-out and validation graph: the greedy placement of every policy (one sample each), then fine-tuning
    (all weights, the benchmark's lr and budget) of the policy whose greedy placement is fastest (ties: the better
    ranked); its samples to reach the from-scratch result count every greedy placement. Also each policy
    fine-tuned alone (its greedy as sample 1), for comparison in the same run."""
    ranked = []
    for seed in args.ensemble:
        encoder, policy, result = _pretrained(args, seed, settings, cluster, train, sim)
        print(f"seed {seed}: pretrained in {result.seconds:.0f} s; training graphs' greedy / best single device "
              f"{result.mean_greedy_ratio:.3f}")
        ranked.append((result.mean_greedy_ratio, seed, encoder, policy))
    ranked.sort(key=lambda r: r[:2])
    seeds, modules = [r[1] for r in ranked], [r[2:] for r in ranked]
    n = len(modules)
    sets = [("held-out", held), ("validation", _validation_graphs())]
    if args.confirm:
        rest = _unused_files()[1]
        sets.append(("confirmation", [load_giph_graph(rest[i]) for i in
                                      sorted(np.random.default_rng(2).permutation(len(rest))[:args.confirm])]))
    counts = ("exact", "by update")  # samples counted in the order measured, or at the end of their update
    for name, graphs in [(name, graphs) for name, graphs in sets if name in args.sets]:
        alone, together = {c: [0] * n for c in counts}, dict.fromkeys(counts, 0)
        for i, graph in enumerate(graphs):
            scratch = bench._scratch("superposition", graph, cluster, sim, settings, i)
            target = scratch.best_step_time
            needed = {c: bench._samples_to_reach(scratch, target, by_update=c != "exact") for c in counts}
            step = bench._step_time(sim, graph, cluster)
            greedy = [step(place_zero_shot(encoder, policy, graph, cluster)) for encoder, policy in modules]
            took = {c: [] for c in counts}
            for (encoder, policy), greedy_time in zip(modules, greedy, strict=True):
                tuned = finetune(encoder, policy, graph, cluster, sim,
                                 trainer=bench._search(settings, settings.finetune_lr, i))
                for c in counts:
                    took[c].append(bench._finetune_samples_to_reach(tuned, target, greedy_time, c != "exact"))
            pick = pick_pretrained(modules, graph, cluster, runtime=sim)  # equal times: the better ranked
            line = []
            for c in counts:
                chosen = None if took[c][pick] is None else took[c][pick] + n - 1
                for s in range(n):
                    alone[c][s] += bool(took[c][s] and needed[c] / took[c][s] >= 10)
                together[c] += bool(chosen and needed[c] / chosen >= 10)
                line.append(f"{c}: from scratch {needed[c]}; seeds {seeds} alone {took[c]} -> seed {seeds[pick]}: "
                            f"{chosen}")
            print(f"{name} {graph.name}: greedy {[round(g) for g in greedy]}; " + "; ".join(line), flush=True)
        for c in counts:
            print(f"{name} ({c}): >= 10x fewer samples, seeds {seeds} alone {alone[c]} of {len(graphs)}, the "
                  f"ensemble {together[c]}", flush=True)


if __name__ == "__main__":
    main()
