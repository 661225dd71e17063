"""Weights & Biases (real, offline): results as summary, table and artifacts; no hang without a network;
one run per multirun job, grouped by sweep."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

wandb = pytest.importorskip("wandb")

import gplace  # noqa: E402
from gplace import cli  # noqa: E402
from gplace.loggers import HeldOpen, JsonlLogger, WandbLogger  # noqa: E402
from gplace.runtime import Simulator  # noqa: E402
from gplace.training import ReinforceTrainer  # noqa: E402
from gplace.zoo import lstm_lm, paper_cluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FAST = ["graph.steps=2", "graph.hidden=64", "graph.vocab=100", "trainer.updates=2", "trainer.progress=false",
        "max_groups=8"]


def _run_files(root: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(root.rglob("run-*.wandb"))]


def test_results_become_summary_table_and_artifacts(tmp_path, monkeypatch):
    """Each run's artifacts are its own (``placement:latest`` was whichever run of the project finished last) and
    the trace is typed ``trace`` (it was ``placement``)."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    (tmp_path / "placement.json").write_text("{}")
    (tmp_path / "trace.json").write_text("{}")
    (tmp_path / "policy.pt").write_bytes(b"weights")
    logger = HeldOpen(WandbLogger(dir=str(tmp_path)))
    logger.log_scalars(0, {"charts/best_step_time": 2.0})
    logger.finish()  # what a trainer does at the end of its search: held back
    rows = [{"placement": "single /GPU:0", "step_time": 3.0}, {"placement": "learned", "step_time": 1.5}]
    artifacts = logger.logger.log_results({"step_time": 1.5, "speedup": 2.0}, rows,
                                          {"placement": tmp_path / "placement.json", "policy": tmp_path / "policy.pt",
                                           "trace": tmp_path / "trace.json", "cache": tmp_path / "missing.json"})
    run_id = logger.logger.run.id
    assert dict(logger.logger.run.summary)["step_time"] == 1.5
    assert [(a.name, a.type) for a in artifacts] == [(f"placement-{run_id}", "placement"),
                                                     (f"policy-{run_id}", "model"), (f"trace-{run_id}", "trace")]
    assert [list(a.manifest.entries) for a in artifacts] == [["placement.json"], ["policy.pt"], ["trace.json"]]
    logger.close()
    [table] = tmp_path.rglob("placements_*.table.json")
    assert json.loads(table.read_text())["data"] == [["single /GPU:0", 3.0], ["learned", 1.5]]
    deadline = time.monotonic() + 20  # W&B's service process writes the run record behind the run
    while not all(b"placement.json" in r and b"policy.pt" in r for r in _run_files(tmp_path) or [b""]):
        assert time.monotonic() < deadline, "the artifacts never reached the run record"
        time.sleep(0.2)


def test_jsonl_logger_keeps_results_too(tmp_path):
    logger = JsonlLogger(tmp_path / "m.jsonl")
    logger.log_results({"step_time": float("inf")}, [{"placement": "learned"}], {"trace": tmp_path / "t.json"})
    record = json.loads((tmp_path / "m.jsonl").read_text())
    assert record["summary"] == {"step_time": None} and record["files"]["trace"].endswith("t.json")


def test_a_key_without_a_network_falls_back_to_offline_within_seconds(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # nothing listens: as with no network
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="gplace.loggers"):
        logger = WandbLogger(dir=str(tmp_path))
    assert logger.mode == "offline" and time.monotonic() - started < 30
    assert "cannot reach http://127.0.0.1:9" in caplog.text and "wandb sync" in caplog.text
    logger.finish()


def test_a_server_that_answers_but_is_not_wandb_falls_back_to_offline_too(tmp_path, monkeypatch, caplog):
    """Where something accepts the connection but W&B cannot start (a proxy, a firewall that swallows the request),
    ``wandb.init``'s error is caught: offline, with a warning. The listener is local and silent, so the test needs
    no network and behaves the same on every machine."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    threading.Thread(target=_accept_and_stay_silent, args=(listener, held), daemon=True).start()
    server = f"http://127.0.0.1:{listener.getsockname()[1]}"
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", server)
    started = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="gplace.loggers"):
            logger = WandbLogger(dir=str(tmp_path))
        assert logger.mode == "offline" and time.monotonic() - started < 60
        assert held, "W&B never connected to the listener"
        assert "online start at " + server in caplog.text and "logging offline" in caplog.text
        logger.finish()
    finally:
        listener.close()
        for connection in held:
            connection.close()


def _accept_and_stay_silent(listener: socket.socket, held: list[socket.socket]) -> None:
    """Accept every connection and never answer, until ``listener`` is closed."""
    while True:
        try:
            held.append(listener.accept()[0])
        except OSError:
            return


def test_a_multirun_logs_one_run_per_job_grouped_by_sweep(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "offline"}
    sweep = tmp_path / "sweep_42"
    proc = subprocess.run([sys.executable, "-m", "gplace", "-m", *FAST, "seed=0,1", f"hydra.sweep.dir={sweep}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = _run_files(sweep)
    assert len(records) == 2
    for i, record in enumerate(records):
        assert b"sweep_42" in record and f"seed={i}".encode() in record  # group and job name
        assert b"placement.json" in record and b"trace.json" in record and b"policy.pt" in record
    tables = [json.loads(p.read_text()) for p in sweep.rglob("placements_*.table.json")]
    assert len(tables) == 2 and all(t["data"][-1][0] == "learned" for t in tables)
    assert {row[0] for row in tables[0]["data"]} >= {"heft", "learned"}


def test_the_default_job_with_a_key_and_no_network_finishes_offline_and_says_so(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "WANDB_MODE"}
    env.update(PYTHONPATH=str(ROOT), WANDB_API_KEY="0" * 40, WANDB_BASE_URL="http://127.0.0.1:9")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "gplace", *FAST, f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "cannot reach http://127.0.0.1:9" in proc.stdout + proc.stderr
    assert list((tmp_path / "run").rglob("offline-run-*")) and time.monotonic() - started < 120


def _settled(run: Path) -> dict[Path, int]:
    """The W&B run files' modification times once they stop changing: the first job's W&B service process may
    still be flushing its own log for a moment after the job has exited (a clean-clone CI run saw it 1.2 s later)."""
    def snapshot() -> dict[Path, int]:
        return {p: p.stat().st_mtime_ns for p in run.rglob("offline-run-*/**/*") if p.is_file()}

    now, deadline = snapshot(), time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now, then = snapshot(), now
        if now == then:
            break
    return now


def test_a_refused_resume_opens_no_wandb_run(tmp_path):
    """A resume refused (another seed) opened the earlier W&B run again and overwrote its config, and Hydra's
    record of the run (.hydra/overrides.yaml) then said seed=1."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "offline"}
    run = tmp_path / "run"

    def job(*overrides: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gplace", *FAST, f"hydra.run.dir={run}", *overrides],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)

    assert job("seed=0").returncode == 0
    record = {p.name: p.read_text() for p in (run / ".hydra").iterdir()}
    assert set(record) == {"config.yaml", "hydra.yaml", "overrides.yaml"} and "- seed=0" in record["overrides.yaml"]
    before = _settled(run)
    refused = job("seed=1")
    assert refused.returncode == 2 and "seed 0" in refused.stderr, refused.stderr[-2000:]
    after = {p: p.stat().st_mtime_ns for p in run.rglob("offline-run-*/**/*") if p.is_file()}
    assert after == before  # no W&B run opened, none changed
    assert {p.name: p.read_text() for p in (run / ".hydra").iterdir()} == record


def test_a_held_logger_opens_at_the_first_scalars_and_marks_a_failed_job(tmp_path, monkeypatch):
    """The config waits for the first scalars (nothing to log: no run at all); a failed job's run ends with exit
    code 1 (it was 0)."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    idle = HeldOpen(open_logger=lambda: WandbLogger(dir=str(tmp_path / "idle")))
    idle.log_config({"seed": 1})
    idle.close(failed=True)
    assert not (tmp_path / "idle").exists()
    (tmp_path / "used").mkdir()
    used = HeldOpen(open_logger=lambda: WandbLogger(dir=str(tmp_path / "used")))
    used.log_config({"seed": 1})
    used.log_scalars(0, {"charts/best_step_time": 2.0})
    assert dict(used.logger.run.config) == {"seed": 1}
    used.close(failed=True)
    [debug] = (tmp_path / "used").rglob("offline-run-*/logs/debug.log")
    assert "got exitcode: 1" in debug.read_text()


def test_a_wandb_mode_that_is_not_one_is_named(tmp_path, monkeypatch):
    """An empty WANDB_MODE failed inside W&B's settings (a pydantic error that did not say where it came from)."""
    monkeypatch.setenv("WANDB_MODE", "")
    with pytest.raises(ValueError, match="environment variable WANDB_MODE='' is not a W&B mode"):
        WandbLogger(dir=str(tmp_path))
    monkeypatch.setenv("WANDB_MODE", "offline")
    with pytest.raises(ValueError, match="W&B mode 'ofline' is not one of online, offline, disabled"):
        WandbLogger(mode="ofline", dir=str(tmp_path))


class _Flaky(Simulator):
    """Measures twelve placements (the baselines, and an update or two of four samples), then raises (a device lost
    mid-search)."""

    measured = 0

    def _measure(self, graph, cluster, placement):
        self.measured += 1
        if self.measured > 12:
            raise RuntimeError("device lost")
        return super()._measure(graph, cluster, placement)


def test_a_search_that_raises_from_python_marks_its_wandb_run_failed(tmp_path, monkeypatch):
    """Only the command line's HeldOpen marked a failed run: from Python the run ended with exit code 0."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    logger = WandbLogger(dir=str(tmp_path))
    graph, cluster = lstm_lm(layers=1, hidden=64, steps=2), paper_cluster(2)
    with pytest.raises(RuntimeError, match="device lost"):
        gplace.place(graph, cluster, runtime=_Flaky(),
                     trainer=ReinforceTrainer(updates=5, samples_per_update=4, progress=False), logger=logger)
    assert logger.run._is_finished
    [debug] = tmp_path.rglob("offline-run-*/logs/debug.log")
    assert "got exitcode: 1" in debug.read_text()


def test_a_users_own_wandb_run_is_left_active_or_logged_into(tmp_path, monkeypatch):
    """WandbLogger finished the user's active run (its next log raised) and could not log into it."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    user = wandb.init(project="mine", dir=str(tmp_path), name="user-run", reinit="create_new", mode="offline")
    try:
        own = WandbLogger(dir=str(tmp_path / "gplace"))
        assert own.run.id != user.id and not user._is_finished
        user.log({"user/metric": 1.0})
        own.finish()
        assert own.run._is_finished and not user._is_finished
        inside = WandbLogger(run=user)
        inside.log_config({"seed": 3})
        inside.log_scalars(-1, {"losses/imitation": 2.0, "charts/best_step_time": float("inf")})
        inside.finish(exit_code=1)
        assert not user._is_finished and user.config["seed"] == 3
        assert dict(user.summary)["losses/imitation"] == 2.0 and "charts/best_step_time" not in dict(user.summary)
        user.log({"user/metric": 2.0})
        with pytest.raises(ValueError, match="not both"):
            WandbLogger(run=user, dir=str(tmp_path))
    finally:
        user.finish()


@pytest.mark.parametrize(("sweep_dir", "group"), [("multirun/2026-12-02/00-59-57", "multirun/2026-12-02/00-59-57"),
                                                  ("{tmp}/elsewhere/00-59-57", "{tmp}/elsewhere/00-59-57")])
def test_a_multirun_group_names_the_whole_sweep_not_its_time(tmp_path, monkeypatch, sweep_dir, group):
    """The group was the sweep directory's last part, Hydra's default the time alone (00-59-57): sweeps of other
    days made one group."""
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    tmp = tmp_path.resolve()
    hc = SimpleNamespace(mode=RunMode.MULTIRUN, sweep=SimpleNamespace(dir=sweep_dir.format(tmp=tmp)),
                         runtime=SimpleNamespace(cwd=str(tmp / "cwd")),
                         job=SimpleNamespace(override_dirname="seed=1", num=1))
    monkeypatch.setattr(cli, "HydraConfig", SimpleNamespace(initialized=lambda: True, get=lambda: hc))
    fields = cli._sweep_fields(OmegaConf.create({"group": None, "name": None}))
    assert fields == {"group": group.format(tmp=tmp), "name": "seed=1"}


def test_a_pipelined_jobs_bubble_and_memory_per_device_reach_the_summary(tmp_path, monkeypatch):
    """The bubble and micro-batches in flight of each device were in ``placement.json`` only, not in W&B."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "gplace", *FAST, "objective=pipeline", "objective.microbatches=4",
                           f"hydra.run.dir={run}"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = json.loads((run / "placement.json").read_text())["per_device"]
    [record] = _run_files(run)
    for device, row in shown.items():
        for key in ("bubble", "in_flight", "peak_memory"):
            name = f"{key}/{device.lstrip('/')}".encode()
            at = record.find(name)
            assert at >= 0 and json.dumps(row[key]).encode() in record[at:at + len(name) + 32], (name, row[key])


def test_no_per_device_figures_where_the_simulator_did_not_measure(tmp_path, monkeypatch):
    """With the steady-state score (or a real runtime) the per-device figures are sim-v1's model of one step:
    they went to the summary as if measured."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "gplace", *FAST, "objective=pipeline_steady", f"hydra.run.dir={run}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    [record] = _run_files(run)
    assert b"step_time" in record and b"peak_memory/" not in record


@pytest.mark.parametrize("mode", ["disabled", "offline"])
def test_results_end_a_run_where_w_and_b_cannot_stage_artifacts(tmp_path, monkeypatch, caplog, mode):
    """With a home folder that cannot be written, a finished run ended in PermissionError (exit status 2, no results
    table) while W&B copied its artifacts to ~/.local/share/wandb, even with WANDB_MODE=disabled. Disabled stages
    nothing; offline logs the summary and says which artifacts it could not stage."""
    monkeypatch.setenv("WANDB_MODE", mode)
    (tmp_path / "not_a_folder").write_text("")
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "not_a_folder" / "wandb"))  # no folder can be made there
    (tmp_path / "placement.json").write_text("{}")
    logger = WandbLogger(dir=str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="gplace.loggers"):
        artifacts = logger.log_results({"step_time": 1.5}, [{"placement": "learned", "step_time": 1.5}],
                                       {"placement": tmp_path / "placement.json"})
    assert artifacts == []
    assert ("W&B artifact placement-" in caplog.text and "WANDB_DATA_DIR" in caplog.text) == (mode == "offline")
    logger.finish()
