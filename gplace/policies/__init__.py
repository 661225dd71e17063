"""Policies: encoder states to a distribution over devices per group."""

from __future__ import annotations

from gplace.policies.base import IndependentPolicy, PolicyOutput
from gplace.policies.device_aware import DeviceAwarePolicy
from gplace.policies.gdp import GDPPolicy
from gplace.policies.list_scheduling import ListSchedulingPolicy
from gplace.policies.mlp import MLPPolicy
from gplace.policies.seq2seq import Seq2SeqPolicy
from gplace.policies.superposition import SuperpositionPolicy

__all__ = [
    "DeviceAwarePolicy", "GDPPolicy", "IndependentPolicy", "ListSchedulingPolicy", "MLPPolicy", "PolicyOutput",
    "Seq2SeqPolicy", "SuperpositionPolicy",
]
