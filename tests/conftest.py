"""Test-wide set-up for small CI machines: one torch thread, quiet TensorFlow, W&B off."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("WANDB_MODE", "disabled")


def pytest_configure(config):
    """Two cores shared by torch's intra-op threads and the test process only slow each other down."""
    import torch

    torch.set_num_threads(1)
