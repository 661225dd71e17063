"""Policies: encoder states to a distribution over devices per group."""

from __future__ import annotations

from gplace.policies.seq2seq import PolicyOutput, Seq2SeqPolicy

__all__ = ["PolicyOutput", "Seq2SeqPolicy"]
