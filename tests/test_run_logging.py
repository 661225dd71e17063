"""A run's outcome in its logs: ``place()``'s config and results through its logger, the bench's failures and
learned results in its log, and the command line's result line in its log files."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

import gplace
from gplace.baselines import HEFT, SingleDevice
from gplace.bench.runner import run_baselines, run_learned
from gplace.ir.cluster import Cluster, Device
from gplace.ir.errors import format_seconds
from gplace.loggers import JsonlLogger
from gplace.runtime import Simulator
from gplace.testing import layered_dag, random_dag, uniform_cluster
from gplace.training import ReinforceTrainer

TINY = {"budget": "4 samples", "seed": 0, "max_groups": 4, "trainer": ReinforceTrainer(samples_per_update=2)}


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _tight(fraction: float):
    """A graph and two equal devices each holding ``fraction`` of its bytes (0.7: HEFT fits, no single device)."""
    graph = layered_dag(40, width=10, seed=0)
    total = int(graph.persistent_memory.sum() + graph.output_bytes.sum())
    devices = [Device(f"/GPU:{i}", "gpu", 1.0, int(total * fraction)) for i in range(2)]
    return graph, Cluster.build(devices, default_bandwidth=1e9, name="tight")


@pytest.mark.parametrize("method", ["learned", "heft"])
def test_place_logs_its_config_and_results_once(tmp_path, method):
    """Only the command line logged a config and results: ``place(..., logger=...)`` left the run without either."""
    graph, cluster = random_dag(12, seed=1), uniform_cluster(2)
    path = tmp_path / "log.jsonl"
    settings = TINY if method == "learned" else {"seed": 0}
    report = gplace.place(graph, cluster, method=method, logger=JsonlLogger(path), **settings)
    records = _records(path)
    [config] = [r["config"] for r in records if "config" in r]
    [results] = [r for r in records if "summary" in r]
    assert config["graph"] == graph.name and config["cluster"] == cluster.name and config["method"] == method
    assert config["runtime"] == "sim-v1" and config["seed"] == 0
    assert ("trainer" in config) == (method == "learned")
    if method == "learned":
        assert config["budget"] == {"seconds": None, "samples": 4} and config["trainer"]["samples_per_update"] == 2
    summary = results["summary"]
    assert summary["step_time"] == report.measurement.step_time and summary["speedup"] == report.speedup
    assert summary["best_single_device"] == report.best_baseline and summary["samples"] == report.train.samples
    assert {"single /GPU:0", "single /GPU:1"} <= {row["placement"] for row in results["table"]}


def test_place_logs_its_config_and_results_into_one_wandb_run(tmp_path, monkeypatch):
    """The results came after the search had finished the logger's run: they went into a second run, or none."""
    pytest.importorskip("wandb")
    from gplace.loggers import WandbLogger

    monkeypatch.setenv("WANDB_MODE", "offline")
    logger = WandbLogger(dir=str(tmp_path))
    report = gplace.place(random_dag(12, seed=1), uniform_cluster(2), logger=logger, **TINY)
    assert logger.run._is_finished
    [run] = tmp_path.rglob("offline-run-*")
    wanted = [report.graph.name.encode(), b"ReinforceTrainer",  # the config
              b"best_single_device", b"heft_step_time"]  # the results' summary
    deadline = time.monotonic() + 30  # W&B's service process writes the run record behind the finished run
    while not all(w in b"".join(p.read_bytes() for p in run.glob("run-*.wandb")) for w in wanted):
        assert time.monotonic() < deadline, "the config or the results never reached the run's one record"
        time.sleep(0.2)
    assert len(list(run.glob("run-*.wandb"))) == 1
    assert list(run.rglob("placements_*.table.json"))  # and table


def test_the_command_line_logs_its_config_and_results_once_and_its_outcome_to_its_log_file(tmp_path, capsys):
    """cli.log held none of the run's outcome (the table went to the console alone); place() now logs a config and
    results of its own, which the command line, logging its fuller ones, must not add to its run."""
    logged = _run_logged(tmp_path, "trainer.updates=2", "logger=none", "logger._target_=gplace.loggers.JsonlLogger",
                         f"+logger.path={tmp_path / 'log.jsonl'}")
    records = _records(tmp_path / "log.jsonl")
    [config] = [r["config"] for r in records if "config" in r]
    [results] = [r for r in records if "summary" in r]
    assert config["encoder"]["_target_"] and "policy" in results["files"]  # the command line's own
    assert "with learned: step time " in logged and "best single device /" in logged and "samples in" in logged
    assert f"wrote {tmp_path / 'run' / 'placement.json'}" in logged
    assert "with learned: step time" not in capsys.readouterr().out  # the console has its table


def test_no_single_device_that_fits_is_said_not_printed_as_an_infinite_speedup(capsys):
    """Every single device out of memory printed "speed-up over the best single device: infx"."""
    from gplace.cli import _outcome, _print_table

    graph, cluster = _tight(0.7)
    report = gplace.place(graph, cluster, method="heft")
    assert not any(m.ok for m in report.baselines.values())
    _print_table(report, "run")
    printed = " ".join(capsys.readouterr().out.split())
    assert "no single device fits" in printed and "infx" not in printed
    assert "no single device fits" in _outcome(report)
    assert "inf" not in _outcome(report)  # HEFT fits: its step time is finite


def test_the_bench_warns_of_each_failed_baseline_naming_it_and_why(caplog):
    """HEFT raising logged nothing; a single device out of memory logged "inf s" at INFO without the reason."""
    graph, cluster = _tight(0.3)
    with caplog.at_level(logging.INFO, logger="gplace.bench"):
        records, _ = run_baselines(graph, cluster, {"single": SingleDevice(device=0), "heft": HEFT()}, Simulator(),
                                   0.0)
    assert [r.failed for r in records] == [True, True]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2 and all(m.startswith(f"{graph.name} on tight: baseline ") for m in warned), warned
    assert "'single' failed" in warned[0] and "out of memory" in warned[0]
    assert "'heft' failed: PlacementInfeasibleError: out of memory" in warned[1]
    assert not any("inf s" in r.getMessage() for r in caplog.records)


def test_the_bench_logs_a_learned_searchs_start_result_and_failure_by_name(caplog):
    """A learned search logged neither its result nor its failure, and its start did not name it."""
    graph, cluster = random_dag(12, seed=1), uniform_cluster(2)
    tight_graph, tight = _tight(0.3)
    with caplog.at_level(logging.INFO, logger="gplace.bench"):
        record, _ = run_learned(graph, cluster, "seq2seq_warm", lambda d: gplace.place(graph, cluster, **TINY), 0.0)
        failed, _ = run_learned(tight_graph, tight, "seq2seq",
                                lambda d: gplace.place(tight_graph, tight, **TINY), 0.0)
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "gplace.bench.runner"]
    assert (logging.INFO, f"{graph.name} on 2xgpu: learned search 'seq2seq_warm' started") in said
    assert (logging.INFO, f"{graph.name} on 2xgpu: learned search 'seq2seq_warm': {format_seconds(record.step_time)} "
                          f"({record.samples} samples in {record.search_seconds:.1f} s)") in said
    assert failed.failed and (logging.INFO, f"{tight_graph.name} on tight: learned search 'seq2seq' started") in said
    assert any(level == logging.WARNING and m.startswith(f"{tight_graph.name} on tight: learned search 'seq2seq' "
                                                         "failed: NothingFitError") for level, m in said), said
    assert failed.samples > 0  # the NothingFitError (a PlacementInfeasibleError) carries what the search measured


def test_a_learned_search_breaking_its_contract_stops_the_bench_unrecorded():
    """A policy's ContractError (a ValueError) was recorded as a failed search, which a resumed bench keeps: the
    search stayed failed after its policy was mended."""
    from gplace.placer import ContractError

    def broken(run_dir):
        raise ContractError("policy Broken's sample must give log-probabilities (<= 0)")

    graph, cluster = random_dag(12, seed=1), uniform_cluster(2)
    with pytest.raises(ContractError, match="policy Broken's sample"):
        run_learned(graph, cluster, "broken", broken, 0.0)


def test_the_held_logger_forwards_the_loggers_own_attributes(tmp_path) -> None:
    """place() hands its trainer the logger wrapped (HeldOpen): a trainer reading the logger's own attributes (a
    WandbLogger's run, a JSONL logger's path) got AttributeError."""
    from gplace.loggers import HeldOpen, JsonlLogger

    held = HeldOpen(JsonlLogger(tmp_path / "m.jsonl"))
    assert held.path == tmp_path / "m.jsonl"
    with pytest.raises(AttributeError):
        held.no_such_attribute  # noqa: B018


def test_a_pipeline_job_logs_its_mini_batch_time(tmp_path: Path) -> None:
    """cli.log called a pipeline runtime's time a step time, where the job's table says mini-batch time."""
    logged = _run_logged(tmp_path, "trainer.updates=1", "logger=none", "objective=pipeline", "objective.microbatches=2")
    assert "with learned: mini-batch time " in logged and "step time" not in logged


def _run_logged(tmp_path: Path, *overrides: str) -> str:
    """Run the command line's job on a tiny lstm_lm with ``overrides``, logging to ``tmp_path/cli.log``; its text."""
    from hydra import compose, initialize_config_module

    from gplace.cli import run

    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "graph.steps=2", "graph.hidden=64", "graph.vocab=100", "trainer.progress=false",
            "trainer.samples_per_update=2", "max_groups=8", *overrides])
    handler = logging.FileHandler(tmp_path / "cli.log")
    logging.getLogger().addHandler(handler)
    try:
        run(cfg, tmp_path / "run")
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    return (tmp_path / "cli.log").read_text()


def test_gplace_places_line_names_the_speed_up_as_cli_log_does():
    """It said "0.97x the best single device", read as 97 % of its time, for a placement 3 % slower."""
    from gplace.cli import _versus_one

    report = gplace.place(random_dag(12, seed=1), uniform_cluster(2), method="round_robin")
    assert _versus_one(report) == f"speed-up over the best single device: {report.speedup:.2f}x"
