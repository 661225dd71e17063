"""The paper's decoder: an LSTM with content-based attention emitting one device per group (Mirhoseini et al. 2017)."""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from gplace.configurable import Configurable
from gplace.interfaces import PolicyCapabilities
from gplace.ir.errors import check_sizes
from gplace.policies.base import (
    PolicyOutput,
    Tempered,
    check_devices,
    check_inputs,
    check_num_samples,
    gumbel_noise,
    masked_log_softmax,
    score,
)

_Choose = Callable[[int, torch.Tensor], torch.Tensor]

RECOMPUTE_ABOVE_BYTES = 2 * 2**30
"""Attention activations (summed over the decoding steps) above which they are recomputed in the backward pass."""

log = logging.getLogger(__name__)


_warned_about_glibcs_heap = False


def _warn_about_glibcs_heap(groups: int, samples: int) -> None:
    """Once a process: on Linux's CPU, glibc's heap holds each step's freed (K, G, A) block (13.5 GB resident for a
    1,024-group pass that autograd keeps 0.3 GB of; benchmarks/seq2seq_memory.md)."""
    global _warned_about_glibcs_heap
    if not _warned_about_glibcs_heap:
        _warned_about_glibcs_heap = True
        log.warning("the seq2seq policy recomputes its attention (%d groups x %d samples): on the CPU, glibc's heap "
                    "may keep gigabytes of the freed blocks; set MALLOC_MMAP_THRESHOLD_=65536 in the environment "
                    "before Python starts to give them back (benchmarks/seq2seq_memory.md)", groups, samples)


class Seq2SeqPolicy(Tempered, Configurable, nn.Module):
    """Decodes a device for each group in turn, attending over the encoder states (Bahdanau attention).

    The input at step ``t`` is the embedding of the device chosen at ``t - 1`` (a start token at ``t = 0``)
    next to the attention context computed from the previous decoder state; the logits come from the new
    decoder state and that context. Logits are divided by :attr:`temperature` and devices a group may not use
    (``allowed`` false) get probability zero.

    Memory: each decoding step's attention keeps a (K, G, A) tensor for the backward pass, K x G^2 x A floats in
    all (35 GB for 16 samples of 2,048 groups, measured on an H200). Where that would pass
    :data:`RECOMPUTE_ABOVE_BYTES` (with 16 samples and the default sizes: above 512 groups), the attention is
    recomputed in the backward pass instead (``torch.utils.checkpoint``: the same gradients, 0.76 GB and 1.9x
    the time at 2,048 groups; ``benchmarks/seq2seq_memory.md``).

    Args:
        num_devices: number of devices D.
        hidden_size: decoder LSTM size (default: 256).
        attention_size: size of the attention's hidden layer (default: 128).
        state_size: size S of the encoder states (default: ``hidden_size``).
        device_embedding: size of the previous-device embedding (default: 32).

    Shapes:
        states (G, S) float, allowed (G, D) bool; devices (K, G) int64; log_prob and entropy (K,).
    """

    def __init__(self, num_devices: int, hidden_size: int = 256, attention_size: int = 128, *,
                 state_size: int | None = None, device_embedding: int = 32) -> None:
        super().__init__()
        check_sizes("Seq2SeqPolicy", num_devices=num_devices, hidden_size=hidden_size, attention_size=attention_size,
                    device_embedding=device_embedding, **({} if state_size is None else {"state_size": state_size}))
        state_size = hidden_size if state_size is None else state_size
        self.num_devices, self.state_size = num_devices, state_size
        self.device_embedding = nn.Embedding(num_devices + 1, device_embedding)  # index D is the start token
        self.init_state = nn.Linear(state_size, hidden_size)
        self.cell = nn.LSTMCell(device_embedding + state_size, hidden_size)
        self.attn_keys = nn.Linear(state_size, attention_size, bias=False)
        self.attn_query = nn.Linear(hidden_size, attention_size)
        self.attn_score = nn.Linear(attention_size, 1, bias=False)
        self.out = nn.Linear(hidden_size + state_size, num_devices)

    @property
    def capabilities(self) -> PolicyCapabilities:
        """Built for ``num_devices`` devices; reads only the states and the mask."""
        return PolicyCapabilities(num_devices=self.num_devices)

    # ------------------------------------------------------------------ public entry points
    def sample(self, states: torch.Tensor, allowed: torch.Tensor, num_samples: int,
               generator: torch.Generator | None = None) -> PolicyOutput:
        """Sample ``num_samples`` device sequences, decoded together as one batch.

        Shapes:
            states (G, S), allowed (G, D) bool; returns devices (K, G), log_prob (K,), entropy (K,).
        """
        self._check(states, allowed)
        check_num_samples(num_samples)

        # all steps' noise in one draw (the same values as a draw per step): one copy to a GPU, not one per step
        noise = gumbel_noise((states.shape[0], num_samples, self.num_devices), states, generator)
        return self._decode(states, allowed, num_samples, lambda t, log_p: (log_p.detach() + noise[t]).argmax(-1))

    def greedy(self, states: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """The most likely device at each step (argmax decoding).

        Shapes:
            states (G, S), allowed (G, D) bool; returns (G,) int64.
        """
        self._check(states, allowed)
        with torch.no_grad():
            out = self._decode(states, allowed, 1, lambda _, log_p: log_p.argmax(-1))
        return out.devices[0]

    def evaluate(self, states: torch.Tensor, allowed: torch.Tensor, devices: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probability and entropy of given device sequences (teacher forcing).

        Raises:
            ValueError: a sequence has the wrong length, or uses a device out of range or not allowed.

        Shapes:
            states (G, S), allowed (G, D) bool, devices (K, G) int; returns log_prob (K,), entropy (K,).
        """
        self._check(states, allowed)
        devices = check_devices(devices, allowed)
        out = self._decode(states, allowed, devices.shape[0], lambda t, _: devices[:, t])
        return out.log_prob, out.entropy

    # ------------------------------------------------------------------ decoding
    def _check(self, states: torch.Tensor, allowed: torch.Tensor) -> None:
        check_inputs(states, allowed, self.num_devices, self.state_size, self)

    def _decode(self, states: torch.Tensor, allowed: torch.Tensor, k: int, choose: _Choose) -> PolicyOutput:
        """Run the decoder for ``k`` sequences; ``choose(t, log_p (k, D))`` picks step ``t``'s devices."""
        keys = self.attn_keys(states)
        h = torch.tanh(self.init_state(states.mean(0))).expand(k, -1).contiguous()
        c = torch.zeros_like(h)
        prev = torch.full((k,), self.num_devices, dtype=torch.int64, device=states.device)
        log_ps, chosen = [], []
        attend = self._attention(k, keys)
        for t in range(states.shape[0]):
            context = attend(keys, states, h)
            h, c = self.cell(torch.cat([self.device_embedding(prev), context], -1), (h, c))
            log_p = masked_log_softmax(self.out(torch.cat([h, context], -1)), allowed[t], self.temperature)
            prev = choose(t, log_p)
            log_ps.append(log_p)
            chosen.append(prev)
        if not chosen:
            empty = states.new_zeros(k)
            return PolicyOutput(torch.zeros(k, 0, dtype=torch.int64, device=states.device), empty, empty)
        return score(torch.stack(log_ps, 1), torch.stack(chosen, 1), allowed)

    def _attention(self, k: int, keys: torch.Tensor) -> Callable[..., torch.Tensor]:
        """:meth:`_attend`, recomputed in the backward pass where keeping every step's (K, G, A) tensor for it
        would pass :data:`RECOMPUTE_ABOVE_BYTES`. Shapes: keys (G, A)."""
        kept = k * keys.shape[0] ** 2 * keys.shape[1] * keys.element_size()
        if torch.is_grad_enabled() and kept > RECOMPUTE_ABOVE_BYTES:
            if keys.device.type == "cpu" and sys.platform == "linux" and "MALLOC_MMAP_THRESHOLD_" not in os.environ:
                _warn_about_glibcs_heap(keys.shape[0], k)
            return functools.partial(checkpoint, self._attend, use_reentrant=False)
        return self._attend

    def _attend(self, keys: torch.Tensor, states: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """Attention context ``sum_i softmax(v . tanh(W s_i + U h)) s_i``. Shapes: keys (G, A), h (K, H) -> (K, S)."""
        scores = torch.tanh(keys.unsqueeze(0) + self.attn_query(h).unsqueeze(1)) @ self.attn_score.weight[0]
        return torch.softmax(scores, -1) @ states
