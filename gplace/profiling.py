"""Profiled op costs: per-op times measured on this machine's CPU, stored in the graph like analytic ones.

The importers give every op an analytic cost (:mod:`gplace.costmodel`: roofline on a reference K80 GPU and
Haswell CPU). This module measures the ``"cpu"`` cost instead and writes it into a new graph
(``kind_cost["cpu"]``, seconds at speed 1.0), so that the simulator's step times are those of this machine on a
CPU device of speed 1.0; for a cluster whose CPU has another ``speed`` (``local_cpu_cluster(n)``'s is this machine's
share against the 18-core Haswell reference, ``cores / (18 * n)``: 0.111 for one device on 2 cores), pass that
device's ``speed`` as ``speed=``: each time is stored times it, so that the device takes the measured time (without
it, ``1 / speed`` times the measurement: 9x there).

ONNX (:func:`profile_onnx`)
    The model runs in an onnxruntime session (CPU provider, one intra-op and one inter-op thread, graph
    optimisations **off** so that every ONNX node is one kernel and nothing is fused or renamed) with
    ``SessionOptions.enable_profiling``. Before the session is made, each node of a copy of the model is
    renamed to its gplace op name, so the trace's ``"<node>_kernel_time"`` events name the ops directly; a call
    of a model-local function is inlined in the copy (else onnxruntime inlines it, under names of its own), its
    nodes named after the call, whose time is the sum of theirs. An
    op's time is the mean kernel time over ``repeats`` runs after ``warmup`` ones (the trace has a resolution
    of one microsecond). Inputs are random normal floats (zeros for integer and bool inputs) of the shapes the
    graph's ``Input`` ops record. A trace made elsewhere can be read with :func:`read_ort_profile` and applied
    with :func:`ort_op_times`; it must come from a session without graph optimisations (fused nodes match
    no op).
torch (:func:`profile_torch`)
    :func:`gplace.runtime.calibration.time_ops`: the graph runs on the host CPU through the ``torch-v1``
    executor and each FX call is timed in sequence (the median over ``repeats`` steps). These times include
    the executor's per-call work (argument lookup, dispatch, releasing values after their last use: a few to
    tens of microseconds), which onnxruntime's kernel times do not.
Ops that no kernel runs
    (``Input``, ``Initializer`` and ``Parameter`` ops; ONNX ``Constant`` nodes, which onnxruntime turns into
    initialisers) keep their analytic cost; how many is logged.
Comparing with the analytic model (:func:`fit_speed_factor`, :func:`cost_error`)
    The analytic ``"cpu"`` cost is for the Haswell reference, not for this machine. :func:`fit_speed_factor`
    fits the one scalar ``s`` that minimises ``sum((log(analytic / s) - log(measured))^2)`` over the ops with
    both costs positive: ``s = exp(mean(log(analytic / measured)))``, this machine's speed relative to the
    reference, as ``Device.speed`` would state it (``s > 1``: faster than the reference). :func:`cost_error`
    reports the per-op error (``|log(predicted / measured)|``, as a factor) and the step error (summed costs)
    both raw (``s = 1``) and after that single factor. Both take a graph's own cost arrays as they are: ops
    with a NaN cost on either side (``Input`` ops have no ``kind_cost``) are left out of the fit, the per-op
    figures and the sums alike; a negative or infinite cost is refused, naming its index.
"""

from __future__ import annotations

import logging
import math
import numbers
import re
import tempfile
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gplace import costmodel
from gplace.ir import OpGraph
from gplace.ir.errors import check_positive, check_sizes, error_summary
from gplace.ir.serialize import JsonTextError, read_json, refuse_special_file

if TYPE_CHECKING:
    import onnx

logger = logging.getLogger(__name__)

__all__ = [
    "CostError", "OrtProfile", "ProfileError", "cost_error", "fit_speed_factor", "onnx_op_times", "op_group",
    "ort_op_times", "profile_onnx", "profile_torch", "read_ort_profile", "torch_op_times", "with_measured_costs",
]

KIND = "cpu"
"""The device kind profiled costs are stored under."""

INSIDE = "gplace.inside/"
"""Prefix of the names :func:`onnx_op_times` gives nodes inside control-flow subgraphs (left out of the times)."""

CALLED = "gplace.called/"
"""Prefix of the names :func:`onnx_op_times` gives the nodes it inlines from a call of a local function
(``<CALLED><call's op name>/<k>``): their times sum into the call's."""

NO_KERNEL = frozenset({"Input", "Initializer", "Parameter"})
"""Op types the importers add for graph inputs and weights: no kernel runs them."""

GROUPS = ("matmul", "conv", "elementwise", "other")
"""The op groups of :func:`op_group`."""

_MATMUL = frozenset({
    "matmul", "mm", "bmm", "gemm", "addmm", "baddbmm", "addmv", "addbmm", "linear", "einsum", "dot", "mv",
    "fusedmatmul", "matmulinteger", "qlinearmatmul", "attention", "multiheadattention",
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
})
_CONV = frozenset({
    "conv", "convolution", "conv1d", "conv2d", "conv3d", "_convolution", "convinteger", "qlinearconv",
    "mkldnn_convolution", "convtranspose", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution_backward",
})
_ELEMENTWISE = costmodel._ELEMENTWISE | frozenset(costmodel.PER_ELEMENT_FLOPS) | {"sum"}
_ORT_IR_VERSION = re.compile(r"max supported IR version:\s*(\d+)")


class ProfileError(ValueError):
    """A profile or model that does not fit the graph, or a run that failed; the message names the file or op."""


# ---------------------------------------------------------------------- public entry points
def profile_onnx(
    graph: OpGraph, model_or_path: onnx.ModelProto | str | Path | None = None, *, repeats: int = 10,
    warmup: int = 2, seed: int = 0, speed: float = 1.0,
) -> OpGraph:
    """``graph`` with ``kind_cost["cpu"]`` measured by onnxruntime's profiler on this machine's CPU.

    Args:
        graph: a graph imported by ``from_onnx`` from this model (op names as the importer gives them).
        model_or_path: the ``ModelProto`` or ``.onnx`` file the graph came from (external weights are loaded
            from beside the file). (default: None: the model kept in the graph's ``source``, its external
            weights from beside the file it was imported from)
        repeats: profiled runs averaged per op. (default: 10)
        warmup: runs before them, not counted. (default: 2)
        seed: of the random inputs. (default: 0)
        speed: the ``Device.speed`` of the CPU the graph is to be simulated on (:func:`with_measured_costs`).
            (default: 1.0)

    Returns:
        A new graph; ops without a kernel keep their analytic cost (see the module docstring).

    Raises:
        ProfileError: the model does not match the graph (the message names the op), cannot be read (names the
            file, a missing one too), or onnxruntime cannot run it.
        ValueError: ``repeats``, ``warmup`` or ``seed`` is no whole number in range (names it).
    """
    return with_measured_costs(graph, onnx_op_times(graph, model_or_path, repeats=repeats, warmup=warmup, seed=seed),
                               speed=speed)


def profile_torch(graph: OpGraph, *, repeats: int = 10, warmup: int = 3, speed: float = 1.0) -> OpGraph:
    """``graph`` with ``kind_cost["cpu"]`` measured through the ``torch-v1`` executor on the host CPU.

    Args:
        graph: a graph imported by ``from_torch`` (it keeps the program as its ``source``).
        repeats: timed steps; each op's time is its median. (default: 10)
        warmup: untimed steps before them. (default: 3)
        speed: the ``Device.speed`` of the CPU the graph is to be simulated on (:func:`with_measured_costs`).
            (default: 1.0)

    Raises:
        ProfileError: the graph has no torch program.
        gplace.runtime.torch_runtime.TorchRunError: the program does not run.
    """
    return with_measured_costs(graph, torch_op_times(graph, repeats=repeats, warmup=warmup), speed=speed)


# ---------------------------------------------------------------------- measuring
def _check_rounds(where: str, repeats: object, warmup: object) -> None:
    """Refuse ``repeats`` < 1 or ``warmup`` < 0 or either not a whole number, by name (``ValueError``)."""
    check_sizes(where, 1, repeats=repeats)
    check_sizes(where, 0, warmup=warmup)


def torch_op_times(graph: OpGraph, *, repeats: int = 10, warmup: int = 3) -> dict[str, float]:
    """Op name -> seconds for every op the ``torch-v1`` executor runs (see :func:`profile_torch`)."""
    from gplace.importers.torch_export import TorchSource
    from gplace.ir import Cluster, Device
    from gplace.runtime.calibration import execution_order, time_ops

    _check_rounds("profile_torch", repeats, warmup)
    if not isinstance(graph.source, TorchSource):
        raise ProfileError(f"graph {graph.name!r} has no torch program (import it with from_torch to profile it)")
    cluster = Cluster.build([Device("/CPU:0", KIND)], name="host CPU")
    seconds = time_ops(graph, cluster, 0, repeats=repeats, warmup=warmup)
    return {graph.op_names[i]: float(seconds[i]) for i in execution_order(graph, cluster)}


def onnx_op_times(
    graph: OpGraph, model_or_path: onnx.ModelProto | str | Path | None = None, *, repeats: int = 10,
    warmup: int = 2, seed: int = 0,
) -> dict[str, float]:
    """Op name -> mean kernel seconds for every op onnxruntime runs (see :func:`profile_onnx`)."""
    from gplace.extras import require

    ort = require("onnxruntime", "onnx", "profiling with onnxruntime")

    _check_rounds("profile_onnx", repeats, warmup)
    check_sizes("profile_onnx", 0, high=None, seed=seed)  # numpy's error named no seed
    model, label = _runnable_model(graph, model_or_path)
    names, feeds_model = _node_names(graph, model, model_or_path, label)
    for node, name in zip(model.graph.node, names, strict=True):
        node.name = name
    calls = _inline_calls(model, label)
    inside = _rename_inside(model.graph)
    feeds = _feeds(feeds_model, label, seed)
    with tempfile.TemporaryDirectory(prefix="gplace-ort-") as tmp:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(tmp) / "ort")
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 4  # errors reach us as exceptions; keep ORT's own logger quiet
        session = _session(model, options, label)
        try:
            for _ in range(warmup + repeats):
                session.run(None, feeds)
        except Exception as err:  # onnxruntime raises its own Fail, InvalidArgument, RuntimeException, ...
            raise ProfileError(f"{label}: onnxruntime failed to run the model ({error_summary(err)})") from None
        finally:
            path = session.end_profiling()
        profile = read_ort_profile(path)
    return ort_op_times(graph, profile, skip_runs=warmup, label=label, inside=inside, calls=calls)


def _inline_calls(model: onnx.ModelProto, label: str) -> dict[str, str]:
    """Replace each call of a local function in the model's graph by its nodes inlined (``onnx.inliner``; else
    onnxruntime inlines it, under names of its own), named ``<CALLED><call's op name>/<k>``, their values apart
    from the graph's; returns those names -> the call's op name."""
    from gplace.importers.onnx.tensors import call_key, function_key

    keys = {function_key(f) for f in model.functions}
    nodes, calls = [], {}
    for node in model.graph.node:
        if call_key(node) not in keys:
            nodes.append(node)
            continue
        for k, inner in enumerate(_inlined(node, model, label)):
            inner.name = f"{CALLED}{node.name}/{k}"
            calls[inner.name] = node.name
            nodes.append(inner)
    if calls:
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    return calls


def _inlined(node: onnx.NodeProto, model: onnx.ModelProto, label: str) -> list[onnx.NodeProto]:
    """The nodes of the call ``node`` inlined, the values they make other than its outputs renamed
    ``<CALLED><call's op name>/<value>``."""
    import onnx
    from onnx.inliner import inline_local_functions

    helper = onnx.helper
    values = [helper.make_value_info(t, onnx.TypeProto()) for t in (*node.input, *node.output) if t]
    graph = helper.make_graph([node], "call", values[:len([t for t in node.input if t])],
                              values[len([t for t in node.input if t]):])
    call = helper.make_model(graph, opset_imports=model.opset_import, functions=model.functions,
                             ir_version=model.ir_version)
    try:
        inner = list(inline_local_functions(call).graph.node)
    except Exception as err:  # onnx raises ValidationError, RuntimeError, ...
        raise ProfileError(f"{label}: cannot inline the call {node.name!r} of local function "
                           f"{node.domain}::{node.op_type} ({error_summary(err)})") from None
    made = {t for n in inner for t in n.output if t} - set(node.output)
    renamed = {t: f"{CALLED}{node.name}/{t}" for t in made}
    for n in inner:
        n.input[:] = [renamed.get(t, t) for t in n.input]
        n.output[:] = [renamed.get(t, t) for t in n.output]
    return inner


def _rename_inside(graph: onnx.GraphProto) -> set[str]:
    """Name the nodes inside the graph's subgraphs (If branches, Loop and Scan bodies, at any depth) apart from its
    own ops, which may share their names; returns those names."""
    from gplace.importers.onnx import subgraphs

    names: set[str] = set()
    pending = [body for node in graph.node for body in subgraphs(node)]
    while pending:
        body = pending.pop()
        for node in body.node:
            node.name = f"{INSIDE}{len(names)}"
            names.add(node.name)
            pending += subgraphs(node)
    return names


# ---------------------------------------------------------------------- onnxruntime traces
@dataclass(frozen=True)
class OrtProfile:
    """The node kernel times of an onnxruntime profiling trace."""

    path: str
    """The trace file."""
    kernel_seconds: Mapping[str, tuple[float, ...]]
    """Node name -> seconds of each of its kernel runs, in trace order."""
    op_types: Mapping[str, str]
    """Node name -> its op type (``args.op_name``)."""
    run_seconds: tuple[float, ...]
    """Seconds of each ``model_run`` (the whole ``session.run``), in trace order."""


def read_ort_profile(path: str | Path) -> OrtProfile:
    """Read the JSON trace that ``InferenceSession.end_profiling`` writes.

    Raises:
        FileNotFoundError: no file at ``path``.
        ProfileError: the file is not an onnxruntime trace (not JSON, not a list of events, a node event
            without a duration) or holds no node kernel events; the message names the file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no onnxruntime profile at {str(path)!r}")
    try:
        events = read_json(path)
    except JsonTextError as err:
        raise ProfileError(f"{path}: not an onnxruntime profile ({err})") from None
    if not isinstance(events, list):
        raise ProfileError(f"{path}: not an onnxruntime profile (expected a JSON list of trace events, "
                           f"got a {type(events).__name__})")
    kernels: dict[str, list[float]] = defaultdict(list)
    types: dict[str, str] = {}
    runs: list[float] = []
    for k, event in enumerate(events):
        if not isinstance(event, dict):
            raise ProfileError(f"{path}: event {k} is a {type(event).__name__}, not a trace event")
        name, cat = event.get("name"), event.get("cat")
        if cat == "Session" and name == "model_run":
            runs.append(_duration(event, path, k))
        elif cat == "Node" and isinstance(name, str) and name.endswith("_kernel_time"):
            node = name.removesuffix("_kernel_time")
            kernels[node].append(_duration(event, path, k))
            args = event.get("args")
            if isinstance(args, dict) and isinstance(args.get("op_name"), str):
                types[node] = args["op_name"]
    if not kernels:
        raise ProfileError(f"{path}: no node kernel events (\"<node>_kernel_time\") in {len(events)} events; "
                           "not an onnxruntime profile of a model run")
    return OrtProfile(str(path), {n: tuple(t) for n, t in kernels.items()}, types, tuple(runs))


ORT_INSERTED_CAST = "InsertedPrecisionFreeCast_"
"""The name prefix of the casts onnxruntime adds around ops of a type its device has no kernels for (float16 on a
CPU), even with graph optimisations off: they are no ops of the graph."""


def ort_op_times(graph: OpGraph, profile: OrtProfile, *, skip_runs: int = 0, label: str | None = None,
                 inside: Collection[str] = (), calls: Mapping[str, str] | None = None) -> dict[str, float]:
    """Op name -> mean kernel seconds, from a trace of the graph's model (node names = op names).

    Args:
        graph: the graph the trace is for.
        profile: from :func:`read_ort_profile`.
        skip_runs: leading kernel runs of each node left out (warm-up). (default: 0)
        label: what to call the trace in errors. (default: its file)
        inside: names of nodes inside control-flow subgraphs, left out: their op's own kernel time holds
            theirs. (default: none)
        calls: names of nodes inlined from a call of a local function -> the call's op name: their mean
            kernel times sum into the call's. (default: none)

    The casts onnxruntime adds itself (:data:`ORT_INSERTED_CAST`) are left out, with a WARNING giving their time.

    Raises:
        ProfileError: a node that is no op of the graph, or an op of another type (an unrelated profile, or one
            made with graph optimisations on, which fuse and rename nodes), or a node with no run left after
            ``skip_runs``; the message names the node and the file.
        ValueError: ``skip_runs`` is not a whole number >= 0.
    """
    if isinstance(skip_runs, bool) or not isinstance(skip_runs, numbers.Integral) or skip_runs < 0:
        raise ValueError(f"skip_runs must be a whole number >= 0, got {skip_runs!r}")
    skip_runs = int(skip_runs)  # a numpy integer, as before
    label = label or profile.path
    index = graph.op_index
    calls = calls or {}
    out: dict[str, float] = {}
    inserted: dict[str, float] = {}
    for node, seconds in profile.kernel_seconds.items():
        if node in inside:
            continue
        if node.startswith(ORT_INSERTED_CAST) and node not in index:
            inserted[node] = _mean_kept(seconds, skip_runs, node, label)
            continue
        if node in calls:
            out[calls[node]] = out.get(calls[node], 0.0) + _mean_kept(seconds, skip_runs, node, label)
            continue
        i = index.get(node)
        if i is None:
            raise ProfileError(f"{label}: profiled node {node!r} is not an op of graph {graph.name!r} (a profile "
                               "of another model, or made with graph optimisations on?)")
        op_type = graph.op_types[i].rsplit("::", 1)[-1]
        if node in profile.op_types and profile.op_types[node] != op_type:
            raise ProfileError(f"{label}: profiled node {node!r} is a {profile.op_types[node]}, but op {node!r} of "
                               f"graph {graph.name!r} is a {op_type}")
        out[node] = _mean_kept(seconds, skip_runs, node, label)
    if inserted:
        logger.warning("%s: onnxruntime ran %d cast(s) of its own (%s...: a type, e.g. float16, without kernels "
                       "on this device), %.3g ms a run, which no op's cost holds", label, len(inserted),
                       next(iter(inserted)), sum(inserted.values()) * 1e3)
    return out


def _mean_kept(seconds: Sequence[float], skip_runs: int, node: str, label: str) -> float:
    """The mean of a node's kernel times after ``skip_runs`` warm-up runs."""
    kept = seconds[skip_runs:]
    if not kept:
        raise ProfileError(f"{label}: node {node!r} ran {len(seconds)} time(s), none left after {skip_runs} "
                           "warm-up run(s)")
    return float(np.mean(kept))


# ---------------------------------------------------------------------- the graph
def with_measured_costs(graph: OpGraph, seconds: Mapping[str, float], kind: str = KIND, *,
                        speed: float = 1.0) -> OpGraph:
    """``graph`` with ``kind_cost[kind]`` set to the measured ``seconds`` times ``speed`` where given, else
    unchanged: a device of that kind and ``speed`` takes the measured time (an op's duration is its cost divided by
    its device's speed; ``calibrate`` scales so too).

    Ops without a measurement keep their ``kind`` cost (the analytic one; NaN where they had none, so that
    their generic cost applies as before); how many is logged. Names, types, memory, shapes, edges and pins
    are unchanged; the fingerprint changes with the costs.

    Raises:
        ProfileError: a name that is no op of the graph, or a time that is no number, negative or not finite.
        ValueError: ``speed`` is not a finite number above 0, or ``kind`` no non-empty string.
        TypeError: ``seconds`` is no mapping.
    """
    from gplace.runtime.calibration import with_op_costs

    check_positive("with_measured_costs", speed=speed)
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"with_measured_costs: kind must be a device kind (a non-empty string), got {kind!r}")
    if not isinstance(seconds, Mapping):
        raise TypeError(f"with_measured_costs: seconds must be a mapping of op name to seconds (dict(pairs) makes "
                        f"one from pairs), got {type(seconds).__name__}")

    index = graph.op_index
    costs = np.array(graph.kind_cost.get(kind, np.full(graph.num_ops, np.nan)), dtype=np.float64)
    for name, value in seconds.items():
        if name not in index:
            raise ProfileError(f"measured op {name!r} is not an op of graph {graph.name!r}")
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value >= 0):
            raise ProfileError(f"op {name!r}: measured time {value!r} is not a finite number of seconds >= 0")
        costs[index[name]] = value * speed
    missing = [n for n in graph.op_names if n not in seconds]
    if missing:
        without_kernel = sum(graph.op_types[index[n]] in NO_KERNEL for n in missing)
        logger.info("graph %r: %d of %d ops not profiled keep their analytic cost (%d inputs/weights, %d other%s)",
                    graph.name, len(missing), graph.num_ops, without_kernel, len(missing) - without_kernel,
                    "" if len(missing) == without_kernel else ": " + ", ".join(
                        n for n in missing if graph.op_types[index[n]] not in NO_KERNEL)[:200])
    return with_op_costs(graph, kind, costs)


# ---------------------------------------------------------------------- comparing with the analytic model
def op_group(op_type: str) -> str:
    """``"matmul"``, ``"conv"``, ``"elementwise"`` (incl. activations, normalisations, softmax) or ``"other"``.

    >>> [op_group(t) for t in ("Gemm", "aten.conv2d.default", "BatchNormalization", "MaxPool")]
    ['matmul', 'conv', 'elementwise', 'other']
    """
    key = costmodel.canonical_op_type(op_type)
    if key in _MATMUL:
        return "matmul"
    if key in _CONV:
        return "conv"
    if key in _ELEMENTWISE:
        return "elementwise"
    return "other"


def fit_speed_factor(analytic: Sequence[float] | np.ndarray, measured: Sequence[float] | np.ndarray) -> float:
    """This machine's speed relative to the analytic model's device: least squares in log space.

    ``s = exp(mean(log(analytic / measured)))`` over the ops where both are > 0 minimises
    ``sum((log(analytic / s) - log(measured))^2)``; ``analytic / s`` then predicts this machine. Ops with a NaN
    cost on either side are left out.

    Raises:
        ValueError: shapes differ, a cost is negative or infinite (naming its index), no op has both costs > 0,
            or the factor is not a finite number > 0 (costs too far apart for float64).
    """
    a, m = _pair(analytic, measured, "fit_speed_factor")
    both = (a > 0) & (m > 0)  # False where either is NaN
    if not both.any():
        raise ValueError("fit_speed_factor: no op has both an analytic and a measured cost > 0")
    with np.errstate(over="ignore", under="ignore"):
        speed = float(np.exp(np.mean(np.log(a[both]) - np.log(m[both]))))
    if not 0 < speed < math.inf:
        raise ValueError(f"fit_speed_factor: the fitted factor is {speed}, not a finite number > 0 (costs too far "
                         "apart for float64)")
    return speed


@dataclass(frozen=True)
class CostError:
    """How far ``analytic / speed`` is from the measured costs."""

    ops: int
    """Ops compared per op (both costs > 0, neither NaN)."""
    speed: float
    """The factor the analytic costs were divided by (1.0: raw)."""
    median: float
    """Median over the compared ops of ``exp(|log(predicted / measured)|)`` (1.0 is exact; 2.0 a factor 2)."""
    p90: float
    """90th percentile of the same."""
    predicted_total: float
    """Sum of ``analytic / speed`` over the given ops with both costs known (not NaN): a one-device step without
    overlap."""
    measured_total: float
    """Sum of the measured costs over the same ops."""

    @property
    def step_ratio(self) -> float:
        """``predicted_total / measured_total``."""
        return self.predicted_total / self.measured_total if self.measured_total > 0 else math.nan


def cost_error(
    analytic: Sequence[float] | np.ndarray, measured: Sequence[float] | np.ndarray, *, speed: float = 1.0,
) -> CostError:
    """Per-op and summed error of ``analytic / speed`` against ``measured`` (seconds, one entry per op).

    Ops with either cost 0 are left out of the per-op figures (a log ratio needs both) but count in the sums;
    ops with either cost NaN (a graph's ``Input`` ops) are left out of both. ``speed``: any real number
    (``numpy`` scalars too).

    Raises:
        ValueError: ``speed`` is not a real number, or not finite and > 0 (the figures came out inf or NaN); a
            cost is negative or infinite (naming its index); shapes differ.
    """
    check_positive("cost_error", speed=speed)
    a, m = _pair(analytic, measured, "cost_error")
    known = ~(np.isnan(a) | np.isnan(m))
    predicted, m = a[known] / float(speed), m[known]
    both = (predicted > 0) & (m > 0)
    factors = np.exp(np.abs(np.log(predicted[both] / m[both]))) if both.any() else np.array([math.nan])
    return CostError(int(both.sum()), float(speed), float(np.median(factors)), float(np.percentile(factors, 90)),
                     float(predicted.sum()), float(m.sum()))


# ---------------------------------------------------------------------- helpers
def _pair(a: Any, b: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Two 1-D float64 arrays of one length, NaN allowed; a negative or infinite entry is refused."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"{where}: need two 1-D arrays of one length, got {a.shape} and {b.shape}")
    for label, values in (("analytic", a), ("measured", b)):
        bad = np.flatnonzero(np.isinf(values) | (values < 0))
        if bad.size:
            raise ValueError(f"{where}: {label} cost at index {int(bad[0])} is {values[bad[0]]}: costs are >= 0 "
                             f"and finite (NaN: unknown, left out){f'; {bad.size} such' if bad.size > 1 else ''}")
    return a, b


def _duration(event: Mapping[str, Any], path: Path, k: int) -> float:
    dur = event.get("dur")
    if isinstance(dur, bool) or not isinstance(dur, int | float) or not dur >= 0:
        raise ProfileError(f"{path}: event {k} ({event.get('name')!r}) has no duration in microseconds "
                           f"(dur = {dur!r})")
    return float(dur) * 1e-6


def _runnable_model(graph: OpGraph, model_or_path: Any) -> tuple[onnx.ModelProto, str]:
    """A private copy of the model with its weights, and what to call it in errors."""
    import onnx

    from gplace.importers.onnx import OnnxSource

    label, base_dir = None, None
    if model_or_path is None:
        if not isinstance(graph.source, OnnxSource):
            raise ProfileError(f"graph {graph.name!r} keeps no ONNX model (import it with from_onnx, or pass "
                               "model_or_path)")
        model_or_path, label = graph.source.model, f"the ONNX model of graph {graph.name!r}"
        base_dir = graph.source.base_dir  # where an imported file's external weights are
    if isinstance(model_or_path, str | Path):
        path = Path(model_or_path)
        refuse_special_file(path, "an ONNX file")
        if not path.is_file():  # a FileNotFoundError, where profile_onnx promises a ProfileError naming the file
            raise ProfileError(f"{path}: cannot be read: no ONNX file there")
        try:
            return onnx.load(str(path)), str(path)
        except Exception as err:  # protobuf DecodeError, missing external data, ...
            raise ProfileError(f"{path}: not a readable ONNX model ({error_summary(err)})") from None
    if not isinstance(model_or_path, onnx.ModelProto):
        raise TypeError(f"expected an onnx.ModelProto, a path or None, got {type(model_or_path).__name__}")
    external = any(t.data_location == onnx.TensorProto.EXTERNAL for t in model_or_path.graph.initializer)
    if external and base_dir is None:
        raise ProfileError(f"graph {graph.name!r}: the model's weights are in external files; pass the .onnx path")
    model = onnx.ModelProto()
    model.CopyFrom(model_or_path)
    label = label or f"ONNX model {model.graph.name!r}"
    if external:
        from onnx.external_data_helper import load_external_data_for_model

        try:
            load_external_data_for_model(model, base_dir)
        except Exception as err:  # a file moved or cut short since the import
            raise ProfileError(f"{label}: its external weights in {base_dir} cannot be read "
                               f"({error_summary(err)})") from None
    return model, label


def _node_names(graph: OpGraph, model: onnx.ModelProto, given: Any, label: str
                ) -> tuple[list[str], onnx.ModelProto]:
    """The graph's op name of each node of ``model``, and the shape-fixed model (for the inputs).

    Raises:
        ProfileError: the model imports to other ops than the graph's (names the first op that differs).
    """
    from gplace.importers.onnx import OnnxSource, from_onnx

    source = graph.source
    if given is None and isinstance(source, OnnxSource):
        node_index, fixed = source.node_index, source.model
    else:
        try:
            imported = from_onnx(model, _input_shapes(graph, model))
        except ValueError as err:
            raise ProfileError(f"{label} does not match graph {graph.name!r}: {err}") from None
        node_index, fixed = imported.source.node_index, imported.source.model
        index = graph.op_index
        for name, op_type in zip(imported.op_names, imported.op_types, strict=True):
            if name not in index:
                raise ProfileError(f"{label} does not match graph {graph.name!r}: its op {name!r} ({op_type}) is "
                                   "not in the graph")
            if graph.op_types[index[name]] != op_type:
                raise ProfileError(f"{label} does not match graph {graph.name!r}: op {name!r} is a {op_type} in "
                                   f"the model, a {graph.op_types[index[name]]} in the graph")
            mine, theirs = graph.output_shapes[index[name]], imported.output_shapes[imported.op_index[name]]
            if mine != theirs:
                raise ProfileError(f"{label} does not match graph {graph.name!r}: op {name!r} has output shapes "
                                   f"{list(theirs)} in the model, {list(mine)} in the graph")
        extra = sorted(set(graph.op_names) - set(imported.op_names))
        if extra:
            raise ProfileError(f"{label} does not match graph {graph.name!r}: graph op {extra[0]!r} is not in "
                               "the model")
    names = [""] * len(model.graph.node)
    for name, i in node_index.items():
        names[i] = name
    if len(node_index) != len(model.graph.node) or not all(names):
        raise ProfileError(f"{label}: {len(model.graph.node)} nodes, but graph {graph.name!r} has "
                           f"{len(node_index)} ops from nodes")
    return names, fixed


def _input_shapes(graph: OpGraph, model: onnx.ModelProto) -> dict[str, list[int]]:
    """Shapes the graph's ``Input`` ops record for the model's inputs (fully known ones only)."""
    initializers = {t.name for t in model.graph.initializer}
    index, out = graph.op_index, {}
    for value in model.graph.input:
        i = index.get(value.name)
        if value.name in initializers or i is None or graph.op_types[i] != "Input" or not graph.output_shapes[i]:
            continue
        shape = graph.output_shapes[i][0]
        if all(d >= 0 for d in shape):
            out[value.name] = list(shape)
    return out


def _feeds(model: onnx.ModelProto, label: str, seed: int) -> dict[str, np.ndarray]:
    """Random inputs for the graph inputs of a shape-fixed model."""
    import onnx

    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor_type = value.type.tensor_type
        dims = tensor_type.shape.dim
        if not value.type.HasField("tensor_type") or any(not d.HasField("dim_value") for d in dims):
            raise ProfileError(f"{label}: input {value.name!r} has no fixed tensor shape to make data for")
        shape = tuple(int(d.dim_value) for d in dims)
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[value.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[value.name] = np.zeros(shape, dtype=dtype)
    return feeds


def _session(model: onnx.ModelProto, options: Any, label: str) -> Any:
    """An onnxruntime CPU session; a model whose IR version is newer than onnxruntime's is lowered to it."""
    import onnxruntime as ort

    for attempt in range(2):
        try:
            return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime raises Fail, InvalidGraph, NotImplemented, ...
            match = _ORT_IR_VERSION.search(str(err))
            if attempt == 0 and match and int(match[1]) < model.ir_version:
                logger.debug("%s: IR version %d lowered to %s for onnxruntime", label, model.ir_version, match[1])
                model.ir_version = int(match[1])
                continue
            raise ProfileError(f"{label}: onnxruntime cannot load the model ({error_summary(err)})") from None
    raise AssertionError("unreachable")
