"""Run written ONNX files (a placed model, its parts) with onnxruntime, as a compiler would."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def run_onnx_files(paths: Sequence[Path], feeds: Mapping[str, Any]) -> dict[str, Any]:
    """Run the files in order on the CPU, each reading what ``feeds`` and the earlier files give; every value."""
    import onnxruntime as ort

    values = dict(feeds)
    for path in paths:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        values.update(zip(names, session.run(names, {i.name: values[i.name] for i in session.get_inputs()}),
                          strict=True))
    return values
