"""A learned search whose trained policy's greedy placement beat every sample returned it, but its checkpoint kept
the best sample only: resumed with a larger budget, the search ended behind what that run directory had already
returned (17.27 against 16.60 s, falling back to one device). The greedy placement is kept apart from the best
sample, so the resumed search imitates and charts what an uninterrupted one would."""

from __future__ import annotations

import torch

import gplace
from gplace.runtime import Simulator
from gplace.testing import cpu_gpu_cluster, random_dag


def test_a_resumed_search_starts_from_the_greedy_placement_it_returned(tmp_path):
    graph, cluster = random_dag(16, edge_prob=0.2, seed=102), cpu_gpu_cluster(3)
    first = gplace.place(graph, cluster, method="gdp", budget="8 samples", seed=0, run_dir=tmp_path)
    assert first.train.best_sample is None  # the greedy placement won: the case this test is about
    saved = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert saved["returned_devices"] == first.placement.devices.tolist()
    assert saved["best_devices"] != saved["returned_devices"]  # the best sample: what the search imitates and charts
    again = gplace.place(graph, cluster, method="gdp", budget="16 samples", seed=0, run_dir=tmp_path)
    assert again.measurement.step_time <= first.measurement.step_time
    assert Simulator().measure(graph, cluster, again.placement).step_time == again.measurement.step_time
