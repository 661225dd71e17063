"""The bench's plots: the learning curve marks updates whose samples all failed (their mean is inf: the line broke
there with nothing to say why) and counts updates in whole numbers; the throughput panels say why one is empty."""

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


def test_throughput_panels_cut_long_titles_and_say_why_one_is_empty():
    """A graph one GPU cannot hold had a blank panel, and a long graph name ran into the next panel's title."""
    from gplace.baselines import SingleDevice
    from gplace.baselines.pipeline import IdealDPPartitioner
    from gplace.bench.pipeline import run_pipeline_case, throughput_figure
    from gplace.ir import Edge, Op, OpGraph
    from gplace.testing import chain, uniform_cluster

    placers = {"single_gpu": SingleDevice(kind="gpu"), "ideal_dp": IdealDPPartitioner()}
    long = "a_graph_name_far_too_long_for_one_panel"
    records = run_pipeline_case(chain((1.0,) * 4, nbytes=0), uniform_cluster(2), placers, microbatches=[4],
                                schedules=["1f1b"], label=long)
    weights = OpGraph.from_ops([Op(f"a{i}", "MatMul", 1.0, persistent_memory=60) for i in range(4)],
                               [Edge(f"a{i}", f"a{i + 1}") for i in range(3)], name="weights")
    records += run_pipeline_case(weights, uniform_cluster(2, memory=150), placers, microbatches=[4],
                                 schedules=["1f1b"], label="too_big")  # 240 B of weights: one GPU fails
    axes = throughput_figure(records).axes
    assert [ax.get_title() for ax in axes[:2]] == [long[:23] + "…", "too_big"]
    assert not axes[0].texts and "no 1f1b M=4 speed-up:\none GPU cannot hold it" in axes[1].texts[0].get_text()


def test_a_plot_replaces_a_link_at_its_path_and_leaves_its_target_alone(tmp_path):
    """savefig wrote through a symbolic link at the plot's path (a file of the user's became a PNG), and a bench
    killed while drawing left half a PNG where the plot before was."""
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    plot = tmp_path / "c.png"
    plot.symlink_to(notes)
    plot_learning_curve(_history([1.5, 1.0]), plot)
    assert notes.read_text() == "my notes"
    assert not plot.is_symlink() and plot.read_bytes().startswith(b"\x89PNG")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.png", "notes.txt"]
