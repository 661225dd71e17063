"""Reading a FIFO or a device where a file is expected: one line saying so (a FIFO blocked for ever, /dev/zero
filled the memory, and load_graph, from_onnx and load_policy said 'no such file' of a path that exists). Every
reader of a user's file goes through ``refuse_special_file``."""

from __future__ import annotations

import contextlib
import os
import threading

import pytest

from gplace.importers import load_graph
from gplace.importers.onnx import from_onnx
from gplace.importers.profiles import load_pipedream
from gplace.ir.serialize import read_json
from gplace.loggers import JsonlLogger
from gplace.pretrained import load_policy
from gplace.run_dir import RunDirConflictError
from gplace.training.checkpoint import load_checkpoint


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "graph.json"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("read", [read_json, load_graph, from_onnx, load_pipedream, load_policy],
                         ids=["read_json", "load_graph", "from_onnx", "load_pipedream", "load_policy"])
def test_every_reader_of_a_user_file_refuses_a_fifo(fifo, read):
    _refused(fifo, OSError, read)


def test_a_fifo_for_the_metrics_file_is_refused_not_written_to(fifo):
    """A run (or its resume) whose metrics.jsonl is a FIFO blocked on its first record."""
    _refused(fifo, OSError, lambda path: JsonlLogger(path).log_scalars(0, {"loss": 1.0}))


def test_a_fifo_for_a_checkpoint_is_refused_not_waited_on(fifo):
    """Resuming a run whose checkpoint.pt is a FIFO blocked for ever."""
    _refused(fifo, RunDirConflictError, lambda path: load_checkpoint(path, "fingerprint"))


@pytest.mark.tf
def test_from_tensorflow_refuses_a_fifo(fifo):
    pytest.importorskip("tensorflow")
    from gplace.importers.tensorflow import from_tensorflow

    _refused(fifo, OSError, from_tensorflow)


def _refused(fifo, error, read):
    """``read(fifo)`` raises ``error`` saying it is no regular file; a reader that opens the FIFO (the defect) is
    unblocked every second after the first two, however often it opens it, so it fails instead of hanging."""
    done = threading.Event()

    def unblock_until_done():
        done.wait(2.0)
        while not done.is_set():
            _unblock(fifo)
            done.wait(1.0)

    opener = threading.Thread(target=unblock_until_done, daemon=True)
    opener.start()
    try:
        with pytest.raises(error, match="is not a regular file \\(a FIFO or a device\\)"):
            read(fifo)
    finally:
        done.set()


def _unblock(path):
    """Open the FIFO's write end and close it: a reader blocked on it (the defect) then reads nothing; and its
    read end: a writer blocked on it then writes to a closed pipe."""
    for mode in (os.O_WRONLY, os.O_RDONLY):
        with contextlib.suppress(OSError):
            os.close(os.open(path, mode | os.O_NONBLOCK))
