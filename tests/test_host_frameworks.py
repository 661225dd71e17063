"""gplace inside a host with its own framework settings: TensorFlow's graph mode, warnings as errors in torch."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import gplace
from gplace.testing import uniform_cluster

GRAPH_MODE_SCRIPT = textwrap.dedent("""
    import json, tempfile
    import numpy as np
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    import gplace
    from gplace.export.tensorflow import save_saved_model
    from gplace.ir import UnsupportedGraphError
    from gplace.runtime.tf_runtime import TensorFlowRuntime
    from gplace.testing import uniform_cluster

    model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(8, activation="relu"),
                                 tf.keras.layers.Dense(4)])
    graph = gplace.from_tensorflow(model, name="k", batch_size=2)
    cluster = uniform_cluster(2, kind="cpu")
    placement = gplace.place(graph, cluster, method="heft").placement
    out, root = {}, tempfile.mkdtemp()
    out["no_session"] = TensorFlowRuntime(steps=1, warmup=0).measure(graph, cluster, placement).reason
    try:
        save_saved_model(graph, cluster, placement, root + "/a")
    except UnsupportedGraphError as err:
        out["export_no_session"] = str(err)
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 16)
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        runtime = TensorFlowRuntime(steps=1, warmup=0)
        out["ok"] = runtime.measure(graph, cluster, placement).ok
        got = runtime.run(graph, cluster, placement, feeds={graph.source.inputs[0]: x})[0]
        out["same"] = bool(np.allclose(got, session.run(model(tf.constant(x))), atol=1e-5))
        out["saved"] = save_saved_model(graph, cluster, placement, root + "/b").is_dir()
    print(json.dumps(out))
""")


@pytest.mark.tf
def test_graph_mode_keras_model_runs_and_exports_with_the_default_sessions_values():
    """With eager execution off, tf-v1 and save_saved_model read the variables in the default session; without
    one, they say so in one line (a failed measurement, an UnsupportedGraphError), not numpy()'s error."""
    pytest.importorskip("tensorflow")
    done = subprocess.run([sys.executable, "-c", GRAPH_MODE_SCRIPT], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["no_session"].startswith("eager execution is off: the values of variables")
    assert out["export_no_session"].startswith("eager execution is off")
    assert out == {**out, "ok": True, "same": True, "saved": True}


def test_pipeline_split_traces_under_warnings_as_errors():
    """torch's own deprecation warnings inside its pipeline tracer are not turned into a PipelineTraceError."""
    from gplace.export.torch import pipeline_split

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16))
    x = torch.randn(4, 16)
    graph, cluster = gplace.from_torch(net, (x,)), uniform_cluster(2, kind="cpu")
    placement = gplace.place(graph, cluster, method="heft").placement
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        split = pipeline_split(graph, cluster, placement, net, (x,))
    with torch.no_grad():
        out = split.pipe(x)
    torch.testing.assert_close(out[0] if isinstance(out, tuple) else out, net(x))
