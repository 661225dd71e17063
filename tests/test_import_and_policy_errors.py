"""Errors of from_torch, policy files and checkpoints name the real cause; imported torch graphs pickle."""

from __future__ import annotations

import pickle

import pytest
import torch
from torch import nn

from gplace.encoders import GNNEncoder
from gplace.importers.torch_export import from_torch
from gplace.ir import UnsupportedGraphError
from gplace.policies import DeviceAwarePolicy
from gplace.pretrained import build, load_policy, save_policy
from gplace.run_dir import RunDirConflictError
from gplace.training.checkpoint import load_checkpoint, save_checkpoint, torch_load_reason

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

ENCODER = {"conv": "sage", "hidden_size": 8, "num_layers": 1, "type_embedding": 4, "projection": 4}


class DataDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if y.sum() > 0:  # the line torch.export cannot trace
            return y * 2
        return y


class ScriptEncoder(GNNEncoder):
    """An encoder as a script defines it."""

    __module__ = "__main__"


def _modules() -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    return build(GNNEncoder, **ENCODER), build(DeviceAwarePolicy, hidden_size=8)


def _json(tmp_path, name: str):
    path = tmp_path / name
    path.write_text('{"format": "gplace.policy"}')
    return path


# ---------------------------------------------------------------------- from_torch
def test_export_failure_names_the_users_line_and_chains_torchs_error():
    """torch names the user's line that failed after 1000 characters of advice: the message keeps that line, and
    torch's error is the cause."""
    with pytest.raises(UnsupportedGraphError, match=r"line \d+, in forward if y\.sum\(\) > 0") as info:
        from_torch(DataDependent(), (torch.randn(2, 4),))
    assert "test_import_and_policy_errors.py" in str(info.value)
    assert info.value.__cause__ is not None


def test_an_imported_torch_graph_pickles_and_unpickles():
    """An inference graph's ExportedProgram comes back from a pickle (torch cannot unpickle one as it is)."""
    torch.manual_seed(0)
    module, x = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval(), torch.randn(4, 8)
    graph = from_torch(module, (x,))
    copy = pickle.loads(pickle.dumps(graph))
    assert copy.op_names == graph.op_names
    assert copy.source.module_paths == graph.source.module_paths
    assert torch.allclose(copy.source.program.module()(x), module(x))


# ---------------------------------------------------------------------- unreadable files
def test_torch_load_reason_drops_the_weights_only_advice(tmp_path):
    """A file that is not torch's is refused for its own reason, not with advice to load it with
    weights_only=False."""
    with pytest.raises(Exception) as info:  # noqa: B017 (torch raises an UnpicklingError)
        torch.load(_json(tmp_path, "x.json"), weights_only=True)
    assert "weights_only" in str(info.value)
    reason = torch_load_reason(info.value)
    assert reason.startswith("WeightsUnpickler error: Unsupported operand") and "weights_only" not in reason
    assert torch_load_reason(RuntimeError("first line\nsecond")) == "first line"


def test_a_json_file_as_a_policy_or_a_checkpoint_names_the_real_reason(tmp_path):
    """load_policy and load_checkpoint of a JSON file quote torch's reason, not its weights_only advice."""
    with pytest.raises(ValueError, match="WeightsUnpickler error: Unsupported operand") as info:
        load_policy(_json(tmp_path, "policy.json"))
    assert "weights_only" not in str(info.value)
    with pytest.raises(RunDirConflictError, match="WeightsUnpickler error: Unsupported operand") as info:
        load_checkpoint(_json(tmp_path, "checkpoint.pt"), "fingerprint")
    assert "weights_only" not in str(info.value)


def test_a_training_checkpoint_or_a_run_directory_names_the_runs_policy_file(tmp_path):
    """A run's checkpoint.pt, or the run directory itself, given as a policy file names the run's policy.pt."""
    policy_file = save_policy(tmp_path / "policy.pt", *_modules())
    save_checkpoint(tmp_path / "checkpoint.pt", {"fingerprint": "f", "optimizer": {}, "update": 3})
    with pytest.raises(ValueError, match=f"training checkpoint; use {policy_file}"):
        load_policy(tmp_path / "checkpoint.pt")
    with pytest.raises(FileNotFoundError, match=f"use {policy_file}"):
        load_policy(tmp_path)


# ---------------------------------------------------------------------- save_policy
def test_save_policy_warns_of_a_class_of_main_and_the_same_process_loads_it(tmp_path, monkeypatch):
    """A class defined in a script or notebook (__main__) cannot be loaded by another process: saving warns (a
    notebook saving and reloading its own policy still works)."""
    import sys

    monkeypatch.setattr(sys.modules["__main__"], "ScriptEncoder", ScriptEncoder, raising=False)
    _, policy = _modules()
    with pytest.warns(UserWarning, match="ScriptEncoder is defined in __main__") as caught:
        save_policy(tmp_path / "p.pt", build(ScriptEncoder, **ENCODER), policy)
    assert caught[0].filename == __file__
    encoder, _, _ = load_policy(tmp_path / "p.pt")
    assert type(encoder) is ScriptEncoder


def test_loading_a_class_of_main_says_so_not_another_gplace_version(tmp_path):
    """A file naming __main__.X (written before saving refused it) is blamed on the script, not on versions."""
    path = save_policy(tmp_path / "p.pt", *_modules())
    doc = torch.load(path, weights_only=True)
    doc["encoder"]["class"] = "__main__.ScriptEncoder"
    torch.save(doc, path)
    with pytest.raises(ValueError, match="defined in __main__") as info:
        load_policy(path)
    assert "gplace version" not in str(info.value)


def test_save_policy_with_the_path_last_names_the_order(tmp_path):
    """save_policy(encoder, policy, path) says the order instead of failing on the str's init_kwargs."""
    encoder, policy = _modules()
    with pytest.raises(TypeError, match=r"save_policy\(path, encoder, policy\).*GNNEncoder, DeviceAwarePolicy, str"):
        save_policy(encoder, policy, str(tmp_path / "p.pt"))


def test_a_run_directory_given_as_the_method_names_its_policy_file(tmp_path):
    """gplace.place(method=<run dir>) (gplace place checkpoint=<run dir>) said only "no policy file at ..."."""
    from gplace.methods import policy_file

    with pytest.raises(FileNotFoundError, match=f"it is a directory; its policy file would be '{tmp_path}/policy.pt'"):
        policy_file(str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"no policy file at '.*nothing\.pt'$"):
        policy_file(str(tmp_path / "nothing.pt"))
