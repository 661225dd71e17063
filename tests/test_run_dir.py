"""A run directory belongs to one run: a second process there stops at once, and another graph's result is not
overwritten."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gplace import place
from gplace.run_dir import RunDirConflictError, RunDirInUseError, hold_dir
from gplace.testing import chain, random_dag, uniform_cluster

ROOT = Path(__file__).resolve().parents[1]
HOLD = """
import sys, time
from gplace.run_dir import claim_run_dir
from gplace.testing import chain
with claim_run_dir(sys.argv[1], chain()):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_second_process_in_a_run_directory_is_refused_until_the_first_ends(tmp_path):
    """Two processes in one directory interleaved their checkpoints, metrics and placement.json."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunDirInUseError, match=f"in use by another process \\(pid {holder.pid}\\)"):
            place(chain(), uniform_cluster(2), method="heft", run_dir=tmp_path)
        assert not (tmp_path / "placement.json").exists()
    finally:
        holder.send_signal(signal.SIGKILL)  # killed, its lock goes with it
        holder.wait()
    place(chain(), uniform_cluster(2), method="heft", run_dir=tmp_path)
    assert (tmp_path / "placement.json").is_file()


def test_a_run_directory_holding_another_graphs_placement_is_refused(tmp_path):
    """A baseline placing graph B in graph A's run directory overwrote A's placement.json and trace.json."""
    cluster = uniform_cluster(2)
    place(chain(), cluster, method="heft", run_dir=tmp_path)
    kept = (tmp_path / "placement.json").read_bytes()
    with pytest.raises(ValueError, match="holds the placement of graph 'chain'.*not of 'random_dag"):
        place(random_dag(8, seed=1), cluster, method="heft", run_dir=tmp_path)
    assert (tmp_path / "placement.json").read_bytes() == kept
    place(chain(), cluster, method="round_robin", run_dir=tmp_path)  # the same graph: a new result replaces it


def test_a_run_directory_holding_a_placement_on_another_cluster_is_refused(tmp_path):
    """gplace place with another cluster in the same directory replaced the first result silently."""
    place(chain(), uniform_cluster(2), method="heft", run_dir=tmp_path)
    kept = (tmp_path / "placement.json").read_bytes()
    with pytest.raises(RunDirConflictError, match="holds a placement on cluster '2xgpu'.*not on '3xgpu'"):
        place(chain(), uniform_cluster(3), method="heft", run_dir=tmp_path)
    assert (tmp_path / "placement.json").read_bytes() == kept


def test_a_held_directory_is_refused_to_a_second_holder(tmp_path):
    """The lock gplace bench holds on its out_dir (one open file each: flock refuses the second)."""
    busy = pytest.raises(RunDirInUseError, match="bench directory .* is in use")
    with hold_dir(tmp_path, "bench directory"), busy, hold_dir(tmp_path, "bench directory"):
        pass
    with hold_dir(tmp_path):
        pass
