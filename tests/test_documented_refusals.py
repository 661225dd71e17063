"""Arguments the docstrings promise to refuse, refused on the spot and by name (found by a probe of the public
API's Raises sections): each was accepted and failed later, deep inside, or was refused with a wrong reason."""

from __future__ import annotations

import math

import pytest

import gplace
import gplace.baselines.pipeline
from gplace.baselines.pipeline import PipelineILPPlacer, PipelineLocalSearch
from gplace.methods import pretrained_path
from gplace.pretrained import load_policy, place_with_pretrained, save_policy
from gplace.testing import chain, uniform_cluster


def test_a_local_search_start_that_is_no_placer_is_refused_on_construction():
    """start='heft' was taken, then place() raised "AttributeError: 'str' object has no attribute 'place'"."""
    with pytest.raises(TypeError, match=r"PipelineLocalSearch: start must be a Placer .* got 'heft'"):
        PipelineLocalSearch(start="heft")


def test_the_ilp_takes_an_unlimited_time():
    """time_limit=inf was refused as 'must be a finite number > 0', where its docstring refuses only a number not
    above 0, and PipelineLocalSearch takes inf for no limit."""
    placer = PipelineILPPlacer(microbatches=2, time_limit=math.inf)
    assert placer.place(chain((1.0, 2.0, 3.0)), uniform_cluster(2)).devices.size == 3


def test_a_budget_of_infinite_seconds_is_refused_with_the_true_reason():
    with pytest.raises(ValueError, match="budget seconds must be a finite number > 0, got inf"):
        gplace.place(chain(), uniform_cluster(2), method="heft", budget=math.inf)


def test_a_logger_or_runtime_of_the_wrong_type_is_a_type_error_naming_it():
    """logger=3 raised "AttributeError: 'int' object has no attribute 'log_config'"; runtime='sim' to
    place_with_pretrained "AttributeError: 'str' object has no attribute 'measure_many'"."""
    with pytest.raises(TypeError, match="logger must be a gplace Logger .* got 3"):
        gplace.place(chain(), uniform_cluster(2), method="heft", logger=3)
    with pytest.raises(TypeError, match="runtime must be a gplace Runtime .* got 'sim'"):
        place_with_pretrained(chain(), uniform_cluster(2), pretrained_path(), runtime="sim")


def test_save_policy_refuses_a_meta_load_policy_would_refuse(tmp_path):
    """meta={'max_groups': 0} was written, and the file then refused by load_policy; meta=[1, 2] raised "TypeError:
    cannot convert dictionary update sequence element #0 to a sequence", not naming meta."""
    encoder, policy, _ = load_policy(pretrained_path())
    with pytest.raises(ValueError, match="max_groups must be a whole number >= 1 or None, got 0"):
        save_policy(tmp_path / "p.pt", encoder, policy, meta={"max_groups": 0})
    assert not (tmp_path / "p.pt").exists()
    with pytest.raises(TypeError, match="meta must be a mapping"):
        save_policy(tmp_path / "p.pt", encoder, policy, meta=[1, 2])


@pytest.mark.parametrize("call", [
    lambda c: gplace.baselines.step_time_lower_bound("g", c),
    lambda c: gplace.baselines.pipeline.pipeline_lower_bound("g", c),
    lambda c: gplace.group_ops("g"),
    lambda c: gplace.Placement.single("g", 0),
    lambda c: gplace.Placement.for_graph("g", [0]),
])
def test_a_graph_that_is_not_an_op_graph_is_a_type_error_naming_it(call):
    """Each raised "AttributeError: 'str' object has no attribute ..." (num_ops, fingerprint)."""
    with pytest.raises(TypeError, match="graph must be a gplace OpGraph, got str"):
        call(uniform_cluster(2))
