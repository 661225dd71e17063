"""The bench's learning curve marks updates whose samples all failed (their mean is inf: the line broke there with
nothing to say why) and counts updates in whole numbers."""

from __future__ import annotations

import math

import numpy as np

from gplace.bench.plots import learning_curve, plot_learning_curve


def _history(mean: list[float]) -> list[dict[str, float]]:
    return [{"update": u, "charts/best_step_time": 1.0, "rollout/mean_step_time": m} for u, m in enumerate(mean)]


def test_an_update_whose_samples_all_failed_is_marked(tmp_path):
    fig = learning_curve(_history([1.5, 1.2, math.inf, 1.1]), baseline=0.9)
    ax = fig.axes[0]
    marks = [line for line in ax.get_lines() if line.get_label() == "every sample failed"]
    assert len(marks) == 1 and marks[0].get_xdata().tolist() == [2]
    assert "batch mean (samples that ran)" in [t.get_text() for t in ax.get_legend().get_texts()]
    ticks = ax.get_xticks()
    assert np.allclose(ticks, np.round(ticks))  # 0.5-update ticks before
    assert plot_learning_curve(_history([1.5, math.inf]), tmp_path / "c.png").stat().st_size > 0


def test_nothing_is_marked_where_every_update_ran():
    ax = learning_curve(_history([1.5, 1.2])).axes[0]
    assert all(line.get_label() != "every sample failed" for line in ax.get_lines())
