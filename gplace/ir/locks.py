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
        self._owner: int | None = None
        """The thread holding the lock (set and cleared by that thread alone, while it holds it)."""
        self._depth = 0
        ForkSafeLock._live.add(self)

    def _new(self) -> Any:
        return threading.RLock() if self._reentrant else threading.Lock()

    def __enter__(self) -> bool:
        acquired = self._lock.__enter__()
        self._owner, self._depth = threading.get_ident(), self._depth + 1
        return acquired

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if not self._depth:
            self._owner = None
        self._lock.__exit__(*exc)

    def held_here(self) -> bool:
        """Whether the calling thread holds the lock."""
        return self._owner == threading.get_ident()

    @classmethod
    def _renew_all(cls) -> None:
        """In a forked child: every lock free (the child runs one thread), except those the forking thread holds:
        it goes on in the child and releases them."""
        me = threading.get_ident()
        for lock in list(cls._live):
            if lock._owner != me:
                lock._lock, lock._owner, lock._depth = lock._new(), None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=ForkSafeLock._renew_all)
