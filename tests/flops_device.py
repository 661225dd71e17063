"""A reference device kind whose seconds are an op's FLOPs, to read the cost model's counts off ``kind_cost``."""

from __future__ import annotations

import math

from gplace.zoo import roofline


def add_flops_kind(monkeypatch) -> str:
    """Add a device kind "flops" whose seconds are the op's FLOPs (no bandwidth limit, no launch), for this test
    (``monkeypatch``); its name."""
    monkeypatch.setitem(roofline.REFERENCE, "flops", roofline.DeviceModel(flops=1.0, bandwidth=math.inf, launch=0.0))
    return "flops"
