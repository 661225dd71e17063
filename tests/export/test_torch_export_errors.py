"""PyTorch write-back errors: a bad dispatch device_map entry, and a split program called with inputs that do not
match the exported program's (found by an error-message probe: torch's own errors, 18 frames deep)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.export import Dim, export

from gplace import InvalidPlacementError, Placement, UnsupportedGraphError, from_torch
from gplace.export.torch import dispatch, pipeline_split, split_program
from gplace.testing import uniform_cluster


class Scaled(nn.Module):
    """Two tensor inputs, a keyword tensor and a constant int: x (batch, 4), y (5,), k (batch, 3), n."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x, y, *, k, n=2):
        return self.lin(x).relu() + y.sum() * n + k.tanh()


def _inputs(batch: int = 3, **changed):
    g = torch.Generator().manual_seed(batch)
    inputs = {"x": torch.randn(batch, 4, generator=g), "y": torch.randn(5, generator=g),
              "k": torch.randn(batch, 3, generator=g), "n": 2}
    return {**inputs, **changed}


def _call(split, inputs):
    return split(inputs["x"], inputs["y"], k=inputs["k"], n=inputs["n"])


def _split(program_or_module, example=None):
    graph = from_torch(program_or_module, example)
    placement = Placement.for_graph(graph, np.arange(graph.num_ops) % 2)  # interleaved: several parts
    split = split_program(graph, uniform_cluster(2, kind="cpu"), placement)
    assert sum(name.startswith("submod_") for name, _ in split.named_children()) > 1
    return split


@pytest.fixture(scope="module")
def static():
    torch.manual_seed(0)
    model = Scaled().eval()
    inputs = _inputs()
    return model, _split(export(model, (inputs["x"], inputs["y"]), {"k": inputs["k"], "n": 2}))


@pytest.fixture(scope="module")
def dynamic():
    """Batch dimension a torch.export Dim in [2, 16], shared by x and k."""
    torch.manual_seed(0)
    model = Scaled().eval()
    inputs, batch = _inputs(), Dim("batch", min=2, max=16)
    program = export(model, (inputs["x"], inputs["y"]), {"k": inputs["k"], "n": 2},
                     dynamic_shapes={"x": {0: batch}, "y": None, "k": {0: batch}, "n": None})
    return model, _split(program)


def test_dispatch_refuses_a_device_map_entry_that_is_no_torch_device_naming_it():
    module = nn.Sequential(nn.Linear(2, 2), nn.ReLU()).eval()
    with pytest.raises(InvalidPlacementError, match=r"device_map\['0'\] = 'bogus' is not a torch device"):
        dispatch(module, {"0": "bogus"})
    assert module[0].weight.device.type == "cpu" and not module[0]._forward_pre_hooks  # nothing moved


@pytest.mark.parametrize("changed, message", [
    ({"x": torch.randn(3, 5)}, r"'x'\.shape\[1\] to be equal to 4, but got 5"),
    ({"y": torch.randn(6)}, r"'y'\.shape\[0\] to be equal to 5, but got 6"),
    ({"x": torch.randn(3, 4, 1)}, r"number of dimensions in input at 'x'.*got torch\.Size\(\[3, 4, 1\]\)"),
    ({"k": torch.randn(3, 3, dtype=torch.float64)}, r"input 'k' \(input 2\) has dtype torch\.float64, "
                                                    r"expected torch\.float32"),
    ({"y": 3.0}, r"'y' to be a tensor, but got <class 'float'>"),
    ({"n": 3}, r"'n' to be equal to 2, but got 3"),  # the program has n=2 built in: 3 gave n=2's output
], ids=["static-size", "static-size-1d", "rank", "dtype", "not-a-tensor", "constant"])
def test_a_split_program_refuses_inputs_unlike_the_programs_naming_them_before_any_part_runs(static, changed,
                                                                                               message):
    model, split = static
    ran = []
    hooks = [sub.register_forward_pre_hook(lambda *_: ran.append(1))
             for name, sub in split.named_children() if name.startswith("submod_")]
    try:
        with pytest.raises(ValueError, match=message):
            _call(split, _inputs(**changed))
        assert not ran
        with torch.no_grad():  # and the right inputs still give the module's outputs
            torch.testing.assert_close(_call(split, _inputs()), _call(model, _inputs()))
    finally:
        for hook in hooks:
            hook.remove()


def test_a_split_program_with_a_dynamic_batch_runs_every_batch_in_its_range_and_refuses_others(dynamic):
    model, split = dynamic
    with torch.no_grad():
        for batch in (1, 2, 3, 7, 16, 7):
            torch.testing.assert_close(_call(split, _inputs(batch)), _call(model, _inputs(batch)))
    with pytest.raises(ValueError, match=r"'x'\.shape\[0\] to be <= 16, but got 17"):
        _call(split, _inputs(17))
    with pytest.raises(ValueError, match=r"'k'\.shape\[0\] to be equal to 7, but got 6"):  # the same Dim
        _call(split, _inputs(7, k=torch.randn(6, 3)))
    with pytest.raises(ValueError, match=r"'x'\.shape\[1\] to be equal to 4, but got 5"):  # its static size
        _call(split, _inputs(7, x=torch.randn(7, 5)))


class Paired(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, pair, extra):
        return self.lin(pair[0]).relu() * pair[1] + extra["a"]


def test_a_split_program_refuses_inputs_nested_otherwise_and_a_missing_input_naming_them():
    x = torch.randn(3, 4)
    split = _split(Paired().eval(), ((x, x), {"a": x}))
    with pytest.raises(ValueError, match=r"input 'pair' \(input 0\) nests its values as \(\*, \*, \*\), the "
                                         r"exported program's as \(\*, \*\)"):
        split((x, x, x), {"a": x})  # the third tensor was dropped without a word
    with pytest.raises(TypeError, match="'extra'"):
        split((x, x))


def test_a_copy_of_a_split_program_checks_its_inputs_too(static):
    model, split = static
    copied = copy.deepcopy(split)
    with pytest.raises(ValueError, match=r"'x'\.shape\[1\] to be equal to 4, but got 5"):
        _call(copied, _inputs(x=torch.randn(3, 5)))
    with torch.no_grad():
        torch.testing.assert_close(_call(copied, _inputs()), _call(model, _inputs()))


class Branching(nn.Module):
    """A ``torch.cond`` between two layers (torch's pipelining finds no nn_module_stack in its branch)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        h = self.a(x)
        return self.c(torch.cond(h.sum() > 0, lambda t: self.b(t), lambda t: t * 2, (h,)))


class NoGradInside(nn.Module):
    """A ``torch.no_grad`` block around a layer (torch's pipelining loses a submodule it makes of it)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        x = self.a(x)
        with torch.no_grad():
            x = self.b(x)
        return self.c(x)


@pytest.mark.parametrize(("cls", "reason"), [
    (Branching, "nn_module_stack"),
    (NoGradInside, "nonexistent attribute|unexpected placeholder node"),  # torch 2.13 | torch 2.11
])
def test_a_module_torchs_pipelining_cannot_trace_is_refused_naming_it(cls, reason):
    """torch raised a RuntimeError from deep inside its tracer, naming neither the module nor gplace: now an
    UnsupportedGraphError naming the module's class and the first line of torch's reason, from pipeline_split and
    from check_pipeline_split (up front, whatever the placement)."""
    torch.manual_seed(0)
    model, x = cls().eval(), torch.randn(2, 4)
    graph = from_torch(model, (x,))
    paths = graph.source.module_paths
    placement = Placement.for_graph(graph, [int(paths.get(op) == "c") for op in graph.op_names])
    with pytest.raises(UnsupportedGraphError, match=f"cannot trace {cls.__name__} .*({reason})"):
        pipeline_split(graph, uniform_cluster(2, kind="cpu"), placement, model, (x,))
    from gplace.export.torch import check_pipeline_split

    with pytest.raises(UnsupportedGraphError, match=f"cannot trace {cls.__name__} .*({reason})"):
        check_pipeline_split(graph, model, (x,))
