"""Cluster.transfer_time refuses a negative or NaN byte count (it returned a negative or NaN time)."""

import math

import pytest

from gplace.testing import uniform_cluster


@pytest.mark.parametrize("nbytes", [-10, -0.5, float("nan"), float("-inf")])
def test_transfer_time_refuses_negative_or_nan_nbytes(nbytes):
    with pytest.raises(ValueError, match="nbytes"):
        uniform_cluster(2).transfer_time(nbytes, 0, 1)


def test_transfer_time_accepts_zero_and_positive():
    c = uniform_cluster(2)
    assert c.transfer_time(0, 0, 1) >= 0
    assert c.transfer_time(1e6, 0, 1) > c.transfer_time(0, 0, 1)
    assert math.isinf(c.transfer_time(float("inf"), 0, 1))
    assert c.transfer_time(10, 1, 1) == 0.0
