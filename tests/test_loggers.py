"""Loggers: the JSON-lines file and a real (disabled-mode) Weights & Biases run."""

import json
import math

from gplace.loggers import JsonlLogger, MultiLogger, NullLogger, WandbLogger


def test_jsonl_appends_and_maps_inf_to_null(tmp_path):
    path = tmp_path / "m" / "metrics.jsonl"
    logger = JsonlLogger(path)
    logger.log_config({"lr": 0.1})
    logger.log_scalars(0, {"charts/best_step_time": 1.5, "rollout/mean_step_time": math.inf})
    JsonlLogger(path).log_scalars(1, {"charts/best_step_time": 1.0})
    records = [json.loads(x) for x in path.read_text().splitlines()]
    assert records == [{"config": {"lr": 0.1}},
                       {"step": 0, "charts/best_step_time": 1.5, "rollout/mean_step_time": None},
                       {"step": 1, "charts/best_step_time": 1.0}]


def test_wandb_logger_in_disabled_mode(tmp_path):
    logger = MultiLogger(NullLogger(), WandbLogger(mode="disabled", dir=str(tmp_path)))
    logger.log_config({"trainer": {"lr": 0.1}})
    logger.log_scalars(0, {"charts/best_step_time": 1.0})
    logger.finish()
