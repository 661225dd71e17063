"""Locks that a forked child finds free.

A thread of the parent that holds a lock when another thread forks does not exist in the child, so a plain lock
stays held there and the child's first use of it hangs (1 in about 500 forks while threads shared a simulator).
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

__all__ = ["ForkSafeLock"]


class ForkSafeLock:
    """A ``threading.Lock`` (``RLock`` with ``reentrant``), used as a context manager, made anew in a forked child.

    Example:
        >>> lock = ForkSafeLock()
        >>> with lock:
        ...     pass
    """

    _live: weakref.WeakSet[ForkSafeLock] = weakref.WeakSet()

    def __init__(self, reentrant: bool = False) -> None:
        self._reentrant = reentrant
        self._lock: Any = self._new()
        ForkSafeLock._live.add(self)

    def _new(self) -> Any:
        return threading.RLock() if self._reentrant else threading.Lock()

    def __enter__(self) -> bool:
        return self._lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._lock.__exit__(*exc)

    @classmethod
    def _renew_all(cls) -> None:
        """In a forked child: every lock free (the child runs one thread)."""
        for lock in list(cls._live):
            lock._lock = lock._new()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=ForkSafeLock._renew_all)
