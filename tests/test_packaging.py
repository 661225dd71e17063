"""The package metadata: an SPDX license expression and the license text shipped with it."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_license_is_an_spdx_expression_with_its_text_shipped():
    """``license = {text = ...}`` is deprecated by setuptools (builds break after 2027-02-18), and no LICENSE file
    shipped though Apache-2.0 asks for its text with the work."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "Apache-2.0" and meta["project"]["license-files"] == ["LICENSE"]
    assert any(r.replace(" ", "") == "setuptools>=77" for r in meta["build-system"]["requires"])
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_package_ships_py_typed_and_types_its_lazy_names():
    """Without py.typed (PEP 561) a user's mypy skipped gplace ("missing library stubs or py.typed marker") and every
    result was Any; and gplace.place, loaded lazily by a module __getattr__, stayed Any even with it."""
    import ast

    import gplace

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in meta["tool"]["setuptools"]["package-data"]["gplace"]
    assert (ROOT / "gplace" / "py.typed").is_file()
    tree = ast.parse((ROOT / "gplace" / "__init__.py").read_text())
    typed = {alias.asname: node.module for block in tree.body
             if isinstance(block, ast.If) and getattr(block.test, "id", None) == "TYPE_CHECKING"
             for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert typed == gplace._LAZY
