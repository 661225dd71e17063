"""Writers on a full disk: each error names the file it could not write, and what was there before stays whole."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from gplace import Placement, from_torch
from gplace.ir.serialize import write_text_atomic
from gplace.loggers import JsonlLogger
from gplace.run_dir import LOCK_FILE, hold_dir
from gplace.testing import uniform_cluster
from gplace.training.checkpoint import save_checkpoint
from tests.full_disk import fill_disk_on_write

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import from_onnx  # noqa: E402
from gplace.export import write_back  # noqa: E402

ENOSPC = errno.ENOSPC


class _FullOnAppend:
    """A file opened to append that takes nothing: the disk is full."""

    def __init__(self, file) -> None:
        self.file = file

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self) -> _FullOnAppend:
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()

    def write(self, data) -> int:
        raise OSError(ENOSPC, os.strerror(ENOSPC))


def _fill_disk_on_append(monkeypatch) -> None:
    """From now on, a file opened through ``Path.open`` to append (``"a"``, ``"a+"``, ``"a+b"``) cannot be written."""
    real = Path.open

    def full(self, mode="r", *args, **kwargs):
        file = real(self, mode, *args, **kwargs)
        return _FullOnAppend(file) if "a" in mode else file

    monkeypatch.setattr(Path, "open", full)


def _named(err: pytest.ExceptionInfo, path: Path) -> bool:
    return err.value.errno == ENOSPC and f"cannot write {path}: No space left on device" in str(err.value)


def test_an_atomic_write_on_a_full_disk_names_its_file(tmp_path, monkeypatch):
    """placement.json, trace.json, results.json, RESULTS.md: a bare "[Errno 28] No space left on device"."""
    path = tmp_path / "results.json"
    fill_disk_on_write(monkeypatch)
    with pytest.raises(OSError) as err:
        write_text_atomic(path, "x" * 100)
    monkeypatch.undo()
    assert _named(err, path) and not list(tmp_path.iterdir())


def test_a_metrics_line_on_a_full_disk_names_its_file(tmp_path, monkeypatch):
    """metrics.jsonl's append failed with a bare "[Errno 28] No space left on device"."""
    logger = JsonlLogger(tmp_path / "metrics.jsonl")
    _fill_disk_on_append(monkeypatch)
    with pytest.raises(OSError) as err:
        logger.log_scalars(1, {"charts/step_time": 1.0})
    monkeypatch.undo()
    assert _named(err, logger.path)


def test_a_run_directory_lock_on_a_full_disk_names_its_file(tmp_path, monkeypatch):
    """Writing the holder's pid into .lock failed with a bare "[Errno 28] No space left on device"."""
    _fill_disk_on_append(monkeypatch)
    with pytest.raises(OSError) as err, hold_dir(tmp_path):
        pass
    monkeypatch.undo()
    assert _named(err, tmp_path / LOCK_FILE)
    with hold_dir(tmp_path):  # the failed hold released the lock
        pass


def _mlp(path: Path, *, external: bool = False) -> Path:
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), f"W{i}") for i in range(2)]
    nodes = [helper.make_node("MatMul", ["x", "W0"], ["h"], name="first"),
             helper.make_node("MatMul", ["h", "W1"], ["y"], name="second")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 16])], initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, path, save_as_external_data=external, location=path.name + ".weights", size_threshold=0)
    return path


def _write_backs(tmp_path: Path, *, external: bool = False):
    """The mlp's graph and two placements' write-backs: spread over two devices, then all on one."""
    graph = from_onnx(_mlp(tmp_path / "mlp.onnx", external=external))
    cluster = uniform_cluster(2, kind="cpu")
    spread = Placement.for_graph(graph, [i % 2 for i in range(graph.num_ops)])
    return lambda out, single=False: write_back(graph, cluster, Placement.single(graph, 0) if single else spread, out)


def _contents(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_write_back_that_fills_the_disk_leaves_the_earlier_placed_model_whole(tmp_path, monkeypatch):
    """placed.onnx was written in place: a full disk left a truncated model onnx could not load."""
    write, out = _write_backs(tmp_path), tmp_path / "run"
    write(out)
    before = _contents(out)
    fill_disk_on_write(monkeypatch, keep=lambda data: data[: len(data) // 2])
    with pytest.raises(OSError) as err:
        write(out, single=True)
    monkeypatch.undo()
    assert _contents(out) == before and _named(err, out / "placed.onnx")
    onnx.checker.check_model(str(out / "placed.onnx"))


def test_a_disk_filled_writing_the_parts_leaves_the_earlier_parts(tmp_path, monkeypatch):
    """The earlier placement's parts/ were deleted before the new ones were written: a full disk left none of
    them (and a truncated new one)."""
    write, out = _write_backs(tmp_path), tmp_path / "run"
    write(out)
    before = {k: v for k, v in _contents(out).items() if k.startswith("parts")}
    assert len(before) == 2
    real = Path.open
    fill_disk_on_write(monkeypatch)
    full = Path.open
    monkeypatch.setattr(Path, "open", lambda self, mode="r", *args, **kwargs: (
        full if "parts" in self.parts else real)(self, mode, *args, **kwargs))
    with pytest.raises(OSError) as err:
        write(out, single=True)
    monkeypatch.undo()
    assert {k: v for k, v in _contents(out).items() if k.startswith("parts")} == before
    assert _named(err, out / "parts" / "000_CPU_0.onnx")
    assert len(write(out, single=True)) == 2 and len(list((out / "parts").iterdir())) == 1  # room again


def test_a_disk_filled_writing_external_weights_leaves_the_earlier_model_and_weights(tmp_path, monkeypatch):
    """placed.onnx.data was deleted, then written in place: a full disk left the model without its weights."""
    import onnx.external_data_helper as helper_module

    write, out = _write_backs(tmp_path, external=True), tmp_path / "run"
    write(out)
    before = _contents(out)
    assert "placed.onnx.data" in before
    real = helper_module.save_external_data

    def full(tensor, base_path):
        real(tensor, base_path)
        raise OSError(ENOSPC, os.strerror(ENOSPC))

    monkeypatch.setattr(helper_module, "save_external_data", full)
    with pytest.raises(OSError) as err:
        write(out, single=True)
    monkeypatch.undo()
    assert _contents(out) == before and _named(err, out / "placed.onnx.data")


def test_a_device_map_on_a_full_disk_is_kept_and_named(tmp_path, monkeypatch):
    """device_map.json (and placed.pb) were written in place: a full disk left half a file."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).eval()
    graph, cluster = from_torch(model, (torch.randn(2, 4),)), uniform_cluster(2, kind="gpu")
    [path] = write_back(graph, cluster, Placement.single(graph, 0), tmp_path)
    fill_disk_on_write(monkeypatch, keep=lambda data: data[:5])
    with pytest.raises(OSError) as err:
        write_back(graph, cluster, Placement.single(graph, 1), tmp_path)
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"0": "cuda:0", "2": "cuda:0"} and _named(err, path)


def test_a_checkpoint_asks_whether_the_disk_is_full_only_when_it_is(tmp_path, monkeypatch):
    """Every failed checkpoint write asked "is the disk full?", a folder without permission too."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full to fill")
    real = torch.save
    monkeypatch.setattr(torch, "save", lambda state, f: real(state, "/dev/full"))  # torch's own full-disk error
    with pytest.raises(OSError, match=r"unexpected pos .*: is the disk full\?"):
        save_checkpoint(tmp_path / "checkpoint.pt", {"w": torch.zeros(10**4)})
    with pytest.raises(OSError, match=r"is the disk full\?"):  # a small state: torch's "iostream error"
        save_checkpoint(tmp_path / "checkpoint.pt", {"w": torch.zeros(10)})

    def torch_denied(state, f):  # torch's C++ writer names no errno, only its strerror
        raise RuntimeError(f"[enforce fail at inline_container.cc:747] . open file failed with strerror: "
                           f"{os.strerror(errno.EACCES)}")

    monkeypatch.setattr(torch, "save", torch_denied)
    with pytest.raises(OSError, match="cannot be written"):
        save_checkpoint(tmp_path / "checkpoint.pt", {"w": torch.zeros(10)})

    def too_many_files(state, f):  # neither: no guess
        raise RuntimeError(f"open file failed with strerror: {os.strerror(errno.EMFILE)}")

    monkeypatch.setattr(torch, "save", too_many_files)
    with pytest.raises(OSError) as err:
        save_checkpoint(tmp_path / "checkpoint.pt", {"w": torch.zeros(10)})
    assert str(err.value).endswith("the last whole one is kept") or str(err.value).endswith("none was written before")

    def denied(state, f):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(f))

    monkeypatch.setattr(torch, "save", denied)
    with pytest.raises(OSError) as err:
        save_checkpoint(tmp_path / "checkpoint.pt", {"w": torch.zeros(10)})
    assert "disk full" not in str(err.value) and f"its folder {tmp_path} cannot be written" in str(err.value)
