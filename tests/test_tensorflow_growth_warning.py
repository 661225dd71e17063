"""TensorFlow started before gplace could set memory growth: the warning that it holds most of a GPU is given only
where growth is off. TensorFlow's get_memory_growth says None (not True) for growth that TF_FORCE_GPU_ALLOW_GROWTH
turned on, so the warning came after its own advice was followed. The GPU and TensorFlow's refusal are stubbed."""

from __future__ import annotations

import logging

import pytest

tf = pytest.importorskip("tensorflow")

from gplace import tensorflow_setup  # noqa: E402


@pytest.mark.parametrize(("allow_growth", "set_on", "warned"), [
    ("true", None, False), ("TRUE", None, True), (None, None, True), ("false", None, True), (None, True, False),
    ("false", True, True),  # TensorFlow's "false" turns off growth that was set on
])
def test_the_warning_follows_tf_force_gpu_allow_growth(monkeypatch, caplog, allow_growth, set_on, warned):
    gpu = tf.config.PhysicalDevice(name="/physical_device:GPU:0", device_type="GPU")

    def started(device, enable):
        raise RuntimeError("Physical devices cannot be modified after being initialized")

    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [gpu] if kind == "GPU" else [])
    monkeypatch.setattr(tf.config.experimental, "set_memory_growth", started)
    monkeypatch.setattr(tf.config.experimental, "get_memory_growth", lambda device: set_on)
    monkeypatch.setattr(tensorflow_setup, "_warned", [False])
    if allow_growth is None:
        monkeypatch.delenv("TF_FORCE_GPU_ALLOW_GROWTH", raising=False)
    else:
        monkeypatch.setenv("TF_FORCE_GPU_ALLOW_GROWTH", allow_growth)
    with caplog.at_level(logging.WARNING, logger="gplace"):
        tensorflow_setup.import_tensorflow()
    assert ("holds most of that GPU's memory" in caplog.text) is warned, caplog.text
