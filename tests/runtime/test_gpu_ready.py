"""Readiness for a GPU machine, checked on CPU: GPLACE_REQUIRE_GPU=1 makes every skipped gpu test fail."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_required_gpu_turns_skips_into_failures() -> None:
    """Under GPLACE_REQUIRE_GPU=1 each gpu-marked torch-v1 test fails here (no CUDA), naming the variable."""
    env = {**os.environ, "GPLACE_REQUIRE_GPU": "1", "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", "-rfE",
            "tests/runtime/test_torch_runtime.py"]
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    failed = sum(int(n) for n in re.findall(r"(\d+) (?:failed|errors?)\b", out))  # a skip at set-up is an error
    assert failed >= 5 and not re.search(r"\d+ (?:passed|skipped)", out), out
    assert "GPLACE_REQUIRE_GPU=1, but this gpu test was skipped: Skipped: needs a CUDA device" in out, out
