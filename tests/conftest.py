"""Test-wide set-up for small CI machines: one torch thread, quiet TensorFlow, W&B off."""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("WANDB_MODE", "disabled")

collect_ignore = ["typed_host.py"]  # mypy reads it (test_typed_host.py); its imports need every optional extra


def pytest_configure(config):
    """Two cores shared by torch's intra-op threads and the test process only slow each other down."""
    import torch

    torch.set_num_threads(1)


def _gpu_required() -> bool:
    return os.environ.get("GPLACE_REQUIRE_GPU") == "1"


def pytest_report_header(config):
    return "GPLACE_REQUIRE_GPU=1: a skipped gpu-marked test fails" if _gpu_required() else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With ``GPLACE_REQUIRE_GPU=1`` (a GPU CI runner), a ``gpu``-marked test that skips fails instead."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and _gpu_required() and item.get_closest_marker("gpu") is not None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"GPLACE_REQUIRE_GPU=1, but this gpu test was skipped: {reason}"
