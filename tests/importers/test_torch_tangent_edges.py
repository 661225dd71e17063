"""Tangent placeholders of a torch joint graph (``tangents_i``, dLoss/dOutput): backward ops fed by the forward
output they are the gradient of, so pipe-v2 never starts a micro-batch's backward before its forward output."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gplace.importers.torch_export import from_torch  # noqa: E402
from gplace.ir import Placement  # noqa: E402
from gplace.pipeline import PipelineSimulator  # noqa: E402
from gplace.testing import uniform_cluster  # noqa: E402

torch.set_num_threads(1)


class _TwoOutputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.a(x)
        return self.b(h), h.relu()


class _Deep(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2, self.l3, self.l4 = (torch.nn.Linear(512, 512) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l4(self.l3(torch.relu(self.l2(torch.relu(self.l1(x))))))


def _edges(g) -> dict[tuple[str, str], int]:
    return {(g.op_names[s], g.op_names[d]): int(b) for (s, d), b in zip(g.edge_index.T, g.edge_bytes, strict=True)}


def _forward_outputs(g) -> list[str]:
    """The op producing each forward output of the joint graph, in output order."""
    out = g.source.program.graph.output_node()
    return [v.name for v, d in zip(out.args[0], out.meta["desc"], strict=True) if type(d).__name__ == "PlainAOTOutput"]


def test_each_tangent_is_backward_and_fed_by_the_output_it_is_the_gradient_of() -> None:
    torch.manual_seed(0)
    g = from_torch(_TwoOutputs(), torch.randn(2, 8), training=True)
    i, edges = g.op_index, _edges(g)
    first, second = _forward_outputs(g)
    assert g.phase[i["tangents_1"]] == g.phase[i["tangents_2"]] == "backward"
    assert g.phase[i[first]] == g.phase[i[second]] == "forward"
    assert edges[(first, "tangents_1")] == 2 * 4 * 4  # the output's bytes: (2, 4) float32
    assert edges[(second, "tangents_2")] == 2 * 8 * 4
    assert [s for s, d in edges if d == "tangents_1"] == [first]
    assert [s for s, d in edges if d == "tangents_2"] == [second]


def test_one_f_one_b_runs_no_backward_of_a_micro_batch_before_its_forward_output() -> None:
    """The defect's model: as imported, micro-batch 0's backward started at t = 0 (1F1B 157.80 us, below GPipe's
    191.55 us); with the tangent after the output, 205.42 us under pipe-v2 and 185.84 us under pipe-v3 (torch's 1F1B
    order, not a ready backward first)."""
    torch.manual_seed(0)
    g = from_torch(_Deep(), torch.randn(64, 512), training=True)
    (out,) = _forward_outputs(g)
    paths = g.source.module_paths
    dev = [1 if paths.get(n, "") in ("l3", "l4") or n.startswith("tangents") else 0 for n in g.op_names]
    c = uniform_cluster(2, bandwidth=1e10)
    s = PipelineSimulator(microbatches=4, schedule="1f1b").simulate(g, c, Placement.for_graph(g, dev))
    code = g.phase_codes()
    for m in range(4):
        mine = s.inst_microbatch == m
        out_end = s.inst_end[mine & (s.inst_op == g.op_index[out])][0]
        tangent = mine & (s.inst_op == g.op_index["tangents_1"])
        # zero-time backward ops of forward values only (t of a weight, detach) may run before it
        backward = mine & (code[s.inst_op] == 1) & ((s.inst_end > s.inst_start) | tangent)
        assert tangent.sum() == 1 and backward.sum() > 1
        assert np.all(s.inst_start[backward] >= out_end), (m, out_end, np.min(s.inst_start[backward]))
    assert s.minibatch_time == pytest.approx(185.84e-6, abs=0.01e-6)
