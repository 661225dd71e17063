"""Calibration fits the simulator's op and link costs to measurements of the torch runtime."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gplace.ir import Cluster, Device, Placement
from gplace.runtime import Simulator
from gplace.runtime.calibration import LinkFit, anchor, fit_link, serialized, with_link_costs, with_op_costs
from gplace.testing import chain, fork_join, uniform_cluster

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

CPU_MAP = {"/CPU:0": "cpu", "/CPU:1": "cpu"}


# ---------------------------------------------------------------------- fitting
def test_fit_link_recovers_a_and_b() -> None:
    """Exact timings give a and b back; 2 % noise gives them within a few percent."""
    sizes = np.array([1e3, 1e4, 1e5, 1e6, 1e7, 1e8])
    a, b = 1 / 12e9, 8e-6  # 12 GB/s, 8 us
    assert fit_link(sizes, a * sizes + b) == pytest.approx((a, b), rel=1e-6)
    noise = 1 + 0.02 * np.random.default_rng(0).standard_normal(sizes.size)
    fa, fb = fit_link(sizes, (a * sizes + b) * noise)
    assert fa == pytest.approx(a, rel=0.05)
    assert fb == pytest.approx(b, rel=0.2)


def test_fit_link_never_goes_negative() -> None:
    """Times that shrink with size (noise around a free copy) fit a = 0 and b >= 0: infinite bandwidth."""
    a, b = fit_link([1e3, 1e6, 1e7], [3e-7, 2e-7, 1e-7])
    assert a == 0.0 and b >= 0.0
    assert LinkFit(0, 1, a, b).bandwidth == math.inf
    with pytest.raises(ValueError, match="distinct sizes"):
        fit_link([1e3, 1e3], [1.0, 2.0])


def test_with_link_costs_sets_bandwidth_and_latency() -> None:
    cluster = with_link_costs(uniform_cluster(2), [LinkFit(0, 1, 1e-9, 5e-6), LinkFit(1, 0, 0.0, 1e-6)])
    assert cluster.transfer_time(1e6, 0, 1) == pytest.approx(1e-3 + 5e-6)
    assert cluster.transfer_time(1e6, 1, 0) == pytest.approx(1e-6)


def test_anchor_makes_costs_add_up_to_the_step() -> None:
    """A step longer than its ops spreads the rest evenly; a shorter one scales the op times down."""
    ops = np.array([0.0, 1.0, 3.0])
    assert anchor(ops, 6.0, executed=2) == (1.0, 1.0)
    for bad in (0.0, -1.0, float("nan"), float("inf")):  # a scale of 0 or -0.5, refused later deep in the graph
        with pytest.raises(ValueError, match="anchor: step_time must be a finite number of seconds > 0"):
            anchor(ops, bad, executed=2)
    overhead, scale = anchor(ops, 2.0, executed=2)
    assert overhead == 0.0 and scale == pytest.approx(0.5)


# ---------------------------------------------------------------------- rewriting the graph
def test_with_op_costs_sets_the_measured_kind() -> None:
    """The calibrated graph's durations on that kind are the given seconds; the original is untouched."""
    g, c = chain(), uniform_cluster(2, kind="cpu")
    seconds = np.array([0.5, 0.25, 0.125])
    calibrated = with_op_costs(g, "cpu", seconds)
    np.testing.assert_array_equal(calibrated.durations(c)[:, 0], seconds)
    np.testing.assert_array_equal(g.durations(c)[:, 0], [1.0, 2.0, 3.0])
    assert calibrated.fingerprint != g.fingerprint
    with pytest.raises(ValueError, match="shape"):
        with_op_costs(g, "cpu", seconds[:2])


def test_serialized_graph_runs_one_op_at_a_time() -> None:
    """Two parallel unit ops on two devices take 1 s; chained in program order they take 2 s."""
    g, c = fork_join(2, nbytes=0), uniform_cluster(2, latency=0.0)
    split = [0, 0, 1, 0]  # src, b0, b1, sink
    assert Simulator().measure(g, c, Placement.for_graph(g, split)).step_time == pytest.approx(1.0)
    chained = serialized(g, [0, 1, 2, 3])
    assert chained.num_edges == g.num_edges + 1  # only b0 -> b1 is new
    assert Simulator().measure(chained, c, Placement.for_graph(chained, split)).step_time == pytest.approx(2.0)


# ---------------------------------------------------------------------- a real calibration
@pytest.fixture(scope="module")
def mlp_case():
    torch = pytest.importorskip("torch")
    from gplace.importers.torch_export import from_torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64))
    graph = from_torch(model, (torch.randn(32, 64),))
    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e6,
                            default_latency=1e-3, name="2xcpu")
    return graph, cluster


def test_calibrate_end_to_end(mlp_case) -> None:
    """Measured op costs and near-free links on two logical CPUs; the prediction tracks the measured step."""
    from gplace.runtime.calibration import calibrate, execution_order
    from gplace.runtime.torch_runtime import TorchRuntime

    graph, cluster = mlp_case
    cal = calibrate(graph, cluster, device_map=CPU_MAP, repeats=5, warmup=1, copy_sizes=(2**10, 2**16, 2**20),
                    copy_repeats=3)
    order = execution_order(graph, cluster, CPU_MAP)
    executed = np.zeros(graph.num_ops, dtype=bool)
    executed[order] = True
    assert cal.shared_executor and len(cal.links) == 2
    assert (cal.op_time["cpu"][executed] > 0).all() and (cal.op_time["cpu"][~executed] == 0).all()
    expected = cal.op_time["cpu"] * cal.scale["cpu"] + cal.overhead["cpu"] * executed
    np.testing.assert_allclose(cal.graph.kind_cost["cpu"], expected)
    assert all(link.latency < 1e-4 and link.bandwidth > 1e9 for link in cal.links)  # CPU -> CPU: no copy
    assert cal.cluster.latency[0, 1] < 1e-4  # replaced the 1 ms of the cluster it started from
    single, split = Placement.for_graph(cal.graph, [0] * graph.num_ops), Placement.for_graph(
        cal.graph, [i % 2 for i in range(graph.num_ops)])
    sim = Simulator()
    predicted = sim.measure(cal.graph, cal.cluster, single).step_time
    assert predicted == pytest.approx(cal.step_time["cpu"], rel=1e-9)  # anchored to the measured step
    # one op at a time: a split is no faster, and slower only by the transfers it makes
    transfers = sum(max(cal.cluster.transfer_time(b, 0, 1), cal.cluster.transfer_time(b, 1, 0))
                    for b in cal.graph.edge_bytes.tolist())
    assert predicted <= sim.measure(cal.graph, cal.cluster, split).step_time <= predicted + transfers + 1e-12
    measured = TorchRuntime(steps=5, warmup=1, device_map=CPU_MAP).measure(graph, cluster, Placement.single(graph, 0))
    assert 0.2 < predicted / measured.step_time < 5  # same order as a separate measurement (a noisy machine)
    assert TorchRuntime(steps=1, warmup=0, device_map=CPU_MAP).measure(cal.graph, cal.cluster, split).ok


def test_links_are_timed_with_the_copies_torch_v1_makes() -> None:
    """A GPU's values reach the host through torch-v1's own pinned, non-blocking copy (the function itself, not a
    pageable ``to("cpu")``); into a GPU non-blocking; between host devices a plain ``to``. Only the choice of
    function is checked here (no GPU): the pinned copy has never been timed on a GPU."""
    import torch

    from gplace.runtime import torch_runtime
    from gplace.runtime.calibration import runtime_copy

    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    assert runtime_copy(gpu, cpu) is torch_runtime.pinned_copy
    into = runtime_copy(cpu, gpu)
    assert into.func is torch_runtime.to_device and into.keywords == {"device": gpu, "non_blocking": True}
    host = runtime_copy(cpu, cpu)
    assert host.keywords == {"device": cpu, "non_blocking": False}
    x = torch.arange(4.0)
    assert host(x) is x  # the host's two logical devices share the value, as in torch-v1


def test_shared_executor_is_refused_for_gpus(mlp_case) -> None:
    from gplace.runtime.calibration import calibrate

    graph, _ = mlp_case
    gpus = Cluster.build([Device("/CPU:0", "cpu"), Device("/GPU:0", "gpu")], default_bandwidth=1e9)
    with pytest.raises(ValueError, match="run concurrently"):
        calibrate(graph, gpus, shared_executor=True)


def test_calibrate_names_counts_that_would_time_nothing(mlp_case) -> None:
    """repeats=0 returned NaN scales (the costs silently not calibrated); copy_repeats=0 raised StatisticsError
    after every op was timed."""
    from gplace.runtime.calibration import calibrate

    graph, cluster = mlp_case
    for settings, words in (({"repeats": 0}, "repeats must be a whole number >= 1"),
                            ({"warmup": -1}, "warmup must be a whole number >= 0"),
                            ({"copy_repeats": 0}, "copy_repeats must be a whole number >= 1"),
                            ({"copy_sizes": (1024,)}, "copy_sizes must hold at least two distinct")):
        with pytest.raises(ValueError, match=words):
            calibrate(graph, cluster, **settings)


def test_calibrate_an_onnx_graph(tmp_path) -> None:
    """ONNX graphs calibrate too (FX nodes are matched to ops by ``meta['gplace_op']``, not by FX name)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from gplace.importers.onnx import from_onnx
    from gplace.runtime.calibration import calibrate, execution_order

    path = tmp_path / "mlp.onnx"
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    torch.onnx.export(model, (torch.randn(4, 32),), str(path), dynamo=False, input_names=["x"])
    graph = from_onnx(path)
    assert any("/" in name for name in graph.op_names)  # names FX would rewrite, e.g. '/0/Gemm'
    cluster = Cluster.build([Device(f"/CPU:{i}", "cpu", 1.0, 10**10) for i in range(2)], default_bandwidth=1e10,
                            name="2xcpu")
    order = execution_order(graph, cluster, CPU_MAP)
    assert sorted(graph.op_types[i] for i in order) == ["Gemm", "Gemm", "Relu"]
    cal = calibrate(graph, cluster, device_map=CPU_MAP, repeats=3, warmup=1, copy_sizes=(2**10, 2**16),
                    copy_repeats=2)
    assert (cal.op_time["cpu"][order] > 0).all()
