"""A search whose samples all failed (nothing it placed fits in memory) still checkpoints: ``place`` run again in
its run directory samples nothing more and returns the same result."""

import numpy as np

import gplace
from gplace.runtime import Simulator
from gplace.training import ReinforceTrainer
from gplace.zoo import lstm_lm, paper_cluster


class _CountingSimulator(Simulator):
    """sim-v1 counting the samples a search measures (``measure_many``; the baselines go through ``measure``)."""

    def __init__(self) -> None:
        super().__init__()
        self.samples = 0

    def measure_many(self, graph, cluster, placements):
        self.samples += len(placements)
        return super().measure_many(graph, cluster, placements)


def test_a_finished_place_whose_samples_all_failed_samples_nothing_more_when_run_again(tmp_path):
    """GPUs of 1 byte: every sample fails, the CPU baseline is returned. Run again, place() measures no sample and
    keeps metrics.jsonl and the result (it searched its whole budget again and replaced both)."""
    graph, cluster = lstm_lm(layers=1, steps=2, hidden=64, vocab=100), paper_cluster(num_gpus=2, gpu_memory=1)
    kwargs = dict(budget="4 samples", seed=0, run_dir=tmp_path, trainer=ReinforceTrainer(samples_per_update=2))
    first = gplace.place(graph, cluster, **kwargs)
    assert first.train.samples == 4 and np.all(np.isinf(first.train.sample_step_times))
    metrics = (tmp_path / "metrics.jsonl").read_text()
    runtime = _CountingSimulator()
    again = gplace.place(graph, cluster, runtime=runtime, **kwargs)
    assert runtime.samples == 0 and again.train.samples == 4
    assert again.placement.devices.tolist() == first.placement.devices.tolist()
    assert again.measurement.step_time == first.measurement.step_time
    assert (tmp_path / "metrics.jsonl").read_text() == metrics
