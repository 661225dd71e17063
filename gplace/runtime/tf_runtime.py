"""``tf-v1``: run an imported TensorFlow GraphDef with each node on the device of its placement, and time it.

The semantics below are those of runtime id ``tf-v1``; any change to them needs a new id. TensorFlow is
imported inside the functions that need it, never at module import.

Program
    The graph's ``source`` must be the :class:`~gplace.importers.tensorflow.TensorFlowSource` that
    :func:`~gplace.importers.tensorflow.from_tensorflow` attached: each op is the GraphDef node of the same name.
    A copy of the GraphDef gets ``NodeDef.device`` from the placement and is imported into a fresh ``tf.Graph``,
    run by a fresh ``tf.compat.v1.Session`` per measurement.
Values
    The source's inputs are fed, and its variables (``VarHandleOp``, ``VariableV2``) initialised once before
    timing, on their own device: with the ``tf.Variable``'s own value where the source holds it (a Keras model,
    ``tf.function`` or SavedModel; :attr:`~gplace.importers.tensorflow.TensorFlowSource.variables`; with eager
    execution off, the value in the default session, else the measurement fails:
    :meth:`~gplace.importers.tensorflow.TensorFlowSource.variable_values`), else, as the inputs, floats uniform
    in ``[0, 1)`` from a generator seeded by the name, integers and booleans 0, strings empty.
    :meth:`TensorFlowRuntime.run` takes other feeds. A measurement does not feed an input placed on a GPU: a
    ``Placeholder`` there of a dtype TensorFlow keeps resource variables of on GPUs (floats, complex, ``int64``,
    ``bool``) and a known shape is held in a variable on that GPU, set once with the value it would be fed, and
    read by each step (``import_graph_def(input_map=...)``), as ``torch-v1`` moves its inputs to their device
    before timing; other inputs (on CPUs, or ``int32``, which TensorFlow keeps in host memory on a GPU anyway)
    are fed each step. (Until 2026-12-02 every input was fed, so a GPU step timed the copy of its inputs from
    the host; never run on a GPU, so no measurement had that rule.) (Until 2026-11-27 every variable was made up, with
    which most Keras applications' outputs overflowed to inf or nan; the id stayed, as the ops, shapes and devices
    timed are the same.)
Devices
    A cluster device name maps to a TensorFlow device: ``"/CPU:i"`` to ``"/device:CPU:i"``, ``"/GPU:i"`` to
    ``"/device:GPU:i"`` (a full ``".../device:GPU:i"`` name too; ``i`` ASCII digits that end the name);
    ``device_map`` overrides. Two cluster devices on one TensorFlow device (``"/CPU:0"`` and ``"/cpu:00"``) are
    refused unless ``device_map`` entries share it on purpose (:func:`~gplace.export.parts.merged_devices`). The
    session has as
    many logical CPU devices as the highest CPU index needs (``device_count``), only the GPUs the placement
    reaches, ``allow_soft_placement=False``, no graph rewriting (Grappler's ``disable_meta_optimizer``, and the
    classic optimiser at ``L0``: no constant folding, no common subexpressions merged), its own thread pools
    (``intra_op_threads``, default 1, and ``inter_op_threads``, default one per cluster device; the same for every
    placement)
    and GPU memory allocated as needed (``allow_growth``).
Step
    One step fetches the source's outputs and runs every sink node of the GraphDef (no node reads it), so every
    op runs in every step, a training step's variable updates included. Transfers between devices are
    TensorFlow's own send/receive; ``bytes_moved`` counts each tensor once per (producer, destination cluster
    device), sized from its static shape as the importer sizes it (a string element 8 bytes, a ``TensorList`` its
    capacity where known, a handle or an unknown shape 0), so that it counts what sim-v1 counts from the graph's
    edges. (Until 2026-12-05 strings and lists counted 0; the id stayed, as the times measured are the
    same: a cache kept with ``cache_nondeterministic=True`` holds the old figure.)
Step time
    The median wall time of ``steps`` ``Session.run`` calls after ``warmup`` ones; ``spread = (max - min) /
    median``. When the placement uses a GPU, at least one step is untimed (each measurement opens a fresh session,
    whose first run creates the kernels and library handles), and the first measurement of a runtime on a GPU
    first runs steps back to back for :data:`~gplace.runtime.calibration.GPU_WARMUP_SECONDS`, as ``torch-v1``
    does (a GPU that idled runs at low clocks). (Until 2026-12-02 neither; never run on a GPU.)
Peak memory
    When every device in use is a GPU of its own: the peak of each GPU's allocator over the timed steps
    (``tf.config.experimental.reset_memory_stats`` after the warm-up, ``get_memory_info``); the allocator is the
    process's, so anything else TensorFlow holds on that GPU counts too. Otherwise ``None``.
Failures
    A graph without a TensorFlow program, a device that does not exist, out of memory, any TensorFlow error in
    an op and the time limit give ``ok=False`` and a reason naming the device or op, never an exception.
Time limit
    It covers set-up, initialisation and warm-up; it is checked between steps, and each ``Session.run`` gets the
    time left as its ``RunOptions.timeout_in_ms``, so TensorFlow cancels a step that runs past it. A kernel
    already running is not interrupted: a single long kernel can overrun the limit by its own duration.
"""

from __future__ import annotations

import logging
import math
import re
import statistics
import sys
import time
import zlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gplace.export.parts import check_device_map, merged_devices
from gplace.ir import Cluster, OpGraph, Placement, UnsupportedGraphError
from gplace.ir.errors import check_sizes, error_summary
from gplace.ir.placement import check_placement
from gplace.runtime.base import ClusterMismatchError, Measurement, Runtime
from gplace.runtime.wrapper import check_time_limit

logger = logging.getLogger(__name__)

__all__ = ["TensorFlowRunError", "TensorFlowRuntime", "tf_device"]

_DEVICE_NAME = re.compile(r"(?:^|/)(?:device:)?(CPU|GPU):([0-9]+)\Z", re.IGNORECASE | re.ASCII)
"""``/CPU:0``, ``/GPU:1``, ``/device:CPU:0``, ``/job:localhost/replica:0/task:0/device:GPU:1``: ASCII digits that end
the name (``/CPU:０``, ``"/CPU:0\\n"`` are none)."""
_NODE_IN_MESSAGE = re.compile(r"\{\{node ([^}]+)\}\}|Node: '([^']+)'")
_ASSIGNED_TO = re.compile(r"assigned to (\S+?)(?: but|\s|$)")
_TF_DEVICE = re.compile(r"device:((?:CPU|GPU):\d+)")
_ROOT_ERROR = re.compile(r"^\(\d+\) [A-Z_]+: ")
_ERROR_COUNT = re.compile(r"^\d+ root error\(s\) found")
_VARIABLE_OPS = {"VarHandleOp": "AssignVariableOp", "VariableV2": "Assign", "Variable": "Assign"}
_FIRST_CPU = re.compile(r"(?i)(^|/)(device:)?cpu:0+$")
"""A device string naming the first CPU (``/device:CPU:0``, ``/cpu:0``, ``/job:localhost/.../device:CPU:0``)."""
_CALL_SCOPE = re.compile(r"(^|/)(Stateful)?PartitionedCall(_\d+)?$")
"""The scope of an inlined function call's ops (``PartitionedCall/...``)."""


class TensorFlowRunError(RuntimeError):
    """Running a placed GraphDef failed; the message is the reason a measurement reports."""


_EXAMPLE = "{'fast': '/device:GPU:0'}"
"""A good ``device_map``, for messages."""


def tf_device(name: str, device_map: Mapping[str, str] | None = None) -> str:
    """The TensorFlow device (``"/device:CPU:0"``) behind a cluster device name (see the module docstring).

    Raises:
        ValueError: the name (or its ``device_map`` entry) maps to no TensorFlow CPU or GPU device, or
            ``device_map`` is no mapping of names to devices.
    """
    check_device_map(device_map, "TensorFlow", _EXAMPLE)
    if device_map is not None and name in device_map:
        return _parse_device(name, device_map[name])
    match = _DEVICE_NAME.search(name)
    if not match:
        raise ValueError(f"device {name!r} maps to no TensorFlow device; give it a device_map entry")
    return f"/device:{match[1].upper()}:{int(match[2])}"


def _parse_device(name: str, value: Any) -> str:
    """``device_map[name] = value`` (a str, or a ``tf.DeviceSpec``) as ``"/device:CPU:0"``."""
    tf = sys.modules.get("tensorflow")  # a DeviceSpec is made with TensorFlow imported
    text = value.to_string() if tf is not None and isinstance(value, tf.DeviceSpec) else value
    match = _DEVICE_NAME.search(text) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"device_map[{name!r}] = {text!r} is not a TensorFlow CPU or GPU device (a str such as "
                         "'/device:CPU:0', or a tf.DeviceSpec)")
    return f"/device:{match[1].upper()}:{int(match[2])}"


def _device_index(device: str) -> tuple[str, int]:
    """``("CPU", 1)`` for ``"/device:CPU:1"``."""
    kind, _, index = device.rpartition(":")
    return kind.rpartition(":")[2], int(index)


def _import_tf() -> Any:
    from gplace.tensorflow_setup import import_tensorflow

    return import_tensorflow()


class TensorFlowRuntime(Runtime):
    """The ``tf-v1`` runtime: executes graphs imported by ``from_tensorflow`` (see the module docstring).

    Args:
        steps: timed steps per measurement. (default: 5)
        warmup: untimed steps before them. (default: 2)
        time_limit: seconds a measurement may take, set-up and warm-up included; ``None`` or ``inf``: no
            limit. (default: 60.0)
        device_map: cluster device name -> TensorFlow device, overriding the default mapping, e.g.
            ``{"gpu0": "/device:GPU:0"}``. (default: None)
        intra_op_threads: threads one op may use (0: TensorFlow's choice). (default: 1)
        inter_op_threads: threads running ops concurrently (0: TensorFlow's choice). (default: None, one per
            device of the cluster)
    """

    id = "tf-v1"
    deterministic = False

    def __init__(
        self, steps: int = 5, warmup: int = 2, time_limit: float | None = 60.0,
        device_map: Mapping[str, str] | None = None, intra_op_threads: int = 1, inter_op_threads: int | None = None,
    ) -> None:
        check_sizes(type(self).__name__, 1, steps=steps)
        check_sizes(type(self).__name__, 0, warmup=warmup)
        limit = check_time_limit(type(self).__name__, time_limit)
        check_sizes(type(self).__name__, 0, intra_op_threads=intra_op_threads,
                    **({} if inter_op_threads is None else {"inter_op_threads": inter_op_threads}))
        self.steps, self.warmup, self.time_limit = steps, warmup, limit
        check_device_map(device_map, "TensorFlow", _EXAMPLE)
        self.device_map = {name: _parse_device(name, value) for name, value in (device_map or {}).items()}
        self.intra_op_threads, self.inter_op_threads = intra_op_threads, inter_op_threads
        self._values: OrderedDict[int, tuple[Any, dict[str, np.ndarray]]] = OrderedDict()
        self._warm_gpus: set[str] = set()
        """TensorFlow GPU devices this runtime has kept busy for ``GPU_WARMUP_SECONDS`` (module docstring)."""

    def run(
        self, graph: OpGraph, cluster: Cluster, placement: Placement, feeds: Mapping[str, Any] | None = None
    ) -> list[np.ndarray]:
        """Run one step and return the values of the source's outputs.

        Args:
            graph: a graph imported by ``from_tensorflow``.
            cluster: the devices.
            placement: a device per op.
            feeds: ``{tensor name ("x:0") or node name ("x"): value}``, replacing the generated input values.
                (default: None)

        Returns:
            One array per tensor of ``graph.source.outputs``, in order (``None`` for a node without outputs).

        Raises:
            InvalidPlacementError: the placement does not fit the graph or cluster.
            TypeError: ``placement`` is not a :class:`~gplace.ir.Placement`.
            ValueError: a name in ``feeds`` is no tensor or node of the graph (the message names it and the
                source's inputs).
            TensorFlowRunError: the step failed (the reason a measurement would report).
        """
        check_placement(placement)
        placement.validate(graph, cluster)
        deadline = time.perf_counter() + self.time_limit
        step = self._open(graph, cluster, placement, feeds, deadline)
        try:
            return step.run(deadline)
        except _TimeUp:
            raise self._time_up(0, 1) from None
        finally:
            step.close()

    def _measure(self, graph: OpGraph, cluster: Cluster, placement: Placement) -> Measurement:
        deadline = time.perf_counter() + self.time_limit
        try:
            step = self._open(graph, cluster, placement, None, deadline, hold=True)
            try:
                devices = self._devices(step.tf, cluster, placement)
                gpus = _own_gpus(devices)
                times = self._time_steps(step, deadline, gpus, _gpu_devices(devices))
                peaks = _gpu_peaks(step.tf, gpus, cluster.num_devices)
            finally:
                step.close()
        except TensorFlowRunError as err:
            logger.debug("measurement of %r failed: %s", graph.name, err)
            return Measurement.failure(self.id, str(err))
        median, spread = _step_statistics(times)
        return Measurement(ok=True, step_time=median, runtime=self.id, spread=spread, bytes_moved=step.moved,
                           peak_memory=peaks)

    def _time_steps(self, step: _Step, deadline: float, gpus: Mapping[int, str] | None = None,
                    used_gpus: frozenset[str] = frozenset()) -> list[float]:
        """Wall times of the timed steps; ``used_gpus`` (TensorFlow devices) get the GPU warm-up (Step time)."""
        warmup = max(self.warmup, 1) if used_gpus else self.warmup  # a fresh session's first run is never timed
        total, times = warmup + self.steps, []
        self._warm_up(step, deadline, used_gpus)
        _reset_gpu_peaks(step.tf, gpus)
        for k in range(total):
            if time.perf_counter() > deadline:
                raise self._time_up(k, total)
            start = time.perf_counter()
            try:
                step.run(deadline)
            except _TimeUp:
                raise self._time_up(k, total) from None
            if k >= warmup:
                times.append(time.perf_counter() - start)
            if k + 1 == warmup:
                _reset_gpu_peaks(step.tf, gpus)
        return times

    def _warm_up(self, step: _Step, deadline: float, used_gpus: frozenset[str]) -> None:
        """Steps back to back for ``GPU_WARMUP_SECONDS`` the first time this runtime uses a GPU (Step time)."""
        from gplace.runtime.calibration import GPU_WARMUP_SECONDS

        cold = used_gpus - self._warm_gpus
        if not cold:
            return
        until = time.perf_counter() + GPU_WARMUP_SECONDS
        try:
            while time.perf_counter() < until:
                if time.perf_counter() > deadline:
                    raise _TimeUp("time limit exceeded while warming up")
                step.run(deadline)
        except _TimeUp:
            raise TensorFlowRunError(f"time limit of {self.time_limit:g} s exceeded while warming up "
                                     f"{', '.join(sorted(cold))}") from None
        self._warm_gpus |= cold

    def _time_up(self, done: int, total: int) -> TensorFlowRunError:
        return TensorFlowRunError(
            f"time limit of {self.time_limit:g} s exceeded after {done} of {total} steps (warm-up included)"
        )

    # ------------------------------------------------------------------ set-up
    def _open(
        self, graph: OpGraph, cluster: Cluster, placement: Placement, feeds: Mapping[str, Any] | None,
        deadline: float, hold: bool = False,
    ) -> _Step:
        """Build the placed graph and its session, initialise the variables; the caller closes the step. With
        ``hold`` (a measurement), the inputs placed on GPUs are held there in variables, not fed (Values)."""
        problem = _unrunnable(graph)
        if problem is not None:
            raise TensorFlowRunError(problem)
        source = graph.source
        tf = _import_tf()
        devices = self._devices(tf, cluster, placement)
        homes = _homes(source.graph_def, graph, placement.devices.tolist())
        labels = {d: f"{cluster.devices[d].name} ({dev})" for d, dev in devices.items()}
        node_devices = {n: devices[d] for n, d in homes.items()}
        held = _held_inputs(tf, source.graph_def, source.inputs, node_devices, source.outputs) if hold else {}
        tf_graph, step_held = _placed_graph(tf, source.graph_def, node_devices, held)
        step = _Step(tf, tf_graph, homes, labels, held=step_held)
        try:
            step.start(self._config(tf, cluster, devices), self._cached_values(source), source, feeds, deadline)
        except BaseException as err:
            step.close()
            if isinstance(err, _TimeUp):
                raise TensorFlowRunError(f"time limit of {self.time_limit:g} s exceeded during set-up") from None
            raise
        return step

    def check_graph(self, graph: OpGraph) -> None:
        """Raise :class:`~gplace.ir.UnsupportedGraphError` unless ``graph`` holds a TensorFlow program tf-v1 can
        run."""
        problem = _unrunnable(graph)
        if problem is not None:
            raise UnsupportedGraphError(problem)

    def check_cluster(self, cluster: Cluster) -> None:
        """Raise :class:`~gplace.runtime.base.ClusterMismatchError` naming every cluster device that maps to no
        TensorFlow device or to a GPU TensorFlow does not see, and cluster devices that map to one TensorFlow
        device without ``device_map`` entries (call it once, before a search)."""
        problems, missing, mapped = [], [], {}
        gpus: int | None = None
        for device in cluster.devices:
            try:
                mapped[device.name] = tf_device(device.name, self.device_map)
            except ValueError as err:
                problems.append(str(err))
                continue
            kind, index = _device_index(mapped[device.name])
            if kind == "GPU":
                gpus = len(_import_tf().config.list_physical_devices("GPU")) if gpus is None else gpus
                if index >= gpus:
                    missing.append(f"{device.name} (/device:GPU:{index})")
        if missing:
            problems.append(f"{', '.join(missing)} not available (TensorFlow sees {gpus} GPU(s))")
        ClusterMismatchError.check(cluster, problems + merged_devices(mapped, self.device_map))

    def _devices(self, tf: Any, cluster: Cluster, placement: Placement) -> dict[int, str]:
        """Cluster device index -> TensorFlow device, for the devices the placement uses; checks the GPUs exist
        and that no two of its devices merge into one (:func:`~gplace.export.parts.merged_devices`)."""
        devices = {}
        for d in sorted(set(placement.devices.tolist())):
            name = cluster.devices[d].name
            try:
                devices[d] = tf_device(name, self.device_map)
            except ValueError as err:
                raise TensorFlowRunError(str(err)) from None
            kind, index = _device_index(devices[d])
            if kind == "GPU":
                gpus = len(tf.config.list_physical_devices("GPU"))
                if index >= gpus:
                    raise TensorFlowRunError(
                        f"device {name} ({devices[d]}) is not available (TensorFlow sees {gpus} GPU(s))"
                    )
        merged = merged_devices({cluster.devices[d].name: device for d, device in devices.items()}, self.device_map)
        if merged:
            raise TensorFlowRunError("; ".join(merged))
        return devices

    def _config(self, tf: Any, cluster: Cluster, devices: Mapping[int, str]) -> Any:
        counts = {"CPU": 1, "GPU": 0}
        for device in devices.values():
            kind, index = _device_index(device)
            counts[kind] = max(counts[kind], index + 1)
        inter = cluster.num_devices if self.inter_op_threads is None else self.inter_op_threads
        config = tf.compat.v1.ConfigProto(
            device_count=counts, allow_soft_placement=False, intra_op_parallelism_threads=self.intra_op_threads,
            inter_op_parallelism_threads=inter, use_per_session_threads=True,
        )
        return as_placed(config)

    def _cached_values(self, source: Any) -> dict[str, np.ndarray]:
        """The generated feed and variable values of a source, filled as they are made (a few sources kept)."""
        key = id(source.graph_def)
        cached = self._values.get(key)
        if cached is not None and cached[0] is source.graph_def:
            self._values.move_to_end(key)
            return cached[1]
        values: dict[str, np.ndarray] = {}
        self._values[key] = (source.graph_def, values)
        if len(self._values) > 4:
            self._values.popitem(last=False)
        return values


# ---------------------------------------------------------------------- the placed graph
def _homes(graph_def: Any, graph: OpGraph, devices: list[int]) -> dict[str, int]:
    """GraphDef node name -> cluster device index; every node must be an op and every op a node."""
    homes = {}
    for node in graph_def.node:
        i = graph.op_index.get(node.name)
        if i is None:
            raise TensorFlowRunError(f"node {node.name!r} of the GraphDef is not an op of graph {graph.name!r}")
        homes[node.name] = devices[i]
    if len(homes) != graph.num_ops:
        missing = next(name for name in graph.op_names if name not in homes)
        raise TensorFlowRunError(f"op {missing!r} of graph {graph.name!r} is not a node of its GraphDef")
    return homes


def with_devices(graph_def: Any, devices: Mapping[str, str]) -> Any:
    """A copy of ``graph_def`` with each node's device ``devices[node.name]``, and no device inside its functions
    but the first CPU: a control-flow op (``While``, ``If``) is placed as a unit, its body running where it runs (a
    device its body was written with names a device the placed program may lack); a body's op pinned to the CPU
    (one without a GPU kernel) stays there, as every program has that device."""
    placed = type(graph_def)()
    placed.CopyFrom(graph_def)
    for node in placed.node:
        node.device = devices[node.name]
    for function in placed.library.function:
        for node in function.node_def:
            if _FIRST_CPU.search(node.device):
                node.device = "/device:CPU:0"  # this process's (a /job:worker/... pin: a local session has none)
            else:
                node.ClearField("device")
    return placed


def _placed_graph(
    tf: Any, graph_def: Any, devices: Mapping[str, str], held: Mapping[str, str] | None = None,
) -> tuple[Any, dict[str, _Held]]:
    """A fresh ``tf.Graph`` of ``graph_def`` with each node's device set, and each input tensor of ``held`` (name ->
    TensorFlow device; :func:`_held_inputs`) read from a resource variable made on that device first."""
    placed = with_devices(graph_def, devices)
    tf_graph = tf.Graph()
    try:
        with tf_graph.as_default():
            holders = _holders(tf, placed, held or {})
            tf.graph_util.import_graph_def(placed, input_map={name: h.read for name, h in holders.items()}, name="")
    except Exception as err:  # ValueError, InvalidArgumentError, ...
        raise TensorFlowRunError(f"TensorFlow could not import the placed GraphDef: {error_summary(err)}") from err
    return tf_graph, holders


_GPU_VARIABLE_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "complex64", "complex128", "bool",
                                  "int64"})
"""Dtypes of the inputs held on a GPU: those TensorFlow registers GPU kernels of ``VarHandleOp`` and
``AssignVariableOp`` for (``resource_variable_ops.cc``: ``TF_CALL_GPU_ALL_TYPES``, ``int64``; not ``int32``,
which GPU kernels keep in host memory anyway)."""


@dataclass(frozen=True, eq=False)
class _Held:
    """An input held in a resource variable on its device: set once (``assign`` fed ``value``), read each step."""

    input: str
    """The input tensor's name (``"x:0"``)."""
    read: Any
    """The tensor the input's readers read instead (a ``ReadVariableOp``'s)."""
    assign: Any
    value: Any
    """The placeholder ``assign`` is fed its value through (once, before timing)."""
    ops: frozenset[str]
    """The names of the ops made for it."""


def _held_on(device: str) -> bool:
    """Whether a measurement holds the inputs placed on TensorFlow device ``device`` there, instead of feeding
    them each step (GPUs only: on a CPU a feed is no copy to another memory)."""
    return _device_index(device)[0] == "GPU"


def _held_inputs(
    tf: Any, graph_def: Any, inputs: Sequence[str], devices: Mapping[str, str], fetched: Sequence[str] = (),
) -> dict[str, str]:
    """Input tensor name -> TensorFlow device, for the inputs a measurement holds on their device (Values): a
    ``Placeholder``'s output on a device :func:`_held_on` accepts, of a dtype in :data:`_GPU_VARIABLE_DTYPES`,
    with a fully defined shape (another one fails when its value is made, as a feed does), and not itself
    fetched (``fetched``: the source's outputs)."""
    nodes = {node.name: node for node in graph_def.node}
    fetched_nodes = {name.split(":")[0] for name in fetched}
    held = {}
    for name in inputs:
        node_name, _, index = name.partition(":")
        node = nodes.get(node_name)
        if node is None or node.op != "Placeholder" or index not in ("", "0") or node_name in fetched_nodes:
            continue
        dtype, shape = tf.dtypes.as_dtype(node.attr["dtype"].type), tf.TensorShape(node.attr["shape"].shape)
        if _held_on(devices[node_name]) and dtype.name in _GPU_VARIABLE_DTYPES and shape.is_fully_defined():
            held[f"{node_name}:0"] = devices[node_name]
    return held


def _holders(tf: Any, graph_def: Any, held: Mapping[str, str]) -> dict[str, _Held]:
    """For each input of ``held`` (name -> device), a resource variable on that device, its assignment from a
    placeholder and its read, made in the default graph (before ``graph_def`` is imported into it, under a name
    scope no node of ``graph_def`` uses)."""
    if not held:
        return {}
    names = {node.name for node in graph_def.node}
    scope = "gplace_input"
    while any(n == scope or n.startswith(scope + "/") for n in names):
        scope += "_"
    nodes = {node.name: node for node in graph_def.node}
    holders = {}
    for name, device in held.items():
        node = nodes[name.split(":")[0]]
        dtype, shape = tf.dtypes.as_dtype(node.attr["dtype"].type), tf.TensorShape(node.attr["shape"].shape)
        prefix = f"{scope}/{node.name}"
        with tf.device(device):
            handle = tf.raw_ops.VarHandleOp(dtype=dtype, shape=shape, shared_name=prefix, name=f"{prefix}/handle")
            value = tf.compat.v1.placeholder(dtype, shape, name=f"{prefix}/value")
            assign = tf.raw_ops.AssignVariableOp(resource=handle, value=value, name=f"{prefix}/assign")
            read = tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype, name=f"{prefix}/read")
        ops = frozenset(op.name for op in (handle.op, value.op, assign, read.op))
        holders[name] = _Held(name, read, assign, value, ops)
    return holders


class _TimeUp(TensorFlowRunError):
    """A ``Session.run`` passed the deadline."""


@dataclass(eq=False)
class _Step:
    """A placed graph in its session: one call runs one step."""

    tf: Any
    graph: Any
    homes: dict[str, int]
    """Node name -> cluster device index."""
    labels: dict[int, str]
    """Cluster device index -> ``"/GPU:0 (/device:GPU:0)"``."""
    session: Any = None
    call: Any = None
    feed_values: tuple[np.ndarray, ...] = ()
    moved: int = 0
    initialises: dict[str, str] = field(default_factory=dict)
    """Name of an added initialising op -> the variable node it initialises."""
    held: dict[str, _Held] = field(default_factory=dict)
    """Input tensor name -> the variable holding it on its device (not fed: :func:`_held_inputs`)."""

    @property
    def holding(self) -> dict[str, str]:
        """Name of an op made to hold an input -> the input's node (a failure there is reported as that node's)."""
        return {op: held.input.split(":")[0] for held in self.held.values() for op in held.ops}

    def start(self, config: Any, cache: dict[str, np.ndarray], source: Any, feeds: Mapping[str, Any] | None,
              deadline: float) -> None:
        """Open the session, initialise the variables and prepare the step's callable."""
        tf = self.tf
        self._check_feeds(source, feeds)  # a caller's mistake: before any work
        _read_variables(cache, source)  # before the graph is the default one
        with self.graph.as_default():
            init_ops, init_feeds, self.initialises = _initializers(tf, self.graph, cache, frozenset(self.holding))
        for held in self.held.values():  # each held input set once, to the value it would be fed
            init_ops.append(held.assign)
            init_feeds[held.value] = _generated(cache, held.input, held.value.dtype, held.value.shape)
        self.session = tf.compat.v1.Session(graph=self.graph, config=config)
        self._guard(lambda: self.session.run(init_ops, init_feeds, options=_options(tf, deadline)))
        tensors, self.feed_values = self._feeds(cache, source, feeds)
        outputs = [self._fetch(name) for name in source.outputs]
        sinks = _sinks(self.graph, self.homes, {t.op.name for t in tensors})
        self.call = self._guard(
            lambda: self.session.make_callable([outputs, sinks], feed_list=tensors, accept_options=True)
        )
        self.moved = _bytes_moved(self.graph, self.homes, {h.read.name: name for name, h in self.held.items()})

    def run(self, deadline: float) -> list[np.ndarray]:
        """Run one step; the values of the source's outputs."""
        options = _options(self.tf, deadline)
        return list(self._guard(lambda: self.call(*self.feed_values, options=options))[0])

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    def _fetch(self, name: str) -> Any:
        """The tensor ``name`` (``"y:0"``), or the operation of a node without outputs (a ``NoOp``)."""
        if ":" not in name:
            try:
                op = self.graph.get_operation_by_name(name)
            except (KeyError, ValueError) as err:
                raise TensorFlowRunError(f"node {name!r} is not in the graph: {error_summary(err)}") from None
            if not op.outputs:
                return op
        return self._tensor(name)

    def _tensor(self, name: str) -> Any:
        try:
            return self.graph.get_tensor_by_name(name if ":" in name else f"{name}:0")
        except (KeyError, ValueError) as err:
            raise TensorFlowRunError(f"tensor {name!r} is not in the graph: {error_summary(err)}") from None

    def _check_feeds(self, source: Any, feeds: Mapping[str, Any] | None) -> None:
        """Raise ValueError naming the first name in ``feeds`` that is no tensor (``"x:0"``) or node (``"x"``, its
        output 0) of the graph, and the source's inputs; or ``feeds`` itself where it is no mapping."""
        if feeds is not None and not isinstance(feeds, Mapping):
            inputs = ", ".join(repr(n) for n in source.inputs) or "none"
            raise ValueError(f"feeds must be a mapping of tensor name to value (its inputs: {inputs}), got a "
                             f"{type(feeds).__name__}")
        for name in feeds or {}:
            try:
                self.graph.get_tensor_by_name(name if ":" in name else f"{name}:0")
            except (KeyError, ValueError, TypeError):
                inputs = ", ".join(repr(n) for n in source.inputs) or "none"
                raise ValueError(f"feeds: {name!r} is no tensor of the graph (its inputs: {inputs}; a tensor "
                                 "name 'node:i', or a node name for its output 0)") from None

    def _feeds(self, cache: dict[str, np.ndarray], source: Any,
               feeds: Mapping[str, Any] | None) -> tuple[list[Any], tuple[np.ndarray, ...]]:
        given = {self._tensor(name).name: value for name, value in (feeds or {}).items()}
        inputs = (self._tensor(n).name for n in source.inputs)
        names = list(dict.fromkeys([*(n for n in inputs if n not in self.held), *given]))
        tensors = [self._tensor(name) for name in names]
        values = [given[t.name] if t.name in given else _generated(cache, t.name, t.dtype, t.shape) for t in tensors]
        return tensors, tuple(values)

    def _guard(self, fn: Any) -> Any:
        """``fn()``, with TensorFlow's errors turned into :class:`TensorFlowRunError`."""
        try:
            return fn()
        except self.tf.errors.DeadlineExceededError as err:
            raise _TimeUp(error_summary(err)) from None
        except self.tf.errors.OpError as err:
            raise self._failure(err) from None
        except (TypeError, ValueError) as err:  # a feed TensorFlow refuses (wrong shape or type)
            reason = f"{type(err).__name__}: {error_summary(err)}"
            raise TensorFlowRunError(f"TensorFlow refused the step: {reason}") from None

    def _failure(self, err: Any) -> TensorFlowRunError:
        """The reason for a TensorFlow error: the op and device it names, out of memory, an unknown device."""
        node, message = self._known(_failed_node(err)), str(err)
        node = self.holding.get(node, node)  # an op holding an input fails as that input's op
        what, where = self._what(node), self._where(node, message)
        brief = error_summary(_first_line(err))
        if isinstance(err, self.tf.errors.ResourceExhaustedError):
            return TensorFlowRunError(f"out of memory on {where} in {what}: {brief}")
        if isinstance(err, self.tf.errors.InvalidArgumentError) and "Cannot assign a device" in message:
            if "kernel" in message:
                return TensorFlowRunError(f"{what} has no kernel for {where}: {brief}")
            assigned = _ASSIGNED_TO.search(message)
            return TensorFlowRunError(f"device {self._label(assigned[1]) if assigned else where} is not available "
                                      f"({what} was placed there): {brief}")
        return TensorFlowRunError(f"{what} on {where} failed: {type(err).__name__}: {brief}")

    def _known(self, node: str | None) -> str | None:
        """The op ``node`` names: where TensorFlow names an op of an inlined call as it was in the call
        (``gradients/...`` for ``PartitionedCall/gradients/...``), the one op of the graph that is ``node`` under a
        call's scope (not an op of a loop's body that shares a name's end with another op)."""
        if node is None or node in self.homes or node in self.initialises or node in self.holding:
            return node
        inlined = [name for name in self.homes
                   if name.endswith(f"/{node}") and _CALL_SCOPE.search(name.removesuffix(f"/{node}"))]
        return inlined[0] if len(inlined) == 1 else node

    def _what(self, node: str | None) -> str:
        if node in self.initialises:
            return f"initialising variable {self.initialises[node]!r}"
        if node in self.homes:
            return f"op {node!r} ({self.graph.get_operation_by_name(node).type})"
        return "the step"

    def _where(self, node: str | None, message: str) -> str:
        node = self.initialises.get(node, node)
        if node in self.homes:
            return self.labels[self.homes[node]]
        named = _TF_DEVICE.search(message)
        return self._label(f"/device:{named[1]}") if named else "an unknown device"

    def _label(self, device: str) -> str:
        """The cluster label of a TensorFlow device (``/device:GPU:0``), or the device itself."""
        return next((label for label in self.labels.values() if label.endswith(f"({device})")), device)


def _options(tf: Any, deadline: float) -> Any:
    """Run options timing out at ``deadline`` (``perf_counter`` seconds; ``inf``: none)."""
    if not math.isfinite(deadline):
        return tf.compat.v1.RunOptions()
    left_ms = max(1, int((deadline - time.perf_counter()) * 1000))
    return tf.compat.v1.RunOptions(timeout_in_ms=left_ms)


def _initializers(
    tf: Any, graph: Any, cache: dict[str, np.ndarray], skip: frozenset[str] = frozenset(),
) -> tuple[list[Any], dict[Any, np.ndarray], dict[str, str]]:
    """An assignment per variable (but those named in ``skip``: the ops holding inputs), on the variable's device,
    fed its value (read into ``cache`` by :func:`_read_variables`) or a generated one; added op name -> variable."""
    ops, feeds, owners = [], {}, {}
    variables = [op for op in graph.get_operations() if op.type in _VARIABLE_OPS and op.name not in skip]
    for op in variables:
        dtype, shape = tf.dtypes.as_dtype(op.get_attr("dtype")), tf.TensorShape(op.get_attr("shape"))
        with tf.device(op.device), tf.name_scope("gplace_init"):
            value = tf.compat.v1.placeholder(dtype, shape)
            if _VARIABLE_OPS[op.type] == "Assign":
                assign = tf.raw_ops.Assign(ref=op.outputs[0], value=value).op
            else:
                assign = tf.raw_ops.AssignVariableOp(resource=op.outputs[0], value=value)
        ops.append(assign)
        feeds[value] = _variable_value(cache, op.name, dtype, shape)
        owners[assign.name] = owners[value.op.name] = op.name
    return ops, feeds, owners


def _read_variables(cache: dict[str, np.ndarray], source: Any) -> None:
    """Put the values of the source's variables (node name -> value) in ``cache``, once per source."""
    missing = [name for name in source.variables if name not in cache]
    if missing:
        try:
            cache.update(source.variable_values(missing))
        except UnsupportedGraphError as err:  # eager execution off, no session holding them
            raise TensorFlowRunError(str(err)) from None


def _variable_value(cache: dict[str, np.ndarray], name: str, dtype: Any, shape: Any) -> np.ndarray:
    """The variable's own value where it has the node's dtype and a shape the node allows, else a generated one."""
    value = cache.get(name)
    if value is not None and (value.dtype != dtype.as_numpy_dtype or not shape.is_compatible_with(value.shape)):
        del cache[name]
    return _generated(cache, name, dtype, shape)


def _generated(cache: dict[str, np.ndarray], name: str, dtype: Any, shape: Any) -> np.ndarray:
    """A value for ``name`` (see the module docstring), made once per source."""
    if name not in cache:
        if not shape.is_fully_defined():
            raise TensorFlowRunError(
                f"input {name!r} has shape {shape}: import with batch_size, or pass a value in feeds"
            )
        dims = tuple(int(d) for d in shape)
        if dtype.is_floating or dtype.is_complex:
            rng = np.random.default_rng(zlib.crc32(name.encode()))
            cache[name] = rng.random(dims).astype(dtype.as_numpy_dtype)
        elif dtype.base_dtype.name == "string":
            cache[name] = np.full(dims, b"", dtype=object)
        else:
            cache[name] = np.zeros(dims, dtype=dtype.as_numpy_dtype)
    return cache[name]


def _sinks(graph: Any, nodes: Mapping[str, int], fed: set[str]) -> list[Any]:
    """The GraphDef's nodes that no op reads (through data or control), placeholders not fed left out."""
    ops = graph.get_operations()
    read = {t.op.name for op in ops for t in op.inputs} | {dep.name for op in ops for dep in op.control_inputs}
    return [op for op in ops if op.name in nodes and op.name not in read
            and (op.type not in ("Placeholder", "PlaceholderWithDefault") or op.name in fed)]


def _bytes_moved(graph: Any, homes: Mapping[str, int], aliases: Mapping[str, str] | None = None) -> int:
    """Bytes of the tensors read on another cluster device, once per (tensor, destination device), each sized as
    the importer sizes it (:func:`~gplace.importers.tensorflow.builder.tensor_bytes`: a string element 8 bytes, a
    ``TensorList`` its capacity); ``aliases``: tensor read in place of an input (a held input's read) -> the input's
    name, counted as the input."""
    from gplace.importers.tensorflow.builder import tensor_bytes

    sent: set[tuple[str, int]] = set()
    for op in graph.get_operations():
        dst = homes.get(op.name)
        for t in op.inputs:
            if aliases and t.name in aliases:
                t = graph.get_tensor_by_name(aliases[t.name])
            src = homes.get(t.op.name)
            if dst is not None and src is not None and src != dst:
                sent.add((t.name, dst))
    if not sent:
        return 0
    import tensorflow as tf

    sizes = tensor_bytes(tf, graph, {name for name, _ in sent})
    return sum(sizes.get(name, 0) for name, _ in sent)


def _failed_node(err: Any) -> str | None:
    op = getattr(err, "op", None)
    if op is not None:
        return op.name
    match = _NODE_IN_MESSAGE.search(str(err))
    return (match[1] or match[2]) if match else None


def _first_line(err: BaseException) -> str:
    """TensorFlow's first error line, without its preamble, error count and root-error numbering."""
    lines = [line.strip() for line in str(getattr(err, "message", err)).splitlines() if line.strip()]
    skip = ("Graph execution error", "Detected at node", "Node:", "[[")
    useful = [_ROOT_ERROR.sub("", line) for line in lines
              if not line.startswith(skip) and not _ERROR_COUNT.match(line)]
    return (useful or lines or [type(err).__name__])[0]


def _gpu_devices(devices: Mapping[int, str]) -> frozenset[str]:
    """The TensorFlow GPU devices among ``devices`` (cluster device -> TensorFlow device)."""
    return frozenset(dev for dev in devices.values() if _device_index(dev)[0] == "GPU")


def _own_gpus(devices: Mapping[int, str]) -> dict[int, str] | None:
    """Cluster device -> TensorFlow's name of its GPU (``"GPU:1"``) when every device in use is a GPU of its own."""
    kinds = [_device_index(d) for d in devices.values()]
    if any(kind != "GPU" for kind, _ in kinds) or len(set(kinds)) < len(kinds):
        return None
    return {d: f"GPU:{_device_index(dev)[1]}" for d, dev in devices.items()}


def _reset_gpu_peaks(tf: Any, gpus: Mapping[int, str] | None) -> None:
    for name in (gpus or {}).values():
        try:
            tf.config.experimental.reset_memory_stats(name)
        except (ValueError, RuntimeError):  # an allocator without statistics: no peak is reported
            return


def _gpu_peaks(tf: Any, gpus: Mapping[int, str] | None, num_devices: int) -> np.ndarray | None:
    """(D,) peak bytes of each GPU's allocator since the last reset (after warm-up; TensorFlow's allocator is
    shared by the process, so what else runs on the GPU counts too), or ``None``."""
    if not gpus:
        return None
    peaks = np.zeros(num_devices, dtype=np.int64)
    try:
        for d, name in gpus.items():
            peaks[d] = tf.config.experimental.get_memory_info(name)["peak"]
    except (ValueError, RuntimeError):
        return None
    return peaks


def _step_statistics(times: Sequence[float]) -> tuple[float, float]:
    """Median step time and spread ``(max - min) / median`` of timed steps."""
    median = statistics.median(times)
    spread = (max(times) - min(times)) / median if median > 0 else 0.0
    return float(median), float(spread) if math.isfinite(spread) else 0.0


def as_placed(config: Any) -> Any:
    """``config`` (a ``tf.compat.v1.ConfigProto``) set to run a graph as placed, as tf-v1 measures it: no graph
    rewriting (Grappler, whose remapper fuses ops across devices; constant folding, common subexpressions, XLA
    auto-clustering whatever ``TF_XLA_FLAGS``) and each GPU's memory taken as it is needed (``allow_growth``)."""
    import tensorflow as tf

    config.graph_options.rewrite_options.disable_meta_optimizer = True
    optimizer = config.graph_options.optimizer_options
    optimizer.opt_level = tf.compat.v1.OptimizerOptions.L0
    optimizer.do_constant_folding = optimizer.do_common_subexpression_elimination = False
    optimizer.global_jit_level = tf.compat.v1.OptimizerOptions.OFF
    config.gpu_options.allow_growth = True
    return config


def _unrunnable(graph: OpGraph) -> str | None:
    """Why tf-v1 cannot run ``graph`` at all (no TensorFlow program, or captured resources it cannot create), or
    ``None``."""
    from gplace.importers.tensorflow import TensorFlowSource

    if not isinstance(graph.source, TensorFlowSource):
        return (f"graph {graph.name!r} has no TensorFlow program to run (its source is "
                f"{type(graph.source).__name__}); TensorFlowRuntime runs graphs imported by "
                "gplace.importers.tensorflow.from_tensorflow (a Keras zoo graph loaded from the zoo's cache has none: "
                "build it with cache=False, graph.cache=false on the command line; the command line's analytic zoo "
                "graphs, graph=lstm_lm, rnnlm, nmt, gnmt and transformer_xl, have no program at all: measure them "
                "with the simulator)")
    if graph.source.resources:
        names = ", ".join(repr(r) for r in graph.source.resources[:5])
        return (f"graph {graph.name!r} reads captured resource(s) ({names}: lookup tables, or the variables of a "
                "function graph's GraphDef, whose values it does not hold), which its GraphDef does not create; "
                "tf-v1 cannot run it (import the tf.function, SavedModel or Keras model itself, or place it with the "
                "simulator)")
    return None
