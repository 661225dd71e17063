"""Environments a probe found gplace failing in: no home directory (``docker run --user <uid not in /etc/passwd>``
with HOME unset) and a pool started from a script read from stdin (``python - < script.py``)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import pytest

from gplace.testing import diamond
from gplace.zoo import keras_models
from gplace.zoo.keras_models import load_zoo_model

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX home lookup and start methods")


@pytest.fixture
def no_home(monkeypatch):
    """HOME unset and the uid absent from the password database; the zoo builds a tiny graph without TensorFlow."""
    import pwd

    def unknown_uid(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("GPLACE_CACHE", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", unknown_uid)
    monkeypatch.setattr(keras_models, "_build", lambda name, params: diamond())


def test_a_zoo_model_without_cache_needs_no_home_directory(no_home):
    """``cache=False`` never looks up the cache's path (it raised 'Could not determine home directory.')."""
    assert load_zoo_model("rnnlm", cache=False).num_ops == diamond().num_ops


def test_a_zoo_model_without_a_home_directory_is_built_uncached_with_a_warning(no_home, caplog):
    """With the cache on and nowhere to put it, the graph is built all the same and a WARNING says why."""
    with caplog.at_level(logging.WARNING, logger=keras_models.__name__):
        graph = load_zoo_model("rnnlm")
    assert graph.num_ops == diamond().num_ops
    assert any("not caching" in r.message and "GPLACE_CACHE" in r.message for r in caplog.records), caplog.text


STDIN_SCRIPT = """
import numpy as np
from gplace.ir import Placement
from gplace.runtime import Simulator
from gplace.runtime.parallel import PoolRuntime
from gplace.testing import chain, uniform_cluster

g = chain()
with PoolRuntime(Simulator(), workers=1, context={context!r}) as pool:
    m = pool.measure_many(g, uniform_cluster(2), [Placement(np.zeros(g.num_ops, dtype=np.int64), g.fingerprint)])
print("measured:", m[0].ok, m[0].reason)
"""


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_a_pool_in_a_script_read_from_stdin_measures(tmp_path, context):
    """Workers do not re-run a main module that is no file (``__file__ == "<stdin>"``): each died of
    FileNotFoundError and every placement failed with "worker process died"."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-"], input=textwrap.dedent(STDIN_SCRIPT.format(context=context)),
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "measured: True" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert "FileNotFoundError" not in proc.stderr, proc.stderr[-2000:]
