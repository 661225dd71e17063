"""Names read from files (graph, cluster, device, runtime, fingerprint) reach the terminal and cli.log with their
control characters escaped: raw, a crafted name cleared the screen, set the terminal's title or forged a log line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ESC = "\x1b[31mRED\x1b[0m\x1b]0;TITLE\x07\nfake: line\x9b"
GRAPH = {"format": "gplace.graph", "version": 1, "name": "g" + ESC,
         "ops": [{"name": "a", "cost": 1e-3, "output_bytes": 100}, {"name": "b", "cost": 1e-3}],
         "edges": [{"src": "a", "dst": "b"}]}
CLUSTER = {"format": "gplace.cluster", "version": 1, "name": "c" + ESC,
           "devices": [{"name": "/CPU:0", "kind": "cpu"}, {"name": "gpu" + ESC, "kind": "cpu"}],
           "default_link": {"bandwidth": 1e9, "latency": 1e-5}}
PLACEMENT = {"format": "gplace.placement", "version": 1, "graph": "G" + ESC, "cluster": "C", "runtime": "sim-v1" + ESC,
             "graph_fingerprint": "deadbeef" + ESC, "devices": ["d0" + ESC], "placement": {"x": "d0" + ESC},
             "step_time": 0.001}
ONE_OP = {"format": "gplace.graph", "version": 1, "name": "mlp", "ops": [{"name": "x", "cost": 1e-3}], "edges": []}


def _gplace(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0",
           "LANG": "C.UTF-8"}
    return subprocess.run([sys.executable, "-m", "gplace", *args], cwd=cwd, env=env, capture_output=True,
                          timeout=300)


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


def _no_controls(data: bytes) -> bool:
    """Whether ``data`` (UTF-8) holds no control character but newlines (C0, DEL, C1)."""
    return not any(ord(c) < 0x20 and c != "\n" or 0x7F <= ord(c) < 0xA0 for c in data.decode())


def test_escaped_escapes_control_characters_and_keeps_ordinary_names():
    from gplace.cli import _encodable, _escaped

    assert _escaped("a\x1b]0;T\x07\nb\x9b\x7f") == "a\\x1b]0;T\\x07\\nb\\x9b\\x7f"
    assert _escaped("/GPU:ü 日本 [bold]x[/bold] a\\b") == "/GPU:ü 日本 [bold]x[/bold] a\\b"
    assert _encodable("d\x1b[2J") == "d\\x1b[2J"


def test_place_prints_and_logs_names_with_control_characters_escaped(tmp_path):
    run = tmp_path / "run"
    proc = _gplace("place", "graph=file", f"graph.path={_write(tmp_path / 'g.json', GRAPH)}", "cluster=file",
                   f"cluster.path={_write(tmp_path / 'c.json', CLUSTER)}", "method=heft", f"hydra.run.dir={run}",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    log = (run / "cli.log").read_bytes()
    assert _no_controls(proc.stdout) and _no_controls(log), (proc.stdout, log)
    assert b"placed g\\x1b[31mRED\\x1b[0m\\x1b]0;TITLE\\x07\\nfake: line\\x9b (2 ops) on c\\x1b" in proc.stdout
    assert b"g\\x1b[31mRED" in log and b"\nfake: line" not in log


def test_show_prints_names_and_fingerprints_with_control_characters_escaped(tmp_path):
    placement = _write(tmp_path / "p.json", PLACEMENT)
    proc = _gplace("show", str(placement), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert _no_controls(proc.stdout), proc.stdout
    assert b"G\\x1b[31mRED" in proc.stdout and b"d0\\x1b[31mRED" in proc.stdout
    proc = _gplace("show", str(placement), "--graph", str(_write(tmp_path / "g.json", ONE_OP)), cwd=tmp_path)
    assert proc.returncode == 2 and _no_controls(proc.stderr) and proc.stderr.count(b"\n") == 1, proc.stderr
    assert b"(fingerprint 'deadbeef\\x1b[31mRED" in proc.stderr


def test_an_error_naming_a_device_from_a_file_reaches_the_terminal_and_log_without_escape_sequences(tmp_path):
    """A single device's failed placement named the device raw in the one-line error on stderr and in cli.log (the
    review); terminal sequences are escaped there too (newlines kept: an error's own text may hold them)."""
    graph = {"format": "gplace.graph", "version": 1, "name": "g",
             "ops": [{"name": "a", "cost": 1e-3, "output_bytes": 10**9, "persistent_memory": 10**9},
                     {"name": "b", "cost": 1e-3}], "edges": [{"src": "a", "dst": "b"}]}
    cluster = {**CLUSTER, "devices": [{"name": "/CPU:0" + ESC, "kind": "cpu", "memory": 1000},
                                      {"name": "gpu" + ESC, "kind": "cpu", "memory": 1000}]}
    done = _gplace("place", "graph=file", f"graph.path={_write(tmp_path / 'g.json', graph)}", "cluster=file",
                   f"cluster.path={_write(tmp_path / 'c.json', cluster)}", "method=single", "hydra.run.dir=run",
                   cwd=tmp_path)
    assert done.returncode != 0 and b"gplace: error:" in done.stderr and b"\\x1b" in done.stderr
    assert _no_controls(done.stderr) and _no_controls((tmp_path / "run" / "cli.log").read_bytes())
