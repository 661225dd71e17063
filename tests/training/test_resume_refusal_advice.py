"""A refused resume's advice: warm-start a new run from the old run's placement.json only where it exists (a run
killed before its end has written none; the advice named that file and the new run then failed on it): else
resume it as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gplace.run_dir import RunDirConflictError
from gplace.training.checkpoint import load_checkpoint


def _checkpoint(run: Path) -> Path:
    run.mkdir()
    path = run / "checkpoint.pt"
    torch.save({"fingerprint": "fp", "update": 3, "runtime": "pipe-v2/1f1b/m4", "trainer": "ReinforceTrainer"},
               path)
    return path


@pytest.mark.parametrize("refused", [{"runtime_id": "pipe-v2/1f1b/m8"}, {"trainer": "PPOTrainer"}])
def test_a_killed_run_is_told_to_resume_as_it_was(tmp_path: Path, refused: dict) -> None:
    path = _checkpoint(tmp_path / "killed")
    with pytest.raises(RunDirConflictError, match="or resume it .*no placement.json beside it") as caught:
        load_checkpoint(path, "fp", **refused)
    assert "warm_start=" not in str(caught.value)


def test_a_finished_run_offers_its_placement(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path / "done")
    (path.parent / "placement.json").write_text("{}")
    with pytest.raises(RunDirConflictError, match="'pipe-v2/1f1b/m4'.*warm_start=.*placement.json"):
        load_checkpoint(path, "fp", runtime_id="pipe-v2/1f1b/m8")


def test_a_checkpoint_refused_says_nothing_first_about_what_it_resumed_unchecked(tmp_path: Path, caplog) -> None:
    """A checkpoint without its seed, of another trainer: the WARNING 'resumed unchecked' came before the refusal."""
    import logging

    path = _checkpoint(tmp_path / "run")
    with caplog.at_level(logging.WARNING, logger="gplace.training.checkpoint"), \
            pytest.raises(RunDirConflictError, match="written by ReinforceTrainer, this run trains with PPOTrainer"):
        load_checkpoint(path, "fp", runtime_id="pipe-v2/1f1b/m4", seed=1, trainer="PPOTrainer")
    assert "resumed unchecked" not in caplog.text


def test_a_part_that_does_not_fit_a_run_without_a_directory_is_refused_in_words() -> None:
    """restoring(None) (a trainer's fit without a run directory) failed inside its own handler on path.parent."""
    from gplace.training.checkpoint import restoring

    with pytest.raises(RunDirConflictError, match=r"a part does not fit this run \(KeyError: 'x'"), restoring(None):
        raise KeyError("x")
