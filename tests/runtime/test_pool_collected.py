"""A PoolRuntime collected right after use, while a worker is still starting: no worker traceback, no worker left."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The checkout this test sits in: its gplace is the one the script imports."""

SCRIPT = textwrap.dedent("""
    import gc, multiprocessing, time
    from gplace.ir import Placement
    from gplace.runtime import Simulator
    from gplace.runtime.parallel import PoolRuntime
    from gplace.testing import diamond, uniform_cluster

    def use_and_drop():
        g, c = diamond(), uniform_cluster(2)
        pool = PoolRuntime(Simulator(), workers=2)
        first, second = Placement.single(g, 0), Placement.single(g, 1)
        assert pool.measure(g, c, first).ok  # one worker started and took it
        assert all(m.ok for m in pool.measure_many(g, c, [second, first]))  # the first worker takes both ...
        del pool  # ... while the second, started for them, is still starting: collected (the documented way)
        gc.collect()

    if __name__ == "__main__":
        for _ in range(RUNS):
            use_and_drop()
        deadline = time.monotonic() + 60
        while multiprocessing.active_children() and time.monotonic() < deadline:
            time.sleep(0.1)
        print("children left:", len(multiprocessing.active_children()), flush=True)
""")

RUNS = 4


def test_collected_pool_stops_its_workers_quietly(tmp_path):
    script = tmp_path / "collect_pool.py"
    script.write_text(SCRIPT.replace("RUNS", str(RUNS)))
    env = {**os.environ, "WANDB_MODE": "disabled",
           "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=180,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr  # a worker killed while starting (its semaphores unlinked)
    assert "children left: 0" in proc.stdout, proc.stdout + proc.stderr
