"""Tests for gplace.encoders.LSTMEncoder."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from gplace.encoders import LSTMEncoder
from gplace.features import featurize
from gplace.grouping import group_ops
from gplace.ir import OpGraph
from gplace.testing import random_dag


@pytest.fixture
def features() -> dict[str, torch.Tensor]:
    """Nine groups of random_dag(50), every op given output shapes."""
    base = random_dag(50, seed=2)
    ops = [replace(op, output_shapes=((32, i + 1), (-1,))) for i, op in enumerate(base.ops())]
    graph = OpGraph.from_ops(ops, base.edges())
    return featurize(graph, group_ops(graph, max_groups=9), max_neighbours=6).to_tensors()


def test_output_shape_and_finite(features):
    """The encoder maps G groups to a finite (G, H) tensor."""
    torch.manual_seed(0)
    states = LSTMEncoder(hidden_size=16, type_embedding=8, max_neighbours=6)(features)
    assert states.shape == (9, 16)
    assert torch.isfinite(states).all()


def test_gradients_reach_every_parameter(features):
    """A loss on the states gives every parameter a nonzero gradient."""
    torch.manual_seed(0)
    encoder = LSTMEncoder(hidden_size=16, type_embedding=8, max_neighbours=6)
    encoder(features).pow(2).sum().backward()
    for name, p in encoder.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_first_state_sees_the_last_group(features):
    """Bidirectional: changing the last group's features changes the first group's state."""
    torch.manual_seed(0)
    encoder = LSTMEncoder(hidden_size=16, type_embedding=8, max_neighbours=6)
    assert encoder.order_sensitive
    numeric = features["numeric"].clone()
    numeric[-1] += 1.0
    before, after = encoder(features), encoder(dict(features, numeric=numeric))
    assert not torch.allclose(before[0], after[0])
    torch.testing.assert_close(encoder.lstm(encoder.embed(features)[None])[0][0], before)


def test_rejects_bad_configuration(features):
    """An odd hidden size, or adjacency of the wrong width, raises ValueError."""
    with pytest.raises(ValueError, match="even"):
        LSTMEncoder(hidden_size=15)
    with pytest.raises(ValueError, match="adjacency"):
        LSTMEncoder(hidden_size=16, max_neighbours=20)(features)


@pytest.mark.parametrize("encoder", ["lstm", "gnn"])
def test_features_of_more_type_buckets_than_the_encoders_are_refused_naming_both(features, encoder):
    """Features hashed into 512 buckets fed to a 4-bucket encoder failed inside torch.embedding_bag ("Index 0 of
    input takes value ... not in the valid range"; on a GPU, a device-side assert)."""
    from gplace.encoders import GNNEncoder

    make = LSTMEncoder if encoder == "lstm" else GNNEncoder
    small = make(hidden_size=16, type_embedding=8, max_neighbours=6, num_type_buckets=4)
    assert int(features["type_ids"].max()) >= 4
    with pytest.raises(ValueError, match=r"type id \d+ is not in \[0, num_type_buckets=4\) of the encoder: make the "
                                         r"features with featurize\(\.\.\., num_type_buckets=4\)"):
        small(features)
