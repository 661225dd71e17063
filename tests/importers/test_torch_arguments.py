"""from_torch's and from_module_shapes's arguments: training= a real flag, an ExportedProgram.module() imported,
a torch dtype and a numpy seed taken, other seeds refused naming seed."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from gplace.importers.torch_export import from_module_shapes, from_torch  # noqa: E402


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.BatchNorm1d(8), nn.Linear(8, 2)).eval()


def _types(graph) -> set[str]:
    return {op.type for op in graph.ops()}


@pytest.mark.parametrize("training", [np.bool_(True), "no", None, 1])
def test_training_must_be_true_or_false(training):
    with pytest.raises(ValueError, match="from_torch: training must be true or false"):
        from_torch(_net(), (torch.randn(4, 8),), training=training)


def test_an_exported_programs_module_is_imported_in_the_mode_it_was_exported_in():
    net, example = _net(), torch.randn(4, 8)
    program = torch.export.export(net, (example,))
    module = program.module()
    expected = _types(from_torch(program))
    assert _types(from_torch(module, (example,))) == expected
    assert _types(from_torch(nn.Sequential(module), (example,))) == expected
    joint = from_torch(module, (example,), training=True)
    assert _types(joint) == _types(from_torch(program, training=True))
    assert "aten._native_batch_norm_legit_no_training.default" in _types(joint)  # eval's batch norm, as exported
    assert not net.training


def test_from_module_shapes_takes_a_torch_dtype_and_a_numpy_seed():
    by_name = from_module_shapes(_net(), [[4, 8]], dtype="float64", seed=3)
    by_dtype = from_module_shapes(_net(), [[4, 8]], dtype=torch.float64, seed=np.int64(3))
    assert by_dtype.num_ops == by_name.num_ops
    assert by_dtype.source.program.example_inputs[0][0].dtype == torch.float64
    assert torch.equal(by_dtype.source.program.example_inputs[0][0], by_name.source.program.example_inputs[0][0])


@pytest.mark.parametrize("seed", [None, 1.5, "1", True, 2**64])
def test_from_module_shapes_refuses_a_seed_that_is_not_a_whole_number(seed):
    with pytest.raises(ValueError, match="from_module_shapes: seed must be a 64-bit whole number, got"):
        from_module_shapes(_net(), [[4, 8]], seed=seed)
