"""Reading a FIFO or a device where a file is expected: one line saying so (a FIFO blocked for ever, /dev/zero
filled the memory, and load_graph said 'no such file' of a path that exists)."""

from __future__ import annotations

import contextlib
import os
import threading

import pytest

from gplace.importers import load_graph
from gplace.ir.serialize import read_json


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "graph.json"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("read", [read_json, load_graph], ids=["read_json", "load_graph"])
def test_a_fifo_is_refused_as_no_regular_file(fifo, read):
    opener = threading.Timer(2.0, lambda: _unblock(fifo))
    opener.daemon = True
    opener.start()
    try:
        with pytest.raises(OSError, match="not a regular file"):
            read(fifo)
    finally:
        opener.cancel()


def _unblock(path):
    """Open the FIFO's write end and close it: a reader blocked on it (the defect) then reads nothing."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
