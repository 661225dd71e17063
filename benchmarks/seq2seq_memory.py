"""Memory of the paper's seq2seq policy on many groups: its attention kept for the backward pass, or recomputed.

Run (on a GPU for the peak memory; ``PYTHONPATH=.``)::

    python benchmarks/seq2seq_memory.py --out benchmarks/seq2seq_memory.md

For each group count G, one REINFORCE-sized pass of :class:`~gplace.policies.Seq2SeqPolicy` (default sizes,
5 devices): sample K = 16 placements of G random encoder states, then backward of their summed log-probability,
once keeping each step's (K, G, A) attention tensor (``RECOMPUTE_ABOVE_BYTES`` = infinity, the behaviour before)
and once recomputing it (threshold 0). Reports the bytes autograd keeps (distinct tensors, via
``saved_tensors_hooks``), the device's peak allocated memory (CUDA only), and the seconds of the pass.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from report_notes import emit_report

import gplace.policies.seq2seq as seq2seq
from gplace.policies import Seq2SeqPolicy

K, D = 16, 5


def one_pass(groups: int, threshold: float, device: str) -> tuple[float, float, float]:
    """Kept GB, peak GB (CUDA; nan on the CPU) and seconds of one sample + backward."""
    seq2seq.RECOMPUTE_ABOVE_BYTES = threshold
    torch.manual_seed(0)
    policy = Seq2SeqPolicy(D).to(device)
    states = torch.randn(groups, policy.state_size, device=device, requires_grad=True)
    allowed = torch.ones(groups, D, dtype=torch.bool, device=device)
    kept: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = policy.sample(states, allowed, K, generator=torch.Generator().manual_seed(0))
    out.log_prob.sum().backward()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated() / 1e9 if cuda else float("nan")
    return sum(kept.values()) / 1e9, peak, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[256, 1024, 2048])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "CPU"
    lines = ["# Seq2seq policy memory: attention kept or recomputed", "",
             "Made by `python benchmarks/seq2seq_memory.py` (see its docstring).", "",
             f"- device: {name}; torch {torch.__version__}; K = {K} samples, {D} devices, default sizes (A = 128)",
             "", "| groups | attention | kept by autograd GB | peak allocated GB | seconds |",
             "|---:|---|---:|---:|---:|"]
    one_pass(64, float("inf"), args.device)  # warm-up (kernels, cuDNN)
    for groups in args.groups:
        for label, threshold in (("kept", float("inf")), ("recomputed", 0.0)):
            kept, peak, seconds = one_pass(groups, threshold, args.device)
            lines.append(f"| {groups} | {label} | {kept:.2f} | {peak:.2f} | {seconds:.2f} |")
            print(lines[-1], flush=True)
    emit_report(lines, args.out)


if __name__ == "__main__":
    main()
