"""Defaults that several parts of gplace share, written once: the functions' signatures take them from here, and
``tests/test_shared_defaults.py`` holds the Hydra configs that must spell them out (``config.yaml``'s
``max_groups``, the objectives' micro-batches and schedule, ``place.yaml``'s ``samples``) to them.

Example:
    >>> from gplace.defaults import MAX_GROUPS, MICROBATCHES, SCHEDULE
    >>> MAX_GROUPS, MICROBATCHES, SCHEDULE
    (256, 4, '1f1b')
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_GROUPS", "MICROBATCHES", "SAMPLES", "SCHEDULE"]

MAX_GROUPS: Final = 256
"""Groups a graph is coarsened to, at most, before a policy sees it (the paper's co-location groups)."""

MICROBATCHES: Final = 4
"""Micro-batches of one mini-batch, for the pipeline objectives, simulator and real pipelined runtime."""

SCHEDULE: Final = "1f1b"
"""The pipeline schedule: ``"1f1b"`` (one forward, one backward in steady state) or ``"gpipe"``."""

SAMPLES: Final = 16
"""Placements a search without a budget measures: a policy file's samples beside its greedy placement, or a
learned search's (``gplace place``, ``gplace.place``)."""
