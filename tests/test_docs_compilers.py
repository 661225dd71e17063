"""The code blocks of docs/compilers.md run, in order, in one namespace (the tutorial stays true)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
pytest.importorskip("onnxruntime")
pytest.importorskip("tensorflow")

DOC = Path(__file__).resolve().parents[1] / "docs" / "compilers.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def test_the_tutorial_has_a_block_per_step():
    assert len(_blocks()) >= 7


def test_every_code_block_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "compilers_md"}
    for i, block in enumerate(_blocks()):
        try:
            exec(compile(block, f"{DOC.name} block {i}", "exec"), namespace)
        except Exception as err:
            raise AssertionError(f"{DOC.name} block {i} failed: {err!r}\n{block}") from err
    assert (tmp_path / "two_tower.placed.onnx").is_file() and (tmp_path / "tf_model.placed.pbtxt").is_file()
    assert (tmp_path / "run" / "placement.json").is_file()
