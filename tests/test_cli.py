"""The CLI in a subprocess (Hydra reads argv): overrides, outputs, multirun, and a clear error."""

import json
import os
import subprocess
import sys

import pytest
import torch

FAST = ["logger=none", "trainer.updates=2", "trainer.samples_per_update=2", "trainer.progress=false",
        "graph.steps=2", "graph.hidden=64", "graph.vocab=100", "encoder.hidden_size=16", "policy.hidden_size=16",
        "policy.attention_size=8"]


def _gplace(*args, cwd):
    env = {**os.environ, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0"}
    return subprocess.run([sys.executable, "-m", "gplace", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_run_writes_placement_and_trace(tmp_path):
    out = tmp_path / "run"
    proc = _gplace(*FAST, "cluster=paper_4gpu", f"hydra.run.dir={out}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "single /GPU:3" in proc.stdout and "learned" in proc.stdout
    doc = json.loads((out / "placement.json").read_text())
    assert doc["format"] == "gplace.placement" and doc["version"] == 1
    assert doc["devices"] == ["/CPU:0", "/GPU:0", "/GPU:1", "/GPU:2", "/GPU:3"]
    assert doc["graph"] == "lstm_lm_2x64_t2_b64_train" and doc["runtime"] == "sim-v1"
    assert 0 < doc["step_time"] <= min(v for v in doc["baselines"].values() if v is not None) * 1.5
    assert set(doc["baselines"]) == set(doc["devices"])
    trace = json.loads((out / "trace.json").read_text())
    assert any(e.get("ph") == "X" for e in trace["traceEvents"])
    assert (out / "checkpoint.pt").exists() and (out / "metrics.jsonl").exists()
    at = doc["best_sample"]  # None: the greedy placement beat every sample
    assert doc["samples"] == 4 and (at is None or 1 <= at <= 4)
    printed = " ".join(proc.stdout.split())  # rich wraps lines
    fastest_device = min(v for v in doc["baselines"].values() if v is not None)
    assert f"the best found by sample {at}" in printed if at else ("the best is the greedy" in printed or (
        "the best is every op on one device" in printed and doc["step_time"] == fastest_device))

    from gplace.pretrained import load_policy

    assert load_policy(out / "policy.pt").meta["runtime"] == "sim-v1"  # the objective it learned
    # the saved policy places the graph again, in seconds, without training
    placed = tmp_path / "placed"
    proc = _gplace("place", f"checkpoint={out / 'policy.pt'}", "cluster=paper_4gpu", "graph.steps=2",
                   "graph.hidden=64", "graph.vocab=100", f"hydra.run.dir={placed}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    again = json.loads((placed / "placement.json").read_text())
    assert again["graph_fingerprint"] == doc["graph_fingerprint"] and again["step_time"] > 0
    assert set(again["placement"]) == set(doc["placement"])
    assert "seed: 0" in (out / ".hydra" / "config.yaml").read_text()  # each job's Hydra record, written by gplace
    assert f"checkpoint={out / 'policy.pt'}" in (placed / ".hydra" / "overrides.yaml").read_text()


@pytest.mark.slow
def test_multirun_sweeps_an_override(tmp_path):
    sweep = tmp_path / "sweep"
    proc = _gplace("-m", *FAST, "trainer.lr=1e-3,1e-2", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    jobs = sorted(p.parent.name for p in sweep.glob("*/placement.json"))
    assert jobs == ["0", "1"]


@pytest.mark.parametrize("override, message", [
    ([], "gplace: error: missing value(s): graph.path"),
    (["graph.path=/nowhere/g.json"], "gplace: error: FileNotFoundError: graph: no such file: /nowhere/g.json"),
])
def test_a_missing_graph_file_is_reported(tmp_path, override, message):
    proc = _gplace("logger=none", "graph=file", *override, f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("device, message", [
    ("gpu0", "gplace: error: ValueError: device='gpu0' is not a torch device name (cpu, cuda, cuda:N)"),
    # mps failed deep inside Module.to; meta was taken and failed once training started
    ("mps", "gplace: error: ValueError: device='mps': gplace runs its networks on cpu or cuda (cuda:N), not mps"),
    ("meta", "gplace: error: ValueError: device='meta': gplace runs its networks on cpu or cuda (cuda:N), not meta"),
    pytest.param("cuda", "gplace: error: ValueError: device='cuda': this machine has no CUDA device",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")),
])
def test_a_device_for_the_networks_that_is_not_there_is_reported(tmp_path, device, message):
    proc = _gplace(*FAST, f"device={device}", f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("override, message", [
    ("trainer.entropy_coef=abc", "gplace: error: ValueError: trainer: entropy_coef must be a float, got 'abc'"),
    ("cluster.num_gpus=abc", "gplace: error: ValueError: cluster: paper_cluster: num_gpus must be a whole number >= 1"),
    ("threads=0", "gplace: error: threads must be a whole number from 1 to "),
    ("threads=100000", "gplace: error: threads must be a whole number from 1 to "),  # a MemoryError, or spun
    ("seed=null", "gplace: error: seed must be a whole number from 0 to 4294967295, got None"),  # torch's TypeError
    ("seed=18446744073709551616", "gplace: error: seed must be a whole number from 0 to 4294967295"),  # Overflow
    ("+policy.foo=1", "gplace: error: policy: a value of the wrong type or an unknown setting (TypeError: "),
    ("policy.hidden_size=abc", "gplace: error: ValueError: policy: Seq2SeqPolicy: hidden_size must be a whole number "
                               ">= 1, got 'abc'"),  # from inside torch before
    ("+objective.foo=1", "gplace: error: objective: a value of the wrong type or an unknown setting"),
    ("runtime.threads=abc",
     "gplace: error: ValueError: runtime: threads must be an integer >= 1 or None"),  # int('abc')
])
def test_a_value_of_the_wrong_type_is_one_line_naming_it(tmp_path, override, message):
    """Before: a traceback (entropy_coef's after training began, threads' from torch), or a TypeError that named
    no key."""
    proc = _gplace(*FAST, override, f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_constructors_refusal_names_the_config_key_it_came_from(tmp_path):
    """"cache_size must be a whole number >= 1" named neither the inner runtime of runtime=cached_simulator nor the
    simulator it builds."""
    proc = _gplace(*FAST, "runtime=cached_simulator", "+runtime.runtime.cache_size=0", f"hydra.run.dir={tmp_path}",
                   cwd=tmp_path)
    assert proc.returncode == 2 and "gplace: error: ValueError: runtime.runtime: cache_size must be a whole number " \
                                   ">= 1, got 0\n" in proc.stderr, proc.stderr


def test_a_file_that_is_not_a_measurement_cache_is_one_line_naming_it(tmp_path):
    """Before: a Hydra traceback ending in sqlite3.DatabaseError: file is not a database (naming no file)."""
    path = tmp_path / "m.sqlite"
    path.write_bytes(b"not a sqlite file" * 64)
    proc = _gplace(*FAST, "runtime=cached_simulator", f"runtime.path={path}", f"hydra.run.dir={tmp_path / 'r'}",
                   cwd=tmp_path)
    assert proc.returncode == 2 and f"gplace: error: ValueError: measurement cache {path} is not" in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


def test_an_interrupted_command_ends_in_one_line_saying_how_to_resume(capsys):
    """Ctrl-C during a run: exit status 130 and one line (a training run resumes when run again), no traceback."""
    from omegaconf import OmegaConf

    from gplace.cli import _guard

    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as stop:
        _guard(interrupted, OmegaConf.create({}))
    assert stop.value.code == 130 and "resumes from its last checkpoint" in capsys.readouterr().err


def test_a_terminated_run_ends_as_an_interrupted_one(tmp_path):
    """SIGTERM (a scheduler's time limit) killed a run at once with no word; now it ends as Ctrl-C does, exit 143."""
    import signal
    import time

    slow = [arg for arg in FAST if not arg.startswith("trainer.updates=")] + ["trainer.updates=100000"]
    proc = subprocess.Popen([sys.executable, "-m", "gplace", *slow,
                             f"hydra.run.dir={tmp_path / 'r'}"], cwd=tmp_path, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "WANDB_MODE": "disabled"})
    deadline = time.monotonic() + 120
    while not (tmp_path / "r" / "metrics.jsonl").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "gplace: terminated; a training run resumes" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("swept, message", [
    ("seed=-1,0", "gplace: error: seed must be a whole number"),
    # a constructor's ValueError: _fail raised inside _guard's except, and Hydra printed 3 chained tracebacks
    ("trainer.lr=-1,0.01", "gplace: error: ValueError: trainer: lr must be > 0, got -1"),
])
def test_one_bad_job_of_a_sweep_leaves_the_others_running(tmp_path, swept, message):
    """_fail's SystemExit ended the whole sweep at its first bad job: seeds 0 and 1 never ran."""
    proc = _gplace("-m", *FAST, swept, f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)
    assert proc.returncode != 0 and message in proc.stderr
    assert (tmp_path / "sweep" / "1" / "placement.json").is_file()
    assert "Error executing job with overrides" in proc.stderr and proc.stderr.count('File "') <= 3, proc.stderr
    assert "During handling of the above exception" not in proc.stderr  # no deep trace


def test_two_jobs_of_a_sweep_in_one_directory_are_refused_not_resumed(tmp_path):
    """A later job resumed the earlier's finished run in the shared directory, wrote its result under its own
    overrides and exited 0."""
    proc = _gplace("-m", *FAST, "trainer.lr=1e-3,1e-2", f"hydra.sweep.dir={tmp_path / 'sweep'}",
                   "hydra.sweep.subdir=${seed}", cwd=tmp_path)
    assert proc.returncode != 0 and "holds job 0 of the sweep" in proc.stderr and "hydra.sweep.subdir" in proc.stderr
    assert "trainer.lr=0.001" in (tmp_path / "sweep" / "0" / ".hydra" / "overrides.yaml").read_text()
    again = _gplace("-m", *FAST, "trainer.lr=1e-3", f"hydra.sweep.dir={tmp_path / 'sweep'}",
                    "hydra.sweep.subdir=${seed}", cwd=tmp_path)
    assert again.returncode == 0, again.stderr  # the same job again resumes its own directory


def test_a_bench_sweep_without_an_out_dir_per_job_is_refused(tmp_path):
    """Every job wrote one out_dir: each after the first skipped (resume) or overwrote the others' cases."""
    proc = subprocess.run([sys.executable, "-m", "gplace", "bench", "-m", "search.updates=1,2",
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0"})
    assert proc.returncode != 0 and proc.stderr.count("gplace: error: a bench sweep needs out_dir set per job") == 2
    assert not (tmp_path / "benchmarks").exists()
