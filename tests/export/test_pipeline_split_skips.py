"""A stage output that two or more later stages read (a skip connection over a stage), which torch's pipelining
cannot run backward through (PipeliningMetadataError: Backward of skip connections not supported yet, in every stage
process): pipeline_split refuses it for training, logs a WARNING otherwise and in pipeline_from_file;
torch-pipeline-v1 fails the measurement before any process starts."""

from __future__ import annotations

import json
import logging

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gplace.export.torch import PipelineSkipError, pipeline_from_file, pipeline_split
from gplace.importers.torch_export import from_torch
from gplace.ir import placement_to_dict
from gplace.pipeline.stages import placement_extras
from gplace.testing import uniform_cluster
from tests.export.module_placements import by_module

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning", "ignore::UserWarning")
torch.set_num_threads(1)


class Skip(nn.Module):
    """``a``'s output is read by ``b`` and, past ``b``, by the add after ``c``."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        h = self.a(x)
        return self.c(self.b(h)) + h


def _save(path, graph, cluster, placement) -> None:
    extra = placement_extras(graph, cluster, placement)
    path.write_text(json.dumps(placement_to_dict(placement, graph, cluster, extra=extra)))


def test_a_stage_output_read_by_two_later_stages_is_refused_for_training_and_warned_of_otherwise(
        tmp_path, caplog) -> None:
    torch.manual_seed(0)
    model, x, cluster = Skip(), torch.randn(2, 8), uniform_cluster(3, kind="cpu")
    training = from_torch(model, (x,), training=True)
    placement = by_module(training, {"a": 0, "b": 1, "c": 2}, root=2)
    with pytest.raises(PipelineSkipError, match=r"'a' of stage 0 is read by stages 1, 2"):
        pipeline_split(training, cluster, placement, model, (x,))
    inference = from_torch(model, (x,))
    with caplog.at_level(logging.WARNING, logger="gplace.export.torch"):
        split = pipeline_split(inference, cluster, by_module(inference, {"a": 0, "b": 1, "c": 2}, root=2), model, (x,))
    assert split.pipe.num_stages == 3
    assert any("'a' of stage 0 is read by stages 1, 2" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)
    with torch.no_grad():
        torch.testing.assert_close(split.pipe(x)[0], model(x))
    caplog.clear()
    _save(tmp_path / "placement.json", training, cluster, placement)
    with caplog.at_level(logging.WARNING, logger="gplace.export.torch"):
        pipe = pipeline_from_file(tmp_path / "placement.json", model, (x,))
    assert pipe.num_stages == 3 and any("Backward of skip connections" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gplace.export.torch"):  # b and c in one stage: no skip over one
        two = by_module(training, {"b": 1, "c": 1}, root=1)
        pipeline_split(training, uniform_cluster(2, kind="cpu"), two, model, (x,))
    assert not caplog.records


def test_torch_pipeline_fails_a_skip_over_a_stage_before_any_process_starts(monkeypatch) -> None:
    from gplace.runtime import torch_pipeline
    from gplace.runtime.torch_pipeline import TorchPipelineRuntime

    def no_process(job):
        raise AssertionError("a stage process started")

    monkeypatch.setattr(torch_pipeline, "_run_stages", no_process)
    torch.manual_seed(0)
    model, x, y = Skip(), torch.randn(8, 8), torch.randn(8, 8)
    graph = from_torch(model, (x[:2],))  # an inference graph: torch-pipeline-v1 trains all the same
    runtime = TorchPipelineRuntime(model, x, y, F.mse_loss, microbatches=4, steps=1, warmup=0)
    m = runtime.measure(graph, uniform_cluster(3, kind="cpu"), by_module(graph, {"a": 0, "b": 1, "c": 2}, root=2))
    assert not m.ok and "'a' of stage 0 is read by stages 1, 2" in m.reason and "skip connections" in m.reason
