"""Import TensorFlow the way gplace needs it: with GPU memory growth set before its context exists.

TensorFlow reserves nearly all of every GPU's memory when its runtime starts (the first eager op, building a
Keras model, listing logical devices), unless memory growth was set before; a session's
``gpu_options.allow_growth`` comes too late then. That would starve ``torch-v1`` and other workers sharing the
GPUs. :func:`import_tensorflow` sets ``TF_FORCE_GPU_ALLOW_GROWTH=true`` before the import (read when the
runtime starts; only when TensorFlow is not imported yet, where it can still take effect, so a caller's process
and the children it starts keep their environment otherwise) and calls
``tf.config.experimental.set_memory_growth`` on every physical GPU; if TensorFlow
was started already without growth, it warns once. It changes nothing else of the process: TensorFlow's logging
and oneDNN are the caller's (until 2026-12-02 it also set ``TF_CPP_MIN_LOG_LEVEL=2`` and ``TF_ENABLE_ONEDNN_OPTS=0``,
which turned oneDNN off for a caller's own TensorFlow work; the ``gplace`` command still sets both for its own
process).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["import_tensorflow"]

_warned = [False]


def import_tensorflow() -> Any:
    """The ``tensorflow`` module, with memory growth on for every GPU where that is still possible.

    Raises:
        ImportError: TensorFlow is not installed (naming the ``tf`` extra that installs it).
    """
    from gplace.extras import require

    if "tensorflow" not in sys.modules:  # read when TensorFlow's runtime starts: too late after the import
        os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    tf = require("tensorflow", "tf", "gplace's TensorFlow support")

    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except ValueError:  # not a physical device TensorFlow knows
            continue
        except RuntimeError:  # the runtime started already: growth is what it was then
            forced = os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH")  # as TensorFlow reads it: "true", "false" or unset
            growth = forced == "true" or (forced != "false" and tf.config.experimental.get_memory_growth(gpu))
            if not growth and not _warned[0]:
                _warned[0] = True
                logger.warning("TensorFlow started before gplace could set memory growth on %s, so it holds most "
                               "of that GPU's memory; import gplace's TensorFlow modules (or set "
                               "TF_FORCE_GPU_ALLOW_GROWTH=true) before TensorFlow runs anything", gpu.name)
    return tf
