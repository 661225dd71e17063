"""What ``gplace show`` and ``gplace place checkpoint=`` accept: a placement file's version, ``--cluster`` without
``--graph``, a ``--draw`` path that is an input, and a checkpoint named like a method (probe of 2026-12-06)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gplace.cli import show
from gplace.experiment import place
from gplace.ir import cluster_to_dict, graph_to_dict, save_json
from gplace.testing import diamond, uniform_cluster

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("show_inputs")
    graph, cluster = diamond(), uniform_cluster(2)
    place(graph, cluster, method="heft", run_dir=root / "run")
    save_json(graph_to_dict(graph), root / "graph.json")
    save_json(cluster_to_dict(cluster), root / "cluster.json")
    return root


def _shown(capsys, *argv) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stop:
        show([str(a) for a in argv])
    return stop.value.code, capsys.readouterr().err


@pytest.mark.parametrize("version", [99, "1", None])
def test_show_refuses_a_placement_file_of_a_version_it_does_not_read(run, tmp_path, capsys, version):
    """docs/format.md: gplace refuses a version it does not know; show printed the table of version 99."""
    doc = json.loads((run / "run" / "placement.json").read_text())
    doc["version"] = version
    if version is None:
        del doc["version"]
    path = save_json(doc, tmp_path / "placement.json")
    code, err = _shown(capsys, path)
    assert code == 2 and "version" in err and "is not supported" in err, err


def test_show_refuses_cluster_without_graph(run, capsys):
    """`--cluster` without `--graph` was ignored, even naming no file."""
    code, err = _shown(capsys, run / "run" / "placement.json", "--cluster", run / "missing.json")
    assert code == 2 and "--cluster needs --graph" in err, err


@pytest.mark.parametrize("target", ["placement", "graph"])
def test_show_does_not_draw_over_a_file_it_reads(run, tmp_path, capsys, target):
    """`--draw` at the placement (or graph) being shown replaced it with a PNG, and the next show failed."""
    placement = tmp_path / "placement.json"
    placement.write_bytes((run / "run" / "placement.json").read_bytes())
    graph = tmp_path / "graph.json"
    graph.write_bytes((run / "graph.json").read_bytes())
    before = {p: p.read_bytes() for p in (placement, graph)}
    code, err = _shown(capsys, placement, "--graph", graph, "--draw", placement if target == "placement" else graph)
    assert code == 2 and "is the file" in err and "being shown" in err, err
    assert {p: p.read_bytes() for p in before} == before


def test_drawing_onto_a_folder_says_cannot_write_once(run, tmp_path, capsys):
    folder = tmp_path / "adir"
    folder.mkdir()
    code, err = _shown(capsys, run / "run" / "placement.json", "--graph", run / "graph.json", "--draw", folder)
    assert code == 2 and err.count("cannot write") == 1, err


def test_place_checkpoint_is_a_file_never_a_method_name(run):
    """`gplace place checkpoint=heft` ran the HEFT baseline (rc 0) and `checkpoint=learned` trained a search."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "-m", "gplace", "place", "logger=none", "graph=file",
                           f"graph.path={run / 'graph.json'}", "cluster=file", f"cluster.path={run / 'cluster.json'}",
                           "checkpoint=heft", f"hydra.run.dir={run / 'by_checkpoint'}"],
                          cwd=run, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "no policy file at 'heft'" in proc.stderr, proc.stderr[-2000:]
    assert not (run / "by_checkpoint" / "placement.json").exists()
