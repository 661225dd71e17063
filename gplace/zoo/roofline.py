"""A roofline cost for the built-in graphs: time = max(FLOPs / peak, bytes / bandwidth) + launch overhead.

The reference devices are the paper's: an NVIDIA K80 (one die) and an 18-core Haswell CPU. Figures are
effective rates, not datasheet peaks.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceModel:
    """Effective throughput of one device kind."""

    flops: float
    """FLOP/s."""
    bandwidth: float
    """Memory bytes/s."""
    launch: float
    """Seconds of fixed overhead per op."""

    def time(self, flops: float, nbytes: float) -> float:
        """Seconds for an op doing ``flops`` and touching ``nbytes`` of memory."""
        return max(flops / self.flops, nbytes / self.bandwidth) + self.launch


K80 = DeviceModel(flops=2.8e12, bandwidth=160e9, launch=8e-6)
HASWELL = DeviceModel(flops=0.6e12, bandwidth=50e9, launch=2e-6)
REFERENCE = {"gpu": K80, "cpu": HASWELL}


def kind_costs(flops: float, nbytes: float) -> dict[str, float]:
    """``{"gpu": seconds, "cpu": seconds}`` on the reference devices."""
    return {kind: model.time(flops, nbytes) for kind, model in REFERENCE.items()}
