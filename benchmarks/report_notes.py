"""Hand-written notes below a generated report survive the script that rewrites it.

A benchmark script writes its report with :func:`write_report`; everything in the existing file from
:data:`NOTES_MARK` on (notes added by hand after a run, figures of other runs) is appended to the new text.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

NOTES_MARK = "<!-- hand-written notes from here on: kept when the script rewrites this report -->"


def write_report(path: Path | str, text: str) -> None:
    """Write the generated ``text``, followed by the existing file's notes (from :data:`NOTES_MARK` on)."""
    path = Path(path)
    old = path.read_text() if path.exists() else ""
    notes = old[old.index(NOTES_MARK):] if NOTES_MARK in old else ""
    path.write_text(text + ("\n" + notes if notes else ""))


def emit_report(lines: list[str], out: Path | str | None) -> None:
    """Print the report made of ``lines`` and, with ``out``, write it there (keeping that file's notes)."""
    text = "\n".join(lines) + "\n"
    if out is not None:
        write_report(out, text)
    print(text)


def timed_row(name: str, cells: Callable[[], list[str]]) -> str:
    """The table row ``| name | cells... | seconds |`` of one sweep case, ``cells()`` timed; printed as it is made."""
    start = time.perf_counter()
    row = f"| {name} | " + " | ".join(cells()) + f" | {time.perf_counter() - start:.0f} |"
    print(row, flush=True)
    return row
