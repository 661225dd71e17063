"""The commands: ``gplace place`` (any method), ``gplace show``, ``gplace train``, ``--help`` and one-line errors."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gplace.ir import Cluster, Device, Op, OpGraph, cluster_to_dict, graph_to_dict, save_json
from gplace.pipeline import PipelineSimulator
from gplace.testing import random_dag, uniform_cluster

ROOT = Path(__file__).resolve().parents[1]


def _gplace(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    return subprocess.run([sys.executable, "-m", "gplace", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    graph, cluster = random_dag(12, seed=4), uniform_cluster(3)
    save_json(graph_to_dict(graph), root / "graph.json")
    save_json(cluster_to_dict(cluster), root / "cluster.json")
    save_json(graph_to_dict(random_dag(12, seed=5)), root / "other.json")
    return root


def _file_args(root: Path) -> list[str]:
    return ["graph=file", f"graph.path={root / 'graph.json'}", "cluster=file", f"cluster.path={root / 'cluster.json'}"]


@pytest.mark.parametrize("method", ["heft", "pretrained"])
def test_place_writes_a_placement_with_a_per_device_summary_that_show_prints_and_draws(files, method):
    out = files / method
    proc = _gplace("place", f"method={method}", "samples=2", *_file_args(files), f"hydra.run.dir={out}", cwd=files)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "placement.json").read_text())
    summary = doc["per_device"]
    assert sum(row["ops"] for row in summary.values()) == 12 and set(summary) == set(doc["devices"])
    assert all(row["compute_seconds"] >= 0 and row["peak_memory"] >= 0 for row in summary.values())
    assert sum(r["bytes_in"] for r in summary.values()) == sum(r["bytes_out"] for r in summary.values())
    proc = _gplace("show", str(out / "placement.json"), "--graph", str(files / "graph.json"), "--draw",
                   str(out / "placement.png"), cwd=files)
    assert proc.returncode == 0, proc.stderr
    for device in doc["devices"]:
        assert device in proc.stdout
    assert "peak memory" in proc.stdout and "bytes in" in proc.stdout
    assert (out / "placement.png").read_bytes()[:4] == b"\x89PNG"


def test_show_with_the_graph_and_cluster_checks_the_placement_and_computes_its_figures(files):
    """A file edited after it was written (ops moved, a device the cluster lacks) was shown with its stale figures
    even where --graph and --cluster were given."""
    proc = _gplace("place", "method=heft", *_file_args(files), f"hydra.run.dir={files / 'edited'}", cwd=files)
    assert proc.returncode == 0, proc.stderr
    path = files / "edited" / "placement.json"
    doc = json.loads(path.read_text())
    moved = doc["devices"][-1]
    doc["placement"] = dict.fromkeys(doc["placement"], moved)
    path.write_text(json.dumps(doc))
    given = ["--graph", str(files / "graph.json"), "--cluster", str(files / "cluster.json")]
    proc = _gplace("show", str(path), *given, cwd=files)
    assert proc.returncode == 0, proc.stderr
    assert next(line for line in proc.stdout.splitlines() if moved in line).split("\u2502")[2].strip() == "12"
    doc["placement"][next(iter(doc["placement"]))] = "/TPU:0"
    path.write_text(json.dumps(doc))
    proc = _gplace("show", str(path), *given, cwd=files)
    assert proc.returncode == 2 and "/TPU:0" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_show_on_another_cluster_titles_the_figures_it_computed_and_marks_memory_over_capacity(files):
    """With --cluster of another name, speed or memory, the table's figures were computed on it but its title kept
    the file's cluster and step time (4.022 ms where the step took 341 s), and a device holding 400 MB against
    16 B was shown as fitting."""
    from gplace.ir import Cluster, Device

    proc = _gplace("place", "method=heft", *_file_args(files), f"hydra.run.dir={files / 'elsewhere'}", cwd=files)
    assert proc.returncode == 0, proc.stderr
    tiny = Cluster.build([Device(f"/GPU:{i}", "gpu", 2.0, 16) for i in range(3)], default_bandwidth=12.0,
                         name="tiny")
    save_json(cluster_to_dict(tiny), files / "tiny.json")
    doc = json.loads((files / "elsewhere" / "placement.json").read_text())
    proc = _gplace("show", str(files / "elsewhere"), "--graph", str(files / "graph.json"), "--cluster",
                   str(files / "tiny.json"), cwd=files)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "on tiny (sim-v1, computed now: failed: out of memory on /GPU:0: needs " in text and "(and 2 more))" in text
    assert "> 16 B" in text
    assert f"(the file's own run: {doc['graph']} on {doc['cluster']} (sim-v1: " in text


def test_a_giph_graph_file_runs_without_the_days_of_compute_warning(files):
    """GiPH's costs are its own units: every run of a GiPH file warned of days of compute, which no user could act
    on; a gplace graph file of the same costs still warns."""
    nodes = [{"id": i, "compute": 90_000.0} for i in range(2)]
    (files / "giph.json").write_text(json.dumps({"name": "giph", "nodes": nodes, "edges": [
        {"src": 0, "dst": 1, "bytes": 1000.0}]}))
    said = []
    for path in (files / "giph.json", files / "slow.json"):
        if path.name == "slow.json":
            slow = OpGraph.from_ops([Op("a", "T", 90_000.0), Op("b", "T", 90_000.0)], [], name="giph")
            save_json(graph_to_dict(slow), path)
        proc = _gplace("place", "method=heft", "graph=file", f"graph.path={path}", f"hydra.run.dir={files / path.stem}",
                       cwd=files)
        assert proc.returncode == 0, proc.stderr
        said.append("days of compute" in proc.stderr)
    assert said == [False, True]


def test_a_cluster_given_in_other_units_is_warned_about(files):
    """Memory in GB (16), a bandwidth in GB/s (12) and a latency in ms (20) ran without a word: every placement out
    of memory, or a step of 341 s reported as found."""
    from gplace.ir import Cluster, Device
    from gplace.ir.cluster import unlikely_units

    odd = Cluster.build([Device("/GPU:0", "gpu", 1.0, 16), Device("/GPU:1", "gpu", 1.0, 16 * 10**9)],
                        default_bandwidth=12.0, default_latency=20.0, name="odd")
    assert [line.split(" (")[0] for line in unlikely_units(odd)] == [
        "cluster odd: memory under 1 MB on /GPU:0", "cluster odd: a bandwidth under 1 MB/s",
        "cluster odd: a latency over 1 s"]
    assert unlikely_units(uniform_cluster(3), random_dag(12, seed=4)) == []
    slow = OpGraph.from_ops([Op("a", "T", 90_000.0), Op("b", "T", 90_000.0)], [], name="giph")
    assert unlikely_units(uniform_cluster(3), slow) == [
        f"graph giph: its ops add up to 2.1 days of compute on cluster {uniform_cluster(3).name}, each on its fastest "
        "device (op costs are in seconds, device speeds relative to the reference; a GiPH graph's costs are its own "
        "units)"]
    save_json(cluster_to_dict(odd), files / "odd.json")
    proc = _gplace("place", "method=heft", "graph=file", f"graph.path={files / 'graph.json'}", "cluster=file",
                   f"cluster.path={files / 'odd.json'}", f"hydra.run.dir={files / 'odd'}", cwd=files)
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "cluster odd: memory under 1 MB on /GPU:0 (memory is in bytes: 16 GB is 16e9)" in said
    assert "a bandwidth under 1 MB/s (bandwidths are in bytes per second: 6 GB/s is 6e9): /GPU:0 -> /GPU:1, " \
           "/GPU:1 -> /GPU:0, e.g. 12" in said


def test_show_errors_are_one_line(files):
    out = files / "heft"
    if not (out / "placement.json").exists():
        pytest.skip("needs the placement of the test above")
    proc = _gplace("show", str(out / "placement.json"), "--graph", str(files / "other.json"), "--draw",
                   str(files / "x.png"), cwd=files)
    assert proc.returncode == 2 and proc.stderr.startswith("gplace: error:") and "places another graph" in proc.stderr
    proc = _gplace("show", str(out / "placement.json"), "--graph", str(files / "other.json"), cwd=files)
    assert proc.returncode == 2 and "places another graph" in proc.stderr  # its stored summary was shown
    proc = _gplace("show", str(files / "graph.json"), cwd=files)
    assert proc.returncode == 2 and "is not a gplace.placement file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_show_reads_a_run_directory_and_says_why_one_has_no_placement(files):
    """`gplace show <run dir>` gave IsADirectoryError, and a killed run's missing placement.json a bare
    FileNotFoundError."""
    out = files / "heft"
    if not (out / "placement.json").exists():
        pytest.skip("needs the placement of the test above")
    proc = _gplace("show", str(out), cwd=files)
    assert proc.returncode == 0 and "peak memory" in proc.stdout, proc.stderr
    killed = files / "killed"
    killed.mkdir()
    (killed / "checkpoint.pt").write_bytes(b"")
    proc = _gplace("show", str(killed), cwd=files)
    assert proc.returncode == 2 and "stopped before the end" in proc.stderr and f"hydra.run.dir={killed}" in \
        proc.stderr and "Traceback" not in proc.stderr, proc.stderr


SUMMARY = ("ops", "compute_seconds", "peak_memory", "bytes_in", "bytes_out")


@pytest.mark.parametrize("doc, match", [
    ({"placement": {"a": {"device": 0}}}, "'placement' must be an object of op name -> device name"),
    ({"placement": {"a": "/CPU:0"}, "step_time": "fast"}, "'step_time' must be a number >= 0 or null"),
    ({"placement": {"a": "/CPU:0"}, "per_device": {"/CPU:0": {"ops": 1}}},
     "needs a number >= 0 for 'compute_seconds'"),
    ({"placement": {"a": "/CPU:0"}, "step_time": float("nan")}, "'step_time' must be a number >= 0 or null, got nan"),
    ({"placement": {"a": "/CPU:0"}, "stages": 5}, "'stages' must be an object of device name -> its ops"),
    ({"placement": {"a": "/CPU:0"}, "step_time": 10**400},  # math.isnan overflowed: an OverflowError traceback
     "'step_time' must be a number >= 0 or null, got an integer too large for a float"),
    ({"placement": {"a": "/CPU:0"}, "per_device": {"/CPU:0": {"ops": 10**400}}}, "needs a number >= 0 for 'ops'"),
    ({"placement": {"a": "/CPU:0"}, "step_time": -1}, "'step_time' must be a number >= 0 or null, got -1"),
    ({"placement": {"a": "/CPU:0"}, "per_device": {"/CPU:0": {**dict.fromkeys(SUMMARY, 1), "bytes_in": -1}}},
     "needs a number >= 0 for 'bytes_in'"),
    ({"placement": {"a": "/GPU:1", "b": "/GPU:1"}, "per_device": {"/GPU:1": dict.fromkeys(SUMMARY, 0)}},
     "per_device['/GPU:1'] counts 0 ops, the placement puts 2 there (the file was changed after it was written)"),
], ids=["placement", "step_time", "summary", "nan", "stages", "huge_step_time", "huge_summary", "negative_step_time",
        "negative_bytes", "stale_summary"])
def test_show_names_the_field_of_a_malformed_placement_file(files, doc, match):
    """Also a summary the placement contradicts (ops moved by hand after the file was written) and negative
    figures: they were printed as they were ('0 ops' where 2 are, '-1 B'), exit 0."""
    path = files / "malformed.json"
    path.write_text(json.dumps({"format": "gplace.placement", "version": 1, **doc}))
    proc = _gplace("show", str(path), cwd=files)
    assert proc.returncode == 2 and match in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def _marked_up_files(root: Path) -> list[str]:
    """A graph, a cluster and its devices named like Rich markup and emoji codes."""
    from dataclasses import replace

    cluster = uniform_cluster(3)
    devices = [replace(d, name=n) for d, n in zip(cluster.devices, ["[red]gpu2", "_gpu1", "gpu\\"], strict=True)]
    save_json(graph_to_dict(replace(random_dag(12, seed=4), name="net[/v2] :cat:")), root / "marked_graph.json")
    save_json(cluster_to_dict(replace(cluster, name="[bold]c", devices=tuple(devices))), root / "marked_cluster.json")
    return ["graph=file", f"graph.path={root / 'marked_graph.json'}", "cluster=file",
            f"cluster.path={root / 'marked_cluster.json'}"]


def test_names_and_paths_are_printed_as_they_are_not_as_markup(files, capsys):
    """Printed as Rich markup, a graph named ``net[/v2]`` ended `gplace place` (after writing its files), `gplace
    show` and the training table in a MarkupError traceback; a run directory ``runs/[exp1]`` was printed without
    ``[exp1]``, a device ``[red]gpu2`` as ``gpu2``, ``:cat:`` as an emoji."""
    import argparse

    import gplace
    from gplace.cli import _print_table, _show
    from gplace.importers import load_cluster, load_graph

    args = _marked_up_files(files)
    out = files / "[exp1]"
    proc = _gplace("place", "method=round_robin", *args, f"hydra.run.dir='{out}'", cwd=files)
    assert proc.returncode == 0, proc.stderr
    assert "placed net[/v2] :cat: (12 ops) on [bold]c with round_robin" in proc.stdout
    assert f"wrote{out}" in "".join(proc.stdout.split())  # however Rich wraps it
    _show(argparse.Namespace(placement=str(out / "placement.json"), graph=None, cluster=None, draw=None))
    shown = capsys.readouterr().out
    assert "net[/v2] :cat: on [bold]c" in shown and all(d in shown for d in ("[red]gpu2", "_gpu1", "gpu\\ "))
    graph, cluster = load_graph(files / "marked_graph.json"), load_cluster(files / "marked_cluster.json")
    _print_table(gplace.place(graph, cluster, method="heft"), files / "[exp2]")
    shown = capsys.readouterr().out
    assert "net[/v2] :cat: (12 ops) on [bold]c" in shown and "single [red]gpu2" in shown and "[exp2]" in shown


def test_a_drawing_keeps_every_device_in_its_legend_and_every_op_name_in_its_dot_labels(tmp_path, monkeypatch):
    """matplotlib left a device named ``_gpu1`` out of the legend (a label starting with '_' is hidden), and op
    names went into Graphviz's DOT labels unescaped: an op ``q"uote`` made invalid DOT."""
    import re

    import matplotlib.figure

    import gplace.show
    from gplace.ir import Edge, Op, OpGraph

    names = ['q"uote', "back\\slash", 'both\\"', "plain"]
    edges = [Edge(a, b) for a, b in zip(names, names[1:], strict=False)]
    graph = OpGraph.from_ops([Op(n, "T", 1.0) for n in names], edges)
    devices = ["_gpu1", "gpu0"]
    assignment = {n: devices[k % 2] for k, n in enumerate(names)}
    legends, sent = [], []
    save = matplotlib.figure.Figure.savefig

    def spy(fig, *args, **kwargs):
        legends.append([t.get_text() for t in fig.axes[0].get_legend().get_texts()])
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    monkeypatch.setattr(gplace.show.shutil, "which", lambda name: None)
    gplace.show.draw_placement(graph, devices, assignment, tmp_path / "m.png")
    assert legends == [devices] and (tmp_path / "m.png").read_bytes()[:4] == b"\x89PNG"
    monkeypatch.setattr(gplace.show.shutil, "which", lambda name: "/usr/bin/dot")  # a stand-in keeps the text sent
    monkeypatch.setattr(gplace.show.subprocess, "run", lambda cmd, input, **kwargs: sent.append(input))
    gplace.show.draw_placement(graph, devices, assignment, tmp_path / "d.png")
    labels = re.findall(r'label="((?:[^"\\]|\\.)*)", fillcolor', sent[0])
    assert [re.sub(r"\\(.)", r"\1", label) for label in labels] == names


def test_place_with_an_unknown_method_is_one_line(files):
    proc = _gplace("place", "method=magic", *_file_args(files), f"hydra.run.dir={files / 'bad'}", cwd=files)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("gplace: error: ValueError: unknown method 'magic'; give a baseline "
                                   "['heft', 'm_etf', 'm_sct', 'm_topo', 'metis', 'random', 'round_robin', 'single'],"
                                   " a pipeline placer ['gpipe', 'ideal_dp', 'ilp', 'local_search', 'pipedream'], a "
                                   "learned method ['device_aware', 'gdp', 'learned', 'list_scheduling', 'mlp', "
                                   "'seq2seq', 'superposition'], 'pretrained', or the path of a policy file")


def test_place_refuses_a_training_runs_directory_and_keeps_its_results(files):
    """`gplace place method=round_robin` in a training run's directory replaced its placement.json (3.4x slower),
    trace and .hydra/ record, silently, beside the run's checkpoint and policy (found by a probe of the output
    files); a baseline in a search's directory likewise."""
    run = files / "trained"
    trained = _gplace("trainer.updates=1", "trainer.samples_per_update=2", "logger=none", *_file_args(files),
                      f"hydra.run.dir={run}", cwd=files)
    assert trained.returncode == 0, trained.stderr
    before = (run / "placement.json").read_bytes()
    proc = _gplace("place", "method=round_robin", *_file_args(files), f"hydra.run.dir={run}", cwd=files)
    assert proc.returncode == 2
    assert "holds a training run (policy.pt)" in proc.stderr and f"checkpoint={run / 'policy.pt'}" in proc.stderr
    assert (run / "placement.json").read_bytes() == before
    searched = files / "searched"
    assert _gplace("place", "method=learned", "samples=2", *_file_args(files), f"hydra.run.dir={searched}",
                   cwd=files).returncode == 0
    proc = _gplace("place", "method=heft", *_file_args(files), f"hydra.run.dir={searched}", cwd=files)
    assert proc.returncode == 2 and "holds a search's checkpoint.pt: method=heft" in proc.stderr
    proc = _gplace("place", "method=pretrained", *_file_args(files), f"hydra.run.dir={searched}", cwd=files)
    assert proc.returncode == 2 and "holds a search's checkpoint.pt: method=pretrained" in proc.stderr


def test_place_splits_pipeline_stages_for_the_pipeline_objective(files):
    out = files / "ideal_dp"
    proc = _gplace("place", "method=ideal_dp", "objective=pipeline", "objective.microbatches=8", *_file_args(files),
                   f"hydra.run.dir={out}", cwd=files)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "placement.json").read_text())
    assert doc["runtime"] == "pipe-v3/1f1b/m8" and doc["stages"]
    names = {e.get("name", "") for e in json.loads((out / "trace.json").read_text())["traceEvents"]}
    assert any(name.endswith("[mb 7]") for name in names)  # the pipelined mini-batch's timeline, not one step's
    rows = doc["per_device"].values()
    assert all(0 <= row["bubble"] <= 1 and row["in_flight"] >= 0 for row in rows)
    assert any(row["in_flight"] >= 1 for row in rows)
    shown = _gplace("show", str(out / "placement.json"), cwd=files)
    assert shown.returncode == 0 and "bubble" in shown.stdout and "flight" in shown.stdout  # headers may wrap
    proc = _gplace("place", "method=ideal_dp", *_file_args(files), f"hydra.run.dir={files / 'no_objective'}",
                   cwd=files)
    assert proc.returncode == 2 and "measures no micro-batches" in proc.stderr and "objective=pipeline" in proc.stderr


def test_place_refines_a_split_with_the_pipeline_local_search(files):
    """``refine=S``: S seconds of the pipeline local search's descent from the placement found (gplace.place's
    ``refine``); refused, naming what to pass, without a pipeline objective."""
    args = ["place", "method=gpipe", "objective=pipeline", "objective.microbatches=8", *_file_args(files)]
    plain, refined = files / "gpipe", files / "gpipe_refined"
    assert _gplace(*args, f"hydra.run.dir={plain}", cwd=files).returncode == 0
    proc = _gplace(*args, "refine=20", f"hydra.run.dir={refined}", cwd=files)
    assert proc.returncode == 0, proc.stderr
    times = [json.loads((out / "placement.json").read_text())["step_time"] for out in (plain, refined)]
    assert times[1] < times[0]
    from gplace.ir.errors import format_seconds

    assert f"refine's descent from {format_seconds(times[0])}" in " ".join(proc.stdout.split())
    proc = _gplace("place", "method=heft", "refine=5", *_file_args(files), f"hydra.run.dir={files / 'r'}", cwd=files)
    assert proc.returncode == 2 and "refine=5 descends on pipe-v3's mini-batch time" in proc.stderr
    for bad in ("abc", "true", "null"):  # a traceback, exit 1: refused in one line as refine=-1 was
        proc = _gplace("place", "method=gpipe", "objective=pipeline", f"refine={bad}", *_file_args(files),
                       f"hydra.run.dir={files / 'r'}", cwd=files)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "refine must be seconds, a finite number >= 0 (0: none), got " in proc.stderr


def test_bench_errors_go_through_the_same_one_line_path(files):
    proc = _gplace("bench", "cases=[['graph=file','graph.path=/nowhere/g.json']]", f"out_dir={files / 'bench'}",
                   cwd=files)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("gplace: error:") and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command, expected", [
    (["train"], "gplace [train]: learn a placement"), ([], "Main options: graph=..."),
    (["place"], "method=pretrained|heft"), (["bench"], "search.seconds=S"), (["show"], "--draw IMAGE"),
])
def test_every_command_has_help_listing_its_main_options(tmp_path, command, expected):
    proc = _gplace(*command, "--help", cwd=tmp_path)
    assert proc.returncode == 0 and expected in proc.stdout


@pytest.mark.parametrize(("command", "listed"), [
    ([], ["encoder: custom, gat, gin, gnn, lstm, sage\n", "trainer: ppo, reinforce\n"]),
    (["place"], ["objective: pipeline, pipeline_steady, step\n"]),
    (["bench"], ["(none: this command selects no group)"]),
    (["bench", "--config-name", "bench_pipeline"], ["(none: this command selects no group)"]),
])
def test_help_lists_the_config_groups_without_the_generated_defaults(tmp_path, command, listed):
    """``--help`` listed seven ``_defaults/<group>`` groups beside the real ones (gplace.conf's generated nodes,
    no choices of their own); a folder of one's own given with ``--config-dir`` is still listed, where the command
    takes that group (``gplace place`` takes no encoder, ``gplace bench`` no group: they listed every one)."""
    (tmp_path / "mine" / "encoder").mkdir(parents=True)
    (tmp_path / "mine" / "encoder" / "custom.yaml").write_text("_target_: gplace.encoders.LSTMEncoder\n")
    proc = _gplace(*command, "--config-dir", str(tmp_path / "mine"), "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    groups = proc.stdout.split("== Configuration groups ==")[1].split("== Config ==")[0]
    assert "_defaults" not in groups and "$" not in groups
    assert all(line in groups for line in listed), groups
    assert ("encoder:" in groups) == (command == [])


def test_show_lists_a_pipelines_devices_by_rank(files):
    """A pipelined mini-batch's placement lists its devices in the order of its ``stages``, each with its rank
    (the order of its first stage, as torch-pipeline-v1 numbers its processes); one step's has no ranks (every
    placement lists its stages: a rank column was shown for sim-v1's too)."""
    out = files / "heft_stages"
    proc = _gplace("place", "method=heft", *_file_args(files), f"hydra.run.dir={out}", cwd=files)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "placement.json").read_text())
    assert doc["stages"] and "rank" not in _gplace("show", str(out / "placement.json"), cwd=files).stdout
    used = list(dict.fromkeys(doc["placement"].values()))
    assert len(used) >= 2  # else the order below would test nothing
    doc["stages"] = {device: [op for op, d in doc["placement"].items() if d == device] for device in used[::-1]}
    for row in doc["per_device"].values():  # as pipe-v3's summary has them
        row.update(bubble=0.5, in_flight=1)
    save_json(doc, files / "pipeline.json")
    proc = _gplace("show", str(files / "pipeline.json"), cwd=files)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if any(d in line for d in doc["devices"])]
    assert [next(d for d in doc["devices"] if d in line) for line in rows][:len(used)] == used[::-1]
    assert "rank" in proc.stdout and [row.split()[1] for row in rows[:len(used)]] == [str(k) for k in range(len(used))]


def test_a_warm_start_that_is_neither_a_file_nor_a_placer_is_one_line(files):
    proc = _gplace("warm_start=ideal_dpp", "logger=none", *_file_args(files), f"hydra.run.dir={files / 'warm'}",
                   cwd=files)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "warm_start='ideal_dpp' is neither a placement.json nor a placer's name" in proc.stderr
    proc = _gplace(f"warm_start={files / 'gone.json'}", "logger=none", *_file_args(files),
                   f"hydra.run.dir={files / 'warm'}", cwd=files)
    assert proc.returncode == 2 and "gone.json' is not a file" in proc.stderr
    proc = _gplace(f"warm_start={files / 'cluster.json'}", "logger=none", *_file_args(files),
                   f"hydra.run.dir={files / 'warm'}", cwd=files)
    assert proc.returncode == 2 and "cluster.json': expected format 'gplace.placement'" in proc.stderr
    from gplace.ir import Placement, placement_to_dict

    other = random_dag(12, seed=5)  # a placement of another graph: its error did not say it came from warm_start
    save_json(placement_to_dict(Placement.for_graph(other, [0] * 12), other, uniform_cluster(3)),
              files / "other_placement.json")
    proc = _gplace(f"warm_start={files / 'other_placement.json'}", "logger=none", *_file_args(files),
                   f"hydra.run.dir={files / 'warm'}", cwd=files)
    assert proc.returncode == 2 and "other_placement.json': placement is for graph 'random_dag12_5'" in proc.stderr
    assert "by_name" not in proc.stderr, proc.stderr  # the API's hint; the command line has no by_name


def test_a_warm_start_of_the_same_graph_with_other_contents_starts_from_it_by_op_name(tmp_path, caplog):
    """After an upgrade changed a built-in graph's costs (so its fingerprint), the old run's placement.json was
    refused as another graph's; a placement of the same graph name and op names is a warm start by name now, with a
    WARNING, and one of other op names is still refused."""
    from omegaconf import OmegaConf

    from gplace.cli import _warm_start
    from gplace.ir import GraphError, InvalidPlacementError, Placement, placement_to_dict

    graph, cluster = random_dag(12, seed=5), uniform_cluster(3)
    devices = [k % 3 for k in range(12)]
    doc = placement_to_dict(Placement.for_graph(graph, devices), graph, cluster)
    save_json({**doc, "graph_fingerprint": "0123456789abcdef"}, tmp_path / "old.json")  # its costs then
    cfg = OmegaConf.create({"warm_start": str(tmp_path / "old.json")})
    with caplog.at_level(logging.WARNING, logger="gplace"):
        assert _warm_start(cfg, graph, cluster).devices.tolist() == devices
    assert "with other contents (fingerprint 0123456789abcdef" in caplog.text
    renamed = {**doc, "graph_fingerprint": "0123456789abcdef",
               "placement": {f"x{op}": d for op, d in doc["placement"].items()}}
    save_json(renamed, tmp_path / "renamed.json")
    with pytest.raises(InvalidPlacementError, match="renamed.json': placement is for graph") as refused:
        _warm_start(OmegaConf.create({"warm_start": str(tmp_path / "renamed.json")}), graph, cluster)
    assert "by_name" not in str(refused.value)  # the API's hint: the command line has no by_name
    (tmp_path / "list.json").write_text("[1, 2]")  # an AttributeError from the by-name check before
    with pytest.raises((GraphError, InvalidPlacementError), match="list.json'"):
        _warm_start(OmegaConf.create({"warm_start": str(tmp_path / "list.json")}), graph, cluster)


def test_place_gives_local_search_its_own_budget_unless_one_is_set():
    from omegaconf import OmegaConf

    from gplace.cli import _place_budget

    cfg = OmegaConf.create({"budget": None, "samples": 16})
    assert _place_budget(cfg, "pretrained") == "16 samples" and _place_budget(cfg, "learned") == "16 samples"
    assert _place_budget(cfg, "local_search") is None  # PipelineLocalSearch's 10 s, not 16 evaluations
    none = OmegaConf.create({"budget": None, "samples": 0})  # heft measures nothing: samples=0 was refused for it
    assert _place_budget(none, "heft") is None and _place_budget(none, "pretrained") == "0 samples"
    with pytest.raises(SystemExit):
        _place_budget(none, "learned")
    assert _place_budget(OmegaConf.create({"budget": "500 samples", "samples": 16}), "local_search") == "500 samples"


def test_place_names_the_settings_it_does_not_use(caplog):
    """A budget for a baseline and a method beside a policy file were dropped without a word."""
    from omegaconf import OmegaConf

    from gplace.cli import _place_budget

    with caplog.at_level(logging.WARNING, logger="gplace"):
        assert _place_budget(OmegaConf.create({"budget": 5, "samples": 16}), "heft") is None
        assert _place_budget(OmegaConf.create({"budget": 2, "samples": 16}), "ideal_dp") is None  # exact: no search
    assert "budget=5 is unused: method heft takes no budget" in caplog.text
    assert "budget=2 is unused: method ideal_dp takes no budget" in caplog.text


@pytest.mark.parametrize(("overrides", "message"), [
    (["method=heft", "write_back=maybe"], "gplace: error: write_back must be true or false, got 'maybe'"),
    (["method=pretrained", "samples=null"], "gplace: error: samples must be a whole number >= 0, got None"),
    (["method=heft", "seed=null"], "gplace: error: seed must be a whole number from 0 to 4294967295, got None"),
    (["method=learned", "split_groups=maybe"], "gplace: error: split_groups must be true or false, got 'maybe'"),
    (["method=learned", "split_groups=true"], "split_groups=True splits groups to express a warm_start"),
])
def test_place_settings_of_the_wrong_type_are_one_line(files, overrides, message):
    """write_back=maybe was true; samples=null blamed 'budget' (never set); seed=null was accepted."""
    proc = _gplace("place", *overrides, *_file_args(files), f"hydra.run.dir={files / 'bad'}", cwd=files)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_place_splits_groups_to_start_from_a_warm_start_baseline(files):
    """The hint for a placement no group search could pack named split_groups=True, which `gplace place` had no key
    for."""
    out = files / "split"
    proc = _gplace("place", "method=learned", "samples=2", "warm_start=heft", "split_groups=true",
                   *_file_args(files), f"hydra.run.dir={out}", cwd=files)
    assert proc.returncode == 0, proc.stderr
    assert (out / "placement.json").is_file()


def test_place_takes_warm_start_as_gplace_and_gplace_place_do(files, tmp_path):
    """`gplace place` named it warm_start_baseline (a placer's name only), where `gplace` and gplace.place take
    warm_start (a placement.json too): `gplace place warm_start=heft` was Hydra's "Key 'warm_start' is not in
    struct". The old name still works, with a WARNING."""
    learned = ("place", "method=learned", "samples=2", *_file_args(files))
    heft = tmp_path / "heft"
    assert _gplace("place", "method=heft", *_file_args(files), f"hydra.run.dir={heft}", cwd=files).returncode == 0
    for start in ("heft", str(heft / "placement.json")):
        proc = _gplace(*learned, f"warm_start={start}", f"hydra.run.dir={tmp_path / 'new'}", cwd=files)
        assert proc.returncode == 0 and "warm_start_baseline" not in proc.stderr, proc.stderr
    proc = _gplace(*learned, "warm_start_baseline=heft", f"hydra.run.dir={tmp_path / 'old'}", cwd=files)
    assert proc.returncode == 0 and "warm_start_baseline is warm_start's old name: use warm_start=heft" in proc.stderr
    proc = _gplace(*learned, "warm_start=heft", "warm_start_baseline=m_etf", f"hydra.run.dir={tmp_path / 'both'}",
                   cwd=files)
    assert proc.returncode == 2 and "give warm_start alone" in proc.stderr and "Traceback" not in proc.stderr
    proc = _gplace(*learned, "warm_start=heft", "warm_start_baseline=heft", f"hydra.run.dir={tmp_path / 'same'}",
                   cwd=files)  # it said "use warm_start=heft", which was given
    assert proc.returncode == 0 and "warm_start_baseline is warm_start's old name: drop it" in proc.stderr


def test_place_with_a_policy_file_says_a_method_given_beside_it_is_unused(files):
    policy = ROOT / "gplace" / "data" / "list_scheduling_giph.pt"
    proc = _gplace("place", "method=heft", f"checkpoint={policy}", "samples=0", *_file_args(files),
                   f"hydra.run.dir={files / 'both'}", cwd=files)
    assert proc.returncode == 0, proc.stderr
    assert "method=heft is unused: checkpoint=" in proc.stdout + proc.stderr


def test_place_checks_a_budget_before_using_it_or_not(capsys):
    """budget=0 fell back to 16 samples (0 is falsy); budget=abc for a baseline was only 'unused'."""
    from omegaconf import OmegaConf

    from gplace.cli import _place_budget

    for budget, method in ((0, "learned"), ("abc", "heft")):
        with pytest.raises(SystemExit):
            _place_budget(OmegaConf.create({"budget": budget, "samples": 16}), method)
        assert f"gplace: error: budget={budget!r}:" in capsys.readouterr().err


def test_a_users_module_from_the_config_can_be_saved():
    """A user's encoder without init_kwargs ran the whole search, then failed to save policy.pt."""
    from omegaconf import OmegaConf

    from gplace.cli import _savable
    from gplace.pretrained import module_spec

    module = _savable(OmegaConf.create({"_target_": "torch.nn.Linear", "in_features": 4, "out_features": 2}), "encoder")
    assert module_spec(module)["kwargs"] == {"in_features": 4, "out_features": 2}
    partial = OmegaConf.create({"_target_": "torch.nn.Linear", "_partial_": True, "in_features": 4})
    assert module_spec(_savable(partial, "policy", out_features=3))["kwargs"] == {"in_features": 4, "out_features": 3}


def test_the_summary_says_when_the_result_is_a_single_device_fallback():
    """It said 'the greedy or warm-start placement' for every op on one device."""
    import math

    import numpy as np

    from gplace.cli import _found
    from gplace.ir import Placement
    from gplace.runtime import Measurement
    from gplace.testing import chain
    from gplace.training import TrainResult

    g = chain()
    result = TrainResult(Placement.single(g, 0), Measurement(True, 1.0, "sim-v1"), 8, 1.0,
                         sample_step_times=np.full(8, 2.0), found_at=-math.inf)
    assert _found(result) == "the best is every op on one device (the search found nothing faster)"
    assert _found(TrainResult(Placement.single(g, 0), Measurement(True, 2.0, "sim-v1"), 8, 1.0,
                              sample_step_times=np.array([3.0, 2.0]))) == "the best found by sample 2"
    unsampled = TrainResult(Placement.single(g, 0), Measurement(True, 1.0, "sim-v1"), 8, 1.0,
                            sample_step_times=np.full(8, 2.0))  # no sample was the best: the greedy decode was
    assert _found(unsampled) == "the best is the trained policy's greedy placement"
    assert _found(unsampled, warm_started=True) == "the best is the warm start's or the trained policy's greedy " \
        "placement"
    refined = TrainResult(Placement.single(g, 0), Measurement(True, 1.0, "sim-v1"), 8, 1.0,
                          sample_step_times=np.full(8, 2.0), refined_from=2.0)
    assert _found(refined) == "the best is refine's descent from the search's 2000.000 ms"


def test_a_placement_measured_by_another_runtime_says_its_summary_and_trace_are_sim_v1s(files):
    """trace.json and the per-device summary are sim-v1's schedule whatever measured the step: with the steady-state
    score (or a real runtime) their step time differed from placement.json's, and nothing said why."""
    out = files / "steady"
    proc = _gplace("place", "method=heft", "objective=pipeline_steady", *_file_args(files), f"hydra.run.dir={out}",
                   cwd=files)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "placement.json").read_text())
    assert doc["runtime"].startswith("pipe-steady-v1") and doc["summary_model"] == "sim-v1"
    assert json.loads((out / "trace.json").read_text())["otherData"]["model"] == "sim-v1"
    shown = " ".join(_gplace("show", str(out / "placement.json"), cwd=files).stdout.split())
    assert "are the sim-v1 model of this placement, not pipe-steady-v1" in shown
    heft = json.loads((files / "heft" / "placement.json").read_text()) if (files / "heft").exists() else None
    assert heft is None or "summary_model" not in heft  # measured by sim-v1 itself


@pytest.mark.parametrize("args", [["--version"], ["bench", "--version"]])
def test_version_is_gplaces_not_hydras_alone(tmp_path, args):
    """``gplace --version`` printed Hydra's version ("Hydra 1.3.8") and not gplace's."""
    import hydra

    import gplace

    proc = _gplace(*args, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == f"gplace {gplace.__version__} (Hydra {hydra.__version__})"


def test_a_part_of_ones_own_is_selected_from_a_config_folder_as_the_readme_says(tmp_path):
    """README's "Parts of your own": a config group file in a folder on Hydra's search path."""
    (tmp_path / "myconf" / "encoder").mkdir(parents=True)
    (tmp_path / "myconf" / "encoder" / "mine.yaml").write_text(
        "_target_: gplace.encoders.GNNEncoder\nconv: gin\nhidden_size: 24\n")
    proc = _gplace(f"hydra.searchpath=[file://{tmp_path / 'myconf'}]", "encoder=mine", "policy=mlp",
                   "trainer.updates=1", "logger=none", "graph.steps=2", "graph.hidden=32", "graph.vocab=50",
                   f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    config = (tmp_path / "run" / ".hydra" / "config.yaml").read_text()
    assert "encoder:\n  _target_: gplace.encoders.GNNEncoder\n  conv: gin\n  hidden_size: 24\n" in config


def test_a_graph_with_no_work_prints_and_logs_its_results(tmp_path, capsys):
    """An all-zero-cost graph's learned step time is 0: the table and the W&B results divided by it
    (ZeroDivisionError after placement.json, trace.json and policy.pt were written; the job failed)."""
    from gplace.cli import _print_table, results
    from gplace.experiment import place
    from gplace.ir import Edge, Op, OpGraph
    from gplace.runtime import Simulator

    graph = OpGraph.from_ops([Op(f"o{i}", "T", 0.0) for i in range(4)],
                             [Edge(f"o{i}", f"o{i + 1}", 0) for i in range(3)], name="idle")
    cluster = uniform_cluster(2)
    report = place(graph, cluster, method="learned", budget=2, seed=0, run_dir=tmp_path)
    summary, rows, _ = results(report, Simulator(), tmp_path)
    assert summary["step_time"] == 0.0 and {row["learned_speedup"] for row in rows} == {1.0}
    _print_table(report, tmp_path)
    assert "1.00x" in capsys.readouterr().out


def test_place_takes_logger_none_and_refuses_a_wandb_logger_by_name(tmp_path, capsys):
    """`gplace place ... logger=none` (as `gplace` takes it) was refused by Hydra: "Could not override 'logger'.
    No match in the defaults list."; a W&B logger, which place would not use, is refused saying so."""
    from hydra import compose, initialize_config_module

    from gplace.cli import place_with_policy

    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        assert compose(config_name="place", overrides=["logger=none"]).logger._target_ == "gplace.loggers.NullLogger"
        wandb = compose(config_name="place", overrides=["logger=wandb", "method=heft"])
    with pytest.raises(SystemExit):
        place_with_policy(wandb, tmp_path)
    assert "gplace place keeps no W&B run" in capsys.readouterr().err


def test_place_imports_the_modules_named_for_a_policy_file_of_ones_own_classes(tmp_path, monkeypatch):
    """A policy file naming a class of one's own loads only once its module is imported (gplace imports none a
    file names: importing runs its code); `imports=[...]` imports it first, from the command line."""
    import importlib

    import torch

    from gplace.encoders import GNNEncoder
    from gplace.pretrained import build, save_policy

    (tmp_path / "my_parts_probe.py").write_text("from gplace.policies import DeviceAwarePolicy\n\n\n"
                                                "class MyPolicy(DeviceAwarePolicy):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        mine = importlib.import_module("my_parts_probe")
        torch.manual_seed(0)
        policy_file = save_policy(tmp_path / "mine.pt", build(GNNEncoder, hidden_size=16),
                                  build(mine.MyPolicy, hidden_size=16, state_size=16))
    finally:
        sys.modules.pop("my_parts_probe", None)
    save_json(graph_to_dict(random_dag(12, seed=4)), tmp_path / "graph.json")
    save_json(cluster_to_dict(uniform_cluster(3)), tmp_path / "cluster.json")
    common = ["place", f"checkpoint={policy_file}", "samples=2", *_file_args(tmp_path)]
    refused = _gplace(*common, f"hydra.run.dir={tmp_path / 'refused'}", cwd=tmp_path)
    assert refused.returncode != 0 and "import my_parts_probe before loading" in refused.stderr, refused.stderr
    placed = _gplace(*common, "imports=[my_parts_probe]", f"hydra.run.dir={tmp_path / 'placed'}", cwd=tmp_path)
    assert placed.returncode == 0, placed.stderr
    assert (tmp_path / "placed" / "placement.json").exists()
    for bad, message in (("imports=[no_such_module_here]", "imports: cannot import 'no_such_module_here'"),
                         ("imports=my_parts_probe", "imports='my_parts_probe': a list of module names")):
        proc = _gplace(*common, bad, f"hydra.run.dir={tmp_path / 'bad'}", cwd=tmp_path)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_show_computes_a_pipelines_summary_by_its_own_simulator_and_never_cuts_device_names(tmp_path, monkeypatch):
    """A pipeline's placement.json without its per-device summary, shown with ``--graph`` and ``--cluster``, gets the
    summary its runtime (``pipe-v3/1f1b/m4``) gives, not one sim-v1 step's; device names that share a long prefix
    are printed whole on an 80-column terminal (the table as wide as it needs), not cut to ``/job:localhost/rep...``."""
    monkeypatch.setenv("COLUMNS", "80")
    names = [f"/job:localhost/replica:0/task:0/device:GPU:{i}" for i in range(3)]
    save_json(cluster_to_dict(Cluster.build([Device(n, "gpu", 1.0, 10**10) for n in names], default_bandwidth=1e9,
                                            name="long")), tmp_path / "cluster.json")
    save_json(graph_to_dict(random_dag(12, seed=4)), tmp_path / "graph.json")
    proc = _gplace("place", "method=gpipe", "objective=pipeline", "objective.microbatches=4", *_file_args(tmp_path),
                   f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "run" / "placement.json").read_text())
    del doc["per_device"]
    save_json(doc, tmp_path / "bare.json")
    full = _gplace("show", str(tmp_path / "run" / "placement.json"), cwd=tmp_path).stdout
    bare = _gplace("show", str(tmp_path / "bare.json"), "--graph", str(tmp_path / "graph.json"), "--cluster",
                   str(tmp_path / "cluster.json"), cwd=tmp_path).stdout
    assert "bubble" in bare
    assert "(pipe-v3/1f1b/m4, computed now: " in bare.splitlines()[0]  # the title says the figures are new
    assert bare.splitlines()[1:-1] == full.splitlines()[1:len(bare.splitlines()) - 1]  # the same table
    assert all(name in full for name in names)  # whole, on one line each
    doc["runtime"] = "torch-v1"  # measured by another runtime: the summary computed now is sim-v1's, and says so
    save_json(doc, tmp_path / "torch.json")
    shown = _gplace("show", str(tmp_path / "torch.json"), "--graph", str(tmp_path / "graph.json"), "--cluster",
                    str(tmp_path / "cluster.json"), cwd=tmp_path).stdout
    assert "bubble" not in shown
    assert "sim-v1 model of this placement, computed now, not torch-v1's" in " ".join(shown.split())
    for older in ("pipe-v1", "pipe-v2"):  # an older pipeline simulator's file: today's simulator, and it says so
        doc["runtime"] = f"{older}/1f1b/m4"
        save_json(doc, tmp_path / "older.json")
        shown = _gplace("show", str(tmp_path / "older.json"), "--graph", str(tmp_path / "graph.json"), "--cluster",
                        str(tmp_path / "cluster.json"), cwd=tmp_path).stdout
        now = f"{PipelineSimulator.semantics}/1f1b/m4"
        assert "bubble" in shown and f"({now}, computed now: " in shown.splitlines()[0], older
        assert f"{now} model of this placement, computed now, not {older}/1f1b/m4's" in " ".join(shown.split())
    for runtime, says in (("torch-pipeline-v1/1f1b/m4", "sim-v1 model of this placement, computed now, not "
                           "torch-pipeline-v1/1f1b/m4's"), (None, None)):  # as gplace place writes them; no runtime
        doc["runtime"] = runtime
        save_json(doc, tmp_path / "other.json")
        shown = " ".join(_gplace("show", str(tmp_path / "other.json"), "--graph", str(tmp_path / "graph.json"),
                                 "--cluster", str(tmp_path / "cluster.json"), cwd=tmp_path).stdout.split())
        assert "bubble" not in shown and "None" not in shown and (says is None or says in shown)


@pytest.mark.slow
def test_a_place_job_stops_its_pools_workers_before_it_returns(tmp_path):
    """The pool was left to the interpreter's exit, where a worker still starting (spawned for the last
    measurements) printed a traceback on stderr after the result line (SemLock: no such file)."""
    import multiprocessing

    from hydra import compose, initialize_config_module

    from gplace.cli import place_with_policy

    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="place", overrides=["method=heft", "runtime=simulator_pool", "runtime.workers=2",
                                                       "write_back=false"])
    place_with_policy(cfg, tmp_path)
    assert multiprocessing.active_children() == []


@pytest.mark.slow
def test_a_job_closes_every_layer_of_the_runtime_it_built(tmp_path):
    """A job's cache around a pool: closing the cache alone left the pool's worker running (a pool shared by
    several caches must stay open, so the job, which built both, closes each layer)."""
    from gplace.cli import _closing
    from gplace.ir import Placement
    from gplace.runtime import Simulator
    from gplace.runtime.cache import CachedRuntime
    from gplace.runtime.parallel import PoolRuntime
    from gplace.testing import diamond, uniform_cluster

    g, c = diamond(), uniform_cluster(2)
    with _closing(CachedRuntime(PoolRuntime(Simulator(), workers=1), path=tmp_path / "m.sqlite")) as runtime:
        assert runtime.measure(g, c, Placement.single(g, 0)).ok
        workers = list(runtime.runtime._pool._processes.values())
        assert workers and all(w.is_alive() for w in workers)
    assert not any(w.is_alive() for w in workers) and runtime.runtime._pool is None


@pytest.mark.parametrize(("args", "message"), [
    (["method=null"], "method must be a placer's name, 'pretrained' or a policy file's path, got None"),
    (["checkpoint="], "checkpoint='' names no policy file (an unset shell variable?)"),
    (["method=learned", "warm_start=true"], "warm_start must be a placement.json or a placer's name, got True"),
    (["method=learned", "warm_start_baseline=true"], "warm_start_baseline must be a placement.json or a placer's"),
    (["method=learned", "warm_start=ideal_dp"], "warm_start='ideal_dp': placer 'ideal_dp' splits the graph into"),
    (["method=learned", "warm_start=no_such_placer"], "warm_start='no_such_placer' is neither a placement.json nor"),
])
def test_place_settings_that_name_nothing_are_one_line(files, tmp_path, args, message):
    """method=null and warm_start_baseline=true ended in a TypeError's traceback; checkpoint='' (checkpoint=$CKPT,
    CKPT unset) placed with the shipped policy without a word."""
    proc = _gplace("place", *args, *_file_args(files), f"hydra.run.dir={tmp_path / 'r'}", cwd=files)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_checkpoint_places_whatever_method_says(files, tmp_path):
    """method=null beside a checkpoint is unused, as any method is there (the check for method=null refused it)."""
    from gplace.methods import pretrained_path

    proc = _gplace("place", "method=null", f"checkpoint={pretrained_path()}", "samples=0", *_file_args(files),
                   f"hydra.run.dir={tmp_path / 'r'}", cwd=files)
    assert proc.returncode == 0, proc.stderr


def test_train_warm_start_that_is_no_name_or_file_is_one_line(files, tmp_path):
    """warm_start=true failed inside pathlib (TypeError: expected str, bytes or os.PathLike object, not bool)."""
    proc = _gplace("logger=none", "trainer.updates=1", "warm_start=true", *_file_args(files),
                   f"hydra.run.dir={tmp_path / 'r'}", cwd=files)
    assert proc.returncode == 2 and "warm_start must be a placement.json or a placer's name, got True" in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


def test_a_learned_search_with_no_samples_or_two_budgets_is_said(files, tmp_path):
    """budget='0 samples' was taken for a search where samples=0 is refused; samples= beside budget= was dropped
    without a word."""
    proc = _gplace("place", "method=learned", "budget='0 samples'", *_file_args(files),
                   f"hydra.run.dir={tmp_path / 'a'}", cwd=files)
    assert proc.returncode == 2 and "budget='0 samples': method learned is a search" in proc.stderr, proc.stderr
    proc = _gplace("place", "method=learned", "budget='4 samples'", "samples=5", *_file_args(files),
                   f"hydra.run.dir={tmp_path / 'b'}", cwd=files)
    assert proc.returncode == 0, proc.stderr
    assert "samples=5 is unused: budget=4 samples is the search's budget" in proc.stdout + proc.stderr
