"""Inputs of the pretrained-policy functions refused in words (probe of 2026-12-06): pairs that are not an encoder
and a policy, a runtime that is not one, a graph without ops, a file's dtype that is not floating, a ``meta`` nested
too deep; and a ``placement.json`` of another format or version given to :func:`pipeline_from_file`."""

from __future__ import annotations

import pytest
import torch

from gplace.ir import GraphError, OpGraph, placement_to_dict, save_json
from gplace.methods import pretrained_path
from gplace.pretrained import load_policy, pick_pretrained, place_with_pretrained, place_zero_shot, save_policy
from gplace.testing import diamond, uniform_cluster


@pytest.fixture(scope="module")
def pair():
    encoder, policy, _ = load_policy(pretrained_path())
    return encoder, policy


@pytest.mark.parametrize(("entry", "match"), [
    ("ab", r"pretrained\[0\] must be an \(encoder, policy\) pair, got str"),
    ("swapped", r"pretrained\[0\]: policy must be a gplace Policy.*encoder and policy swapped\?"),
])
def test_pick_pretrained_refuses_an_entry_that_is_not_an_encoder_and_a_policy(pair, entry, match):
    """A swapped pair and a 2-letter string failed with AttributeError: ... has no attribute 'greedy'."""
    given = pair[::-1] if entry == "swapped" else entry
    with pytest.raises(TypeError, match=match):
        pick_pretrained([given], diamond(), uniform_cluster(2))


def test_zero_shot_placement_refuses_a_runtime_that_is_not_one_before_placing(pair):
    """runtime='sim' failed with 'str' object has no attribute 'measure_many', after every greedy placement."""
    with pytest.raises(TypeError, match="runtime must be a gplace Runtime"):
        pick_pretrained([pair], diamond(), uniform_cluster(2), runtime="sim")
    with pytest.raises(TypeError, match="runtime must be a gplace Runtime"):
        place_zero_shot(*pair, diamond(), uniform_cluster(2), samples=2, runtime="sim")


def test_a_graph_without_ops_is_refused_as_gplace_place_refuses_it(pair):
    """A RuntimeError from torch's reshape ('cannot reshape tensor of 0 elements')."""
    empty = OpGraph.from_ops([], [], name="empty")
    for call in (lambda: place_with_pretrained(empty, uniform_cluster(2), pretrained_path()),
                 lambda: pick_pretrained([pair], empty, uniform_cluster(2)),
                 lambda: place_zero_shot(*pair, empty, uniform_cluster(2))):
        with pytest.raises(GraphError, match="graph 'empty' has no ops: nothing to place"):
            call()


@pytest.mark.parametrize("dtype", ["int8", "bool", "complex64"])
def test_a_policy_file_whose_dtype_is_not_floating_is_refused_naming_the_file(tmp_path, dtype):
    """int8 raised Module.to's TypeError naming no file (a traceback from the CLI); complex64 loaded, then failed."""
    doc = torch.load(pretrained_path(), weights_only=True)
    doc["policy"]["dtype"] = dtype
    path = tmp_path / "policy.pt"
    torch.save(doc, path)
    with pytest.raises(ValueError, match=rf"^{path}: .*dtype '{dtype}' is not a torch floating point dtype"):
        load_policy(path)


def test_meta_nested_too_deep_is_refused_as_bad_meta_not_a_failed_write(pair, tmp_path):
    """5,000 deep was OSError 'cannot write ... (maximum recursion depth exceeded)', which the CLI calls a disk
    failure."""
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ValueError, match=r"^meta is nested more than 100 deep"):
        save_policy(tmp_path / "p.pt", *pair, meta={"x": deep})
    assert not (tmp_path / "p.pt").exists()


@pytest.mark.parametrize(("field", "value", "match"), [
    ("version", 99, "version 99 is not supported"),
    ("format", "gplace.graph", "is not a gplace.placement file"),
])
def test_pipeline_from_file_refuses_another_format_or_version(tmp_path, field, value, match):
    """Both built a 4-stage Pipe from the file's split_spec as if it were a placement of this version."""
    from gplace.export.torch import pipeline_from_file
    from gplace.ir import Placement

    graph, cluster = diamond(), uniform_cluster(2)
    doc = placement_to_dict(Placement.single(graph, 0), graph, cluster)
    doc.update({"split_spec": {}, field: value})
    path = save_json(doc, tmp_path / "placement.json")
    with pytest.raises(GraphError, match=match):
        pipeline_from_file(path, torch.nn.Linear(2, 2), (torch.zeros(1, 2),))
