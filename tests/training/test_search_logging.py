"""What a search logs: lines above its progress bar, failures grouped by kind of reason, the task they are of, and
a DEBUG line per update."""

from __future__ import annotations

import io
import logging
import re
import sys
import time

import pytest
import torch

from gplace.encoders import GNNEncoder
from gplace.ir import Cluster, OpGraph, Placement
from gplace.placer import PolicyPlacer
from gplace.policies import DeviceAwarePolicy
from gplace.pretrained import build
from gplace.runtime.base import Measurement, Runtime
from gplace.testing import chain, random_dag, uniform_cluster
from gplace.training import ReinforceTrainer
from gplace.training._loop import failure_kind, log_failures, progress_bar
from gplace.training.multigraph import MultiGraphTrainer


class _Terminal(io.StringIO):
    """A string stream that says it is a terminal, so rich draws its bar there."""

    def isatty(self) -> bool:
        return True


class _EveryOtherFails(Runtime):
    """Every second measurement runs out of memory on /GPU:0 by a different number of bytes; the others take 4 s."""

    id = "every-other-fails"

    def __init__(self) -> None:
        self.calls = 0

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        self.calls += 1
        if self.calls % 2 == 0:
            return Measurement.failure(self.id, f"out of memory on /GPU:0: needs {1000 + self.calls:,} B, has 999 B")
        return Measurement(ok=True, step_time=4.0, runtime=self.id)


@pytest.fixture
def terminal(monkeypatch) -> _Terminal:
    """A wide colour terminal with a root log handler writing to it (removed after); a test makes it ``sys.stderr``
    itself (pytest's capture sets its own between a fixture and the test)."""
    stream = _Terminal()
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "300")
    handler = logging.StreamHandler(stream)
    logging.getLogger().addHandler(handler)
    yield stream
    logging.getLogger().removeHandler(handler)


def _root_handler(stream) -> logging.StreamHandler:
    return next(h for h in logging.getLogger().handlers if getattr(h, "stream", None) is stream)


def _visible_line_before(text: str, at: int) -> str:
    """What a terminal shows left of position ``at``: the line so far after its last carriage return, without
    escape sequences."""
    line = re.split(r"[\r\n]", text[:at])[-1]
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line)


def test_a_log_line_under_the_progress_bar_starts_its_own_line(terminal, monkeypatch) -> None:
    """A record the root handler writes to the bar's terminal is printed above the bar, not after its characters;
    the handler writes to its own stream again after the bar."""
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress_bar(True, total=3, completed=0):
        deadline = time.monotonic() + 5
        while "placing" not in terminal.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)  # the bar is drawn by rich's refresh thread
        assert "placing" in terminal.getvalue()
        logging.getLogger("gplace.training").warning("MARK a warning during the search")
    text = terminal.getvalue()
    assert _visible_line_before(text, text.index("MARK")) == ""
    assert _root_handler(terminal).stream is terminal


def test_the_bar_writes_nothing_where_stderr_is_no_terminal(monkeypatch) -> None:
    """Off a terminal rich drew no bar but ended it with an empty line: one after every search's log lines."""
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", piped)
    with progress_bar(True, total=3, completed=0) as advance:
        advance(0.1)
    assert piped.getvalue() == ""


def test_the_log_streams_are_restored_when_the_search_raises(terminal, monkeypatch) -> None:
    """A search that raises under the bar leaves every handler writing to its own stream."""
    monkeypatch.setattr(sys, "stderr", terminal)
    with pytest.raises(RuntimeError, match="boom"), progress_bar(True, total=3, completed=0):
        raise RuntimeError("boom")
    assert _root_handler(terminal).stream is terminal


def test_failures_are_grouped_by_reason_without_its_numbers(caplog) -> None:
    """Out-of-memory reasons that differ only in byte counts are one group of the WARNING line, which stays short
    (16 devices of a placement); DEBUG keeps each reason and whole placement."""
    graph = random_dag(300, seed=0)
    placements = [Placement.for_graph(graph, [i % 2] * 300) for i in range(8)]
    failures = [Measurement.failure("sim", f"out of memory on /GPU:1: needs {n:,} B, has 999 B")
                for n in range(1000, 1008)]
    with caplog.at_level(logging.DEBUG, logger="gplace"):
        log_failures(placements, failures)
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "8 of 8 placements: out of memory on /GPU:1: needs 1,000 B, has 999 B and the like (8x; e.g. " in warning
    assert len(warning) < 250
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(debug) == 8 and "needs 1,007 B" in debug[-1] and str([1] * 300) in debug[-1]


def test_failure_kind_keeps_device_names() -> None:
    """Quantities become N; the digits of a device name stay, so two devices are two kinds."""
    kind = failure_kind("out of memory on /GPU:1: needs 1.3 GB, has 1,200 B")
    assert kind == "out of memory on /GPU:1: needs N, has N"
    assert failure_kind("out of memory on /GPU:0: needs 2 B, has 1 B") != failure_kind("out of memory on /GPU:1: "
                                                                                        "needs 2 B, has 1 B")


def test_multi_graph_failure_warnings_name_the_task(caplog) -> None:
    """Pretraining's failure warning starts with its task, as its other task warnings do."""
    torch.manual_seed(0)
    encoder = build(GNNEncoder, conv="sage", hidden_size=8, num_layers=1, type_embedding=4, projection=4)
    graph, cluster = chain((1.0, 1.0)), uniform_cluster(2)
    with caplog.at_level(logging.WARNING, logger="gplace"):
        MultiGraphTrainer(updates=1, samples_per_update=4, seed=0).fit(
            encoder, build(DeviceAwarePolicy, hidden_size=8), [(graph, cluster)], _EveryOtherFails())
    failures = [r.getMessage() for r in caplog.records if "failed measurements" in r.getMessage()]
    assert failures and all(m.startswith(f"task {graph.name} on {cluster.name}: failed") for m in failures)


def test_a_search_logs_each_update_at_debug(caplog) -> None:
    """One DEBUG line per update: its index, the best step time so far, the rollout's mean and its failures."""
    graph, cluster = chain((1.0, 1.0)), uniform_cluster(2)
    torch.manual_seed(0)
    encoder = build(GNNEncoder, conv="sage", hidden_size=8, num_layers=1, type_embedding=4, projection=4)
    placer = PolicyPlacer(graph, cluster, encoder, build(DeviceAwarePolicy, hidden_size=8))
    with caplog.at_level(logging.DEBUG, logger="gplace"):
        ReinforceTrainer(updates=2, samples_per_update=4, penalty_step_time=100.0).fit(
            placer, _EveryOtherFails(), graph, cluster)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("update ")]
    assert lines == ["update 0: best step time 4 s, rollout mean 4 s (of the successful), 2 failed",
                     "update 1: best step time 4 s, rollout mean 4 s (of the successful), 2 failed"]


class _Slow(Runtime):
    """Every measurement takes 4 s of step time and 20 ms of wall time, so a 10 ms budget runs out in one update."""

    id = "slow"

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        time.sleep(0.02)
        return Measurement(ok=True, step_time=4.0, runtime=self.id)


def test_a_search_says_when_its_time_budget_ends_it_and_a_resume_with_none_left(caplog, tmp_path) -> None:
    """A search ended by ``max_seconds`` said nothing (only the update count told), and calling it again on the
    same run directory with the same budget silently ran no update and returned the earlier result."""
    graph, cluster = chain((1.0, 1.0)), uniform_cluster(2)

    def search():
        torch.manual_seed(0)
        encoder = build(GNNEncoder, conv="sage", hidden_size=8, num_layers=1, type_embedding=4, projection=4)
        placer = PolicyPlacer(graph, cluster, encoder, build(DeviceAwarePolicy, hidden_size=8))
        ReinforceTrainer(updates=50, samples_per_update=2, max_seconds=0.01).fit(
            placer, _Slow(), graph, cluster, run_dir=tmp_path)

    with caplog.at_level(logging.INFO, logger="gplace"):
        search()
    assert "time budget of 0.01 s reached after 1 of 50 updates (2 placements sampled)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gplace"):
        search()
    assert re.search(r"the time budget of 0\.01 s was spent by the earlier run\(s\) .* \(\d+\.\d s, 1 updates\): "
                     r"no update runs", caplog.text)


def test_a_fresh_search_whose_warm_start_spends_the_budget_runs_one_update(caplog) -> None:
    """A warm start measured past a small budget left a fresh search with no update and a WARNING blaming "the
    earlier run(s) of this run directory" (there were none); the budget's promise is at least one update."""
    graph, cluster = chain((1.0, 1.0)), uniform_cluster(2)
    torch.manual_seed(0)
    encoder = build(GNNEncoder, conv="sage", hidden_size=8, num_layers=1, type_embedding=4, projection=4)
    placer = PolicyPlacer(graph, cluster, encoder, build(DeviceAwarePolicy, hidden_size=8))
    with caplog.at_level(logging.INFO, logger="gplace"):
        result = ReinforceTrainer(updates=50, samples_per_update=2, max_seconds=0.01).fit(
            placer, _Slow(), graph, cluster, warm_start=Placement.for_graph(graph, [0, 0]))
    assert result.samples == 2 and "earlier run" not in caplog.text
    assert "time budget of 0.01 s reached after 1 of 50 updates" in caplog.text


def test_failure_kinds_keep_torchs_gpu_numbers_apart() -> None:
    """torch's out-of-memory text names the GPU as "GPU 0": two GPUs' failures were one kind ("GPU N")."""
    zero = failure_kind("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.1 GiB")
    one = failure_kind("CUDA out of memory. Tried to allocate 30.00 MiB. GPU 1 has a total capacity of 79.1 GiB")
    assert zero != one and zero == "CUDA out of memory. Tried to allocate N. GPU 0 has a total capacity of N"
