"""pipeline_split and pipeline_from_file refuse a placement that puts backward ops on another device than their
forward ops (placement.json's split_backward_away): torch runs each stage's backward on the stage's device, so no
split gives it (a 1-stage pipe came back before). torch-pipeline-v1 runs it as torch would (stage_backward=True)."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from gplace.export.torch import pipeline_from_file, pipeline_split
from gplace.importers.torch_export import from_torch
from gplace.ir import InvalidPlacementError, Placement, placement_to_dict
from gplace.pipeline.stages import placement_extras
from gplace.testing import uniform_cluster

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning", "ignore::UserWarning")
torch.set_num_threads(1)


def _save(path, graph, cluster, placement) -> None:
    extra = placement_extras(graph, cluster, placement)
    path.write_text(json.dumps(placement_to_dict(placement, graph, cluster, extra=extra)))


def test_backward_ops_away_from_their_forward_ops_are_refused(tmp_path) -> None:
    """Forward ops on /CPU:0, backward ops on /CPU:1 (ideal_dp's 2-device placement of a training MLP): no
    torch split gives it (a 1-stage pipe on /CPU:0 came back before)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(2, 8)
    graph, cluster = from_torch(model, (x,), training=True), uniform_cluster(2, kind="cpu")
    placement = Placement.for_graph(graph, [int(f >= 0) for f in graph.grad_of])
    away = sum(f >= 0 for f in graph.grad_of)
    with pytest.raises(InvalidPlacementError, match=rf"puts {away} backward ops on another device .*align_to_modules"):
        pipeline_split(graph, cluster, placement, model, (x,))
    assert pipeline_split(graph, cluster, placement, model, (x,), stage_backward=True).pipe.num_stages == 1
    _save(tmp_path / "placement.json", graph, cluster, placement)
    with pytest.raises(InvalidPlacementError, match=rf"{away} backward ops .*split_backward_away"):
        pipeline_from_file(tmp_path / "placement.json", model, (x,))
