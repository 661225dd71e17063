"""Errors raised when a graph, cluster or placement is malformed."""

from __future__ import annotations


class GraphError(ValueError):
    """An op graph or cluster is malformed; the message names the op, edge or field."""


class InvalidPlacementError(ValueError):
    """A placement does not fit its graph or cluster; the message names the op and device."""


class UnsupportedGraphError(ValueError):
    """A graph cannot be imported; the message names the node and the reason."""
