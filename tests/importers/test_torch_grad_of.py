"""``grad_of`` of a torch joint graph (the importer's ``seq_forward``: autograd sequence number -> the first forward
op with it): backward ops point at the first forward op of their sequence number, forward ops at nothing.

Driven through the FX builder's phase rule with stand-in nodes (a traced joint graph takes seconds; the end-to-end
case is tests/pipeline/test_importer_phases.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("torch")

from gplace.importers.torch_export import _FxBuilder  # noqa: E402


def _node(name: str, tag: str | None, seq: int | None) -> SimpleNamespace:
    return SimpleNamespace(name=name, meta={"partitioner_tag": tag, "seq_nr": seq})


def test_backward_ops_point_at_the_first_forward_op_of_their_sequence_and_forward_ops_at_none() -> None:
    """relu and the detach after it share sequence 7 (as in ``Linear -> ReLU`` traced for training), addmm has 3:
    relu's backward ops point at relu, the first of them (not detach, the last); addmm's at addmm; no forward op,
    nor an op of no phase or a backward op without a forward one, is the gradient of anything."""
    builder = _FxBuilder(None, {})
    nodes = [_node("addmm", "is_forward", 3), _node("relu", "is_forward", 7), _node("detach", "is_forward", 7),
             _node("output_grad", None, 7), _node("threshold_backward", "is_backward", 7),
             _node("mm", "is_backward", 3), _node("orphan", "is_backward", 11)]
    got = {n.name: builder._phase(n) for n in nodes}
    assert got == {
        "addmm": ("forward", None), "relu": ("forward", None), "detach": ("forward", None),
        "output_grad": (None, None), "threshold_backward": ("backward", "relu"), "mm": ("backward", "addmm"),
        "orphan": ("backward", None),
    }
