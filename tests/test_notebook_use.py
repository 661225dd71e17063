"""Notebook use: a logger kept in one cell serves searches run again in another; reprs of large objects stay short."""

import gplace
from gplace.loggers import WandbLogger
from gplace.testing import cpu_gpu_cluster, layered_dag
from gplace.training import ReinforceTrainer


def test_a_wandb_logger_given_to_a_second_search_logs_into_a_new_run(tmp_path, monkeypatch):
    """A search finishes its WandbLogger's run; the same logger given to another search (a cell run again) starts a
    new run for it (its scalars went to the finished run: wandb's UsageError ``Run ... is finished``)."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    graph, cluster = layered_dag(30, width=6, seed=1), cpu_gpu_cluster(2)
    logger = WandbLogger(mode="offline", dir=str(tmp_path / "wb"))
    gplace.place(graph, cluster, trainer=ReinforceTrainer(updates=2), logger=logger, run_dir=tmp_path / "a")
    first = logger.run
    report = gplace.place(graph, cluster, trainer=ReinforceTrainer(updates=2), logger=logger, run_dir=tmp_path / "b")
    assert logger.run.id != first.id
    assert [len(list((tmp_path / "wb" / "wandb").glob(f"offline-run-*-{run.id}/run-{run.id}.wandb")))
            for run in (first, logger.run)] == [1, 1]
    assert (tmp_path / "b" / "placement.json").is_file() and report.train.samples > 0
    logger.finish()
    logger.finish()  # finishing again is a no-op


def test_an_op_graphs_repr_is_one_short_line():
    """``repr(graph)`` names the graph, its sizes and fingerprint, not every op (GNMT's was 2.1 MB)."""
    graph = layered_dag(2000, width=50)
    text = repr(graph)
    assert text == (f"OpGraph(name={graph.name!r}, ops=2000, edges={graph.num_edges}, "
                    f"fingerprint={graph.fingerprint!r})")
    assert graph.op_names[5] not in text


def test_a_placement_reports_repr_summarises_it():
    """``repr(report)`` names the graph, cluster and method and gives the figures (it embedded the graph's repr)."""
    graph, cluster = layered_dag(300, width=20), cpu_gpu_cluster(2)
    report = gplace.place(graph, cluster, method="heft")
    text = repr(report)
    assert text.startswith(f"PlacementReport(graph={graph.name!r}, cluster={cluster.name!r}, method='heft', "
                           f"step_time={report.measurement.step_time:.6g}, speedup=")
    assert f"samples={report.train.samples})" in text and len(text) < 200
