"""numba's ``njit`` with an on-disk cache where numba can keep one, and without it where it cannot.

numba writes compiled kernels next to the source (``__pycache__``), under ``NUMBA_CACHE_DIR``, or in the user's
cache directory. Where none is writable (a read-only install, a user without a writable home), ``cache=True``
raises at decoration time; :func:`cached_njit` then compiles in memory (each process compiles anew) and logs one
warning naming ``NUMBA_CACHE_DIR``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from numba import njit

logger = logging.getLogger(__name__)

__all__ = ["cached_njit"]

_warned: list[str] = []


def cached_njit(**options: Any) -> Callable[[Callable], Any]:
    """A decorator: ``njit(cache=True, **options)``, or ``njit(**options)`` where numba has nowhere to cache."""

    def decorate(func: Callable) -> Any:
        try:
            return njit(cache=True, **options)(func)
        except RuntimeError as err:
            if "no locator available" not in str(err):
                raise
            _warn_once(err)
            return njit(**options)(func)

    return decorate


def _warn_once(err: RuntimeError) -> None:
    if not _warned:
        _warned.append(str(err))
        logger.warning("numba cannot cache compiled kernels (%s): they are compiled anew in each process; set "
                       "NUMBA_CACHE_DIR to a writable directory to keep them", err)
