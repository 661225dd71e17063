"""No module of gplace imports another module's private (``_``-prefixed) name: what is shared is public."""

from __future__ import annotations

import ast
from pathlib import Path

import gplace

PACKAGE = Path(gplace.__file__).parent


def private_imports(source: str) -> list[str]:
    """``module.name`` of every ``from gplace... import _name`` in ``source`` (dunder names allowed)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gplace"):
            found += [f"{node.module}.{a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_the_check_finds_a_private_import():
    found = private_imports("from gplace.runtime.parallel import ProblemKey, _dumps")
    assert found == ["gplace.runtime.parallel._dumps"]
    assert private_imports("from gplace.runtime.parallel import __all__\nimport gplace._x") == []


def test_no_module_imports_another_modules_private_name():
    offenders = {str(path.relative_to(PACKAGE)): found for path in sorted(PACKAGE.rglob("*.py"))
                 if (found := private_imports(path.read_text()))}
    assert offenders == {}
