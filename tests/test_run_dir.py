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
from gplace.runtime import Simulator
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


def test_a_run_directory_of_the_same_graph_with_other_contents_says_so_and_how_to_go_on(tmp_path):
    """A built-in graph whose costs a newer gplace changed was named twice as if two graphs differed, and the way
    out offered was deleting the run."""
    cluster = uniform_cluster(2)
    place(chain(), cluster, method="heft", run_dir=tmp_path)
    changed = chain(costs=(1.0, 2.0, 4.0))
    with pytest.raises(ValueError, match=r"the same name with other contents .*resume with the graph file it ran on"
                                         r".*warm_start=.*placement\.json"):
        place(changed, cluster, method="heft", run_dir=tmp_path)


def test_a_run_directory_holding_a_placement_on_another_cluster_is_refused(tmp_path):
    """gplace place with another cluster in the same directory replaced the first result silently."""
    place(chain(), uniform_cluster(2), method="heft", run_dir=tmp_path)
    kept = (tmp_path / "placement.json").read_bytes()
    with pytest.raises(RunDirConflictError, match="holds a placement on cluster '2xgpu'.*not on '3xgpu'"):
        place(chain(), uniform_cluster(3), method="heft", run_dir=tmp_path)
    assert (tmp_path / "placement.json").read_bytes() == kept


TRY = """
import sys
from gplace.run_dir import RunDirInUseError, hold_dir
try:
    with hold_dir(sys.argv[1]):
        print("free")
except RunDirInUseError:
    print("held")
"""


def _seen_from_another_process(path: Path) -> str:
    return subprocess.run([sys.executable, "-c", TRY, str(path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.strip()


def test_a_directory_held_again_by_its_process_stays_held_until_the_outer_block_ends(tmp_path):
    """A trainer holds its run_dir inside place()'s hold of the same directory (the CLI's, around the policy file
    too): the inner block must not be refused by its own process, nor let go of the lock when it ends."""
    with hold_dir(tmp_path, "bench directory"):
        with hold_dir(tmp_path):
            pass
        assert _seen_from_another_process(tmp_path) == "held"
    assert _seen_from_another_process(tmp_path) == "free"


def test_a_directory_one_thread_holds_is_refused_to_another_thread_of_the_process(tmp_path):
    """Two threads of one process (a compiler placing modules from a thread pool) both took a run directory: the
    second counted as a block nested in the first, so both runs wrote checkpoint, metrics and placement there and
    one run's result was lost without an error."""
    import threading

    held, done, seen = threading.Event(), threading.Event(), []

    def hold():
        with hold_dir(tmp_path):
            held.set()
            done.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(60)
        with pytest.raises(RunDirInUseError, match=r"in use by another thread of this process \(pid"), \
                hold_dir(tmp_path):
            seen.append("entered")
    finally:
        done.set()
        holder.join(60)
    assert seen == []
    with hold_dir(tmp_path):  # free again once the holder's block ended
        pass


@pytest.mark.parametrize("trainer", ["reinforce", "multigraph"])
def test_a_trainer_refuses_a_run_directory_another_process_holds(tmp_path, trainer):
    """Trainers called directly took no lock: a second process read the first's checkpoint while it was written,
    both logged the same updates into metrics.jsonl, and one died renaming the other's checkpoint.pt.tmp."""
    from gplace.encoders import LSTMEncoder
    from gplace.placer import PolicyPlacer
    from gplace.policies import MLPPolicy
    from gplace.runtime import Simulator
    from gplace.training import MultiGraphTrainer, ReinforceTrainer

    graph, cluster = chain(), uniform_cluster(2)
    encoder, policy = LSTMEncoder(hidden_size=8, type_embedding=4, projection=4), MLPPolicy(2, 8)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunDirInUseError, match=f"pid {holder.pid}"):
            if trainer == "reinforce":
                ReinforceTrainer(updates=1).fit(PolicyPlacer(graph, cluster, encoder, policy), Simulator(), graph,
                                                cluster, run_dir=tmp_path)
            else:
                MultiGraphTrainer(updates=1).fit(encoder, policy, [(graph, cluster)], Simulator(), run_dir=tmp_path)
        assert not (tmp_path / "metrics.jsonl").exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


class _FailsSecondBatch(Simulator):
    """sim-v1 whose second batch of measurements raises (a runtime that breaks mid-search)."""

    batches = 0

    def measure_many(self, graph, cluster, placements):
        self.batches += 1
        if self.batches == 2:
            raise RuntimeError("the runtime broke")
        return super().measure_many(graph, cluster, placements)


@pytest.mark.parametrize("trainer", ["reinforce", "ppo", "multigraph"])
def test_a_trainer_that_raises_lets_go_of_its_run_directory_at_once(tmp_path, trainer):
    """A trainer that raised mid-run kept the directory's lock until its loop was collected, which the exception's
    traceback prevents while anything holds it: another process was refused the directory of a run that ended."""
    from gplace.encoders import LSTMEncoder
    from gplace.placer import PolicyPlacer
    from gplace.policies import MLPPolicy
    from gplace.training import MultiGraphTrainer, PPOTrainer, ReinforceTrainer

    graph, cluster = chain(), uniform_cluster(2)
    encoder, policy = LSTMEncoder(hidden_size=8, type_embedding=4, projection=4), MLPPolicy(2, 8)
    with pytest.raises(RuntimeError, match="the runtime broke") as raised:  # kept, as a notebook keeps the last one
        if trainer == "multigraph":
            MultiGraphTrainer(updates=3, samples_per_update=2).fit(encoder, policy, [(graph, cluster)],
                                                                   _FailsSecondBatch(), run_dir=tmp_path)
        else:
            kind = ReinforceTrainer if trainer == "reinforce" else PPOTrainer
            kind(updates=3, samples_per_update=2).fit(PolicyPlacer(graph, cluster, encoder, policy),
                                                      _FailsSecondBatch(), graph, cluster, run_dir=tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert raised.value.__traceback__ is not None  # the failed run's frames were alive all along
