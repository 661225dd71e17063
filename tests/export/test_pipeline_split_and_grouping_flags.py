"""group_ops' merge_consumers and pipeline_split's training, stage_backward and sums_shared_gradients must be
bools (training may be None), refused by name otherwise: merge_consumers="no" merged (taken as true) and None did
not; pipeline_split(..., training=1, stage_backward="yes") was accepted."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gplace.export.torch import pipeline_split
from gplace.grouping import group_ops
from gplace.importers.torch_export import from_torch
from gplace.ir import Placement
from gplace.testing import chain, uniform_cluster

torch.set_num_threads(1)


@pytest.mark.parametrize("flag", ["no", None, 1])
def test_group_ops_refuses_non_bool_merge_consumers(flag):
    with pytest.raises(ValueError, match="merge_consumers"):
        group_ops(chain(), merge_consumers=flag)


def test_group_ops_bool_merge_consumers():
    assert group_ops(chain(), merge_consumers=True).num_groups <= group_ops(chain(), merge_consumers=False).num_groups


@pytest.fixture(scope="module")
def split_case():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(2, 8)
    graph, cluster = from_torch(model, (x,)), uniform_cluster(2, kind="cpu")
    return graph, cluster, Placement.for_graph(graph, [0] * graph.num_ops), model, (x,)


@pytest.mark.parametrize("kwargs, name", [({"training": 1}, "training"), ({"training": "no"}, "training"),
                                          ({"stage_backward": "yes"}, "stage_backward"),
                                          ({"stage_backward": None}, "stage_backward"),
                                          ({"sums_shared_gradients": 0}, "sums_shared_gradients")])
def test_pipeline_split_refuses_non_bool_flags(split_case, kwargs, name):
    with pytest.raises(ValueError, match=name):
        pipeline_split(*split_case, **kwargs)


def test_pipeline_split_bool_flags(split_case):
    assert pipeline_split(*split_case, training=None, stage_backward=True).pipe.num_stages == 1
