"""gplace.place with one network of one's own: a learned method by name (``"gdp"``, ``"list_scheduling"``) filled
the other from the paper's defaults, not the method's (a GNN encoder given to ``list_scheduling`` trained a
seq2seq policy under that name; a policy given to ``gdp`` got an LSTM encoder and failed deep in the placer)."""

from __future__ import annotations

import pytest

import gplace
from gplace.encoders import GNNEncoder
from gplace.testing import two_branches, uniform_cluster


def test_one_network_with_a_named_learned_method_is_refused() -> None:
    graph, cluster = two_branches(2), uniform_cluster(2)
    with pytest.raises(ValueError, match="method 'list_scheduling' builds its own encoder and policy: give the "
                                         "policy too"):
        gplace.place(graph, cluster, method="list_scheduling", encoder=GNNEncoder(hidden_size=16), budget=2)


def test_learned_pairs_one_network_with_the_papers_other() -> None:
    graph, cluster = two_branches(2), uniform_cluster(2)
    report = gplace.place(graph, cluster, method="learned", encoder=GNNEncoder(hidden_size=256), budget="4 samples")
    assert report.measurement.ok
