"""gplace.show: the drawing of a placement draws graph and device names as they are."""

from __future__ import annotations

import pytest

from gplace.ir import OpGraph
from gplace.show import draw_placement
from gplace.testing import diamond

pytest.importorskip("matplotlib")


@pytest.mark.parametrize("graph_name, devices", [
    (r"model_$\undefinedmacro$", ["/CPU:0", "/CPU:1"]),  # the title
    ("model", [r"/CPU:$\undefinedmacro$", r"$\alpha$"]),  # the legend
], ids=["graph", "device"])
def test_names_holding_dollar_signs_are_drawn_as_text_not_math(tmp_path, monkeypatch, graph_name, devices):
    """Without Graphviz the drawing falls back to matplotlib, which read ``$...$`` in a graph's or device's name as
    math: ``$\\undefinedmacro$`` failed with a ParseFatalException (and valid math was rendered as math)."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` on it: matplotlib draws
    g = diamond()
    graph = OpGraph.from_ops(g.ops(), g.edges(), name=graph_name)
    assignment = {op: devices[k % 2] for k, op in enumerate(graph.op_names)}
    path = draw_placement(graph, devices, assignment, tmp_path / "d.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("name", ["drawing", "drawing.txt"])
def test_the_drawing_is_written_at_the_path_given(tmp_path, monkeypatch, name):
    """matplotlib added ``.png`` to a name without that suffix, so ``gplace show --draw out`` said it wrote ``out``
    and wrote ``out.png``."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` on it: matplotlib draws
    graph = diamond()
    devices = ["/CPU:0", "/CPU:1"]
    path = draw_placement(graph, devices, {op: devices[0] for op in graph.op_names}, tmp_path / name)
    assert path == tmp_path / name and path.read_bytes()[:4] == b"\x89PNG"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_an_svg_drawing_is_the_same_file_every_time(tmp_path, monkeypatch):
    """matplotlib wrote the date and random ids into an SVG: two drawings of one placement differed in 372 lines."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` on it: matplotlib draws
    graph = diamond()
    devices = ["/CPU:0", "/CPU:1"]
    assignment = {op: devices[k % 2] for k, op in enumerate(graph.op_names)}
    first, second = (draw_placement(graph, devices, assignment, tmp_path / f"{k}.svg").read_bytes() for k in (1, 2))
    assert first.startswith(b"<?xml") and first == second


def test_a_drawing_that_fails_halfway_leaves_the_earlier_image_whole(tmp_path, monkeypatch):
    """A full disk left a truncated PNG where a good image was, with a bare 'No space left on device'."""
    import errno

    from matplotlib.figure import Figure

    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no `dot` on it: matplotlib draws
    graph = diamond()
    devices = ["/CPU:0", "/CPU:1"]
    path = draw_placement(graph, devices, {op: devices[0] for op in graph.op_names}, tmp_path / "d.png")
    before = path.read_bytes()

    def full_disk(self, fname, **kwargs):
        with open(fname, "wb") as out:
            out.write(b"\x89PNG half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", full_disk)
    with pytest.raises(OSError, match=f"cannot write {path}"):
        draw_placement(graph, devices, {op: devices[1] for op in graph.op_names}, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["d.png"]
