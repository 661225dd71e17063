"""A device kind no op is costed for (``"GPU"`` written for ``"gpu"``) left those devices idle in every placement
without a word: the run ended with exit status 0 and every op on the CPU."""

import os
import subprocess
import sys
from pathlib import Path

from gplace.ir import Op, OpGraph
from gplace.ir.cluster import misspelt_kinds
from gplace.ir.serialize import cluster_from_dict, cluster_to_dict, save_json
from gplace.testing import chain, cpu_gpu_cluster
from gplace.zoo import lstm_lm, paper_cluster

ROOT = Path(__file__).resolve().parents[1]


def _upper_gpus(cluster):
    doc = cluster_to_dict(cluster)
    for device in doc["devices"]:
        device["kind"] = device["kind"].upper() if device["kind"] == "gpu" else device["kind"]
    return doc


def test_a_cluster_kind_no_op_is_costed_for_is_named_with_its_devices():
    graph = chain()  # kind-agnostic costs: any kind runs them
    assert misspelt_kinds(cpu_gpu_cluster(2), graph) == []
    lm = lstm_lm(layers=1, hidden=64, steps=2, vocab=100)
    lines = misspelt_kinds(cluster_from_dict(_upper_gpus(paper_cluster(2))), lm)
    assert lines == [f"cluster haswell+2xK80: no op of graph {lm.name} may run on /GPU:0, /GPU:1: their kind 'GPU' "
                     "is not the ops' 'gpu' (kinds are compared as written)"]
    assert misspelt_kinds(paper_cluster(2), lm) == []
    gpu_only = OpGraph.from_ops([Op("a", "MatMul", None, kind_cost={"gpu": 1e-3})], [], name="gpu_only")
    assert misspelt_kinds(paper_cluster(2), gpu_only) == []  # the CPU: a kind simply not costed, as PipeDream's


def test_the_cli_warns_of_misspelt_kinds(tmp_path):
    path = tmp_path / "upper.json"
    save_json(_upper_gpus(paper_cluster(2)), path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "-m", "gplace", "place", "method=heft", "graph=lstm_lm", "graph.steps=2",
                           "graph.hidden=64", "graph.vocab=100", "cluster=file", f"cluster.path={path}",
                           f"hydra.run.dir={tmp_path / 'run'}"], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warned = [line for line in proc.stderr.splitlines() if "may run on /GPU:0, /GPU:1: their kind 'GPU'" in line]
    assert len(warned) == 1 and "WARNING" in warned[0], proc.stderr[-3000:]
