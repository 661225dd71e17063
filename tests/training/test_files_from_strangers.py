"""Policy files from strangers (probe: files crafted to run code, exhaust memory or hang): refused quickly, naming
what is wrong, before anything large is built or inflated."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
import torch

from gplace.encoders import GNNEncoder
from gplace.policies import MLPPolicy
from gplace.pretrained import load_policy, save_policy


def _policy_file(path: Path) -> Path:
    return save_policy(path, GNNEncoder(hidden_size=8), MLPPolicy(2, hidden_size=8, state_size=8))


def _edited(path: Path, edit) -> Path:
    doc = torch.load(path, weights_only=True)
    edit(doc)
    torch.save(doc, path)
    return path


class _RunsCode:
    def __reduce__(self):
        return os.system, ("true",)


def test_a_file_that_would_run_code_is_refused_with_torchs_reason_not_its_advice(tmp_path):
    """torch 2.6 and later word the reason after their advice to load with weights_only=False ("... will likely
    succeed"), which the message printed in place of the reason."""
    path = tmp_path / "policy.pt"
    torch.save({"format": "gplace.policy", "meta": _RunsCode()}, path)
    with pytest.raises(ValueError, match=r"cannot be read as plain data: .*GLOBAL (posix|os)\.system") as err:
        load_policy(path)
    assert "weights_only" not in str(err.value)


@pytest.mark.parametrize(("cls", "kwargs"), [
    ("torch.nn.LSTM", {"input_size": 8, "hidden_size": 8, "num_layers": 10**9}),  # ran for minutes
    ("torch.nn.Transformer", {"num_encoder_layers": 10**9}),  # a MemoryError after 39 s
])
def test_a_billion_layers_of_a_class_not_gplaces_are_refused(tmp_path, cls, kwargs):
    path = _edited(_policy_file(tmp_path / "policy.pt"),
                   lambda d: d["encoder"].update({"class": cls, "kwargs": kwargs}))
    with pytest.raises(ValueError, match=r"asks for more layers than it may \(a policy file 1024 at most\)"):
        load_policy(path)


def test_settings_that_repeat_themselves_2_to_the_40_times_are_refused(tmp_path):
    """A list holding one list twice, 40 deep: a few bytes in the file (pickle shares them), 2**40 values to check
    (the check never ended)."""
    laughs: list = ["lol"]
    for _ in range(40):
        laughs = [laughs, laughs]
    path = _edited(_policy_file(tmp_path / "policy.pt"),
                   lambda d: d["encoder"]["kwargs"].update(num_type_buckets=laughs))
    with pytest.raises(ValueError, match=r"more than 100,000 values in all"):
        load_policy(path)


def test_a_compressed_part_is_refused_before_it_is_inflated(tmp_path):
    """torch.save stores parts uncompressed; a deflated part of zeros (1.4 MB unpacking to 1.2 GB) was inflated
    before anything was checked (3.5 GB peak)."""
    plain = _policy_file(tmp_path / "plain.pt")
    packed = tmp_path / "policy.pt"
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    with pytest.raises(ValueError, match=r"is damaged: its part '.*' is compressed .*which torch.save never writes"):
        load_policy(packed)


def test_a_classes_from_config_calls_nothing_but_that_class(tmp_path):
    """MLPPolicy.from_config({"class": "subprocess.run", ...}) ran the command, then said the config named another
    class."""
    marker = tmp_path / "ran"
    config = {"class": "os.makedirs", "kwargs": {"name": str(marker)}}
    with pytest.raises(ValueError, match=r"config names 'os.makedirs', not a MLPPolicy"):
        MLPPolicy.from_config(config)
    assert not marker.exists()
    assert type(MLPPolicy.from_config(MLPPolicy(2, hidden_size=8).config())) is MLPPolicy


def test_a_file_padded_with_views_of_one_storage_still_cannot_ask_for_more_layers(tmp_path):
    """The cap counted the file's entries, which views of one 1-element storage pad cheaply: torch.nn.LSTM with
    30,000 layers passed and took 125 s to refuse (the review)."""
    one = torch.zeros(1)
    padding = {f"pad{i}": one[0:1] for i in range(30_000)}
    path = _edited(_policy_file(tmp_path / "policy.pt"), lambda d: (
        d["encoder"].update({"class": "torch.nn.LSTM", "kwargs": {"input_size": 8, "hidden_size": 8,
                                                                  "num_layers": 30_000}}),
        d["state"]["encoder"].update(padding)))
    with pytest.raises(ValueError, match=r"num_layers=30000 asks for more layers than it may"):
        load_policy(path)


def test_a_configs_module_not_imported_is_not_imported_to_check_its_class():
    """Importing a module runs its code: MLPPolicy.from_config({"class": "this.s"}) printed the Zen of Python before
    refusing the class (the review)."""
    import sys

    if "this" in sys.modules:
        pytest.skip("the module 'this' is imported already")
    with pytest.raises(ValueError, match=r"module 'this', which is not imported"):
        MLPPolicy.from_config({"class": "this.s", "kwargs": {}})
    assert "this" not in sys.modules


def test_a_config_class_whose_module_fails_to_import_names_the_cause(tmp_path, monkeypatch):
    """The shared resolver said only "cannot import 'badmod.X'": the missing dependency went unsaid."""
    from gplace.configurable import from_config

    (tmp_path / "badmod.py").write_text("import no_such_dependency_xyz\n\n\nclass X:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"cannot import 'badmod.X' \(No module named 'no_such_dependency_xyz'\)"):
        from_config({"class": "badmod.X", "kwargs": {}})
