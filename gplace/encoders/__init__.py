"""Encoders: group features to one state per group."""

from __future__ import annotations

from gplace.encoders.lstm import LSTMEncoder

__all__ = ["LSTMEncoder"]
