"""from_torch(exported_program, example_inputs): the given example inputs count for an inference import as for a
training one (the program at their sizes, its Dims kept, and its example inputs for running it), and inputs the
program would not take are refused naming the input."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.export import Dim, export  # noqa: E402

from gplace.importers.torch_export import from_torch  # noqa: E402


class _Lin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(8, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.l(x))


class _Kw(nn.Module):
    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return x * scale


@pytest.fixture(scope="module")
def program():
    torch.manual_seed(0)
    return export(_Lin(), (torch.randn(4, 8),), dynamic_shapes=({0: Dim("batch", min=2, max=4096)},))


def _bytes(graph) -> dict[str, int]:
    return {op.name: op.output_bytes for op in graph.ops()}


def test_given_example_inputs_size_an_inference_import_as_a_training_one(program):
    x = torch.randn(256, 8)
    graph = from_torch(program, (x,))
    assert _bytes(graph) == {"x": 256 * 8 * 4, "linear": 256 * 16 * 4, "relu": 256 * 16 * 4}
    joint = from_torch(program, (x,), training=True)
    inputs = [op for op in joint.ops() if op.type == "Input" and op.phase != "backward"]
    assert 256 * 8 * 4 in {op.output_bytes for op in inputs}
    source = graph.source.program
    assert source.example_inputs[0][0] is x  # torch-v1 and the trip counts run the given inputs
    assert str(source.range_constraints) == str(program.range_constraints)  # the Dim kept, its range too
    assert _bytes(from_torch(program)) == {"x": 128, "linear": 256, "relu": 256}  # its own, untouched


def test_inputs_of_the_programs_own_sizes_replace_its_example_inputs_in_a_copy(program):
    x = torch.randn(4, 8)
    graph = from_torch(program, x)
    assert graph.source.program.example_inputs[0][0] is x
    assert program.example_inputs[0][0] is not x
    assert _bytes(graph) == _bytes(from_torch(program))


@pytest.mark.parametrize("inputs, match", [
    (("not a tensor", 3), "structure"),
    (("not a tensor",), r"example input 'x' \(.*\) must be a tensor"),
    ((torch.randn(4, 9),), r"shape\[1\]"),
    ((torch.randn(4, 8, 1),), r"example input 'x' .* 3 dimensions, the program's has 2"),
    ((torch.randn(4, 8, dtype=torch.float64),), r"example input 'x' .* dtype torch.float64"),
    ((torch.randn(5000, 8),), r"<= 4096"),
    ({"y": torch.randn(4, 8)}, r"keyword inputs \['y'\], the program takes \[\]"),
])
def test_inputs_the_program_would_not_take_are_refused_naming_them(program, inputs, match):
    for training in (False, True):
        with pytest.raises(ValueError, match=match):
            from_torch(program, inputs, training=training)


def test_keyword_inputs_are_matched_by_name():
    program = export(_Kw(), (), {"x": torch.randn(3, 2), "scale": torch.randn(2)},
                     dynamic_shapes={"x": {0: Dim("rows")}, "scale": None})
    graph = from_torch(program, {"scale": torch.randn(2), "x": torch.randn(10, 2)})
    assert _bytes(graph)["x"] == 10 * 2 * 4
    with pytest.raises(ValueError, match=r"keyword inputs \['x', 'other'\], the program takes \['x', 'scale'\]"):
        from_torch(program, {"x": torch.randn(3, 2), "other": 2})
