"""A kernel cached on disk is compiled anew when a kernel it calls from another file changes: numba stamps a cache
with the kernel's own file only, so after a change to ``gplace/runtime/kernels.py`` alone (a ``git pull`` in an
editable install) the simulators ran the old code."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

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


def _run(root: Path, path: Path, code: str = "from tpkg.main import g; print(g())") -> str:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(root / "cache"), "HOME": str(root),  # a zip's cache: under HOME
           "PYTHONPATH": os.pathsep.join([str(path), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def _package(root: Path, value: int, zipped: bool) -> Path:
    """``tpkg`` (``main.g`` calls ``kern.f``, which returns ``value``) under ``root``, or in ``root/tpkg.zip``."""
    files = {"tpkg/__init__.py": "", "tpkg/main.py": CALLER, "tpkg/kern.py": KERNEL.format(value=value)}
    if zipped:
        with zipfile.ZipFile(root / "tpkg.zip", "w") as archive:
            for name, text in files.items():
                archive.writestr(name, text)
        return root / "tpkg.zip"
    for name, text in files.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize("zipped", [False, True])
def test_a_change_to_a_called_kernel_alone_is_compiled_anew(tmp_path: Path, zipped: bool) -> None:
    """In a folder, and in a zip (whose files a folder walk did not see)."""
    assert _run(tmp_path, _package(tmp_path, 1, zipped)) == "1"
    assert list(tmp_path.rglob("*.nbi"))  # cached on disk, so the next run loads it
    assert _run(tmp_path, _package(tmp_path, 2, zipped)) == "2"


def test_a_scripts_kernel_ignores_the_files_around_it(tmp_path: Path) -> None:
    """A kernel in a script (``__main__``) hashed every file under the script's folder, and a broken link there
    failed its decoration (FileNotFoundError)."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "broken.py").symlink_to(tmp_path / "nowhere.py")
    script = "from gplace.runtime.jit import cached_njit\n\n@cached_njit()\ndef h():\n    return 3\n\nprint(h())\n"
    assert _run(tmp_path, tmp_path, script) == "3"


def test_a_kernel_in_a_top_level_module_imports(tmp_path: Path) -> None:
    """A kernel in a module that is no package: importlib.resources refused it (TypeError on Python 3.11) and the
    import failed, or walked the whole folder the module sits in."""
    (tmp_path / "kern.py").write_text(KERNEL.format(value=5))
    assert _run(tmp_path, tmp_path, "import kern; print(kern.f())") == "5"
