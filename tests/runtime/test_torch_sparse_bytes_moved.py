"""torch-v1 counts a sparse value crossing devices as the importer and sim-v1 size it (values + indices), not as
its dense size (a 1000x1000 COO input with 10 non-zeros: 200 bytes, not 4,000,000)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from gplace.importers.torch_export import from_torch  # noqa: E402
from gplace.ir import Placement  # noqa: E402
from gplace.runtime import Simulator  # noqa: E402
from gplace.runtime.torch_runtime import TorchRuntime  # noqa: E402
from gplace.testing import uniform_cluster  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::FutureWarning"), pytest.mark.filterwarnings("ignore::UserWarning")]


class _Double(nn.Module):
    def forward(self, x):
        return x * 2


def test_torch_v1_counts_a_sparse_value_as_the_importer_and_sim_v1():
    torch.set_num_threads(1)
    indices = torch.tensor([list(range(10)), list(range(9, -1, -1))])
    x = torch.sparse_coo_tensor(indices, torch.ones(10), (1000, 1000)).coalesce()
    real = x.values().nbytes + x.indices().nbytes  # 10 float32 values + 2x10 int64 indices
    graph = from_torch(_Double(), (x,))
    cluster = uniform_cluster(2, kind="cpu", bandwidth=1e9)
    placement = Placement.from_names(graph, cluster, {"x": "/CPU:0", "mul": "/CPU:1"})
    simulated = Simulator().measure(graph, cluster, placement).bytes_moved
    assert simulated == real == 200
    measured = TorchRuntime(steps=1, warmup=0, device_map={"/CPU:0": "cpu", "/CPU:1": "cpu"}).measure(
        graph, cluster, placement)
    assert measured.ok, measured.reason
    assert measured.bytes_moved == simulated
