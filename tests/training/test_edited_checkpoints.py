"""A checkpoint edited by hand or by another tool: a count out of range (a ``seconds`` of NaN made a resumed
time-budgeted search run forever), or a part missing or of another type (a KeyError, TypeError or AttributeError
from deep inside), is refused naming the file."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import gplace
from gplace.run_dir import RunDirConflictError
from gplace.testing import cpu_gpu_cluster, random_dag
from gplace.training import ReinforceTrainer


def _edited_run(tmp_path: Path, edit) -> Path:
    graph, cluster = random_dag(12), cpu_gpu_cluster(2)
    gplace.place(graph, cluster, run_dir=tmp_path, seed=0, trainer=ReinforceTrainer(updates=2, samples_per_update=4,
                                                                                    progress=False))
    path = tmp_path / "checkpoint.pt"
    state = torch.load(path, weights_only=False)
    edit(state)
    torch.save(state, path)
    return path


def _set(name, value):
    return lambda state: state.__setitem__(name, value)


@pytest.mark.parametrize(("edit", "named"), [
    (_set("seconds", math.nan), "seconds=nan"), (_set("seconds", -math.inf), "seconds=-inf"),
    (_set("samples", -1), "samples=-1"), (_set("update", "3"), "update='3'"), (_set("history", None), "history=None"),
    (lambda state: state.pop("generator"), "KeyError"), (_set("baseline", None), "TypeError"),
    (_set("generator", torch.zeros(3, dtype=torch.uint8)), "RuntimeError"),
])
def test_an_edited_checkpoint_is_refused_naming_the_file(tmp_path: Path, edit, named: str) -> None:
    path = _edited_run(tmp_path, edit)
    graph, cluster = random_dag(12), cpu_gpu_cluster(2)
    with pytest.raises(RunDirConflictError, match=rf"checkpoint {path} cannot be resumed: .*{named}"):
        gplace.place(graph, cluster, run_dir=tmp_path, seed=0,
                     trainer=ReinforceTrainer(updates=4, samples_per_update=4, progress=False))


def test_a_runtime_error_while_measuring_the_checkpoints_best_again_is_not_blamed_on_the_file(tmp_path: Path) -> None:
    """The resume measures the checkpoint's best placement again: a runtime's own error there (a CUDA error) was
    reported as a checkpoint that 'does not fit this run', with the advice to delete the run directory."""
    from gplace.encoders import LSTMEncoder
    from gplace.grouping import group_ops
    from gplace.placer import PolicyPlacer
    from gplace.policies import Seq2SeqPolicy
    from gplace.runtime import Simulator

    class Broken(Simulator):
        def _measure(self, graph, cluster, placement):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    def placer(graph, cluster):
        torch.manual_seed(0)
        return PolicyPlacer(graph, cluster, LSTMEncoder(hidden_size=16, type_embedding=8),
                            Seq2SeqPolicy(cluster.num_devices, hidden_size=16, attention_size=8),
                            grouping=group_ops(graph))

    graph, cluster = random_dag(12), cpu_gpu_cluster(2)
    ReinforceTrainer(updates=2, samples_per_update=4, progress=False).fit(placer(graph, cluster), Simulator(), graph,
                                                                          cluster, run_dir=tmp_path)
    with pytest.raises(RuntimeError, match="CUDA error") as caught:
        ReinforceTrainer(updates=4, samples_per_update=4, progress=False).fit(placer(graph, cluster), Broken(),
                                                                              graph, cluster, run_dir=tmp_path)
    assert not isinstance(caught.value, RunDirConflictError)
