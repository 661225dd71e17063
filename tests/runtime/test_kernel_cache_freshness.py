"""A kernel cached on disk is compiled anew when a kernel it calls from another file changes: numba stamps a cache
with the kernel's own file only, so after a change to ``gplace/runtime/kernels.py`` alone (a ``git pull`` in an
editable install) the simulators ran the old code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

KERNEL = '''from gplace.runtime.jit import cached_njit


@cached_njit()
def f():
    return {value}
'''

CALLER = '''from gplace.runtime.jit import cached_njit
from tpkg.kern import f


@cached_njit()
def g():
    return f()
'''


def _run(root: Path) -> str:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(root / "cache"),
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", "from tpkg.main import g; print(g())"], env=env, cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_change_to_a_called_kernel_alone_is_compiled_anew(tmp_path: Path) -> None:
    package = tmp_path / "tpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "main.py").write_text(CALLER)
    (package / "kern.py").write_text(KERNEL.format(value=1))
    assert _run(tmp_path) == "1"
    assert list((tmp_path / "cache").rglob("*.nbi"))  # cached on disk, so the next run loads it
    (package / "kern.py").write_text(KERNEL.format(value=2))
    assert _run(tmp_path) == "2"
