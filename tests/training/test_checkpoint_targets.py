"""save_checkpoint at a path that is a folder, or whose name is as long as a file system allows."""

from __future__ import annotations

import pytest
import torch

from gplace.training.checkpoint import save_checkpoint


def test_a_folder_at_the_path_is_named_and_no_temp_file_is_left(tmp_path):
    """The rename failed with a bare IsADirectoryError naming '<path>.tmp', and the whole temp file was left."""
    target = tmp_path / "policy.pt"
    target.mkdir()
    with pytest.raises(OSError, match=f"cannot write {target}"):
        save_checkpoint(target, {"w": torch.zeros(1000)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.pt"]


def test_a_name_of_255_bytes_is_written(tmp_path):
    """'<name>.tmp' was over the limit: ENAMETOOLONG, raised again by the cleanup, hid the message."""
    target = tmp_path / ("p" * 252 + ".pt")
    save_checkpoint(target, {"w": torch.ones(3)})
    assert torch.load(target, weights_only=True)["w"].tolist() == [1.0, 1.0, 1.0]
    assert [p.name for p in tmp_path.iterdir()] == [target.name]
