"""Loggers: the JSON-lines file and a real (disabled-mode) Weights & Biases run."""

import json
import logging
import math
import re

import pytest
import torch

from gplace.loggers import HeldOpen, JsonlLogger, MultiLogger, NullLogger, WandbLogger
from gplace.training._loop import start_loop


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


def test_jsonl_drop_from_keeps_earlier_steps_and_other_records(tmp_path):
    log = JsonlLogger(tmp_path / "m.jsonl")
    log.log_config({"lr": 0.1})
    log.log_scalars(-1, {"losses/imitation": 2.0})
    for step in range(5):
        log.log_scalars(step, {"x": step})
    with log.path.open("ab") as f:
        f.write(b'{"step": 5, "x": "\xe2\x82')  # torn by a kill inside a multi-byte character (UnicodeDecodeError)
    log.drop_from(3)
    records = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert [r.get("step") for r in records] == [None, -1, 0, 1, 2]
    assert records[0] == {"config": {"lr": 0.1}}
    log.log_scalars(3, {"x": 3})
    assert json.loads(log.path.read_text().splitlines()[-1]) == {"step": 3, "x": 3}


def test_wandb_logger_in_disabled_mode(tmp_path):
    wandb_logger = WandbLogger(mode="disabled", dir=str(tmp_path))
    logger = MultiLogger(NullLogger(), wandb_logger)
    logger.log_config({"trainer": {"lr": 0.1}})
    logger.log_scalars(0, {"charts/best_step_time": 1.0})
    assert wandb_logger.mode == "disabled" and dict(wandb_logger.run.config) == {"trainer": {"lr": 0.1}}
    assert wandb_logger.run.summary["charts/best_step_time"] == 1.0  # what was logged reached the run
    logger.finish()


@pytest.mark.parametrize("setting", [{"group": 123}, {"name": 1.5}, {"project": ["a"]}, {"dir": 7}])
def test_a_wandb_setting_that_is_no_string_is_named(tmp_path, setting):
    """logger.group=123 ended in W&B's multi-line pydantic text ("1 validation error for Settings / run_group"),
    which named no gplace setting."""
    (key, value), = setting.items()
    with pytest.raises(ValueError, match=re.escape(f"WandbLogger: {key} must be a string, got {value!r}")):
        WandbLogger(mode="disabled", **{"dir": str(tmp_path), **setting})


def test_wandb_logger_continues_its_run_in_the_same_directory_and_keeps_imitation_steps(tmp_path):
    """A second logger in the run's directory (a resumed run) continues the first one's W&B run (a second run was
    made); scalars at negative steps (a warm start's imitation) reach the run (W&B dropped them)."""
    first = WandbLogger(mode="offline", dir=str(tmp_path))
    first.log_scalars(-5, {"losses/imitation": 2.0})
    assert first.run.summary["losses/imitation"] == 2.0
    first.log_scalars(0, {"charts/best_step_time": 1.0})
    first.finish()
    (tmp_path / "checkpoint.pt").write_bytes(b"")  # what the search left to resume from
    second = WandbLogger(mode="offline", dir=str(tmp_path))
    assert second.run.id == first.run.id == (tmp_path / "wandb_run_id").read_text()
    second.finish()


def test_a_fresh_start_in_a_run_directory_makes_a_new_wandb_run(tmp_path):
    """With the checkpoint gone (deleted to start over), the kept id is not reused: a fresh search continued the
    old W&B run, its curves drawn over the old ones."""
    first = WandbLogger(mode="offline", dir=str(tmp_path))
    first.log_scalars(0, {"charts/x": 1.0})
    first.finish()
    second = WandbLogger(mode="offline", dir=str(tmp_path))
    assert second.run.id != first.run.id and (tmp_path / "wandb_run_id").read_text() == second.run.id
    second.finish()


def test_an_offline_resume_warns_that_wandb_writes_a_second_run_folder(tmp_path, caplog):
    """W&B ignores resume offline (a second folder, its _step from 0); the docs promised the same run."""
    first = WandbLogger(mode="offline", dir=str(tmp_path))
    first.log_scalars(0, {"charts/x": 1.0})
    first.finish()
    (tmp_path / "checkpoint.pt").write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="gplace.loggers"):
        second = WandbLogger(mode="offline", dir=str(tmp_path))
        second.log_scalars(0, {"charts/x": 1.0})
    second.finish()
    assert f"W&B does not resume an offline run (wandb issue 4624): this resumed search writes a second offline " \
           f"run folder under id {first.run.id}" in caplog.text


class _Recording:
    """A logger whose ``finish`` takes an ``exit_code``, as :class:`WandbLogger`'s does."""

    def __init__(self) -> None:
        self.finished: list[int | None] = []

    def log_config(self, config):
        pass

    def log_scalars(self, step, scalars):
        pass

    def finish(self, exit_code=None):
        self.finished.append(exit_code)


class _OldStyle(NullLogger):
    """A third-party logger whose ``finish`` takes no argument."""

    def __init__(self) -> None:
        self.finished = 0

    def finish(self):
        self.finished += 1


def test_a_loop_that_raises_finishes_its_logger_as_failed(tmp_path):
    """A search that raised finished its logger with no failure (its W&B run recorded exit code 0); a logger
    whose finish takes no argument is still finished, through the run directory's MultiLogger too."""
    for run_dir in (None, tmp_path):
        recording, old, held = _Recording(), _OldStyle(), HeldOpen(_Recording())
        for logger in (recording, old, held):
            loop, _ = start_loop([torch.zeros(1, requires_grad=True)], lr=0.1, seed=0, run_dir=run_dir,
                                 logger=logger, run_id="r")
            with pytest.raises(RuntimeError, match="device lost"), loop.closed_on_error():
                raise RuntimeError("device lost")
        held.close()
        assert recording.finished == [1] and old.finished == 1 and held.logger.finished == [1]
    ok = _Recording()
    loop, _ = start_loop([torch.zeros(1, requires_grad=True)], lr=0.1, seed=0, run_dir=tmp_path, logger=ok, run_id="r")
    loop.close()
    assert ok.finished == [None]


def test_non_finite_scalars_are_left_out_of_wandb_as_null_in_jsonl(tmp_path):
    """W&B got Infinity (its chart of the best step time stuck at Infinity where every sample failed), the JSONL
    file null; now the W&B history has no value there and its summary keeps the last finite one."""
    logger = WandbLogger(mode="disabled", dir=str(tmp_path))
    logger.log_scalars(0, {"charts/best_step_time": math.inf, "rollout/failures": 4})
    assert "charts/best_step_time" not in dict(logger.run.summary)
    logger.log_scalars(1, {"charts/best_step_time": 2.0, "rollout/mean_step_time": 3.0})
    logger.log_scalars(2, {"charts/best_step_time": 2.0, "rollout/mean_step_time": math.nan})
    summary = dict(logger.run.summary)
    assert summary["rollout/mean_step_time"] == 3.0 and summary["step"] == 2 and summary["rollout/failures"] == 4
    logger.finish()


def _tiny_search(graph, run_dir, logger):
    import gplace
    from gplace.training import ReinforceTrainer

    return gplace.place(graph, _two_gpus(), run_dir=run_dir, logger=logger,
                        trainer=ReinforceTrainer(updates=2, samples_per_update=2, progress=False))


def _two_gpus():
    from gplace.zoo import paper_cluster

    return paper_cluster(2)


def _offline_runs(folder):
    return sorted(p.name for p in folder.rglob("offline-run-*") if p.is_dir())


def test_a_search_refused_its_run_directory_opens_no_wandb_run(tmp_path):
    """The logger took the earlier search's run id when made, and the refused search wrote its config and a failed
    exit into that run (online: the earlier run marked failed)."""
    from gplace.run_dir import RunDirConflictError
    from gplace.zoo import lstm_lm

    run_dir = tmp_path / "rd"
    _tiny_search(lstm_lm(layers=1, hidden=64, steps=2), run_dir, WandbLogger(mode="offline", dir=str(run_dir)))
    runs, kept = _offline_runs(run_dir), (run_dir / "wandb_run_id").read_text()
    with pytest.raises(RunDirConflictError, match="holds the placement of graph"):
        _tiny_search(lstm_lm(layers=1, hidden=64, steps=3), run_dir, WandbLogger(mode="offline", dir=str(run_dir)))
    assert _offline_runs(run_dir) == runs and len(runs) == 1
    assert (run_dir / "wandb_run_id").read_text() == kept


def test_one_logger_given_another_search_logs_it_into_a_new_run_not_the_kept_one(tmp_path):
    """The first use after finish() resumed the id kept in the logger's dir (the first search's checkpoint is
    there), so an unrelated search was logged into the first one's run."""
    from gplace.zoo import lstm_lm

    logger = WandbLogger(mode="offline", dir=str(tmp_path / "a"))
    _tiny_search(lstm_lm(layers=1, hidden=64, steps=2), tmp_path / "a", logger)
    first = logger.run.id
    _tiny_search(lstm_lm(layers=1, hidden=64, steps=3), tmp_path / "b", logger)
    assert logger.run.id != first


@pytest.mark.parametrize("kept", [b"bad/id", b"\xff\xfe"])
def test_a_kept_run_id_wandb_cannot_take_is_a_warning_and_a_new_run(tmp_path, caplog, kept):
    """A wandb_run_id holding a '/' (W&B's UsageError) or bytes that are no UTF-8 (UnicodeDecodeError) ended the job
    with an error naming neither the file nor the id."""
    (tmp_path / "wandb_run_id").write_bytes(kept)
    (tmp_path / "checkpoint.pt").write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="gplace.loggers"):
        logger = WandbLogger(mode="offline", dir=str(tmp_path))
        logger.log_scalars(0, {"charts/x": 1.0})
    logger.finish()
    assert f"{tmp_path / 'wandb_run_id'}" in caplog.text and "so a new run" in caplog.text
    assert (tmp_path / "wandb_run_id").read_text() == logger.run.id


def test_wandb_logger_settings_that_cannot_work_are_refused_before_any_run_starts(tmp_path):
    """A dir that is a file started a W&B run (in /tmp, left unfinished) before gplace refused it; a run that is no
    wandb run was an AttributeError from deep inside."""
    (tmp_path / "afile").write_text("")
    with pytest.raises(NotADirectoryError, match="WandbLogger: dir .*afile' is a file, not a folder"):
        WandbLogger(mode="offline", dir=str(tmp_path / "afile"))
    with pytest.raises(TypeError, match="WandbLogger: run must be an active wandb run .*got 'my-run-id'"):
        WandbLogger(run="my-run-id")


def test_jsonl_writes_strict_json_and_names_a_scalar_that_is_no_number(tmp_path):
    """A config's NaN was written as NaN (no JSON), 10**400 raised OverflowError and None a TypeError naming no
    key, the record lost."""
    path = tmp_path / "m.jsonl"
    logger = JsonlLogger(path)
    logger.log_config({"lr": math.nan, "caps": [math.inf, 1.0]})
    logger.log_scalars(0, {"charts/huge": 10**400})
    with pytest.raises(TypeError, match="logger: scalar 'charts/none' must be a number, got None"):
        logger.log_scalars(1, {"charts/none": None})
    assert [json.loads(line, parse_constant=pytest.fail) for line in path.read_text().splitlines()] == [
        {"config": {"lr": None, "caps": [None, 1.0]}}, {"step": 0, "charts/huge": None}]
