"""numba's ``njit`` with an on-disk cache where numba can keep one, and without it where it cannot.

numba writes compiled kernels next to the source (``__pycache__``), under ``NUMBA_CACHE_DIR``, or in the user's
cache directory. Where none is writable (a read-only install, a user without a writable home), ``cache=True``
raises at decoration time; :func:`cached_njit` then compiles in memory (each process compiles anew) and logs one
warning naming ``NUMBA_CACHE_DIR``.

numba judges a cached kernel fresh by its own source file alone, yet a kernel compiles in the kernels it calls from
other files (``gplace.runtime.kernels``): after a change to those only (a ``git pull`` in an editable install), the
simulators ran the old code. So each kernel's freshness stamp also holds a digest of every file of its top-level
package that defines kernels: a change to any of them compiles every kernel anew.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from collections.abc import Callable, Iterator
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from numba import njit

logger = logging.getLogger(__name__)

__all__ = ["cached_njit"]

_warned: list[str] = []


def cached_njit(**options: Any) -> Callable[[Callable], Any]:
    """A decorator: ``njit(cache=True, **options)``, or ``njit(**options)`` where numba has nowhere to cache."""

    def decorate(func: Callable) -> Any:
        try:
            kernel = njit(cache=True, **options)(func)
        except RuntimeError as err:
            if "no locator available" not in str(err):
                raise
            _warn_once(err)
            return njit(**options)(func)
        _stamp_with_callees(kernel, func.__module__)
        return kernel

    return decorate


def _stamp_with_callees(kernel: Any, module: str) -> None:
    """Make ``kernel``'s cache stale when any kernel file of ``module``'s top-level package changes (numba's own
    stamp, the modification time and size of the kernel's file, left out the kernels it calls from other files).
    Uses numba's cache internals; where they differ (another numba), the stamp stays numba's own."""
    index = getattr(getattr(kernel, "_cache", None), "_cache_file", None)
    digest = _kernel_files_digest(module.partition(".")[0])
    if digest and index is not None and hasattr(index, "_source_stamp"):
        index._source_stamp = (index._source_stamp, digest)


@cache
def _kernel_files_digest(package: str) -> str:
    """SHA-256 of the contents of every ``.py`` file of ``package`` (a directory or a zip) that uses
    :func:`cached_njit`, unreadable files left out; empty where ``package`` is no regular package (a script's
    ``__main__``, a top-level module, a namespace package), whose kernels keep numba's stamp alone."""
    module = sys.modules.get(package)
    if getattr(module, "__file__", None) is None or getattr(module, "__path__", None) is None:
        return ""
    digest = hashlib.sha256()
    for name, text in sorted(_sources(resources.files(package))):
        if b"cached_njit" in text:
            digest.update(name.encode() + b"\0" + text)
    return digest.hexdigest()


def _sources(folder: Traversable, prefix: str = "") -> Iterator[tuple[str, bytes]]:
    """``(path, contents)`` of every readable ``.py`` file under ``folder``, paths relative to it."""
    try:
        entries = list(folder.iterdir())
    except OSError:  # a folder without read permission
        return
    for entry in entries:
        if entry.is_dir():
            yield from _sources(entry, f"{prefix}{entry.name}/")
        elif entry.name.endswith(".py"):
            try:
                yield prefix + entry.name, entry.read_bytes()
            except OSError:  # a broken link, a file without read permission
                continue


def _warn_once(err: RuntimeError) -> None:
    if not _warned:
        _warned.append(str(err))
        logger.warning("numba cannot cache compiled kernels (%s): they are compiled anew in each process; set "
                       "NUMBA_CACHE_DIR to a writable directory to keep them", err)
