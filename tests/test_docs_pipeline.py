"""The code blocks of docs/pipeline.md run, in order, in one namespace (the walk-through stays true)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "pipeline.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def test_every_code_block_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = _blocks()
    assert len(blocks) >= 5
    namespace: dict = {"__name__": "pipeline_md"}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"{DOC.name} block {i}", "exec"), namespace)
        except Exception as err:
            raise AssertionError(f"{DOC.name} block {i} failed: {err!r}\n{block}") from err
    assert (tmp_path / "pipeline_trace.json").is_file()
    times = namespace["times"]
    assert times["ideal_dp"] < namespace["one_gpu"].step_time  # the pipeline pays on this graph
    assert times["local_search"] < 0.95 * times["ideal_dp"]  # and the simulator-guided moves pay on top
