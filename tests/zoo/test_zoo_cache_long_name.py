"""A GPLACE_CACHE the file system refuses (a name over 255 bytes) is a warning, as any other unusable cache."""

from __future__ import annotations

import logging

from gplace.zoo import keras_models


def test_a_cache_name_too_long_is_a_warning_not_an_error(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("GPLACE_CACHE", str(tmp_path / ("x" * 300)))
    with caplog.at_level(logging.WARNING, logger="gplace.zoo.keras_models"):
        assert keras_models._usable_cache_path("mlp", {"batch": 2}) is None
    assert "not caching it" in caplog.text
