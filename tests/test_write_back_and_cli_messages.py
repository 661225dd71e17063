"""``write_back`` with a ``device_map`` (``gplace place ... write_back_device_map=``), the CLI's one line for a
constructor's unknown or missing setting, and the results table's failed single devices merged into one row."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gplace.ir import Cluster, Device, InvalidPlacementError, Placement, cluster_to_dict, save_json
from gplace.testing import cpu_gpu_cluster, random_dag

ROOT = Path(__file__).resolve().parents[1]
TORCH_LINEAR = ["graph=torch", "graph.module._target_=torch.nn.Linear", "graph.input_shapes=[[4,8]]", "method=heft"]


def _gplace(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0"}
    return subprocess.run([sys.executable, "-m", "gplace", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _named_cluster() -> Cluster:
    return Cluster.build([Device("fast", "cpu", 2.0), Device("slow", "cpu", 1.0)], default_bandwidth=1e10,
                         name="named")


def test_write_back_maps_devices_not_named_cpu_or_gpu_with_a_device_map(tmp_path):
    """write_back took no device_map: a torch graph on devices 'fast' and 'slow' could not be written back."""
    import torch
    from torch import nn

    import gplace
    from gplace.export import check_write_back, write_back

    graph = gplace.from_torch(nn.Linear(8, 8).eval(), (torch.randn(4, 8),))
    cluster, device_map = _named_cluster(), {"fast": "cpu", "slow": "cpu"}
    with pytest.raises(InvalidPlacementError, match="device 'fast' maps to no torch device"):
        check_write_back(graph, cluster)
    check_write_back(graph, cluster, device_map=device_map)
    [path] = write_back(graph, cluster, Placement.single(graph, 1), tmp_path, device_map=device_map)
    assert path.name == "device_map.json" and json.loads(path.read_text()) == {"": "cpu"}


def test_place_writes_back_with_write_back_device_map_and_says_how_to_give_it(tmp_path):
    """`gplace place` on devices not named /CPU:k or /GPU:k failed after placing, advising a device_map entry that
    the command line could not give; the map is now `write_back_device_map=`, checked before placing."""
    save_json(cluster_to_dict(_named_cluster()), tmp_path / "named.json")
    args = [*TORCH_LINEAR, "+graph.module.in_features=8", "+graph.module.out_features=8", "cluster=file",
            f"cluster.path={tmp_path / 'named.json'}"]
    proc = _gplace("place", *args, f"hydra.run.dir={tmp_path / 'unmapped'}", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "'write_back_device_map={fast: cpu, slow: cpu}'" in proc.stderr and "write_back=false" in proc.stderr
    assert not (tmp_path / "unmapped" / "placement.json").exists()  # refused before placing
    out = tmp_path / "mapped"
    proc = _gplace("place", *args, "write_back_device_map={fast: cpu, slow: cpu}", f"hydra.run.dir={out}",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert {"placement.json", "trace.json", "device_map.json"} <= {p.name for p in out.iterdir()}


def test_a_runtime_device_map_for_more_devices_than_the_clusters_serves_the_write_back(tmp_path):
    """One runtime.device_map may serve a sweep over clusters (the runtime reads the entries of its devices): the
    write-back check refused its entries for devices the job's cluster lacks; a misspelt write_back_device_map key
    is still refused, named."""
    save_json(cluster_to_dict(_named_cluster()), tmp_path / "named.json")
    args = [*TORCH_LINEAR, "+graph.module.in_features=8", "+graph.module.out_features=8", "cluster=file",
            f"cluster.path={tmp_path / 'named.json'}", "runtime=torch"]
    out = tmp_path / "wider"
    proc = _gplace("place", *args, "runtime.device_map={fast: cpu, slow: cpu, other: cpu}", f"hydra.run.dir={out}",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (out / "device_map.json").is_file()
    proc = _gplace("place", *args, "runtime.device_map={fast: cpu, slow: cpu}", "write_back_device_map={fats: cpu}",
                   f"hydra.run.dir={tmp_path / 'misspelt'}", cwd=tmp_path)
    assert proc.returncode == 2 and "device_map names no device of cluster 'named': 'fats'" in proc.stderr, proc.stderr


@pytest.mark.parametrize("args, message", [
    (["+encoder.bogus=3"], "gplace: error: encoder: no setting 'bogus' (its settings: hidden_size, type_embedding, "),
    (["place", *TORCH_LINEAR],
     "gplace: error: graph.module: set +graph.module.in_features=... and +graph.module.out_features=...\n"),
])
def test_an_unknown_or_missing_setting_is_named_not_called_a_wrong_type(tmp_path, args, message):
    """Every constructor TypeError read "a value of the wrong type", an unknown or a missing setting too."""
    proc = _gplace(*args, f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr and "wrong type" not in proc.stderr, proc.stderr


def test_the_table_shows_the_single_devices_that_failed_alike_as_one_row(tmp_path, capsys, monkeypatch):
    """A wide cluster where no single device fits repeated the same out-of-memory row for every device."""
    import gplace

    monkeypatch.setenv("COLUMNS", "200")  # each row on one line
    from gplace.cli import _print_table

    report = gplace.place(random_dag(12, seed=4), cpu_gpu_cluster(5, gpu_memory=20 * 10**6), method="heft")
    assert [m.ok for m in report.baselines.values()] == [True] + [False] * 5
    _print_table(report, tmp_path)
    shown = capsys.readouterr().out
    assert "single /CPU:0" in shown and "single (5 devices)" in shown and "/GPU:1" not in shown
    assert shown.count("out of memory") == 1 and "all failed: out of memory on /GPU:0" in shown
