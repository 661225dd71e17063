"""From a probe of experiment tracking: W&B's service dying mid-search ended the search (exit 2, "Connection lost",
W&B never named); a W&B ``dir`` where its run id cannot be kept ended it too, naming a temporary file."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from gplace.loggers import WandbLogger


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds W&B's service among the children")
def test_wandb_dying_mid_run_is_a_warning_and_logging_goes_on(tmp_path, caplog):
    logger = WandbLogger(mode="offline", dir=str(tmp_path))
    logger.log_scalars(0, {"charts/best_step_time": 1.0})
    service = subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", "wandb-core"], capture_output=True,
                             text=True).stdout.split()
    assert service, "W&B's service process was not found among this process's children"
    for pid in service:
        os.kill(int(pid), signal.SIGKILL)
    time.sleep(1)
    with caplog.at_level(logging.WARNING, logger="gplace.loggers"):
        for step in (1, 2, 3):
            logger.log_scalars(step, {"charts/best_step_time": 1.0})
        logger.log_results({"best_step_time": 1.0}, [], {})
        logger.finish()
    assert caplog.text.count("W&B stopped working") == 1


def test_a_wandb_dir_that_cannot_keep_the_run_id_is_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="gplace.loggers"):
        logger = WandbLogger(mode="offline", dir="/proc/no_such_folder")
        logger.log_scalars(0, {"charts/best_step_time": 1.0})
        logger.finish()
    assert "cannot keep the run's id in /proc/no_such_folder" in caplog.text
