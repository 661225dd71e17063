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
    """``arr`` made read-only where it owns its data, else a read-only copy: a view's base (a caller's array, a
    tensor's memory) stays writable and would change the object under its caches. An array someone else holds is
    copied by the caller first (``np.array``), as the dataclasses' ``_freeze`` does."""
    if arr.base is not None:
        arr = arr.copy()
    arr.setflags(write=False)
    return arr


def freeze_arrays(obj: object) -> None:
    """Make every NumPy array attribute of ``obj`` read-only (for frozen result dataclasses)."""
    for value in vars(obj).values():
        if isinstance(value, np.ndarray):
            value.setflags(write=False)


class ReadOnlyArrays:
    """Base of frozen dataclasses whose arrays stay read-only: :func:`frozen_array` again on unpickling and
    deep-copying (numpy restores arrays writable, so a placement or measurement from a worker process or a copy
    could change, and a placement's hash with it; an array unpickled from out-of-band buffers, pickle protocol 5,
    is a view of the receiver's buffer and is copied)."""

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update({k: frozen_array(v) if isinstance(v, np.ndarray) else v for k, v in state.items()})
