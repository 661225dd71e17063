"""Ctrl-C and SIGTERM end a CLI command in one line at any moment, naming what resumes it; pool workers stay quiet."""

from __future__ import annotations

import copy
import fcntl
import logging
import os
import signal
import subprocess
import sys
import time

import pytest
from hydra import compose, initialize_config_module
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

ENV = {**os.environ, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0"}

IN_COMPOSE = """
import os, signal, sys
import hydra._internal.hydra as h
import gplace.cli
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job (CI's) starts with Ctrl-C ignored
compose, signum = h.Hydra.compose_config, getattr(signal, sys.argv[1])
def signalled(*args, **kwargs):  # the signal arrives while Hydra composes the config, before any job runs
    os.kill(os.getpid(), signum)
    return compose(*args, **kwargs)
h.Hydra.compose_config = signalled
sys.argv = ["gplace", "logger=none", "hydra.run.dir=" + sys.argv[2]]
gplace.cli.main()
"""

AT_EXIT = """
import atexit, os, signal, sys
import gplace.cli
sys.argv = ["gplace", "--version"]
gplace.cli.main()
atexit.register(lambda: os.kill(os.getpid(), signal.SIGTERM))  # while the interpreter exits
"""


@pytest.fixture
def hydra_job():
    """Set Hydra's config of a job composed from ``config_name`` and ``overrides``, as Hydra does for a job, and
    return the job's config; the previous Hydra config is given back after the test."""
    before = HydraConfig.instance().cfg

    def job(config_name: str, *overrides: str):
        with initialize_config_module("gplace.conf", version_base="1.3"):
            cfg = compose(config_name, overrides=list(overrides), return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        return OmegaConf.masked_copy(cfg, [key for key in cfg if key != "hydra"])

    yield job
    HydraConfig.instance().cfg = before


@pytest.mark.parametrize(("name", "status", "word"), [("SIGTERM", 143, "terminated"), ("SIGINT", 130, "interrupted")])
def test_a_signal_while_hydra_composes_ends_in_one_line_and_its_exit_status(tmp_path, name, status, word):
    """Before: a 16-87 line traceback (Hydra's start-up runs outside _guard), and SIGTERM exited with status 1."""
    proc = subprocess.run([sys.executable, "-c", IN_COMPOSE, name, str(tmp_path / "r")], env=ENV, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == status, proc.stderr
    assert proc.stderr == f"gplace: {word}; no run was in progress: nothing to resume\n"


def test_sigterm_while_the_interpreter_exits_ends_it_without_a_word(tmp_path):
    """Before: gplace's SIGTERM handler outlived the command: "Exception ignored in atexit callback ... Terminated"."""
    proc = subprocess.run([sys.executable, "-c", AT_EXIT], env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGTERM and proc.stderr == "", proc.stderr


def test_pool_workers_ignore_ctrl_c_and_end_on_sigterm():
    """A terminal's Ctrl-C reaches the whole process group: each idle pool worker printed a KeyboardInterrupt
    traceback. Now the workers ignore SIGINT (the interrupted caller stops the pool) and SIGTERM still ends them."""
    from gplace.ir import Placement
    from gplace.runtime import PoolRuntime, Simulator
    from gplace.testing import chain, uniform_cluster

    graph, cluster = chain(), uniform_cluster(2)
    with PoolRuntime(Simulator(), workers=1) as pool:
        assert pool.measure(graph, cluster, Placement.for_graph(graph, [0, 1, 0])).ok
        executor = pool._executor()
        assert executor.submit(signal.getsignal, signal.SIGINT).result(timeout=60) == signal.SIG_IGN
        pid = executor.submit(os.getpid).result(timeout=60)
        worker = executor._processes[pid]
        os.kill(pid, signal.SIGINT)
        time.sleep(0.5)
        assert worker.is_alive()
        os.kill(pid, signal.SIGTERM)
        worker.join(timeout=30)
        deadline = time.monotonic() + 30  # the pool's own thread may reap the worker first (its join then returns
        while worker.exitcode is None and time.monotonic() < deadline:  # before the exit code is stored: 4 in 25)
            time.sleep(0.05)
        assert worker.exitcode == -signal.SIGTERM


def test_the_interrupted_line_names_the_directory_a_rerun_resumes_from(hydra_job):
    """It said "the same hydra.run.dir" everywhere: wrong for Hydra's timestamped default (a rerun gets a new one),
    a sweep (hydra.sweep.dir), the bench (out_dir) and a baseline placement (nothing resumes)."""
    from gplace.cli import resume_hint

    cfg = hydra_job("config")
    default = HydraConfig.get().run.dir
    assert resume_hint("train", cfg, HydraConfig.get()) == ("a training run resumes from its last checkpoint when "
                                                            f"the same command runs again with hydra.run.dir={default}")
    assert default.startswith("outputs/")
    cfg = hydra_job("config", "hydra.mode=MULTIRUN", "hydra.sweep.dir=runs/my sweep")
    assert resume_hint("train", cfg, HydraConfig.get()).endswith(
        "runs again with \"hydra.sweep.dir='runs/my sweep'\"")
    cfg = hydra_job("bench", "out_dir=runs/b")
    assert "the same command run again with out_dir=runs/b runs the others" in resume_hint("bench", cfg, None)
    cfg = hydra_job("bench", "resume=false")
    assert "run again with out_dir=benchmarks resume=true runs the others" in resume_hint("bench", cfg, None)
    cfg = hydra_job("bench", "~resume")  # a bench config without the key starts over, so the rerun needs resume=true
    assert "run again with out_dir=benchmarks resume=true runs the others" in resume_hint("bench", cfg, None)
    cfg = hydra_job("place", "method=heft")
    assert resume_hint("place", cfg, HydraConfig.get()) == ("nothing resumes (method heft keeps no checkpoint): run "
                                                            "the command again")
    cfg = hydra_job("place", "method=gdp", "hydra.run.dir=runs/p")
    assert resume_hint("place", cfg, HydraConfig.get()) == ("the gdp search resumes from its last checkpoint when "
                                                            "the same command runs again with hydra.run.dir=runs/p")


@pytest.mark.parametrize("run_dir", ["runs/ü run", "runs/run (1)", "runs/a,b", "runs/it's", "runs/x=y~#", "r\\"])
def test_the_resume_hint_is_an_override_hydra_takes_back(hydra_job, run_dir):
    """The hint quoted a directory for the shell alone: pasted back, Hydra's override parser refused one with a
    ``ü`` or ``(`` (LexerNoViableAltException), and read a ``,`` as a sweep."""
    import shlex

    from hydra.core.override_parser.overrides_parser import OverridesParser

    from gplace.cli import resume_hint

    cfg = hydra_job("place", "method=gdp")
    hydra_cfg = copy.deepcopy(HydraConfig.get())
    OmegaConf.set_readonly(hydra_cfg, False)
    hydra_cfg.run.dir = run_dir  # as a quoted override sets it (the job fixture takes no quotes)
    hint = resume_hint("place", cfg, hydra_cfg)
    [override] = shlex.split(hint.rsplit("runs again with ", 1)[1])
    parsed = OverridesParser.create().parse_override(override)
    assert (parsed.key_or_group, parsed.value()) == ("hydra.run.dir", run_dir)


def test_an_interrupted_place_with_a_baseline_says_nothing_resumes(hydra_job, capsys):
    """The line of an interrupted job is the one its command's resume_hint gives, with exit status 143."""
    from gplace.cli import Terminated, _guard

    def terminated():
        raise Terminated

    cfg = hydra_job("place", "method=heft")
    with pytest.raises(SystemExit) as stop:
        _guard(terminated, cfg, "place")
    assert stop.value.code == 143
    assert capsys.readouterr().err == "gplace: terminated; nothing resumes (method heft keeps no checkpoint): run " \
                                      "the command again\n"


def test_an_interrupted_job_says_so_in_its_log_file(hydra_job, tmp_path):
    """cli.log of a killed run ended at "placing ...", like one still running or one that died hard."""
    import logging

    from gplace.cli import _guard

    def interrupted():
        raise KeyboardInterrupt

    handler = logging.FileHandler(tmp_path / "cli.log")
    logging.getLogger().addHandler(handler)
    try:
        with pytest.raises(SystemExit):
            _guard(interrupted, hydra_job("place", "method=heft"), "place")
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    assert "interrupted; nothing resumes (method heft keeps no checkpoint)" in (tmp_path / "cli.log").read_text()


@pytest.mark.parametrize("given", [False, True])
def test_a_run_directory_in_use_that_is_hydras_default_says_it_is_named_by_the_second(tmp_path, hydra_job, capsys,
                                                                                      given):
    """Two runs started in the same second without hydra.run.dir get the same default directory: the refused one
    now says why and what to do (only where the directory is Hydra's default)."""
    from gplace.cli import _guard
    from gplace.run_dir import LOCK_FILE, hold_dir

    run_dir = tmp_path / "outputs" / "12-51-33"
    run_dir.mkdir(parents=True)
    cfg = hydra_job("config", f"hydra.runtime.output_dir={run_dir}", *[f"hydra.run.dir={run_dir}"] * given)
    with (run_dir / LOCK_FILE).open("a+") as lock:  # another run's hold (a lock of another open file)
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(SystemExit) as stop:
            _guard(lambda: hold_dir(run_dir).__enter__(), cfg)
    err = capsys.readouterr().err
    assert stop.value.code == 75 and f"run directory {run_dir} is in use by another process" in err
    hint = ("no hydra.run.dir was given, and Hydra's default directory (outputs/<date>/<time>) is named by the second, "
            "so two runs started in the same second get the same one: give each run its own hydra.run.dir=..., or "
            "run them as one sweep (-m)")
    assert (hint in err) is not given, err


def test_a_signal_that_arrives_inside_a_c_callback_still_ends_in_one_line(hydra_job, capsys):
    """SIGTERM landing while numba unpickled a kernel came out as "SystemError: <function _numba_unpickle> returned
    a result with an exception set" (caused by Terminated): a traceback and exit status 1, not the one line and 143
    (seen once in the CI mimic, tests/test_cli.py::test_a_terminated_run_ends_as_an_interrupted_one)."""
    from gplace.cli import Terminated, _guard

    def terminated_in_callback():
        try:
            raise Terminated
        except Terminated as err:
            raise SystemError("<function _numba_unpickle> returned a result with an exception set") from err

    cfg = hydra_job("place", "method=heft")
    with pytest.raises(SystemExit) as stop:
        _guard(terminated_in_callback, cfg, "place")
    assert stop.value.code == 143
    assert capsys.readouterr().err.startswith("gplace: terminated; nothing resumes")
    with pytest.raises(SystemError, match="not an interrupt"):  # other errors pass through as they were
        _guard(lambda: (_ for _ in ()).throw(SystemError("not an interrupt")), cfg, "place")


def test_a_run_refused_a_directory_in_use_leaves_that_runs_log_alone(tmp_path, hydra_job, capsys):
    """The refused run wrote its ERROR line, and its warnings before it, into the cli.log of the run holding the
    directory (Hydra opens the log before the hold is checked): a script reading that log took the other run as
    failed. The job holds its directory before it logs anything."""
    from gplace.cli import _guard, place_with_policy
    from gplace.run_dir import LOCK_FILE

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cfg = hydra_job("place", "method=heft", "budget=10", f"hydra.run.dir={run_dir}")  # budget: unused, a warning
    handler = logging.FileHandler(run_dir / "cli.log")
    logging.getLogger().addHandler(handler)
    try:
        with (run_dir / LOCK_FILE).open("a+") as lock:  # another run's hold
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with pytest.raises(SystemExit) as stop:
                _guard(lambda: place_with_policy(cfg, run_dir), cfg, "place")
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    assert stop.value.code == 75 and "is in use by another process" in capsys.readouterr().err
    assert (run_dir / "cli.log").read_text() == ""


def test_a_ctrl_c_while_the_cli_imports_is_one_line(monkeypatch, capsys):
    """The gplace command imported gplace.cli before main() took over Ctrl-C: one in its first second printed a
    20-line KeyboardInterrupt traceback. The entry point imports it inside its own handler."""
    import importlib.abc

    from gplace.__main__ import main

    class Interrupted(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "gplace.cli":
                raise KeyboardInterrupt
            return None

    monkeypatch.delitem(sys.modules, "gplace.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Interrupted(), *sys.meta_path])
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 130
    assert capsys.readouterr().err == "gplace: interrupted; no run was in progress: nothing to resume\n"


def test_place_into_a_running_training_runs_folder_says_what_the_folder_is(tmp_path, hydra_job, capsys):
    """Holding the folder first made `gplace place` in a training run's folder, while it ran, say "in use: wait"
    (status 75), where waiting gets the same refusal: such a folder is refused for what it is, first (status 2)."""
    from gplace.cli import _guard, place_with_policy
    from gplace.run_dir import LOCK_FILE

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "checkpoint.pt").write_bytes(b"")
    cfg = hydra_job("place", "method=heft", f"hydra.run.dir={run_dir}")
    with (run_dir / LOCK_FILE).open("a+") as lock:  # the training run's hold
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(SystemExit) as stop:
            _guard(lambda: place_with_policy(cfg, run_dir), cfg, "place")
    assert stop.value.code == 2 and "checkpoint.pt" in capsys.readouterr().err
