"""Defaults several parts share are written once, in :mod:`gplace.defaults`: no signature or settings field repeats
one as a literal, and the Hydra configs that must spell one out hold the same value."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

import gplace
import gplace.conf
from gplace import defaults

SHARED = {"max_groups": defaults.MAX_GROUPS, "microbatches": defaults.MICROBATCHES, "schedule": defaults.SCHEDULE,
          "samples": defaults.SAMPLES}
"""Argument name -> the shared default it would copy."""
CONF = Path(gplace.conf.__file__).parent


def _literal_copies(source: str, where: str) -> list[str]:
    """``where:line name=value`` for each default in ``source`` (an argument's or a class-level annotated field's)
    that repeats a shared default as a literal."""
    found = []
    for node in ast.walk(ast.parse(source)):
        pairs = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = args.posonlyargs + args.args
            pairs += zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True)
            pairs += [(arg, d) for arg, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
            pairs = [(arg.arg, default) for arg, default in pairs]
        elif isinstance(node, ast.ClassDef):
            pairs = [(item.target.id, item.value) for item in node.body if isinstance(item, ast.AnnAssign)
                     and isinstance(item.target, ast.Name) and item.value is not None]
        for name, default in pairs:
            if (name in SHARED and isinstance(default, ast.Constant) and type(default.value) is type(SHARED[name])
                    and default.value == SHARED[name]):
                found.append(f"{where}:{default.lineno} {name}={default.value!r}")
    return found


def test_no_signature_repeats_a_shared_default():
    root = Path(gplace.__file__).parent
    copies = [hit for path in sorted(root.rglob("*.py")) if path.name != "defaults.py"
              for hit in _literal_copies(path.read_text(), str(path.relative_to(root)))]
    assert copies == [], f"write gplace.defaults' constant instead of its value: {copies}"


def test_the_copy_finder_finds_a_copy():
    source = "class S:\n    max_groups: int = 256\n\ndef f(x, samples=16, *, schedule='1f1b', microbatches=1): ...\n"
    assert _literal_copies(source, "s.py") == ["s.py:2 max_groups=256", "s.py:4 samples=16", "s.py:4 schedule='1f1b'"]


@pytest.mark.parametrize(("config", "key", "value"), [
    ("config", "max_groups", defaults.MAX_GROUPS),
    ("place", "samples", defaults.SAMPLES),
    ("objective/pipeline", "microbatches", defaults.MICROBATCHES),
    ("objective/pipeline", "schedule", defaults.SCHEDULE),
    ("objective/pipeline_steady", "microbatches", defaults.MICROBATCHES),
])
def test_a_config_that_spells_out_a_shared_default_holds_it(config, key, value):
    assert yaml.safe_load((CONF / f"{config}.yaml").read_text())[key] == value
