"""Read-only containers for the IR's immutable objects: a graph's or cluster's state cannot change under a cache."""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np


class FrozenDict(dict):
    """A ``dict`` that refuses changes; it pickles and serialises as a plain one."""

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(f"{type(self).__name__} is read-only; build a new object to change it")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[type, tuple[dict]]:
        return type(self), (dict(self),)


def frozen_array(arr: np.ndarray) -> np.ndarray:
    """A read-only copy of ``arr`` (same dtype): the caller's array stays theirs and writable, and changing it
    cannot change the object under its caches (as it could through a shared array or a view's base)."""
    arr = np.array(arr, copy=True)
    arr.setflags(write=False)
    return arr
