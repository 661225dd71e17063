"""`python -m gplace seed=N warm_start=<placer>` places the warm start with seed N, as `gplace.place(seed=N)` does."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_module
from hydra.utils import instantiate

from gplace.baselines import RandomPlacer
from gplace.ir.serialize import placement_to_dict

ROOT = Path(__file__).resolve().parents[1]
TINY = ["graph.steps=2", "graph.hidden=64", "graph.vocab=100"]
FAST = ["logger=none", "trainer.updates=1", "trainer.imitation_steps=1", "trainer.samples_per_update=2",
        "trainer.progress=false", "encoder.hidden_size=16", "policy.hidden_size=16", "policy.attention_size=8",
        *TINY]


def _imitation_loss(job: Path) -> float:
    first = json.loads((job / "metrics.jsonl").read_text().splitlines()[0])
    return first["losses/imitation"]


def test_a_named_warm_start_is_placed_with_the_jobs_seed(tmp_path):
    """The CLI passed no seed to place(): warm_start=random started every seed's search from RandomPlacer(seed=0)."""
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=TINY)
    graph, cluster = instantiate(cfg.graph), instantiate(cfg.cluster)
    seeded, zero = (RandomPlacer(seed=s).place(graph, cluster) for s in (3, 0))
    assert not np.array_equal(seeded.devices, zero.devices)  # the seed shows
    warm = tmp_path / "random3.json"
    warm.write_text(json.dumps(placement_to_dict(seeded, graph, cluster)))

    sweep = tmp_path / "sweep"  # job 0: warm_start=random, job 1: RandomPlacer(seed=3)'s placement from a file
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0"}
    proc = subprocess.run([sys.executable, "-m", "gplace", "-m", *FAST, "seed=3", f"warm_start=random,{warm}",
                           f"hydra.sweep.dir={sweep}"], capture_output=True, text=True, timeout=600, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # the same networks (seed 3) imitate the warm start first: the same loss for the same warm-start placement
    assert _imitation_loss(sweep / "0") == _imitation_loss(sweep / "1")
