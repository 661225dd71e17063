"""Modules that record their own constructor arguments: :class:`Configurable`'s ``config()`` / ``from_config()``.

A saved policy file names each module's class and arguments (:mod:`gplace.pretrained`), so it rebuilds without
Hydra or the code that made it::

    >>> from gplace.policies import MLPPolicy
    >>> policy = MLPPolicy(4, hidden_size=32)
    >>> policy.config()["kwargs"]["hidden_size"]
    32
    >>> type(MLPPolicy.from_config(policy.config())).__name__
    'MLPPolicy'
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from typing import Any, TypeVar

__all__ = ["Configurable", "ModuleNotImportedError", "class_by_name", "from_config"]

C = TypeVar("C", bound="Configurable")


class Configurable:
    """Mix-in: every subclass's ``__init__`` records the arguments it was called with (defaults filled in)."""

    _init_arguments: dict[str, Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return
        signature = inspect.signature(init)

        @functools.wraps(init)
        def recording_init(self: Any, *args: Any, **kw: Any) -> None:
            init(self, *args, **kw)
            bound = signature.bind(self, *args, **kw)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            arguments.pop(next(iter(signature.parameters)))  # self
            for name, parameter in signature.parameters.items():  # **kwargs are keywords of their own: rebuilt so
                if parameter.kind is inspect.Parameter.VAR_KEYWORD:  # (a key 'kwargs' was passed as one)
                    arguments.update(arguments.pop(name, {}))
            if type(self).__init__ is recording_init:  # the most derived class's call has the user's arguments
                object.__setattr__(self, "_init_arguments", arguments)

        cls.__init__ = recording_init  # type: ignore[method-assign]

    def config(self) -> dict[str, Any]:
        """``{"class": qualified name, "kwargs": constructor arguments}``, enough to rebuild the module."""
        cls = type(self)
        return {"class": f"{cls.__module__}.{cls.__qualname__}", "kwargs": dict(self._init_arguments)}

    @classmethod
    def from_config(cls: type[C], config: dict[str, Any]) -> C:
        """A new instance built from :meth:`config`'s output (fresh weights).

        Raises:
            ValueError: ``config`` names another class (refused before anything is called), or a class of a
                module neither gplace's nor imported already (never imported here: importing runs its code).
        """
        named = _config_class(config, imports=False)
        if not (isinstance(named, type) and issubclass(named, cls)):
            raise ValueError(f"config names {config.get('class')!r}, not a {cls.__name__}")
        return named(**config["kwargs"])


def from_config(config: dict[str, Any]) -> Any:
    """Build the object a ``{"class": ..., "kwargs": ...}`` config names: its module is imported and the class
    (or any callable) called with the kwargs, so build only configs you trust (``SomeClass.from_config`` builds
    only that class and its subclasses).

    Raises:
        ValueError: the config lacks ``class`` or ``kwargs``, or the class cannot be imported.
    """
    return _config_class(config)(**config["kwargs"])


def _config_class(config: dict[str, Any], imports: bool = True) -> Any:
    """The object a config's ``class`` names (:func:`class_by_name`; with ``imports``, from any module)."""
    if not isinstance(config, dict) or "class" not in config or "kwargs" not in config:
        raise ValueError(f"a module config is a dict with 'class' and 'kwargs', got {config!r}")
    try:
        return class_by_name(str(config["class"]), import_any=imports)
    except ModuleNotImportedError as err:
        raise ValueError(f"config class {config['class']!r} is in module {err.module!r}, which is not imported; "
                         "import it first if you trust it") from None
    except ValueError as err:
        raise ValueError(f"config class: {err}") from None


class ModuleNotImportedError(ValueError):
    """A name read from a file lies in a module that is neither gplace's nor imported already (``module``)."""

    def __init__(self, module: str) -> None:
        super().__init__(f"module {module!r} is not imported")
        self.module = module

    def __reduce__(self):
        return type(self), (self.module,)


def class_by_name(name: str, *, import_any: bool = False) -> Any:
    """The object ``module.attr`` names (``name`` split at its last dot), its module imported: only gplace's own
    unless ``import_any``, as importing a module runs its code; another must be imported by the caller already.

    Raises:
        ModuleNotImportedError: the module is neither gplace's nor imported (without ``import_any``).
        ValueError: the module cannot be imported or has no such attribute.
    """
    module, _, attr = name.rpartition(".")
    own = module == "gplace" or module.startswith("gplace.")
    if module and not (import_any or own) and module not in sys.modules:
        raise ModuleNotImportedError(module)
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as err:
        raise ValueError(f"cannot import {name!r} ({err})") from None
