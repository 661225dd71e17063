"""Tests for gplace.encoders.GNNEncoder."""

from __future__ import annotations

import pytest
import torch

from gplace.encoders import GNNEncoder
from gplace.encoders.gnn import both_directions
from gplace.features import featurize
from gplace.grouping import group_ops, identity_grouping
from gplace.testing import chain, random_dag

CONVS = ["sage", "gat", "gin"]


def _encoder(conv: str, num_layers: int = 2) -> GNNEncoder:
    torch.manual_seed(0)
    return GNNEncoder(conv, hidden_size=16, num_layers=num_layers, heads=2, type_embedding=8, projection=8,
                      max_neighbours=6)


def _features(graph=None) -> dict[str, torch.Tensor]:
    graph = graph or random_dag(40, seed=3)
    return featurize(graph, group_ops(graph, max_groups=9), max_neighbours=6).to_tensors()


def _permute(features: dict[str, torch.Tensor], perm: torch.Tensor) -> dict[str, torch.Tensor]:
    """The same graph with the group at new position ``i`` being old group ``perm[i]``."""
    g = perm.numel()
    ends = torch.cat([features["type_offsets"][1:], torch.tensor([features["type_ids"].numel()])])
    bags = [features["type_ids"][features["type_offsets"][p]:ends[p]] for p in perm.tolist()]
    new_pos = torch.empty(g, dtype=torch.int64)
    new_pos[perm] = torch.arange(g)
    out = {k: features[k][perm] for k in ("shapes", "shape_flags", "adjacency", "numeric", "position", "order")}
    out["type_ids"] = torch.cat(bags)
    out["type_offsets"] = torch.tensor([0] + [len(b) for b in bags[:-1]]).cumsum(0)
    return dict(out, edge_index=new_pos[features["edge_index"]], edge_attr=features["edge_attr"])


@pytest.mark.parametrize("conv", CONVS)
def test_output_shape_finite_and_order_blind(conv):
    """G groups map to a finite (G, H) tensor; the encoder declares itself order-insensitive."""
    states = _encoder(conv)(_features())
    assert states.shape == (9, 16) and torch.isfinite(states).all()
    assert not GNNEncoder.order_sensitive
    assert _encoder(conv).uses_edge_features == (conv == "gat")


@pytest.mark.parametrize("conv", CONVS)
def test_relabelling_groups_permutes_the_states(conv):
    """Equivariance: renumbering the groups (and their edges) permutes the rows of the output the same way."""
    encoder, features = _encoder(conv), _features()
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(1))
    before, after = encoder(features), encoder(_permute(features, perm))
    torch.testing.assert_close(after, before[perm], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(after.sum(0), before.sum(0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("conv", CONVS)
def test_messages_travel_both_ways_one_hop_per_layer(conv):
    """On a 4-op chain, a change at the sink reaches its producer after one layer, and the source after three."""
    graph = chain((1.0, 2.0, 3.0, 4.0))
    features = featurize(graph, identity_grouping(graph), max_neighbours=6).to_tensors()
    numeric = features["numeric"].clone()
    numeric[3] += 1.0
    changed = dict(features, numeric=numeric)
    one, three = _encoder(conv, num_layers=1), _encoder(conv, num_layers=3)
    delta1 = (one(changed) - one(features)).abs().sum(1)
    delta3 = (three(changed) - three(features)).abs().sum(1)
    assert delta1[2] > 1e-4 and delta1[:2].max() == 0
    assert delta3[0] > 1e-4


def test_only_gat_reads_edge_bytes():
    """Changing the bytes on the edges changes GAT's states and leaves SAGE's and GIN's alone."""
    features = _features()
    heavier = dict(features, edge_attr=features["edge_attr"] * 1.5)
    for conv in CONVS:
        encoder = _encoder(conv)
        same = torch.equal(encoder(features), encoder(heavier))
        assert same == (conv != "gat"), conv


def test_both_directions_adds_reversed_edges_with_a_direction_flag():
    """Edges come forward with +1 and reversed with -1; bytes are log1p(bytes) / 10."""
    edge_index, attr = both_directions(torch.tensor([[0, 1], [1, 2]]), torch.tensor([[10.0], [20.0]]))
    assert edge_index.tolist() == [[0, 1, 1, 2], [1, 2, 0, 1]]
    torch.testing.assert_close(attr, torch.tensor([[1.0, 1.0], [2.0, 1.0], [1.0, -1.0], [2.0, -1.0]]))


def test_rejects_bad_configuration():
    """An unknown layer names the choices; GAT heads must divide the hidden size; adjacency width is checked."""
    with pytest.raises(ValueError, match="sage"):
        GNNEncoder("gcn")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="heads"):
        GNNEncoder("gat", hidden_size=10, heads=4)
    with pytest.raises(ValueError, match="num_layers"):
        GNNEncoder("sage", num_layers=0)
    with pytest.raises(ValueError, match="adjacency"):
        GNNEncoder("sage", hidden_size=8)(_features())
