"""Kernels where numba has nowhere to cache them (a read-only install, no writable home): compiled in memory."""

import logging
import re
import subprocess
import sys
from pathlib import Path

import numba.core.caching
import pytest

import gplace
import gplace.runtime.jit as jit

_NO_LOCATOR = """
import numba.core.caching as caching
impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")
impl._locator_classes = []  # numba finds no writable place for any function's cache
import gplace.policies.schedule_rollout, gplace.pipeline.steady
from gplace.testing import chain, uniform_cluster
print(gplace.place(chain((1.0, 2.0)), uniform_cluster(2), method="heft").measurement.step_time)
"""


@pytest.mark.slow
def test_gplace_imports_and_places_where_numba_cannot_cache():
    """``RuntimeError: cannot cache function 'before': no locator available`` at import; one warning now."""
    code = f"import logging\nlogging.basicConfig()\nimport gplace\n{_NO_LOCATOR}"  # a host that shows warnings
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.split()[-1]) == 3.0
    assert done.stderr.count("NUMBA_CACHE_DIR") == 1, done.stderr[-2000:]


def _no_locator(monkeypatch):
    impl = getattr(numba.core.caching, "CacheImpl", None) or numba.core.caching._CacheImpl
    monkeypatch.setattr(impl, "_locator_classes", [])
    monkeypatch.setattr(jit, "_warned", [])


def test_cached_njit_falls_back_to_an_uncached_kernel_and_warns_once(monkeypatch, caplog):
    _no_locator(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="gplace.runtime.jit"):
        add = jit.cached_njit()(lambda a, b: a + b)
        mul = jit.cached_njit(nogil=True)(lambda a, b: a * b)
    assert (add(2, 3), mul(2, 3)) == (5, 6)
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "NUMBA_CACHE_DIR" in caplog.records[0].getMessage()


def test_cached_njit_caches_where_numba_can(caplog):
    with caplog.at_level(logging.WARNING, logger="gplace.runtime.jit"):
        kernel = jit.cached_njit()(lambda a: a + 1)
    assert kernel._cache.__class__.__name__ != "NullCache" and caplog.records == []


def test_every_kernel_of_gplace_goes_through_cached_njit():
    package = Path(gplace.__file__).parent
    offenders = [str(path.relative_to(package)) for path in sorted(package.rglob("*.py"))
                 if path.name != "jit.py" and re.search(r"\bnjit\(|from numba import .*\bnjit\b|numba\.njit",
                                                        path.read_text())]
    assert offenders == []


@pytest.mark.parametrize("message", ["something else went wrong"])
def test_other_errors_are_not_swallowed(monkeypatch, message):
    def broken(**options):
        raise RuntimeError(message)

    monkeypatch.setattr(jit, "njit", broken)
    with pytest.raises(RuntimeError, match=message):
        jit.cached_njit()(lambda a: a)
