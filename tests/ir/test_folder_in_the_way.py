"""A file (or a symbolic link to nothing) where a writer needs a folder is named, not reported as "File exists"."""

from __future__ import annotations

import re

import pytest

import gplace
from gplace.ir.serialize import make_folder, write_text_atomic
from gplace.loggers import JsonlLogger
from gplace.run_dir import hold_dir
from gplace.testing import chain, uniform_cluster
from gplace.training.checkpoint import save_checkpoint


def _in_the_way(tmp_path, kind):
    blocker = tmp_path / "blocker"
    if kind == "file":
        blocker.write_text("not a folder")
    else:
        blocker.symlink_to(tmp_path / "gone")
    return blocker, "is a file, not a folder" if kind == "file" else "is a symbolic link to nothing"


def _place(path):
    graph = chain([1.0, 1.0, 1.0])
    gplace.place(graph, uniform_cluster(2), method="heft", run_dir=path)


@pytest.mark.parametrize("kind", ["file", "dangling link"])
@pytest.mark.parametrize("write, below", [
    (lambda path: write_text_atomic(path / "placement.json", "{}"), ""),
    (lambda path: write_text_atomic(path / "placement.json", "{}"), "a/b"),
    (lambda path: save_checkpoint(path / "checkpoint.pt", {"x": 1}), ""),
    (lambda path: JsonlLogger(path / "metrics.jsonl"), ""),
    (lambda path: hold_dir(path).__enter__(), "run"),
    (_place, "run"),
], ids=["atomic-write", "atomic-write-deeper", "checkpoint", "metrics", "run-dir-lock", "place-run-dir"])
def test_a_file_where_a_folder_must_be_is_named(tmp_path, kind, write, below):
    """mkdir said "[Errno 17] File exists: '<the file>'" (or "Not a directory: '<the path>'"), which reads as if the
    file to write existed, and named no part for a folder below the file."""
    blocker, what = _in_the_way(tmp_path, kind)
    folder = blocker / below if below else blocker
    with pytest.raises(NotADirectoryError, match=re.escape(f"{blocker} {what}")):
        write(folder)
    assert blocker.is_symlink() or blocker.read_text() == "not a folder"


def test_make_folder_makes_missing_parents_and_keeps_an_existing_folder(tmp_path):
    folder = tmp_path / "a" / "b"
    assert make_folder(folder) == folder and folder.is_dir()
    assert make_folder(folder) == folder
