"""Placement checks pinned by hand: index D (one past the last device) is refused by name, as an
InvalidPlacementError, not an IndexError from deeper down; equal devices of different graphs are different
placements."""

from __future__ import annotations

import numpy as np
import pytest

from gplace.ir import InvalidPlacementError, Placement
from gplace.testing import chain, uniform_cluster


def test_a_device_index_equal_to_the_number_of_devices_is_refused_by_name() -> None:
    """Two devices have indices 0 and 1: op a1 on device 2 is outside the cluster; device 1 is the last valid one."""
    g, c = chain((1.0, 2.0)), uniform_cluster(2)
    Placement.for_graph(g, [0, 1]).validate(g, c)
    with pytest.raises(InvalidPlacementError, match="op 'a1' placed on device 2; cluster .* has 2 devices"):
        Placement.for_graph(g, [0, 2]).validate(g, c)
    with pytest.raises(InvalidPlacementError, match="placed on device 2"):
        Placement.for_graph(g, [2, 0]).to_names(g, c)


def test_placements_of_different_graphs_are_not_equal() -> None:
    """[0, 1] for chain (1, 2) and for chain (2, 1) (other fingerprints), and a bare [0, 1] with no graph, are three
    different placements; the same devices for the same graph are equal."""
    g, h = chain((1.0, 2.0)), chain((2.0, 1.0))
    assert g.fingerprint != h.fingerprint
    p = Placement.for_graph(g, [0, 1])
    assert p == Placement.for_graph(g, [0, 1])
    assert p != Placement.for_graph(h, [0, 1])
    assert p != Placement(np.array([0, 1]))
