"""Runtimes measure placements: the contract, the ``sim-v1`` simulator and its trace writer."""

from gplace.runtime.base import Measurement, Runtime
from gplace.runtime.simulator import Schedule, Simulator, schedule
from gplace.runtime.trace import write_chrome_trace

__all__ = ["Measurement", "Runtime", "Schedule", "Simulator", "schedule", "write_chrome_trace"]
