"""A process using a PoolRuntime killed with SIGKILL (no cleanup runs): its workers end within seconds, where they
lived on (reparented, holding their own task pipe open, and the caller's stdout; on a GPU machine their GPUs)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import sys, time
    from gplace.ir import Placement
    from gplace.runtime import Simulator
    from gplace.runtime.parallel import PoolRuntime
    from gplace.testing import diamond, uniform_cluster

    if __name__ == "__main__":
        g, c = diamond(), uniform_cluster(2)
        pool = PoolRuntime(Simulator(), workers=2, context=sys.argv[1])
        assert all(m.ok for m in pool.measure_many(g, c, [Placement.single(g, 0), Placement.single(g, 1)]))
        print(" ".join(str(pid) for pid in pool._pool._processes), flush=True)
        time.sleep(600)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:  # a zombie (not yet reaped) has ended
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or reaped before the read
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_workers_end_when_their_caller_is_killed(tmp_path, context):
    script = tmp_path / "caller.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    caller = subprocess.Popen([sys.executable, str(script), context], stdout=subprocess.PIPE, text=True, env=env)
    try:
        workers = [int(pid) for pid in caller.stdout.readline().split()]
        assert workers and all(_alive(pid) for pid in workers)
        caller.send_signal(signal.SIGKILL)
        caller.wait(timeout=30)
        deadline = time.monotonic() + 90  # a worker still starting (importing torch on a busy machine) ends once up
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [pid for pid in workers if _alive(pid)]
    finally:
        caller.kill()
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"workers {left} outlived their caller"
