"""gplace ships py.typed: a host's typed code over its public API passes ``mypy --strict`` (tests/typed_host.py).
Found by a probe of type-checked host code: no built-in policy satisfied the ``Policy`` protocol (its methods
demanded ``**inputs`` that a policy is never given unless it declares them), runtime settings read as ``object``,
``stage_orders`` gave ``Hashable`` keys for ``str`` labels, and the ONNX and torch write-back, ``check_trainer``
and ``TrainablePlacer.sample`` returned ``Any``."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_typed_host_passes_mypy_strict(tmp_path):
    args = [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--cache-dir", str(tmp_path),
            str(ROOT / "tests" / "typed_host.py")]
    done = subprocess.run(args, cwd=tmp_path, env={**os.environ, "MYPYPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_trainers_settings_resolve_their_type_hints():
    """PPOTrainer's constructor took its settings' Literal annotation from a module that never imported Literal:
    typing.get_type_hints (and inspect.signature(eval_str=True)) raised NameError."""
    import inspect
    import typing

    from gplace.training import PPOTrainer, ReinforceTrainer

    for trainer in (PPOTrainer, ReinforceTrainer):
        assert "entropy_coef" in typing.get_type_hints(trainer.__init__)
        inspect.signature(trainer, eval_str=True)


def test_the_write_backs_hints_resolve_without_their_frameworks_types_imported():
    """Typed as onnx.ModelProto and Pipe for checkers, the ONNX and torch write-back's annotations raised NameError
    in typing.get_type_hints (the review of this change)."""
    import typing

    from gplace.export.onnx import OnnxPart, annotate_onnx, save_onnx
    from gplace.export.torch import PipelineSplit, pipeline_from_file

    for typed in (OnnxPart, annotate_onnx, save_onnx, PipelineSplit, pipeline_from_file):
        typing.get_type_hints(typed)
