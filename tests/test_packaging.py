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
