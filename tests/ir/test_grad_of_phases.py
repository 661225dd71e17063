"""``grad_of`` links a backward op to the forward op it differentiates (docs/format.md). A ``grad_of`` on a
forward or update op, or naming a backward or update op, was loaded and simulated silently."""

import pytest

from gplace.ir import Edge, GraphError, Op, OpGraph


def _graph(ops):
    return OpGraph.from_ops(ops, [Edge("f", "b", 4)], name="g")


@pytest.mark.parametrize("phase", ["forward", "update", None])
def test_grad_of_on_an_op_that_is_not_backward_is_refused(phase):
    ops = [Op("f", "F", 1.0, phase="forward"), Op("b", "B", 1.0, phase=phase, grad_of="f")]
    with pytest.raises(GraphError, match=f"op 'b' has grad_of 'f' but phase {phase!r}"):
        _graph(ops)


@pytest.mark.parametrize("phase", ["backward", "update"])
def test_grad_of_naming_an_op_that_is_not_forward_is_refused(phase):
    ops = [Op("f", "F", 1.0, phase=phase), Op("b", "B", 1.0, phase="backward", grad_of="f")]
    with pytest.raises(GraphError, match=f"op 'b' has grad_of 'f', a {phase} op"):
        _graph(ops)


def test_a_backward_op_naming_a_forward_op_or_one_without_a_phase_loads():
    assert _graph([Op("f", "F", 1.0, phase="forward"), Op("b", "B", 1.0, phase="backward", grad_of="f")]).grad_of
    assert _graph([Op("f", "F", 1.0), Op("b", "B", 1.0, phase="backward", grad_of="f")]).grad_of
