"""save_checkpoint at a path that is a folder, whose name is as long as a file system allows, or beside a symbolic
link planted at a temporary name."""

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


def test_a_link_planted_at_the_temporary_name_is_not_written_through(tmp_path):
    """The temporary file was always '<name>.tmp': a link of that name in a shared run directory had torch.save
    write the checkpoint over the file it points to, and the link itself became the checkpoint."""
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint.pt.tmp").symlink_to(notes)
    save_checkpoint(run / "checkpoint.pt", {"w": torch.ones(2)})
    assert notes.read_text() == "my notes"
    assert not (run / "checkpoint.pt").is_symlink()
    assert torch.load(run / "checkpoint.pt", weights_only=True)["w"].tolist() == [1.0, 1.0]
