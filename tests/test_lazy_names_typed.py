"""Every lazily loaded public name of gplace, gplace.importers and gplace.runtime is also imported under
``if TYPE_CHECKING:``, so that type checkers (gplace ships py.typed) see what it is: without that, mypy typed
``gplace.from_onnx`` and ``CachedRuntime`` as ``Any`` ('Returning Any', 'Class cannot subclass CachedRuntime')."""

import ast
import importlib
import inspect

import pytest


@pytest.mark.parametrize("package", ["gplace", "gplace.importers", "gplace.runtime"])
def test_every_lazy_name_is_imported_for_type_checkers(package):
    module = importlib.import_module(package)
    tree = ast.parse(inspect.getsource(module))
    typed = {alias.asname or alias.name
             for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
             for stmt in node.body if isinstance(stmt, ast.ImportFrom) for alias in stmt.names}
    assert set(module._LAZY) - typed == set()
