"""The placer contract every baseline follows: :class:`gplace.interfaces.Placer`, importable from here too."""

from __future__ import annotations

from gplace.interfaces import Placer

__all__ = ["Placer"]
