"""Training the placement networks on a GPU against the CPU: seconds per update of the same search.

Run where a GPU is lent (``PYTHONPATH=.``; no Hydra needed)::

    python benchmarks/gpu_training.py --out benchmarks/gpu_training.md

For each encoder x policy pair (the paper's LSTM + seq2seq, GDP's GraphSAGE + GDP policy and superposition
network, the list-scheduling policy), runs ``--updates`` updates of :class:`~gplace.training.ReinforceTrainer`
(``--samples`` placements each, measured by ``sim-v1``) on the paper's 4-GPU cluster for two graphs: the built-in
LSTM language model (``gplace.zoo.lstm_lm``, 274 ops, at most 256 groups) and an unrolled 4-layer GNMT training
step (``gplace.zoo.unrolled_gnmt``, 20 + 20 steps, at most 2,048 groups: GDP's scale; without the seq2seq policy,
whose decoding is sequential over the groups with an attention over all of them at each step), once
with the networks on the CPU and once on the GPU (``encoder.to("cuda")``, ``policy.to("cuda")``), from the same
initial weights and seed. Reports the median seconds per update after the first (which pays for cuDNN and kernel
set-up), the ratio, and each run's best step time. The CPU runs use ``--threads`` torch threads (default 1, the
CLI's ``threads``: small networks on many threads spin against each other, ``benchmarks/parallel.md``). Without CUDA
it runs the CPU column only (to check the script).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from report_notes import emit_report

from gplace.encoders import GNNEncoder, LSTMEncoder
from gplace.loggers import Logger
from gplace.placer import PolicyPlacer
from gplace.policies import GDPPolicy, ListSchedulingPolicy, Seq2SeqPolicy, SuperpositionPolicy
from gplace.runtime import Simulator
from gplace.training import ReinforceTrainer
from gplace.zoo import lstm_lm, paper_cluster
from gplace.zoo.gnmt import unrolled_gnmt

PAIRS = {
    "lstm + seq2seq (paper)": (lambda: LSTMEncoder(), lambda d: Seq2SeqPolicy(d)),
    "sage + gdp": (lambda: GNNEncoder("sage"), lambda d: GDPPolicy(d)),
    "sage + superposition": (lambda: GNNEncoder("sage"), lambda d: SuperpositionPolicy(d)),
    "sage + list_scheduling": (lambda: GNNEncoder("sage"), lambda d: ListSchedulingPolicy()),
}


class UpdateClock(Logger):
    """Records the wall time at which each update is logged."""

    def __init__(self) -> None:
        self.stamps = [time.perf_counter()]

    def log_scalars(self, step: int, metrics: dict[str, float]) -> None:
        self.stamps.append(time.perf_counter())


def timed_search(pair: str, device: str, graph, cluster, groups: int, args) -> tuple[float, float]:
    """Median seconds per update (after the first) and the best step time of one search."""
    make_encoder, make_policy = PAIRS[pair]
    torch.manual_seed(0)
    encoder, policy = make_encoder().to(device), make_policy(cluster.num_devices).to(device)
    placer = PolicyPlacer(graph, cluster, encoder, policy, max_groups=groups)
    clock = UpdateClock()
    result = ReinforceTrainer(updates=args.updates, samples_per_update=args.samples, progress=False).fit(
        placer, Simulator(), graph, cluster, logger=clock)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    steps = [b - a for a, b in zip(clock.stamps[1:], clock.stamps[2:], strict=False)]
    return statistics.median(steps), result.best_step_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=8)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cluster = paper_cluster(4)
    cases = [(lstm_lm(), 256, list(PAIRS)),
             (unrolled_gnmt(layers=4, src_len=20, tgt_len=20), 2048, [p for p in PAIRS if "seq2seq" not in p])]
    gpu = torch.cuda.is_available()
    name = torch.cuda.get_device_name(0) if gpu else "none"
    lines = ["# Training the placement networks on a GPU", "",
             "Made by `python benchmarks/gpu_training.py` (see its docstring).", "",
             f"- GPU: {name}; torch {torch.__version__}; CPU threads for torch: {torch.get_num_threads()}",
             f"- cluster: {cluster.name}; ReinforceTrainer, {args.updates} updates of {args.samples} samples, sim-v1",
             "", "| graph (ops, groups at most) | encoder + policy | CPU s/update | GPU s/update | CPU / GPU | "
             "best step ms (CPU) | best step ms (GPU) |", "|---|---|---:|---:|---:|---:|---:|"]
    for graph, groups, pairs in cases:
        for pair in pairs:
            cpu_s, cpu_best = timed_search(pair, "cpu", graph, cluster, groups, args)
            gpu_s, gpu_best = timed_search(pair, "cuda", graph, cluster, groups, args) if gpu else (float("nan"),) * 2
            lines.append(f"| {graph.name} ({graph.num_ops}, {groups}) | {pair} | {cpu_s:.3f} | {gpu_s:.3f} | "
                         f"{cpu_s / gpu_s:.2f} | {cpu_best * 1e3:.2f} | {gpu_best * 1e3:.2f} |")
            print(lines[-1], flush=True)
    emit_report(lines, args.out)


if __name__ == "__main__":
    main()
