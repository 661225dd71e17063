"""A write-back interrupted halfway (Ctrl-C, a full disk) leaves the earlier placement's files whole, never a mix of
two placements' parts; a whole one replaces them all."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import numpy as np
import pytest

from gplace import Placement
from gplace.export import write_back
from gplace.testing import uniform_cluster
from tests.export.write_back_cases import onnx_case, tf_case


def _contents(out: Path) -> dict[str, bytes]:
    """Every file under ``out`` (hidden ones too), by relative path."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _fail_on_second_part(monkeypatch, error: BaseException) -> None:
    """``save_onnx`` raises ``error`` when asked for the second part (after writing the first part whole)."""
    import gplace.export.onnx as export_onnx

    real, parts = export_onnx.save_onnx, []

    def save(model, path, base_dir=None):
        if Path(path).parent.name == "parts":
            parts.append(path)
            if len(parts) == 2:
                raise error
        return real(model, path, base_dir)

    monkeypatch.setattr(export_onnx, "save_onnx", save)


def _placements(graph):
    """The chain over two CPUs, then the same with the devices swapped (other part file names)."""
    first = Placement.for_graph(graph, [i % 2 for i in range(graph.num_ops)])
    return first, Placement.for_graph(graph, [1 - i % 2 for i in range(graph.num_ops)])


@pytest.mark.parametrize("error", [KeyboardInterrupt(), OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))],
                         ids=["ctrl_c", "full_disk"])
def test_a_write_back_interrupted_on_its_second_part_leaves_the_earlier_one_whole(tmp_path, monkeypatch, error):
    """placed.onnx and the first part were replaced before the second failed: the folder held a mix of the two
    placements, the new placed.onnx beside old and new parts."""
    graph, _, _ = onnx_case()
    cluster, out = uniform_cluster(2, kind="cpu"), tmp_path / "run"
    first, second = _placements(graph)
    write_back(graph, cluster, first, out)
    before = _contents(out)
    assert sum(k.startswith("parts") for k in before) >= 2
    _fail_on_second_part(monkeypatch, error)
    with pytest.raises(type(error)):
        write_back(graph, cluster, second, out)
    monkeypatch.undo()
    assert _contents(out) == before  # no new file, and no stage left behind
    assert sorted(p.name for p in out.iterdir()) == ["parts", "placed.onnx"]


def test_a_disk_filled_on_the_second_part_names_it_at_its_place(tmp_path, monkeypatch):
    """The disk filled writing the second part left the new placed.onnx and first part beside the old second one;
    the parts are now written in a folder beside ``parts/``, and the error still names the file asked for."""
    import pathlib

    from tests.full_disk import fill_disk_on_write

    graph, _, _ = onnx_case()
    cluster, out = uniform_cluster(2, kind="cpu"), tmp_path / "run"
    first, second = _placements(graph)
    write_back(graph, cluster, first, out)
    before = _contents(out)
    real = pathlib.Path.open
    fill_disk_on_write(monkeypatch)
    full = pathlib.Path.open
    monkeypatch.setattr(pathlib.Path, "open", lambda self, mode="r", *args, **kwargs: (
        full if self.name.startswith("001_") else real)(self, mode, *args, **kwargs))
    with pytest.raises(OSError) as err:
        write_back(graph, cluster, second, out)
    monkeypatch.undo()
    assert err.value.errno == errno.ENOSPC and f"cannot write {out / 'parts' / '001_CPU_'}" in str(err.value)
    assert _contents(out) == before


def test_a_rewrite_replaces_the_parts_whole_and_clears_a_killed_writers_stage(tmp_path):
    """A write-back killed outright (SIGKILL) leaves its stage folder; the next one removes it once it is an hour
    old (a live writer's is younger), and writes only the new placement's parts."""
    graph, _, x = onnx_case()
    cluster, out = uniform_cluster(2, kind="cpu"), tmp_path / "run"
    write_back(graph, cluster, _placements(graph)[0], out)
    killed, live = out / ".placed.onnx.999999-deadbeef.tmp", out / ".placed.onnx.999998-cafecafe.tmp"
    for stage in (killed, live):
        (stage / "parts").mkdir(parents=True)
        (stage / "parts" / "000_CPU_1.onnx").write_bytes(b"half")
    hour_ago = time.time() - 7200
    for path in (killed / "parts" / "000_CPU_1.onnx", killed / "parts", killed):
        os.utime(path, (hour_ago, hour_ago))
    written = write_back(graph, cluster, Placement.single(graph, 1), out)
    assert not killed.exists() and live.exists()
    assert sorted((out / "parts").iterdir()) == [out / "parts" / "000_CPU_1.onnx"]
    assert sorted(written) == [out / "parts" / "000_CPU_1.onnx", out / "placed.onnx"]
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(out / "parts" / "000_CPU_1.onnx"), providers=["CPUExecutionProvider"])
    whole = ort.InferenceSession(str(out / "placed.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(["logits"], {"x": x})[0], whole.run(["logits"], {"x": x})[0], rtol=1e-6)


def test_a_failed_move_in_puts_the_earlier_entries_back(tmp_path, monkeypatch):
    """Of two entries moved in together, the second failing leaves the first one old too: no mix."""
    import gplace.ir.serialize as serialize

    (tmp_path / "a").write_text("old a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("old b")
    real = os.rename

    def rename(src, dst):
        if Path(dst) == tmp_path / "b" and ".tmp" in str(src) and ".old" not in str(src):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(src, dst)

    monkeypatch.setattr(serialize.os, "rename", rename)
    with pytest.raises(OSError, match="Input/output error"), serialize.staged(tmp_path, ("a", "b")) as stage:
        (stage / "a").write_text("new a")
        (stage / "b").mkdir()
        (stage / "b" / "y").write_text("new b")
    monkeypatch.undo()
    assert _contents(tmp_path) == {"a": b"old a", "b/x": b"old b"}


def test_an_interrupted_save_saved_model_leaves_no_export_dir(tmp_path, monkeypatch):
    """Ctrl-C in ``builder.save()`` left a SavedModel folder without its saved_model.pb; a second try was refused
    (``FileExistsError``) and a loader read a broken model."""
    from gplace.export.tensorflow import save_saved_model

    tf, graph, cluster, placement = tf_case()
    real = tf.compat.v1.saved_model.Builder.save

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tf.compat.v1.saved_model.Builder, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_saved_model(graph, cluster, placement, tmp_path / "sm")
    assert not list(tmp_path.iterdir())
    monkeypatch.setattr(tf.compat.v1.saved_model.Builder, "save", real)
    export = save_saved_model(graph, cluster, placement, tmp_path / "sm")
    assert export == tmp_path / "sm" and (export / "saved_model.pb").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sm"]
