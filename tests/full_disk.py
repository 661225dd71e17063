"""A disk that fills mid-write, for the tests of atomic writes (``gplace.ir.serialize.write_text_atomic``)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable


class _FullDisk:
    """A file opened for writing that writes ``keep(text)`` of what it is given, then raises ENOSPC."""

    def __init__(self, file, keep: Callable[[str], str]) -> None:
        self.file, self.keep = file, keep

    def __enter__(self) -> _FullDisk:
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()

    def write(self, text: str) -> int:
        self.file.write(self.keep(text))
        raise OSError(28, "No space left on device")

    def writelines(self, pieces) -> None:
        self.write("".join(pieces))


def fill_disk_on_write(monkeypatch, keep: Callable[[str], str] = lambda text: text[:10]) -> None:
    """From now on (until ``monkeypatch.undo()``), a file opened for writing through ``Path.open`` takes
    ``keep(text)`` and then the disk is full."""
    real = pathlib.Path.open

    def full(self, mode="r", *args, **kwargs):
        file = real(self, mode, *args, **kwargs)
        return _FullDisk(file, keep) if "w" in mode or "x" in mode else file

    monkeypatch.setattr(pathlib.Path, "open", full)
