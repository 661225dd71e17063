"""A torch training import of nn.LSTM on CPU: torch's decomposition traces its layers for inference
(``mkldnn_rnn_layer`` with an empty workspace), so the graph lacks what eager training keeps for the backward
(4 MB per layer in a probe's 2-layer LSTM: a simulated peak 0.26x eager training's) and torch-v1 cannot run the
backward. The import said nothing; it now warns, naming the layers."""

from __future__ import annotations

import logging

import pytest
import torch

from gplace.importers.torch_export import from_torch

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


class _Lstm(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = torch.nn.LSTM(8, 16, 2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0].sum()


def _warnings(caplog, training: bool) -> list[str]:
    with caplog.at_level(logging.WARNING, logger="gplace.importers.torch_export"):
        from_torch(_Lstm(), (torch.randn(2, 3, 8),), training=training, name="lstm")
    return [r.getMessage() for r in caplog.records if "backward workspace" in r.getMessage()]


def test_a_training_import_of_an_lstm_warns_that_its_backward_workspace_is_missing(caplog):
    [message] = _warnings(caplog, training=True)
    assert "'lstm': 2 recurrent layer(s)" in message and "torch-v1 cannot run" in message


def test_an_inference_import_does_not_warn(caplog):
    assert _warnings(caplog, training=False) == []
