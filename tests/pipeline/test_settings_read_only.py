"""A pipeline runtime's settings are read-only: its id (the key caches keep settings apart by) and its prepared
arrays are made from them once, so a changed setting would be measured, or cached, under the old id."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from gplace.ir import Placement
from gplace.pipeline import PipelineSimulator, SteadyStateScore
from gplace.runtime.parallel import Worker, pickle_for_workers, pickled_runtime
from gplace.testing import chain, uniform_cluster

GRAPH, CLUSTER = chain((1.0, 1.0), nbytes=0), uniform_cluster(2)
PLACEMENT = Placement.for_graph(GRAPH, [0, 1])


@pytest.mark.parametrize(("runtime", "name", "value"), [
    (PipelineSimulator(4, "1f1b"), "microbatches", 16),
    (PipelineSimulator(4, "1f1b"), "schedule", "gpipe"),
    (SteadyStateScore(4), "microbatches", 16),
])
def test_assigning_a_setting_raises_and_changes_nothing(runtime, name, value) -> None:
    """Assigning a setting raises an AttributeError telling to build a new runtime; setting and id stay."""
    before, old_id = getattr(runtime, name), runtime.id
    with pytest.raises(AttributeError, match=rf"{type(runtime).__name__}\.{name} is read-only.*build a new"):
        setattr(runtime, name, value)
    assert getattr(runtime, name) == before and runtime.id == old_id


@pytest.mark.parametrize("runtime", [PipelineSimulator(8, "gpipe"), SteadyStateScore(8)], ids=["pipe", "steady"])
def test_copies_and_pickles_keep_the_settings(runtime) -> None:
    """deepcopy, pickle and a pool worker's copy keep the settings, the id and the measurement."""
    expected = runtime.measure(GRAPH, CLUSTER, PLACEMENT)
    worker = Worker(pickled_runtime(runtime)).runtime
    for other in (copy.deepcopy(runtime), pickle.loads(pickle.dumps(runtime)), worker):
        assert (other.microbatches, getattr(other, "schedule", None), other.id) == (
            runtime.microbatches, getattr(runtime, "schedule", None), runtime.id)
        assert other.measure(GRAPH, CLUSTER, PLACEMENT).step_time == expected.step_time


def test_a_pool_worker_measures_a_pipeline_simulator(tmp_path) -> None:
    """A worker rebuilt from a PipelineSimulator measures as it does."""
    path = tmp_path / "problem.pkl"
    path.write_bytes(pickle_for_workers((GRAPH, CLUSTER)))
    sim = PipelineSimulator(4, "gpipe")
    got = Worker(pickled_runtime(sim)).measure((GRAPH.fingerprint, CLUSTER.fingerprint), str(path),
                                                np.array([0, 1], dtype=np.int64))
    assert got.runtime == sim.id and got.step_time == pytest.approx(1.25)


@pytest.mark.parametrize(("name", "value"), [("microbatches", 4), ("schedule", "gpipe")])
def test_the_real_pipelined_runtimes_settings_are_read_only_too(name, value) -> None:
    """TorchPipelineRuntime's id is made from its schedule and micro-batches as pipe-v3's is."""
    torch = pytest.importorskip("torch")
    from gplace.runtime.torch_pipeline import TorchPipelineRuntime

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    runtime = TorchPipelineRuntime(model, torch.randn(8, 4), torch.randn(8, 2), torch.nn.functional.mse_loss,
                                   microbatches=2, schedule="1f1b")
    with pytest.raises(AttributeError, match=rf"TorchPipelineRuntime\.{name} is read-only"):
        setattr(runtime, name, value)
    assert (runtime.microbatches, runtime.schedule, runtime.id) == (2, "1f1b", "torch-pipeline-v1/1f1b/m2")
    copied = pickled_runtime(runtime)
    assert (Worker(copied).runtime.microbatches, Worker(copied).runtime.schedule) == (2, "1f1b")
