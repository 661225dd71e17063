"""Turning an imported ``tf.Graph`` into op and edge records: tensor shapes and bytes, variables, costs (control
flow's from its functions), CPU-only ops, colocation groups and edges."""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gplace.costmodel import TensorSpec, op_work, peak_held, roofline_costs
from gplace.importers.tensorflow.costs import COST_NAMES, cost_attrs, tf_flops
from gplace.importers.tensorflow.errors import wrap_errors
from gplace.importers.tensorflow.functions import reset
from gplace.importers.tensorflow.op_types import CPU_ONLY_OPS, FREE_OPS, FUNCTIONAL_CONTROL_FLOW, VARIABLE_OPS
from gplace.ir import Edge, Op, UnsupportedGraphError

logger = logging.getLogger(__name__)


_ALIAS_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable", "Const", "HostConst", "ReadVariableOp"})
"""Ops whose outputs alias resident (persistent) memory: no ``output_bytes`` of their own."""
_VIEW_OPS = frozenset({"Identity", "IdentityN", "Reshape", "Squeeze", "ExpandDims", "StopGradient", "PreventGradient",
                       "EnsureShape"})
"""Ops whose outputs share their data inputs' buffers (TensorFlow forwards them): inside a control-flow
function they hold nothing of their own (:meth:`Builder._call_peak`)."""
_NO_TENSOR = ("resource", "variant")
_LIST_PASSING = frozenset({"Identity", "TensorListSetItem", "TensorListPushBack"})
"""Ops whose ``TensorList`` output is (a version of) their first input's list (bytes: the package docstring)."""
_STRING_BYTES = 8


def import_graph_def(tf: Any, graph_def: Any) -> Any:
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    return graph


_FOLDABLE = frozenset({
    "Const", "Identity", "Cast", "Add", "AddV2", "Sub", "Mul", "FloorDiv", "TruncateDiv", "Div", "RealDiv",
    "FloorMod", "Mod", "Maximum", "Minimum", "Neg", "Abs", "Sum", "Prod", "Max", "Min", "Pack", "ConcatV2",
    "Reshape", "Squeeze", "ExpandDims", "StridedSlice", "Slice", "GatherV2", "Select", "SelectV2", "Less",
    "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "Range", "Rank", "Shape", "Size",
})
"""Op types a ``While``'s trip count may be computed with for gplace to run it (:meth:`Builder._trip_count`)."""
_FOLD_ELEMENTS = 4096
"""Most elements any tensor of that computation may have, by its static shape."""


def _small(tensor: Any) -> bool:
    """Whether ``tensor``'s static shape is known and has at most :data:`_FOLD_ELEMENTS` elements."""
    return tensor.shape.is_fully_defined() and tensor.shape.num_elements() <= _FOLD_ELEMENTS


@dataclass(frozen=True)
class _Tensor:
    """One output of one op."""

    shape: tuple[int, ...] | None
    """Known dimensions, ``None`` where any dimension (or the rank) is unknown."""
    nbytes: int
    """Bytes it carries (0 for handles, variants and unknown shapes)."""
    kind: str
    """``"data"``, ``"resource"`` or ``"ref"``."""
    partial: tuple[int, ...] = ()
    """The dimensions with -1 where unknown (``()`` for an unknown rank)."""


class Builder:
    """Turns an imported ``tf.Graph`` into op and edge records (one pass over the ops)."""

    def __init__(self, tf: Any, graph: Any, graph_def: Any, where: str, batch_size: int | None = None,
                 at_batch: bool = False) -> None:
        self.tf = tf
        self.where = where
        self.batch_size, self.at_batch = batch_size, at_batch  # at_batch: Traced.at_batch
        self.ops = graph.get_operations()
        self.nodes = {n.name: n for n in graph_def.node}
        self.tensors: dict[str, _Tensor] = {}
        self.variables: dict[str, TensorSpec] = {}
        """Tensor name of a resource handle or reference -> the variable it points at."""
        self.readers: dict[str, list[str]] = defaultdict(list)
        self.list_capacity: dict[str, int] = {}
        """Tensor name of a ``TensorList`` -> the bytes it can hold, where known (the package docstring)."""
        self.gpu_kernel = _gpu_kernel_lookup()
        self.held: dict[str, int] = {}
        """Control-flow op name -> bytes its functions hold at once while it runs (its ``temporary_memory``)."""
        self.returned: frozenset[str] = frozenset()
        """Of a function's graph: the tensors it returns (not counted by :meth:`_call_peak`)."""
        self.graph, self.library = graph, graph_def.library

    def build(self) -> tuple[list[Op], list[Edge]]:
        for op in self.ops:
            self._add_outputs(op)
            for t in op.inputs:
                self.readers[t.name].append(op.name)
        groups = self._colocation()
        records = [self._op(op, groups.get(op.name)) for op in self.ops]
        self._warn_unknown()
        return records, self._edges()

    # -------------------------------------------------------------- tensors
    def _add_outputs(self, op: Any) -> None:
        recorded = self._recorded_shapes(op.name)
        variable = self._variable_spec(op) if op.type in VARIABLE_OPS else None
        for i, t in enumerate(op.outputs):
            dims = _merge_dims(t.shape, recorded[i] if i < len(recorded) else None)
            if op.type == "BroadcastGradientArgs" and dims == (-1,):
                dims = (max(s.shape[0] or 0 for s in op.inputs),)  # reduction axes: at most the shapes' rank
            kind = "resource" if t.dtype == self.tf.resource else "ref" if t.dtype != t.dtype.base_dtype else "data"
            self.tensors[t.name] = _tensor(dims, t.dtype, kind)
            if variable is not None:
                self.variables[t.name] = variable
            elif kind != "data":
                source = next((s.name for s in op.inputs if s.name in self.variables), None)
                if source is not None:
                    self.variables[t.name] = self.variables[source]
        if any(t.dtype == self.tf.variant for t in op.outputs):
            self._size_lists(op)
        if op.type == "TensorListStack":
            self._size_from_stack(op)

    def _size_lists(self, op: Any) -> None:
        """Bytes of ``op``'s ``TensorList`` outputs (the package docstring), from its inputs'."""
        capacity = self.list_capacity
        if op.type == "TensorListFromTensor":
            capacity[op.outputs[0].name] = self.tensors[op.inputs[0].name].nbytes
            self._set_bytes(op.outputs[0].name, capacity[op.outputs[0].name])
        elif op.type == "TensorListReserve":
            shape, count = (self.tf.get_static_value(t) for t in op.inputs[:2])
            if shape is not None and count is not None and min([*shape.reshape(-1).tolist(), int(count)]) >= 0:
                size = _itemsize(self.tf.dtypes.as_dtype(op.get_attr("element_dtype")))
                capacity[op.outputs[0].name] = int(count) * math.prod(shape.reshape(-1).tolist()) * size
        elif op.type in ("While", "StatelessWhile") or op.type in _LIST_PASSING:
            loop = op.type.endswith("While")
            pairs = zip(op.inputs, op.outputs, strict=False) if loop else [(op.inputs[0], op.outputs[0])]
            for src, out in pairs:
                if out.dtype != self.tf.variant:
                    continue
                if src.name in capacity:
                    capacity[out.name] = capacity[src.name]
                full = src.name in capacity and (loop or op.type == "Identity")
                self._set_bytes(out.name, capacity[src.name] if full else self.tensors[src.name].nbytes)

    def _size_from_stack(self, op: Any) -> None:
        """A ``While``'s list output of unknown capacity (a ``TensorArray`` of unknown ``element_shape``) that
        ``op``, a ``TensorListStack`` of known output shape, reads (directly or through ``Identity``) holds what
        the stack returns: every element, stacked."""
        stacked = self.tensors[op.outputs[0].name]
        t = op.inputs[0]
        while t.name not in self.list_capacity and stacked.shape is not None and not self.tensors[t.name].nbytes:
            if t.op.type not in ("Identity", "While", "StatelessWhile"):
                return
            self.list_capacity[t.name] = stacked.nbytes
            self._set_bytes(t.name, stacked.nbytes)
            if t.op.type != "Identity":
                return
            t = t.op.inputs[0]

    def _set_bytes(self, name: str, nbytes: int) -> None:
        self.tensors[name] = dataclasses.replace(self.tensors[name], nbytes=nbytes)

    def _recorded_shapes(self, name: str) -> list[Any]:
        node = self.nodes.get(name)
        if node is None or "_output_shapes" not in node.attr:
            return []
        return list(node.attr["_output_shapes"].list.shape)

    def _variable_spec(self, op: Any) -> TensorSpec:
        shape = self.tf.TensorShape(op.get_attr("shape"))
        if not shape.is_fully_defined():
            raise UnsupportedGraphError(
                f"{self.where}: node {op.name!r} ({op.type}): variable of unknown shape {shape}"
            )
        dtype = self.tf.dtypes.as_dtype(op.get_attr("dtype"))
        dims = tuple(int(d) for d in shape)
        return TensorSpec(dims, math.prod(dims) * _itemsize(dtype))

    def _value(self, name: str) -> TensorSpec:
        """What reading tensor ``name`` touches: the variable behind a handle, else the tensor itself."""
        if name in self.variables:
            return self.variables[name]
        t = self.tensors[name]
        return TensorSpec(t.shape or (), t.nbytes)

    # -------------------------------------------------------------- ops
    def _op(self, op: Any, group: str | None) -> Op:
        outputs = [self.tensors[t.name] for t in op.outputs]
        for i, t in enumerate(outputs):
            if t.shape is None and t.kind == "data" and self.readers.get(f"{op.name}:{i}"):
                self._unknown_shape(op, i, t)
        persistent = 0
        shapes = tuple(t.shape if t.shape is not None else t.partial or (-1,) for t in outputs)
        if op.type in VARIABLE_OPS:
            variable = self.variables[op.outputs[0].name]
            persistent, shapes = variable.nbytes, (variable.shape,)
        elif op.type in ("Const", "HostConst"):
            persistent = sum(t.nbytes for t in outputs)
        costs = self._kind_costs(op, outputs)
        return Op(
            op.name, op.type, None, costs, persistent_memory=persistent, temporary_memory=self.held.get(op.name, 0),
            output_bytes=0 if op.type in _ALIAS_OPS else sum(t.nbytes for t in outputs), output_shapes=shapes,
            colocation=group, pinned="cpu" if self._cpu_only(op) else None,
        )

    def _unknown_shape(self, op: Any, i: int, t: _Tensor) -> None:
        shown = "unknown rank" if not t.partial else str(list(t.partial))
        batch_only = t.partial and t.partial[0] < 0 and min(t.partial[1:], default=0) >= 0
        hint = self._batch_hint(op) if batch_only else ""
        raise UnsupportedGraphError(
            f"{self.where}: node {op.name!r} ({op.type}): output {i} has an unknown shape {shown}, read by "
            f"{self.readers[op.outputs[i].name][0]!r}{hint}"
        )

    def _batch_hint(self, op: Any) -> str:
        """What to do about ``op``'s unknown leading dimension: ``batch_size`` sets only ``Placeholder`` inputs."""
        if op.type == "Placeholder":
            return " (give batch_size)" if self.batch_size is None else ""
        given = f"batch_size={self.batch_size} is given, but " if self.batch_size is not None else ""
        if op.type.startswith("Placeholder") or not op.inputs:  # an input of another kind (PlaceholderWithDefault)
            return (f" ({given}batch_size sets only Placeholder inputs, not a {op.type}: feed the input through a "
                    "Placeholder, or give outputs= that do not need it)")
        if not self.at_batch and (op.type in FUNCTIONAL_CONTROL_FLOW or op.type.startswith("TensorList")):
            return (f" ({given}batch_size sets only Placeholder inputs; a {op.type} keeps the shapes it was traced "
                    "with (a SavedModel or GraphDef saved at an unknown batch), which batch_size does not rewrite: "
                    "import the Keras model or tf.function itself with batch_size, or save it at a fixed batch)")
        return (f" ({given}batch_size sets only Placeholder inputs; this {op.type}'s size depends on values known "
                "only at run time: import only what does not need it (outputs= for a GraphDef or tf.Graph; a "
                "function or Keras model: leave it out of what it returns)")

    def _kind_costs(self, op: Any, outputs: list[_Tensor]) -> dict[str, float]:
        """Roofline seconds per device kind; a tensor read twice (``x * x``) is read once, as the other
        importers count it. An op type :func:`tf_flops` counts gets those FLOPs through :func:`op_work`'s
        ``flops``, so the cost model's DEBUG log does not call it uncounted."""
        if op.type in FUNCTIONAL_CONTROL_FLOW:
            return self._control_flow_costs(op)
        if op.type in FREE_OPS or not (outputs or op.inputs):
            return {"gpu": 0.0, "cpu": 0.0}
        ins = [self._value(t.name) for t in op.inputs]
        distinct = [self._value(name) for name in dict.fromkeys(t.name for t in op.inputs)]
        outs = [TensorSpec(t.shape, t.nbytes) for t in outputs if t.shape is not None and t.kind == "data"]
        attrs = cost_attrs(self.nodes.get(op.name))
        flops = tf_flops(op.type, ins, outs, attrs)  # given to op_work, which then logs no "no FLOP rule" for it
        work = op_work(COST_NAMES.get(op.type, op.type), ins, outs, attrs, distinct, flops=flops)
        return roofline_costs(work.flops, work.nbytes)

    # -------------------------------------------------------------- control flow
    def _control_flow_costs(self, op: Any) -> dict[str, float]:
        """An ``If``'s or ``Case``'s dearer branch, or a ``While``'s condition and body times its trip count; what
        one call of its functions holds at once, the most of them, goes to :attr:`held`."""
        if op.type.endswith("While"):
            calls = [self._function_call(op.get_attr(key).name, list(op.inputs)) for key in ("cond", "body")]
            trips = self._trip_count(op)
            if trips is None:
                logger.warning("%s: node %r (%s): trip count unknown, its cost counts one pass", self.where, op.name,
                               op.type)
            self.held[op.name] = max(peak for _, peak in calls)
            return {kind: (trips or 1) * sum(c[kind] for c, _ in calls) for kind in calls[0][0]}
        names = ([f.name for f in op.get_attr("branches")] if op.type.endswith("Case")
                 else [op.get_attr("then_branch").name, op.get_attr("else_branch").name])
        branches = [self._function_call(name, list(op.inputs)[1:]) for name in names]
        self.held[op.name] = max(peak for _, peak in branches)
        return {kind: max(c[kind] for c, _ in branches) for kind in branches[0][0]}

    def _function_call(self, name: str, inputs: list[Any]) -> tuple[dict[str, float], int]:
        """Seconds per device kind of one call of function ``name`` on ``inputs``: its ops' costs, with the shapes
        TensorFlow infers from the inputs' (a variable handle passed in becomes that variable, so its reads have
        its shape); and the most bytes its ops' outputs hold at once, run in order (each until its last reader;
        what the function returns, its arguments and views not counted)."""
        from tensorflow.python.framework import function_def_to_graph

        fdef = next(f for f in self.library.function if f.signature.name == name)
        graph_def, flat = function_def_to_graph.function_def_to_graph_def(fdef, [t.shape for t in inputs])
        nodes = {n.name: n for n in graph_def.node}
        for arg, t in zip(fdef.signature.input_arg, inputs, strict=True):
            if t.op.type == "VarHandleOp":
                reset(nodes[arg.name], "VarHandleOp")
                for key in ("dtype", "shape"):
                    nodes[arg.name].attr[key].CopyFrom(t.op.node_def.attr[key])
                nodes[arg.name].attr["shared_name"].s = arg.name.encode()
        graph_def.library.CopyFrom(self.library)
        with wrap_errors(f"{self.where}: function {name!r} of a control-flow op could not be imported"):
            graph = import_graph_def(self.tf, graph_def)
        inner = Builder(self.tf, graph, graph_def, f"{self.where}: function {name!r}")
        inner.returned = frozenset(flat.get(t, t) for t in fdef.ret.values())
        for op in inner.ops:
            inner._add_outputs(op)
        total, unknown = {"gpu": 0.0, "cpu": 0.0}, 0
        for op in inner.ops:
            outputs = [inner.tensors[t.name] for t in op.outputs]
            if any(inner.tensors[t.name].shape is None and inner.tensors[t.name].kind == "data"
                   for t in [*op.inputs, *op.outputs]):
                unknown += 1
                continue
            for kind, seconds in inner._kind_costs(op, outputs).items():
                total[kind] += seconds
        if unknown:
            logger.warning("%s: function %r: %d op(s) with a shape unknown count 0 seconds", self.where, name,
                           unknown)
        return total, inner._call_peak()

    def _call_peak(self) -> int:
        """The most bytes this function graph's op outputs hold at once, its ops run in order (see
        :meth:`_function_call`); a nested control-flow op adds its own while it runs."""
        position = {op.name: i for i, op in enumerate(self.ops)}
        last = {t.name: position[op.name] for op in self.ops for t in op.inputs}
        returned = set(self.returned)
        for op in reversed(self.ops):  # a view keeps its input's buffer until its own last reader, or returns it
            if op.type in _VIEW_OPS:
                for t_in, t_out in zip(op.inputs, op.outputs, strict=False):
                    last[t_in.name] = max(last.get(t_in.name, 0), last.get(t_out.name, position[op.name]))
                    if t_out.name in returned:
                        returned.add(t_in.name)
        return peak_held([([] if op.type in (*_VIEW_OPS, *_ALIAS_OPS, "Placeholder") else [
            (self.tensors[t.name].nbytes, last.get(t.name, i)) for t in op.outputs if t.name not in returned],
            self.held.get(op.name, 0)) for i, op in enumerate(self.ops)])

    def _trip_count(self, op: Any) -> int | None:
        """A ``While``'s ``maximum_iterations`` (its second input, as ``tf.while_loop`` writes it) when only
        constants compute it, by small arithmetic (:data:`_FOLDABLE` ops on at most :data:`_FOLD_ELEMENTS` elements
        each: the graph is a stranger's, and a ``Fill`` or a ``While`` there ran as it was imported), and it is not
        -1 (no limit)."""
        if len(op.inputs) < 2 or op.inputs[1].dtype not in (self.tf.int32, self.tf.int64) or op.inputs[1].shape.rank:
            return None
        seen, stack = set(), [op.inputs[1].op]
        while stack:
            producer = stack.pop()
            if producer.name in seen:
                continue
            seen.add(producer.name)
            if producer.type not in _FOLDABLE or producer.op_def.is_stateful or not all(map(_small, producer.outputs)):
                return None
            stack += [t.op for t in producer.inputs]
        with self.tf.compat.v1.Session(graph=self.graph) as session:
            trips = int(session.run(op.inputs[1]))
        return trips if trips >= 0 else None

    def _cpu_only(self, op: Any) -> bool:
        if op.type in CPU_ONLY_OPS or op.type.endswith(("Dataset", "DatasetV2", "DatasetV3")):
            return True
        if any(t.dtype == self.tf.string for t in [*op.inputs, *op.outputs]):
            return True
        return self.gpu_kernel is not None and op.type not in FREE_OPS and not self.gpu_kernel(op.type)

    # -------------------------------------------------------------- colocation and edges
    def _colocation(self) -> dict[str, str]:
        """Op name -> group name for ops in a group of two or more (``_class`` and resource/ref readers)."""
        parent = {op.name: op.name for op in self.ops}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for op in self.ops:
            for other in self._colocated_with(op):
                if other in parent:
                    parent[find(op.name)] = find(other)
        members: dict[str, list[str]] = defaultdict(list)
        for op in self.ops:
            members[find(op.name)].append(op.name)
        types = {op.name: op.type for op in self.ops}
        groups = {}
        for names in members.values():
            if len(names) > 1:
                label = next((n for n in names if types[n] in VARIABLE_OPS), names[0])
                groups.update(dict.fromkeys(names, label))
        return groups

    def _colocated_with(self, op: Any) -> list[str]:
        node = self.nodes.get(op.name)
        names = []
        if node is not None and "_class" in node.attr:
            names = [s.decode().removeprefix("loc:@") for s in node.attr["_class"].list.s if s.startswith(b"loc:@")]
        names += [t.op.name for t in op.inputs if self.tensors[t.name].kind != "data"]
        return names

    def _edges(self) -> list[Edge]:
        nbytes: dict[tuple[str, str], int] = {}
        for op in self.ops:
            for t in dict.fromkeys(op.inputs):
                key = (t.op.name, op.name)
                nbytes[key] = nbytes.get(key, 0) + self.tensors[t.name].nbytes
            for dep in sorted(op.control_inputs, key=lambda d: d.name):  # TensorFlow's order varies by process
                nbytes.setdefault((dep.name, op.name), 0)
        return [Edge(src, dst, b) for (src, dst), b in nbytes.items() if src != dst]

    def _warn_unknown(self) -> None:
        unread = [name for name, t in self.tensors.items() if t.shape is None and t.kind == "data"]
        if unread:
            logger.warning("%s: %d output(s) of unknown shape that no op reads count 0 bytes: %s",
                           self.where, len(unread), ", ".join(unread[:5]))
        lists = [t.name for op in self.ops if op.type in ("While", "StatelessWhile") for t in op.outputs
                 if t.dtype == self.tf.variant and self.readers.get(t.name) and not self.tensors[t.name].nbytes]
        if lists:
            logger.warning("%s: %d loop output(s) holding a TensorList of unknown size (no constant element_shape "
                           "and num_elements, no stack of known shape reading it) count 0 bytes: %s", self.where,
                           len(lists), ", ".join(lists[:5]))


def tensor_bytes(tf: Any, graph: Any, names: Any = None) -> dict[str, int]:
    """Tensor name -> the bytes the importer gives it (its edges' bytes are these), for ``graph``'s tensors named
    in ``names`` (default: all): a string element 8 bytes, a ``TensorList`` its capacity where known (the package
    docstring), a handle or a tensor of unknown shape 0. tf-v1 counts its ``bytes_moved`` with it, so that it counts
    what sim-v1 counts from the graph's edges."""
    builder = Builder(tf, graph, graph.as_graph_def(), "tensor bytes")
    for op in builder.ops:
        builder._add_outputs(op)
    return {name: t.nbytes for name, t in builder.tensors.items() if names is None or name in names}


def _merge_dims(inferred: Any, recorded: Any) -> tuple[int, ...] | None:
    """Dimensions from shape inference, each unknown one filled from the recorded ``_output_shapes``."""
    dims = None if inferred.rank is None else [-1 if d is None else int(d) for d in inferred.as_list()]
    if recorded is not None and not recorded.unknown_rank:
        rec = [int(d.size) for d in recorded.dim]
        if dims is None:
            dims = rec
        elif len(rec) == len(dims):
            dims = [d if d >= 0 else r for d, r in zip(dims, rec, strict=True)]
    return None if dims is None else tuple(dims)


def _tensor(dims: tuple[int, ...] | None, dtype: Any, kind: str) -> _Tensor:
    if kind == "resource" or dtype.base_dtype.name in _NO_TENSOR:
        return _Tensor(dims if dims is not None and min(dims, default=0) >= 0 else (), 0, kind, dims or ())
    if dims is None or min(dims, default=0) < 0:
        return _Tensor(None, 0, kind, dims or ())
    return _Tensor(dims, math.prod(dims) * _itemsize(dtype), kind, dims)


def _itemsize(dtype: Any) -> int:
    base = dtype.base_dtype
    if base.name in _NO_TENSOR:
        return 0
    return _STRING_BYTES if base.name == "string" else int(base.size)


@functools.cache
def _gpu_kernel_lookup() -> Callable[[str], bool] | None:
    """Whether an op type has a GPU kernel, from TensorFlow's kernel registry; ``None`` on a CPU-only build."""
    from tensorflow.python.framework import kernels

    def has_gpu(op_type: str) -> bool:
        try:
            return any(k.device_type == "GPU" for k in kernels.get_registered_kernels_for_op(op_type).kernel)
        except Exception:  # an op type the registry does not know: assume it has one
            return True

    return functools.cache(has_gpu) if has_gpu("MatMul") else None
