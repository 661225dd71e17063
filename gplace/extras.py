"""Optional dependencies: import one, or say which gplace extra installs it."""

from __future__ import annotations

import importlib
from functools import partial
from types import ModuleType

__all__ = ["MissingExtraError", "require"]


class MissingExtraError(ImportError):
    """An optional dependency is not installed; ``name`` is the module, :attr:`extra` the gplace extra to install."""

    def __init__(self, message: str, *, name: str, extra: str) -> None:
        super().__init__(message, name=name)
        self.extra = extra

    def __reduce__(self):
        return partial(type(self), name=self.name, extra=self.extra), (self.msg,)


def require(module: str, extra: str, feature: str) -> ModuleType:
    """``module`` imported, for ``feature`` (e.g. ``"the METIS placer"``), which the gplace extra ``extra`` enables.

    Raises:
        MissingExtraError: ``module`` cannot be imported (an :class:`ImportError` saying ``<feature> needs <module>:
            pip install 'gplace[<extra>]'``, and what failed when the module is there but its import is not).
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        message = f"{feature} needs {module}: pip install 'gplace[{extra}]'"
        if err.name not in (module, module.split(".")[0]):  # installed, but its own import failed
            message += f" (importing it failed: {err})"
        raise MissingExtraError(message, name=module, extra=extra) from err
