"""A PoolRuntime in the sessions it meets: threads replacing its workers, guarded scripts, interactive sessions."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import types
from concurrent.futures import Future, ProcessPoolExecutor

import pytest

import gplace.runtime.parallel as parallel
from gplace.ir import Cluster, OpGraph, Placement
from gplace.runtime import Measurement, Simulator
from gplace.runtime.parallel import PoolRuntime
from gplace.testing import diamond, uniform_cluster

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")


class _Dies(Simulator):
    """Kills its worker process when op 1 is on device 1."""

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        if placement.devices[1] == 1:
            os._exit(3)
        return super()._measure(graph, cluster, placement)


class _Exits(Simulator):
    """Calls ``sys.exit(3)`` when op 1 is on device 1."""

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        if placement.devices[1] == 1:
            sys.exit(3)
        return super()._measure(graph, cluster, placement)


class _CancelledPool:
    """A pool another thread shut down with ``cancel_futures=True`` after the call was queued."""

    def submit(self, *args: object) -> Future:
        future: Future = Future()
        future.cancel()
        return future


def _shut_down_pool() -> ProcessPoolExecutor:
    pool = ProcessPoolExecutor(1)
    pool.shutdown()
    return pool


@pytest.mark.parametrize("make_pool", [_CancelledPool, _shut_down_pool], ids=["cancelled", "shut-down"])
def test_a_pool_shut_down_by_another_thread_is_broken_for_on_every_worker(make_pool) -> None:
    """A thread killing the workers to end a hung placement shuts the pool down under another thread reading a graph:
    its cancelled call or refused submission is a broken pool (``_load`` retries on the new one), not an error."""
    assert parallel._on_every_worker(make_pool(), 2) == set()


@pytest.mark.parametrize("source", [
    "import sys\ntry:\n    if __name__ == '__main__':\n        x = 1\nexcept KeyboardInterrupt:\n    sys.exit(130)\n",
    "import contextlib\nwith contextlib.suppress(KeyboardInterrupt):\n    if __name__ == '__main__':\n        x = 1\n",
])
def test_a_main_guard_inside_a_compound_statement_is_a_guard(tmp_path, monkeypatch, source: str) -> None:
    """``if __name__ == "__main__":`` inside ``try:`` or ``with`` at module level guards the script."""
    monkeypatch.setitem(sys.modules, "__main__", _main_module(tmp_path, source))
    parallel._check_main_guard()


def test_a_main_guard_only_inside_a_function_is_no_guard(tmp_path, monkeypatch) -> None:
    """A function body does not run on import: a guard there leaves the script unguarded."""
    source = "def main():\n    if __name__ == '__main__':\n        x = 1\n\nmain()\n"
    monkeypatch.setitem(sys.modules, "__main__", _main_module(tmp_path, source))
    with pytest.raises(RuntimeError, match="guard"):
        parallel._check_main_guard()


def test_a_worker_dying_after_workers_answered_is_not_blamed_on_the_script(tmp_path, monkeypatch) -> None:
    """Once a worker returned a result the workers start, so a later broken pool is no missing guard: the placement
    that killed its worker is a failed measurement."""
    monkeypatch.setitem(sys.modules, "__main__", _main_module(tmp_path, "x = 1\n"))
    g, c = diamond(), uniform_cluster(2)
    with PoolRuntime(_Dies(), workers=1) as runtime:
        assert runtime.measure(g, c, Placement.for_graph(g, [0, 0, 0, 0])).ok
        dead = runtime.measure(g, c, Placement.for_graph(g, [0, 1, 0, 0]))
    assert not dead.ok and "worker process died" in dead.reason


def test_a_runtime_calling_sys_exit_in_a_worker_is_a_failed_measurement() -> None:
    """The worker sent the SystemExit back and the pool raised it in the caller: the host process ended, status 3."""
    g, c = diamond(), uniform_cluster(2)
    with PoolRuntime(_Exits(), workers=1) as runtime:
        exited = runtime.measure(g, c, Placement.for_graph(g, [0, 1, 0, 0]))
        assert runtime.measure(g, c, Placement.for_graph(g, [0, 0, 0, 0])).ok
    assert not exited.ok and "raised SystemExit in a worker" in exited.reason


def _main_module(tmp_path, source: str) -> types.ModuleType:
    script = tmp_path / "script.py"
    script.write_text(source)
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    return main


SESSION = textwrap.dedent("""
    from gplace.runtime import Simulator
    from gplace.runtime.parallel import PoolRuntime
    class MyRuntime(Simulator):
        pass
    PoolRuntime(Simulator(), workers=1)
    try:
        PoolRuntime(MyRuntime(), workers=1)
        print("accepted")
    except TypeError as err:
        print("refused:", err)
""")


def _session(how: str) -> list[str]:
    if how == "ipython" and importlib.util.find_spec("IPython") is None:
        pytest.skip("IPython is not installed")
    return {"python -c": [sys.executable, "-c", SESSION], "python -": [sys.executable, "-"],
            "ipython": [sys.executable, "-m", "IPython", "--no-banner", "-c", SESSION]}[how]


@pytest.mark.parametrize("how", ["python -c", "python -", "ipython"])
def test_a_runtime_class_workers_cannot_import_is_refused_at_once(tmp_path, how: str) -> None:
    """A runtime class defined in a session whose ``__main__`` the workers do not import (a notebook cell,
    ``python -c``, stdin) killed every worker at start-up; it is a TypeError naming the class, before any starts."""
    proc = subprocess.run(_session(how), input=SESSION, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "WANDB_MODE": "disabled"})
    assert "refused: PoolRuntime: the runtime needs MyRuntime from __main__" in proc.stdout, proc.stdout + proc.stderr
    assert "move it into an importable module" in proc.stdout


def test_a_runtime_class_in_a_guarded_script_still_travels(tmp_path) -> None:
    """Workers re-import a script file, so a runtime class it defines is not refused and measures there."""
    script = tmp_path / "guarded.py"
    script.write_text(textwrap.dedent("""
        from gplace.ir import Placement
        from gplace.runtime import Simulator
        from gplace.runtime.parallel import PoolRuntime
        from gplace.testing import diamond, uniform_cluster
        class MyRuntime(Simulator):
            pass
        if __name__ == "__main__":
            g, c = diamond(), uniform_cluster(2)
            with PoolRuntime(MyRuntime(), workers=1) as runtime:
                print("measured:", runtime.measure_many(g, c, [Placement.single(g, 0)])[0].ok)
    """))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "measured: True" in proc.stdout, proc.stdout + proc.stderr


def test_a_pool_runtime_inside_a_multiprocessing_pool_worker_measures_there(tmp_path) -> None:
    """A multiprocessing.Pool worker is daemonic and may not start processes: the pool raised a bare
    AssertionError from deep in concurrent.futures; it measures in that worker instead, with a warning."""
    script = tmp_path / "harness.py"
    script.write_text(textwrap.dedent("""
        import logging
        import multiprocessing
        from gplace.ir import Placement
        from gplace.runtime import Simulator
        from gplace.runtime.parallel import PoolRuntime
        from gplace.testing import diamond, uniform_cluster
        class Raises(Simulator):
            def _measure(self, graph, cluster, placement):
                raise ValueError("broken runtime")
        logging.basicConfig()  # in every process: gplace logs nothing until the host configures logging
        def job(seed):
            g, c = diamond(), uniform_cluster(2)
            with PoolRuntime(Simulator(), workers=1) as runtime:
                return runtime.measure_many(g, c, [Placement.single(g, 0)])[0].step_time
        def broken(seed):
            g, c = diamond(), uniform_cluster(2)
            with PoolRuntime(Raises(), workers=1) as runtime:
                return runtime.measure(g, c, Placement.single(g, 0)).reason
        if __name__ == "__main__":
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                print("times:", pool.map(job, [0]), Simulator().measure(diamond(), uniform_cluster(2),
                      Placement.single(diamond(), 0)).step_time)
                print("reason:", pool.map(broken, [0])[0])
    """))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("times:")), "")
    assert line and line.split()[1] == f"[{line.split()[2]}]", proc.stdout + proc.stderr
    assert "daemonic worker" in proc.stderr and "AssertionError" not in proc.stderr
    assert "reason: Raises raised ValueError: broken runtime" in proc.stdout, proc.stdout + proc.stderr
