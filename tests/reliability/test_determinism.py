"""The same seed and config give the same placement and step time with the simulator, twice in one process
(the CLI's job, composed by Hydra and run through ``gplace.cli.run``; across two processes see
``test_killed_runs.py``)."""

from __future__ import annotations

import json

from hydra import compose, initialize_config_module

from gplace.cli import run

OVERRIDES = ["logger=none", "trainer.samples_per_update=2", "trainer.progress=false", "trainer.updates=3",
             "graph.steps=2", "graph.hidden=64", "graph.vocab=100", "encoder.hidden_size=16", "seed=7"]


def test_the_same_seed_gives_the_same_placement_twice_in_one_process(tmp_path) -> None:
    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=OVERRIDES)
    times = [run(cfg, tmp_path / name) for name in ("a", "b")]
    docs = [json.loads((tmp_path / name / "placement.json").read_text()) for name in ("a", "b")]
    assert times[0] == times[1] and docs[0]["placement"] == docs[1]["placement"]
    assert docs[0]["step_time"] == docs[1]["step_time"]
