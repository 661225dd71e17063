"""Errors raised when a graph, cluster or placement is malformed."""

from __future__ import annotations

import math
import numbers
import reprlib
from collections.abc import Iterable

MAX_SIZE = 2**63 - 1
"""The largest size or count :func:`check_sizes` takes (an int64: torch's and numpy's sizes)."""
SHORT_REPR_CHARS = 400
"""The most characters :func:`short_repr` returns."""


def _short_reprlib() -> reprlib.Repr:
    """A ``reprlib.Repr`` showing 8 items of a container, 3 levels deep, 200 characters of a string."""
    short = reprlib.Repr()
    short.maxtuple = short.maxlist = short.maxarray = short.maxdict = short.maxset = short.maxfrozenset = 8
    short.maxdeque = 8
    short.maxlevel = 3
    short.maxstring = short.maxother = 200
    short.maxlong = 60
    return short


_SHORT_REPR = _short_reprlib()


def short_repr(value: object) -> str:
    """``repr(value)`` for an error message, cut short: a few items of a long list or dict, the ends of a long
    string, and at most :data:`SHORT_REPR_CHARS` characters in all."""
    text = _SHORT_REPR.repr(value)
    return text if len(text) <= SHORT_REPR_CHARS else text[:SHORT_REPR_CHARS - 3] + "..."


class GraphError(ValueError):
    """An op graph or cluster is malformed; the message names the op, edge or field."""


class InvalidPlacementError(ValueError):
    """A placement does not fit its graph or cluster; the message names the op and device."""


class OtherGraphError(InvalidPlacementError):
    """A placement document made for another graph (another fingerprint) than the one it is read for.

    ``placed`` and ``placed_fingerprint`` are the document's graph (its name, shortened) and fingerprint,
    ``graph`` and ``graph_fingerprint`` those of the graph given; :attr:`facts` says so in a line to which a
    caller adds its own advice (the message is ``facts; hint``).
    """

    def __init__(self, placed: str, placed_fingerprint: str, graph: str, graph_fingerprint: str,
                 hint: str) -> None:
        self.placed, self.placed_fingerprint, self.hint = placed, placed_fingerprint, hint
        self.graph, self.graph_fingerprint = graph, graph_fingerprint
        super().__init__(f"{self.facts}; {hint}")

    @property
    def facts(self) -> str:
        """Which graph the document places, and which it was read for."""
        return f"placement is for graph {self.placed} ({self.placed_fingerprint}), not {self.graph!r} " \
               f"({self.graph_fingerprint})"

    def __reduce__(self):
        return type(self), (self.placed, self.placed_fingerprint, self.graph, self.graph_fingerprint, self.hint)


class UnsupportedGraphError(ValueError):
    """A graph cannot be imported; the message names the node and the reason."""


def error_summary(err: BaseException | str, limit: int = 300) -> str:
    """``err``'s message on one line, cut to ``limit`` characters (its type name when the message is empty).

    >>> error_summary(ValueError("bad\\n   shape"))
    'bad shape'
    >>> error_summary(KeyError(), limit=10)
    'KeyError'
    """
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[:limit] + " ..."


def format_bytes(nbytes: int, unit_of: int | None = None) -> str:
    """Decimal units, one decimal place: ``13.2 GB``; in the unit ``unit_of`` bytes would take, if given."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if (nbytes if unit_of is None else unit_of) >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{int(nbytes)} B"


def format_seconds(seconds: float) -> str:
    """A step time as gplace shows it: milliseconds with three decimals from 1 ms to 100 s (``91.525 ms``),
    microseconds below (``45.123 us``, where ``0.045 ms`` hid a 1 % difference), seconds above (``187,967.411 s``).

    >>> [format_seconds(s) for s in (0.091525, 4.5123e-05, 187967.4108, float("inf"))]
    ['91.525 ms', '45.123 us', '187,967.411 s', 'inf']
    """
    if not math.isfinite(seconds):
        return "inf" if seconds > 0 else str(seconds)
    if abs(seconds) < 1e-3:
        return f"{seconds * 1e6:.3f} us"
    if abs(seconds) < 100:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds:,.3f} s"


def format_shortfall(needs: int, has: int) -> str:
    """``needs 5.0 MB, has 4.2 MB``; exact byte counts where the rounded ones would read the same, in the larger
    one's unit (``needs 1.0 MB, has 1000.0 kB`` for a byte short, before).

    >>> format_shortfall(1_000_000, 999_999)
    'needs 1,000,000 B, has 999,999 B'
    >>> format_shortfall(5_000_000, 420_000)
    'needs 5.0 MB, has 420.0 kB'
    """
    need, have = format_bytes(needs), format_bytes(has)
    larger = max(needs, has)
    if format_bytes(needs, larger) == format_bytes(has, larger):
        need, have = f"{int(needs):,} B", f"{int(has):,} B"
    return f"needs {need}, has {have}"


def check_sizes(where: str, low: int = 1, *, high: int | None = MAX_SIZE, **sizes: object) -> None:
    """Refuse a size or count of ``where`` (a model, a placer, a runtime) that is not a whole number from ``low`` to
    ``high`` (``None``: no limit, for a numpy seed), naming it (a zero or a fraction failed later, deep inside, with
    a KeyError, ZeroDivisionError or TypeError; ``10**400`` in torch with its C++ stack).

    Raises:
        ValueError: the first such size, by name.
    """
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{where}: {name} must be a whole number >= {low}, got {short_repr(value)}"
                             f"{_numpy_hint(value)}")
        if high is not None and value > high:  # torch's "Overflow when unpacking long long", with its C++ stack
            limit = "2**63 - 1" if high == MAX_SIZE else str(high)
            raise ValueError(f"{where}: {name} must be a whole number from {low} to {limit}, got {short_repr(value)}")


def is_finite(value: object) -> bool:
    """Whether ``value`` is a real number (not a bool) that is finite as a float: NaN, inf and a whole number past a
    float's range (``10**400``, whose ``math.isfinite`` raises ``OverflowError``) are not."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def check_finite(where: str, **values: object) -> None:
    """Refuse a number of ``where`` that is not a finite real number, naming it (a NaN or infinite weight made
    every value computed from it NaN or infinite, and training then changed nothing).

    Raises:
        ValueError: the first such value, by name.
    """
    for name, value in values.items():
        if not is_finite(value):
            raise ValueError(f"{where}: {name} must be a finite number, got {short_repr(value)}")


def check_positive(where: str, **values: object) -> None:
    """Refuse a number of ``where`` that is not a finite real number above 0, naming it (a speed or rate of 0
    divides by it; a string or ``True`` was read as a number or failed deep inside).

    Raises:
        ValueError: the first such value, by name.
    """
    for name, value in values.items():
        if not (is_finite(value) and value > 0):
            raise ValueError(f"{where}: {name} must be a finite number > 0, got {short_repr(value)}")


def check_flags(where: str, **flags: object) -> None:
    """Refuse a flag of ``where`` that is not ``True`` or ``False``, naming it (``"no"`` was taken as true).

    Raises:
        ValueError: the first such flag, by name.
    """
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise ValueError(f"{where}: {name} must be true or false, got {value!r}{_numpy_hint(value)}")


def name_list(value: object, what: str, example: str) -> list[str]:
    """``value`` read once as a list of names: one ``str`` is one name (``"serve"`` was five tags, ``"logits"`` six
    outputs), any other iterable of ``str`` is read once (a generator read twice gave none the second time).

    Args:
        what: who takes it and its name, for the error (``"run_parts: outputs"``).
        example: a value to show in the error (``"['y']"``).

    Raises:
        TypeError: ``value`` is bytes or not iterable, or an entry is no ``str``, naming ``what`` and the entry.
    """
    if isinstance(value, str):
        return [value]
    if isinstance(value, bytes | bytearray) or not isinstance(value, Iterable):
        raise TypeError(f"{what} must be a name (str) or names such as {example}, got a {type(value).__name__}")
    names = list(value)
    for k, entry in enumerate(names):
        if not isinstance(entry, str):
            raise TypeError(f"{what}[{k}] must be a name (str), got a {type(entry).__name__} {entry!r}")
    return [str(entry) for entry in names]  # np.str_ as str


def _numpy_hint(value: object) -> str:
    """What to do with a numpy or torch scalar where a Python ``int`` or ``bool`` is asked for (``np.int64(4)``
    read as a contradiction: "must be a whole number, got 4"), or ``""``."""
    if type(value).__module__ in ("numpy", "torch"):
        return " (a Python int or bool: convert numpy and torch scalars with int(x) or bool(x))"
    return ""
