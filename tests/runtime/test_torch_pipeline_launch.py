"""torch-pipeline-v1 started by others: under ``torchrun`` (``processes="torchrun"``) and from ``gplace place`` on a
torch module (``graph=torch``), whose placement.json rebuilds the stages (``gplace.pipeline_from_file``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from pipeline_models import ConvNet, mlp

import gplace
from gplace.ir import cluster_to_dict, save_json
from gplace.runtime.torch_pipeline import TorchPipelineRuntime
from gplace.testing import uniform_cluster

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning",
                                                           "ignore::UserWarning")]
HERE, ROOT = Path(__file__).resolve().parent, Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)]), "WANDB_MODE": "disabled"}


def _torchrun(out: Path, processes: int, *job_args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           f"--nproc-per-node={processes}", str(HERE / "torchrun_job.py"), str(out), *job_args],
                          env=ENV, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("layout", ["split", "back"])  # stages on devices 0, 1; or 0, 1, 0 (two ranks either way)
def test_under_torchrun_every_rank_gets_the_unsplit_models_loss_and_gradients(tmp_path, layout) -> None:
    proc = _torchrun(tmp_path, 2, *(["back"] if layout == "back" else []))
    assert proc.returncode == 0, proc.stderr[-3000:]
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert reports[0] == reports[1]  # gathered: every rank reports the same run
    torch.manual_seed(0)
    model = mlp()
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(1))
    y = torch.randn(8, 4, generator=torch.Generator().manual_seed(2))
    loss = F.mse_loss(model(x), y)
    loss.backward()
    assert reports[0]["ok"] and reports[0]["step_time"] > 0
    assert reports[0]["threads_after"] == 2  # threads_per_stage=1 was left set in the caller's process
    assert reports[0]["loss"] == pytest.approx(loss.item(), rel=1e-5)
    assert set(reports[0]["grads"]) == {n for n, _ in model.named_parameters()}
    for n, p in model.named_parameters():
        torch.testing.assert_close(torch.tensor(reports[0]["grads"][n]), p.grad, rtol=1e-5, atol=1e-6)


def test_under_torchrun_a_world_of_the_wrong_size_is_a_failed_measurement_on_every_rank(tmp_path) -> None:
    proc = _torchrun(tmp_path, 3)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for r in range(3):
        report = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert not report["ok"] and "stages are on 2 devices but torchrun started 3 processes" in report["reason"]


def test_torchrun_processes_outside_torchrun_are_refused_naming_the_variables(monkeypatch) -> None:
    from gplace.importers.torch_export import from_torch
    from gplace.ir import Placement

    monkeypatch.delenv("RANK", raising=False)
    model, x = mlp(), torch.randn(8, 8)
    graph = from_torch(model, (x[:2],))
    runtime = TorchPipelineRuntime(model, x, torch.zeros(8, 4), F.mse_loss, processes="torchrun")
    with pytest.raises(ValueError, match="RANK and WORLD_SIZE"):
        runtime.run(graph, uniform_cluster(2, kind="cpu"), Placement.single(graph, 0))
    with pytest.raises(ValueError, match="processes"):
        TorchPipelineRuntime(model, x, torch.zeros(8, 4), F.mse_loss, processes="slurm")


def test_gplace_place_on_a_torch_module_writes_the_split_and_its_stages_compute_the_module(tmp_path) -> None:
    save_json(cluster_to_dict(uniform_cluster(2, kind="cpu")), tmp_path / "cluster.json")
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "gplace", "place", "graph=torch",
                           "graph.module._target_=pipeline_models.ConvNet", "graph.input_shapes=[[2,3,16,16]]",
                           "cluster=file", f"cluster.path={tmp_path / 'cluster.json'}", "method=round_robin",
                           f"hydra.run.dir={out}"], cwd=tmp_path, env=ENV, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "placement.json").read_text())
    assert doc["split_spec"] and doc["split_unaligned"] == []
    assert len(doc["stage_devices"]) == len(doc["split_spec"]) + 1 and set(doc["stage_devices"]) <= {"/CPU:0", "/CPU:1"}
    assert (out / "device_map.json").exists()
    torch.manual_seed(0)
    module, x = ConvNet(), torch.randn(2, 3, 16, 16)
    expected = module(x)
    pipe = gplace.pipeline_from_file(out / "placement.json", module, (x,))
    assert pipe.num_stages == len(doc["split_spec"]) + 1
    got = pipe(x)  # the stages in one process, one after another
    torch.testing.assert_close(got[0] if isinstance(got, tuple) else got, expected)


def test_a_module_from_shapes_checks_its_shapes_and_dtype_naming_them() -> None:
    from gplace.importers import from_module_shapes

    graph = from_module_shapes(mlp(), [[2, 8]])
    assert graph.num_ops > 0 and graph.source.module_paths
    with pytest.raises(ValueError, match=r"input_shapes\[1\]"):
        from_module_shapes(mlp(), [[2, 8], [0, 3]])
    with pytest.raises(ValueError, match=r"one shape per positional input, e.g. \[\[8, 3, 32, 32\]\], got \[2, 8\]"):
        from_module_shapes(mlp(), [2, 8])
    with pytest.raises(ValueError, match="'float33' is not a torch dtype"):
        from_module_shapes(mlp(), [[2, 8]], dtype="float33")
