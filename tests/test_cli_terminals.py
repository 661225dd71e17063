"""The CLI under odd terminals and locales: a closed stdout pipe, ``python -OO``, an ASCII stdout, ``COLUMNS=0``."""

import json
import os
import subprocess
import sys

import pytest

from gplace.ir.serialize import file_stem

GRAPH = {"format": "gplace.graph", "version": 1, "name": "grâphe_π",
         "ops": [{"name": "x→é", "type": "Placeholder", "cost": 1e-6, "output_bytes": 4096},
                 {"name": "w_ü", "type": "VariableV2", "cost": 1e-6, "persistent_memory": 4096, "output_bytes": 4096},
                 {"name": "mm_日本", "type": "MatMul", "cost": 2e-5, "output_bytes": 4096},
                 {"name": "relu_ß", "type": "Relu", "cost": 1e-5, "output_bytes": 4096}],
         "edges": [{"src": "x→é", "dst": "mm_日本"}, {"src": "w_ü", "dst": "mm_日本"},
                   {"src": "mm_日本", "dst": "relu_ß"}]}
CLUSTER = {"format": "gplace.cluster", "version": 1, "name": "clüster",
           "devices": [{"name": "/CPU:0", "kind": "cpu", "speed": 1.0},
                       {"name": "/GPU:ü", "kind": "gpu", "speed": 4.0, "memory": 12000000000}],
           "default_link": {"bandwidth": 6.0e9, "latency": 2e-5}}
ASCII_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}
TRAIN = ["trainer.updates=2", "logger=none"]


def _files(folder):
    """The non-ASCII graph and cluster files, written under ``folder``: overrides naming them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "g.json").write_text(json.dumps(GRAPH, ensure_ascii=False), encoding="utf-8")
    (folder / "c.json").write_text(json.dumps(CLUSTER, ensure_ascii=False), encoding="utf-8")
    return [f"graph.path={folder / 'g.json'}", f"cluster.path={folder / 'c.json'}", "graph=file", "cluster=file"]


def _gplace(*args, cwd, env=None, flags=(), stdout=subprocess.PIPE):
    """``python [flags] -m gplace args`` with ``env`` added to a plain environment (no locale or width of the
    test's own terminal)."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("COLUMNS", "LINES", "PYTHONIOENCODING", "PYTHONUTF8", "LC_ALL", "LC_CTYPE", "LANG")}
    env = {**base, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0", "LANG": "C.UTF-8", **(env or {})}
    return subprocess.run([sys.executable, *flags, "-m", "gplace", *args], cwd=cwd, env=env, stdout=stdout,
                          stderr=subprocess.PIPE, timeout=300)


def _closed_pipe():
    """The write end of a pipe whose reader is gone (``gplace ... | head -1`` once head has its line)."""
    read, write = os.pipe()
    os.close(read)
    return write


@pytest.fixture(scope="module")
def placed(tmp_path_factory):
    """A placement.json of the non-ASCII graph (by HEFT)."""
    tmp = tmp_path_factory.mktemp("placed")
    proc = _gplace("place", "method=heft", *_files(tmp), f"hydra.run.dir={tmp / 'run'}", cwd=tmp)
    assert proc.returncode == 0, proc.stderr.decode()
    return tmp / "run" / "placement.json"


@pytest.mark.slow
@pytest.mark.parametrize("command", [TRAIN, ["place", "method=learned"]], ids=["train", "place_learned"])
def test_a_closed_stdout_ends_a_finished_run_normally_with_its_files(tmp_path, command):
    """A reader gone from stdout neither fails the run nor keeps it from writing its files (the progress bar drew
    on stdout, and rich's broken-pipe handler ended the run with status 1 before placement.json)."""
    pipe = _closed_pipe()
    try:
        proc = _gplace(*command, *_files(tmp_path), f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path, stdout=pipe)
    finally:
        os.close(pipe)
    assert proc.returncode == 0, proc.stderr.decode()
    assert (tmp_path / "run" / "placement.json").is_file()
    assert (tmp_path / "run" / "policy.pt").is_file() or command != TRAIN
    assert b"Logging error" not in proc.stderr  # each log line to the gone stdout printed logging's traceback


@pytest.mark.slow
def test_a_closed_stderr_too_ends_a_finished_run_normally_with_its_files(tmp_path):
    """``gplace ... 2>&1 | head -1``: the progress bar's write to the gone stderr at the end of the search raised
    OSError, and the run ended with status 1 and no placement.json, saying nothing anywhere."""
    pipe = _closed_pipe()
    env = {**os.environ, "WANDB_MODE": "disabled"}
    try:
        proc = subprocess.run([sys.executable, "-m", "gplace", *TRAIN, *_files(tmp_path),
                               f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path, env=env, stdout=pipe,
                              stderr=pipe, timeout=300)
    finally:
        os.close(pipe)
    assert proc.returncode == 0
    assert {"placement.json", "policy.pt"} <= {p.name for p in (tmp_path / "run").iterdir()}


@pytest.mark.slow
def test_an_ascii_locale_escapes_names_and_logs_them_in_utf8(tmp_path):
    """Under an ASCII locale a finished run's names are printed escaped, not an error (exit 2), no log line fails,
    and cli.log keeps them in UTF-8."""
    proc = _gplace(*TRAIN, *_files(tmp_path), f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path, env=ASCII_LOCALE)
    stderr = proc.stderr.decode("ascii", "replace")
    assert proc.returncode == 0, stderr
    assert "Logging error" not in stderr
    assert "gr\\xe2phe_\\u03c0" in proc.stdout.decode("ascii")
    assert "placing grâphe_π" in (tmp_path / "run" / "cli.log").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_run_in_a_folder_the_locale_cannot_decode_keeps_going_and_logs_it(tmp_path):
    """Under ``LC_ALL=C PYTHONUTF8=0`` a non-ASCII run folder reaches Python as surrogates: W&B's offline start
    failed on it and ended the run with status 2 ('surrogates not allowed', naming nothing), and cli.log's lines
    naming the folder failed ('Logging error'). W&B is now off for the run with a warning, and cli.log escapes."""
    folder = tmp_path / "Ünïcode dir"
    folder.mkdir()
    for _ in range(2):  # the second run resumes, logging the checkpoint's path
        proc = _gplace("trainer.updates=2", "hydra.run.dir=run", cwd=folder,
                       env={**ASCII_LOCALE, "WANDB_MODE": "offline"})
        assert proc.returncode == 0, proc.stderr.decode("ascii", "replace")
    assert "W&B is off for this run" in proc.stderr.decode("ascii", "replace")
    assert (folder / "run" / "placement.json").is_file()
    log = (folder / "run" / "cli.log").read_text(encoding="utf-8")
    assert "resuming from" in log and "\\udcc3" in log


@pytest.mark.slow
def test_place_and_show_with_an_ascii_stdout_escape_names(tmp_path, placed):
    """``gplace place`` and ``gplace show`` print a non-ASCII graph's name escaped on an ASCII stdout."""
    ascii_out = {"PYTHONIOENCODING": "ascii"}
    proc = _gplace("place", "method=heft", *_files(tmp_path), f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path,
                   env=ascii_out)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "placed gr\\xe2phe_\\u03c0" in proc.stdout.decode("ascii")
    proc = _gplace("show", str(placed), cwd=tmp_path, env=ascii_out)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "cl\\xfcster" in proc.stdout.decode("ascii") and "/GPU:\\xfc" in proc.stdout.decode("ascii")
    rows = [line for line in proc.stdout.decode("ascii").splitlines() if line[:1] in "|+"]
    assert len({len(row) for row in rows}) == 1, rows  # escaped after the layout, '/GPU:\xfc' widened its row


@pytest.mark.slow
def test_show_runs_under_python_OO(tmp_path, placed):  # noqa: N802
    """``python -OO`` strips docstrings; ``gplace show`` built its description from one."""
    proc = _gplace("show", str(placed), cwd=tmp_path, flags=["-OO"])
    assert proc.returncode == 0, proc.stderr.decode()
    assert "/GPU:ü" in proc.stdout.decode()


@pytest.mark.slow
def test_columns_zero_prints_the_table(tmp_path, placed):
    """``COLUMNS=0`` (no positive width) prints at a fallback width, not nothing."""
    proc = _gplace("show", str(placed), cwd=tmp_path, env={"COLUMNS": "0"})
    assert proc.returncode == 0, proc.stderr.decode()
    assert "/GPU:ü" in proc.stdout.decode() and "peak memory" in proc.stdout.decode()


@pytest.mark.slow
def test_a_long_run_directory_is_printed_on_one_line(tmp_path):
    """Off a terminal (a log file) the sentences are not wrapped at 80 columns: the run directory stays whole."""
    run_dir = tmp_path / ("a_really_long_experiment_directory_name_for_the_sweep" + "_x" * 20) / "seed_0"
    proc = _gplace("place", "method=heft", *_files(tmp_path), f"hydra.run.dir={run_dir}", cwd=tmp_path,
                   env={"COLUMNS": "0"})
    assert proc.returncode == 0, proc.stderr.decode()
    assert any(f"wrote {run_dir}" in line for line in proc.stdout.decode().splitlines()), proc.stdout.decode()


def test_file_stem_replaces_what_the_file_system_encoding_cannot_write(monkeypatch):
    """Under an ASCII file system encoding (``LC_ALL=C``) a run directory's name is ASCII, and names that differ
    only in non-ASCII characters still get distinct stems."""
    monkeypatch.setattr(sys, "getfilesystemencoding", lambda: "ascii")
    one, other = file_stem("grâphe_π", "clüster", "seq2seq"), file_stem("grèphe_π", "clüster", "seq2seq")
    assert one.isascii() and other.isascii() and one != other
    assert one.startswith("gr_phe__-cl_ster-seq2seq-")


def test_version_to_a_closed_stdout_ends_quietly(tmp_path):
    """``gplace --version | true`` ended in a BrokenPipeError traceback and status 1."""
    pipe = _closed_pipe()
    try:
        proc = _gplace("--version", cwd=tmp_path, stdout=pipe)
    finally:
        os.close(pipe)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr.decode()


def test_log_lines_go_to_stderr_and_stdout_holds_the_result(tmp_path):
    """A script reads the result from stdout: Hydra's console log handler wrote warnings there, before it
    (``gplace place ... | head -1`` read the warning); ``hydra/job_logging=stdout`` keeps them there."""
    args = ["place", "method=heft", "budget=10", *_files(tmp_path)]
    proc = _gplace(*args, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 0, err
    assert out.startswith("placed ") and "WARNING" not in out
    assert "budget=10 is unused" in err
    kept = _gplace(*args, f"hydra.run.dir={tmp_path / 'run2'}", "hydra/job_logging=stdout", cwd=tmp_path)
    assert "budget=10 is unused" in kept.stdout.decode()


@pytest.mark.slow
def test_the_results_table_is_as_wide_as_it_needs_when_piped(tmp_path):
    """Off a terminal the training table cut long device names at 80 columns, to the same prefix each."""
    files = _files(tmp_path)
    names = [f"/job:trainer_pool_east/replica:0/task:0/device:accelerator:{i}" for i in range(2)]
    cluster = {**CLUSTER, "devices": [{"name": name, "kind": "gpu", "speed": 1.0 + i} for i, name in enumerate(names)]}
    (tmp_path / "c.json").write_text(json.dumps(cluster, ensure_ascii=False), encoding="utf-8")
    proc = _gplace(*TRAIN, *files, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert all(f"single {name}" in proc.stdout.decode() for name in names), proc.stdout.decode()


def test_no_placement_that_runs_has_its_own_exit_status(tmp_path):
    """Every error gplace names exited 2, so a script could not tell bad input from a graph that fits nowhere."""
    files = _files(tmp_path)
    tiny = {**CLUSTER, "devices": [{**d, "memory": 1000} for d in CLUSTER["devices"]]}
    (tmp_path / "c.json").write_text(json.dumps(tiny, ensure_ascii=False), encoding="utf-8")
    proc = _gplace("place", "method=heft", *files, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode == 3 and b"PlacementInfeasibleError" in proc.stderr, proc.stderr.decode()
    wrong = {**CLUSTER, "devices": [{**d, "speed": -1.0} for d in CLUSTER["devices"]]}  # bad input: gplace's own error
    (tmp_path / "c.json").write_text(json.dumps(wrong, ensure_ascii=False), encoding="utf-8")
    bad = _gplace("place", "method=heft", *files, f"hydra.run.dir={tmp_path / 'run2'}", cwd=tmp_path)
    assert bad.returncode == 2 and b"speed" in bad.stderr, bad.stderr.decode()
    hydras = _gplace("place", "method=heft", *files[:-1], "cluster=nosuch", cwd=tmp_path)  # Hydra's own error
    assert hydras.returncode == 1


@pytest.mark.parametrize("below", ["", "/sub"])
def test_a_file_given_as_the_run_directory_is_one_line(tmp_path, below):
    """A file as hydra.run.dir (or a folder under one) ended in Hydra's chained FileExistsError or
    NotADirectoryError traceback, status 1."""
    (tmp_path / "afile").write_text("")
    proc = _gplace("place", "method=heft", f"hydra.run.dir={tmp_path / 'afile'}{below}", cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "afile is a file, not a folder" in err and "Traceback" not in err, err


def test_numbers_are_printed_as_they_are_on_a_terminal(monkeypatch):
    """rich's highlighter drew ``1.32x`` as a bold cyan ``1.`` and a plain ``32x``, and bolded brackets."""
    from gplace import cli

    monkeypatch.setenv("FORCE_COLOR", "1")
    console = cli._console()
    with console.capture() as captured:
        console.print("speed-up over the best single device: 1.32x (2 devices)")
    assert captured.get() == "speed-up over the best single device: 1.32x (2 devices)\n"
