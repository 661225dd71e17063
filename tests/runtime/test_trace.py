"""The Chrome trace of a simulated step (gplace.runtime.trace)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gplace.ir import Placement
from gplace.runtime import schedule, write_chrome_trace
from gplace.testing import MB, chain, diamond, uniform_cluster
from tests.full_disk import fill_disk_on_write


def test_trace_is_json_with_one_slice_per_op_and_transfer(tmp_path: Path) -> None:
    """Diamond with left on GPU:1: 4 op slices on the device tracks, 2 transfer slices (src -> GPU:1 at
    1-2 s, left -> GPU:0 at 4-5 s) in microseconds, and a memory counter per device."""
    g, c = diamond(), uniform_cluster(2, bandwidth=1e6)
    s = schedule(g, c, Placement.for_graph(g, [0, 1, 0, 0]))
    path = write_chrome_trace(tmp_path / "sub" / "trace.json", g, c, s)
    events = json.loads(path.read_text())["traceEvents"]

    ops = [e for e in events if e["ph"] == "X" and e["pid"] == 1]
    assert sorted(e["name"] for e in ops) == sorted(g.op_names)
    left = next(e for e in ops if e["name"] == "left")
    assert (left["tid"], left["ts"], left["dur"], left["args"]["type"]) == (1, 2e6, 2e6, "MatMul")
    assert (left["args"]["op"], left["args"]["index"]) == ("left", g.op_names.index("left"))  # as transfers name it

    transfers = [e for e in events if e["ph"] == "X" and e["pid"] == 2]
    assert [(e["name"], e["ts"], e["dur"], e["args"]["bytes"], e["args"]["op"]) for e in transfers] == [
        ("src -> /GPU:1", 1e6, 1e6, MB, "src"), ("left -> /GPU:0", 4e6, 1e6, MB, "left")]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert threads[(2, transfers[0]["tid"])] == "/GPU:0 -> /GPU:1"

    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert counters == {"memory /GPU:0", "memory /GPU:1"}


def test_a_schedule_of_another_graph_or_cluster_is_named(tmp_path: Path) -> None:
    """It raised IndexError from inside the writer (or wrote a wrong trace when the other graph was larger)."""
    g, c = diamond(), uniform_cluster(2, bandwidth=1e6)
    s = schedule(g, c, Placement.single(g, 0))
    for other_graph, other_cluster in ((chain((1.0, 2.0)), c), (g, uniform_cluster(3))):
        with pytest.raises(ValueError, match="the schedule places 4 ops on 2 devices, but graph"):
            write_chrome_trace(tmp_path / "t.json", other_graph, other_cluster, s)


@pytest.mark.parametrize("kind", ["step", "pipeline"])
def test_a_write_that_fails_half_way_leaves_the_earlier_trace(tmp_path: Path, monkeypatch, kind) -> None:
    """trace.json was written in place: a process killed (or a disk filled) mid-write left half a JSON file where
    the last run's trace was; written beside it and renamed now, as placement.json is."""
    from gplace.pipeline import PipelineSimulator, write_pipeline_trace

    g, c = diamond(), uniform_cluster(2, bandwidth=1e6)
    placement = Placement.for_graph(g, [0, 1, 0, 0])
    if kind == "step":
        def write(p: Path) -> Path:
            return write_chrome_trace(p, g, c, schedule(g, c, placement))
    else:
        def write(p: Path) -> Path:
            return write_pipeline_trace(p, g, c, PipelineSimulator(2).simulate(g, c, placement))
    path = write(tmp_path / "trace.json")
    before = path.read_text()
    fill_disk_on_write(monkeypatch, keep=lambda text: text[: len(text) // 2])
    with pytest.raises(OSError, match="No space"):
        write(tmp_path / "trace.json")
    monkeypatch.undo()
    assert path.read_text() == before
