"""From a probe of torch-pipeline-v1: a stage's own error was dropped (only torch's "[Stage 1] failed to run
forward" was said); stage processes outlived a caller killed with SIGKILL, holding their ports; a graph of another
module was measured on the runtime's."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from pipeline_models import FailsInStage
from torch import nn

from gplace.importers.torch_export import from_torch
from gplace.ir import Cluster, Device, Placement, UnsupportedGraphError
from gplace.runtime.torch_pipeline import TorchPipelineRuntime

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning",
                                                           "ignore::UserWarning")]
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)


def test_a_stage_whose_op_raises_names_that_error() -> None:
    model, x, y = FailsInStage(), torch.randn(8, 8), torch.randn(8, 4)
    graph = from_torch(model, (x[:2],))
    paths = graph.source.module_paths
    placement = Placement.for_graph(graph, [int(paths.get(op, "") not in ("", "a")) for op in graph.op_names])
    measured = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=4, steps=1, warmup=0,
                                    time_limit=120).measure(graph, CLUSTER, placement)
    assert not measured.ok and "stage op exploded" in measured.reason, measured.reason


def test_a_graph_of_another_module_is_refused() -> None:
    x = torch.randn(8, 8)
    runtime = TorchPipelineRuntime(FailsInStage(), x, torch.randn(8, 4), F.mse_loss, microbatches=4)
    with pytest.raises(UnsupportedGraphError, match="not imported from this FailsInStage: its parameter 'a.weight'"):
        runtime.check_graph(from_torch(nn.Sequential(nn.Linear(8, 4)), (x[:2],)))


SCRIPT = textwrap.dedent("""
    import torch
    from pipeline_models import mlp, hanging_loss
    from gplace.importers.torch_export import from_torch
    from gplace.ir import Cluster, Device, Placement
    from gplace.runtime.torch_pipeline import TorchPipelineRuntime

    if __name__ == "__main__":
        model, x = mlp(), torch.randn(8, 8)
        graph = from_torch(model, (x[:2],))
        cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)
        paths = graph.source.module_paths
        first = paths[next(op for op in graph.op_names if op in paths)].split(".")[0]
        devices = [int(paths.get(op, first).split(".")[0] != first) for op in graph.op_names]
        TorchPipelineRuntime(model, x, torch.randn(8, 4), hanging_loss, microbatches=4, time_limit=None).measure(
            graph, cluster, Placement.for_graph(graph, devices))
""")


def _stages_of(pid: int) -> list[int]:
    """The spawned stage processes among ``pid``'s children."""
    found = []
    for child in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split():
        with contextlib.suppress(OSError):
            if b"multiprocessing.spawn" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(int(child))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_stages_end_when_their_caller_is_killed(tmp_path) -> None:
    script = tmp_path / "caller.py"
    script.write_text(SCRIPT)
    path = os.pathsep.join([str(Path(__file__).parent), str(ROOT), os.environ.get("PYTHONPATH", "")])
    caller = subprocess.Popen([sys.executable, str(script)], env={**os.environ, "PYTHONPATH": path})
    try:
        deadline = time.monotonic() + 120
        while len(stages := _stages_of(caller.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(stages) == 2 and caller.poll() is None
        caller.send_signal(signal.SIGKILL)
        caller.wait(timeout=30)
        deadline = time.monotonic() + 90  # a stage still importing torch on a busy machine ends once up
        while any(_alive(pid) for pid in stages) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [pid for pid in stages if _alive(pid)]
    finally:
        caller.kill()
        for pid in _stages_of(caller.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"stage processes {left} outlived their killed caller"
