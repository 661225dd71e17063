"""TensorFlow's exceptions turned into :class:`~gplace.ir.UnsupportedGraphError` saying where they happened."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from gplace.ir import UnsupportedGraphError
from gplace.ir.errors import error_summary

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def wrap_errors(where: str) -> Iterator[None]:
    """Turn any exception but ours into an :class:`UnsupportedGraphError` that says where it happened."""
    try:
        yield
    except UnsupportedGraphError:
        raise
    except Exception as err:  # TensorFlow raises ValueError, TypeError, InvalidArgumentError, DecodeError, ...
        logger.debug("%s failed", where, exc_info=True)
        raise UnsupportedGraphError(f"{where} ({type(err).__name__}: {error_summary(err, limit=400)})") from None
