"""PoolRuntime's gpus read as CUDA_VISIBLE_DEVICES entries (found by a type probe): "0,1" gave three workers with
CUDA_VISIBLE_DEVICES '0', ',' and '1', and 'cuda:0' or torch.device('cuda', 0) was passed as it is."""

from __future__ import annotations

import pytest
import torch

from gplace.runtime import PoolRuntime, Simulator


def _sets(gpus) -> list[str]:
    return PoolRuntime(Simulator(), gpus=gpus, gpus_per_worker=1)._gpu_sets


@pytest.mark.parametrize("gpus", [
    pytest.param("0,1", id="comma-str"),
    pytest.param(" 0, 1 ,", id="comma-str-spaces"),
    pytest.param(["cuda:0", "cuda:1"], id="cuda-str"),
    pytest.param([torch.device("cuda", 0), torch.device("cuda:1")], id="torch.device"),
    pytest.param([0, 1], id="int"),
    pytest.param(["0", " 1 "], id="str"),
    pytest.param((g for g in [0, 1]), id="generator"),
])
def test_pool_gpus_are_read_as_cuda_visible_devices_ids(gpus):
    assert _sets(gpus) == ["0", "1"]


def test_pool_gpus_keep_gpu_uuids_and_the_ids_read():
    assert _sets(["GPU-5f3e", "MIG-1a2b"]) == ["GPU-5f3e", "MIG-1a2b"]
    assert PoolRuntime(Simulator(), gpus=(g for g in ["cuda:1"]), gpus_per_worker=1).gpus == ["1"]


def test_pool_gpus_without_gpus_per_worker_are_refused():
    """They were ignored: every worker saw every GPU of the machine, not the ones given."""
    with pytest.raises(ValueError, match=r"gpus=\['0', '1'\] are shared out by gpus_per_worker, which is not given"):
        PoolRuntime(Simulator(), gpus="0,1")


@pytest.mark.parametrize("entry", ["cpu", "cuda", pytest.param(torch.device("cpu"), id="torch-cpu"), -1, True, 1.0,
                                   None, "0,1"])
def test_pool_refuses_a_gpu_that_is_no_cuda_device_naming_it(entry):
    with pytest.raises(ValueError, match=r"^PoolRuntime: gpus\[1\] = .* is not a GPU") as err:
        _sets([0, entry])
    assert "\n" not in str(err.value)


def test_torch_indices_are_read_through_this_process_cuda_visible_devices(monkeypatch):
    """In a job given GPUs 2 and 3, torch's cuda:1 is physical GPU 3; the worker's CUDA_VISIBLE_DEVICES replaces
    the job's list, so '1' would have been physical GPU 1, outside the job."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert _sets(["cuda:1", torch.device("cuda", 0)]) == ["3", "2"]
    assert _sets("2,3") == ["2", "3"]  # the job's own entries, as they are
    with pytest.raises(ValueError, match=r"gpus\[0\] = 0 is not one of this process's CUDA_VISIBLE_DEVICES \(2,3\)"):
        _sets([0])
    with pytest.raises(ValueError, match=r"gpus\[0\] = 'cuda:2' is not one of this process's 2 GPUs"):
        _sets(["cuda:2"])
