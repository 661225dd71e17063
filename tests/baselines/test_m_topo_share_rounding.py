"""m-TOPO's "load reached the even share" allows for float rounding (probe of 2026-12-06): ten 0.1 s ops on two
equal devices were split 6/4 (0.5 against a share of 0.5000000000000001), and on speeds 1 and 3 the fast device
took 7 of 8 ops (6 x 1/3 = 1.9999999999999998 against 2.0): 20 % and 17 % slower than the even split."""

from __future__ import annotations

import pytest

from gplace.baselines import MTopo
from gplace.ir import Cluster, Device
from gplace.runtime import Simulator
from gplace.testing import chain, fork_join, uniform_cluster


def test_equal_devices_take_half_of_ops_whose_costs_do_not_sum_exactly():
    assert MTopo().place(chain((0.1,) * 10), uniform_cluster(2)).devices.tolist() == [0] * 5 + [1] * 5
    graph, cluster = fork_join(10, cost=0.1, nbytes=0), uniform_cluster(2)
    assert Simulator().measure(graph, cluster, MTopo().place(graph, cluster)).step_time == pytest.approx(0.5)


def test_a_three_times_faster_device_takes_three_quarters_of_the_work():
    graph = fork_join(8, cost=1.0, nbytes=0)
    cluster = Cluster.build([Device("/GPU:0", "gpu", 1.0), Device("/GPU:1", "gpu", 3.0)], default_bandwidth=1e9)
    placement = MTopo().place(graph, cluster)
    assert Simulator().measure(graph, cluster, placement).step_time == pytest.approx(2.0)
