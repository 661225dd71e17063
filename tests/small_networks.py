"""Every built-in encoder and policy at a small size (width 32), by name: one place for the tests that run them
all (conformance on the CPU, the same on a GPU)."""

from __future__ import annotations

from gplace.encoders import GNNEncoder, LSTMEncoder
from gplace.policies import (
    DeviceAwarePolicy,
    GDPPolicy,
    ListSchedulingPolicy,
    MLPPolicy,
    Seq2SeqPolicy,
    SuperpositionPolicy,
)

ENCODERS = {
    "lstm": lambda: LSTMEncoder(hidden_size=32),
    "sage": lambda: GNNEncoder("sage", hidden_size=32),
    "gat": lambda: GNNEncoder("gat", hidden_size=32),
    "gin": lambda: GNNEncoder("gin", hidden_size=32),
}
"""Name -> a new encoder with 32-wide states."""

POLICIES = {
    "seq2seq": lambda: Seq2SeqPolicy(3, hidden_size=32, state_size=32),
    "mlp": lambda: MLPPolicy(3, hidden_size=32, state_size=32),
    "gdp": lambda: GDPPolicy(3, hidden_size=32, state_size=32, segment_size=8),
    "superposition": lambda: SuperpositionPolicy(3, hidden_size=32, state_size=32, segment_size=8),
    "device_aware": lambda: DeviceAwarePolicy(32, state_size=32),
    "list_scheduling": lambda: ListSchedulingPolicy(32, state_size=32),
}
"""Name -> a new policy for 32-wide states (the fixed-size ones for 3 devices)."""
