"""A CPU training graph runs nn.LSTM as aten.mkldnn_rnn_layer (forward) and aten.mkldnn_rnn_layer_backward, one per
layer and direction: both had no FLOP rule and counted 0 FLOPs (an LSTM(512, 1024) step was 69x too cheap)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from gplace.costmodel import TensorSpec, op_flops, roofline_costs  # noqa: E402
from gplace.importers.torch_export import from_torch  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _spec(value) -> TensorSpec:
    return TensorSpec(tuple(value.shape), value.numel() * value.element_size())


def _flops(node) -> float:
    """op_flops of an FX node, its tensor inputs and outputs taken from the fake tensors."""
    ins = [_spec(a.meta["val"]) for a in node.all_input_nodes]
    val = node.meta["val"]
    outs = [_spec(v) for v in (val if isinstance(val, tuple | list) else [val]) if v is not None]
    return op_flops(str(node.target), ins, outs)


def _rnn_nodes(module: nn.Module, x: torch.Tensor, training: bool) -> dict[str, list[float]]:
    g = from_torch(module, (x,), training=training)
    found: dict[str, list[float]] = {}
    for node in g.source.program.graph.nodes:
        if node.op == "call_function" and ("rnn" in str(node.target) or "lstm" in str(node.target)):
            found.setdefault(str(node.target), []).append(_flops(node))
    return found


def test_mkldnn_lstm_layers_count_the_lstm_flops_and_their_backward_twice_that():
    """LSTM(8, 16), 2 layers, bidirectional, x[3, 5, 8]: per layer and direction 2*T*B*4H*(I+H) + 12*T*B*H."""
    torch.manual_seed(0)
    lstm, x = nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True), torch.randn(3, 5, 8)
    steps_batch, hidden = 5 * 3, 16
    hand = [2 * steps_batch * 4 * hidden * (i + hidden) + 12 * steps_batch * hidden for i in (8, 8, 32, 32)]
    train = _rnn_nodes(lstm, x, training=True)
    forward = train["aten.mkldnn_rnn_layer.default"]
    backward = train["aten.mkldnn_rnn_layer_backward.default"]
    assert sorted(forward) == sorted(hand)
    assert sorted(backward) == sorted(2 * h for h in hand)
    inference = _rnn_nodes(lstm.eval(), x, training=False)["aten.lstm.input"]
    assert math.isclose(sum(forward), sum(inference))


def test_a_training_import_of_an_lstm_costs_its_forward_and_backward_flops():
    """LSTM(128, 256) on x[16, 20, 128] (compute-bound): the training graph's LSTM ops cost at least the roofline
    of 3x the forward's FLOPs."""
    torch.manual_seed(0)
    g = from_torch(nn.LSTM(128, 256, batch_first=True), (torch.randn(16, 20, 128),), training=True)
    fwd = 2 * 320 * 4 * 256 * (128 + 256) + 12 * 320 * 256
    rnn = [i for i, t in enumerate(g.op_types) if "mkldnn_rnn_layer" in t]
    assert len(rnn) == 2
    assert sum(float(g.kind_cost["gpu"][i]) for i in rnn) >= roofline_costs(3 * fwd, 0)["gpu"] * 0.999
