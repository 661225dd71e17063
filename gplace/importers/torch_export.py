"""Import a PyTorch program, through ``torch.export``, into gplace's op graph.

``torch`` is imported only inside the functions of this module.

How a program maps onto the IR:

- **One op per FX node** that computes something (``call_function``), named after the node, with the ATen
  target as its type (e.g. ``"aten.linear.default"``). ``operator.getitem`` nodes, which only pick one result
  of a multi-output op, are not ops: their readers get an edge from the op that produced the tuple.
- **Shapes and bytes** come from the ``FakeTensor`` in each node's ``meta["val"]``; a symbolic dimension takes
  its example (hint) value; non-tensor values (``SymInt``, Python scalars) count 8 bytes. A sparse tensor (COO,
  CSR, CSC, BSR, BSC) has its dense shape and holds its values and indices, as the ONNX importer sizes a sparse
  initializer; a fake tensor does not know its number of non-zeros, so an inference program with a sparse value
  is run once on its example inputs (as for ``while_loop`` trip counts) to size its top-level nodes' sparse
  results; where that cannot be done (a training graph, no example inputs, a failed run) they count their dense
  size, an upper bound, with a warning naming them. A view or an in-place op is charged its result's bytes as
  if it were a fresh tensor (an upper bound: see ``docs/format.md``).
- **User inputs** become ``"Input"`` ops (cost 0). **Parameters, buffers and constants** are persistent
  memory: one read by a single op is folded into that op's ``persistent_memory``; one read by several ops (or
  by none) becomes a ``"Parameter"`` op (cost 0) holding it once, as its ``persistent_memory`` with
  ``output_bytes`` 0, with an edge carrying the tensor's bytes to every reader (a reader on another device
  still pays for moving it).
- **In-place ops** (``torch.export`` keeps ``aten.add_``, ``fill_``, ``copy_``, ``index_put_``, ``relu_``, ...):
  an alias analysis in node order gives each value its *bases*, the nodes that allocated the storage it may alias
  (a view, an in-place op returning its argument, or a ``.to()`` that changes nothing, has the argument's; a
  ``.to()`` that converts is a copy; ``getitem`` its tuple's; a higher-order op's results any of its inputs'),
  and each node the bases it writes (arguments its schema marks ``alias_info.is_write``; what a higher-order op's
  subgraphs write). Per base, a node reading it gets a 0-byte
  edge from its last writer, and a node writing it one from every reader since that write and from that writer,
  where no data edge runs already: placers, simulators, runtimes and exporters keep them in program order. A
  write placed on another device writes a moved copy, so a written base gets a colocation group (its producer,
  its views, its writers) only where that copy would be missed: the base is state or an input (a buffer, a
  mutated argument), or a node after a write reads it through an alias whose lineage does not pass through that
  writer (the tensor written or a view made from it, not the writer's result; a higher-order op's result
  derives from all its inputs). Where every later read goes through the writer's result (``ReLU(inplace=True)``,
  ``out += identity``, ``x += f(x)``), the readers read the copy and the ordering edges suffice. A group is named
  after a group one of its ops was in already (a tied parameter's), which it absorbs, else after its first op.
  A graph without in-place writes gets neither.
- **Module paths**: the innermost entry of ``meta["nn_module_stack"]`` gives each op its owning module
  (``""`` is the root). In a training graph, backward ops have no stack of their own and inherit the path of
  the forward op with the same autograd sequence number (``meta["seq_nr"]``); ``Parameter`` ops take the
  module that owns the tensor. The mapping is kept in :class:`TorchSource`, the graph's ``source``, with each
  op's whole stack (``module_calls``: which call of which module it runs in, from the outermost).
- **Costs**: ``kind_cost`` from :mod:`gplace.costmodel` (roofline on the reference GPU and CPU). A ``.to()``
  that returns its input (same dtype, device, layout and memory format, no ``copy=True``: inference programs
  keep them as ``aten.to.*``) costs 0 with ``output_bytes`` 0, as does ``torch.export``'s
  ``_assert_tensor_metadata`` check; a converting ``.to()`` (and ``_to_copy``) is a copy.
- **Training** (``training=True``): the module is exported in training mode, then the joint
  forward+backward graph is traced with ``torch._functorch.aot_autograd.aot_export_joint_with_descriptors``.
  Its extra inputs are the tangents (the gradient of each output), its extra outputs the gradients of the
  parameters; the optimiser update is not included. Each op gets its ``phase`` from the node's
  ``meta["partitioner_tag"]`` (``is_forward`` / ``is_backward``) and a backward op's ``grad_of`` is the first
  forward op with its autograd sequence number (``meta["seq_nr"]``). A tangent is a backward ``Input`` op fed
  by the op producing the output it is the gradient of (paired by the graph's descriptors), the edge carrying
  that output's bytes: the loss reads the output to make it. (Until 2026-12-05 it had no phase and no input,
  so ``pipe-v2`` under 1F1B ran a micro-batch's backward ops from ``t = 0``, before its forward output.) Both
  traces record autograd whatever the caller's mode (``torch.no_grad()``, ``torch.inference_mode()``).
- **Control flow**: ``torch.cond`` and ``torch.while_loop`` are one op each, placed as a unit (their subgraphs
  run where they run, nested control flow included), reading their operands (parameters a branch uses are
  operands too, folded like any other read); the cost is a ``cond``'s dearer branch, or a ``while_loop``'s
  condition and body times the passes it makes on the example inputs (an inference program's top-level loops,
  counted by running the program once on them; else one pass, with a warning naming the program and saying
  why: the trip count depends on the data, or the loop is nested in the named top-level node and not counted).
  While it runs, such an op holds what its subgraphs' intermediates take at once, run in node order (a
  ``cond``'s dearer branch, the larger of a loop's condition and body), as ``temporary_memory``.
  A ``torch.no_grad()`` or ``torch.autocast`` block inside ``forward`` (``wrap_with_set_grad_enabled``,
  ``wrap_with_autocast``) is one op costing one pass of its subgraph. Other higher-order operators are not
  handled.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import logging
import math
import numbers
import operator
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gplace.costmodel import TensorSpec, canonical_op_type, op_kind_costs, peak_held
from gplace.ir import Edge, GraphError, Op, OpGraph, UnsupportedGraphError
from gplace.ir.errors import check_flags, error_summary
from gplace.torch_modes import gradients_on, tracing
from gplace.zoo import roofline

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    import torch
    from torch.export import ExportedProgram

_STATE_KINDS = frozenset({"PARAMETER", "BUFFER", "CONSTANT_TENSOR"})
"""Input kinds of an ``ExportedProgram`` signature that hold persistent state."""

_STATE_DESCRIPTORS = frozenset({"ParamAOTInput", "BufferAOTInput"})
"""Placeholder descriptors of a joint graph that hold persistent state."""

_PHASES = {"is_forward": "forward", "is_backward": "backward"}
"""``meta["partitioner_tag"]`` of a joint graph's node -> the op's phase."""

_SCALAR = TensorSpec((), 8)
"""A non-tensor value (``SymInt``, ``float``, ...) read by an op."""

_USER_CALL = "The following call raised this error:"
"""What precedes, in a ``torch.export`` error, the line of the user's code that raised it."""


@dataclass(frozen=True)
class TorchSource:
    """The graph's ``source`` handle: the traced program and the module that owns each op."""

    program: Any = field(repr=False)
    """The ``ExportedProgram`` (inference) or the joint forward+backward ``torch.fx.GraphModule`` (training)."""
    module_paths: Mapping[str, str]
    """Op name -> path of its owning module (``""`` for the root); ops of no module (inputs) are absent."""
    training: bool
    """Whether the graph is a joint forward+backward graph."""
    values: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """Placeholder name -> the real value of a joint graph's parameters, buffers and example inputs (an
    ``ExportedProgram`` holds its own), so that torch-v1 runs the model's numbers, not made-up ones."""
    module_calls: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict, repr=False)
    """Op name -> the module calls it runs in, outermost (the root) first: ``(module path, call)`` per entry of
    its ``nn_module_stack``, the call being the stack's key, which tells two calls of one module apart
    (``L__self__l``, then ``L__self__l@1``). A backward op has its forward op's; ``Parameter`` ops and ops of
    no module are absent. Only modules called appear: a container such as ``nn.ModuleList`` never does."""

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle an ``ExportedProgram`` as ``torch.export.save``'s bytes (torch cannot unpickle one pickled as it
        is). A joint graph's ``GraphModule`` is left out, with a warning: pickled, it comes back with other node
        names and without their metadata (and a fresh process may fail to load it), so the copy of the graph has no
        ``source`` (it places and simulates; torch-v1 and the write-back say it holds no program).
        ``copy.deepcopy`` keeps it."""
        import torch

        fields = (self.module_paths, self.training, self.values, self.module_calls)
        if not isinstance(self.program, torch.export.ExportedProgram):
            logger.warning("a torch joint (training) graph's program is left out when pickled (an FX GraphModule "
                           "loses its node names and metadata): the copy places and simulates but cannot run on "
                           "torch or be written back; copy.deepcopy keeps it")
            return _no_source, ()
        buffer = io.BytesIO()
        torch.export.save(self.program, buffer)
        return _saved_source, (buffer.getvalue(), *fields)

    def __deepcopy__(self, memo: dict[int, Any]) -> TorchSource:
        """A deep copy keeps a joint graph's ``GraphModule`` (its own deep copy keeps the node names)."""
        import torch

        if isinstance(self.program, torch.export.ExportedProgram):
            rebuild, args = self.__reduce__()
            return rebuild(*copy.deepcopy(args, memo))
        return TorchSource(*(copy.deepcopy(getattr(self, f.name), memo) for f in dataclasses.fields(self)))

    def __copy__(self) -> TorchSource:
        return self


def _no_source() -> None:
    """What a joint graph's :class:`TorchSource` unpickles as: none (see :meth:`TorchSource.__reduce__`)."""
    return None


def _saved_source(program: bytes, *fields: Any) -> TorchSource:
    """The :class:`TorchSource` pickled with its ``ExportedProgram`` as ``torch.export.save``'s bytes."""
    import torch

    return TorchSource(torch.export.load(io.BytesIO(program)), *fields)


def from_torch(
    module_or_exported_program: torch.nn.Module | ExportedProgram,
    example_inputs: Any = None,
    *,
    training: bool = False,
    name: str | None = None,
) -> OpGraph:
    """Import a PyTorch module or ``ExportedProgram`` as an op graph.

    Args:
        module_or_exported_program: an ``nn.Module`` (exported here, in eval or train mode according to
            ``training``, its modes restored afterwards) or an ``ExportedProgram`` (used as it is). An
            ``ExportedProgram.module()`` (alone or inside another module) keeps the mode it was exported in:
            torch fixed it in its graph.
        example_inputs: a tensor, a tuple or list of positional inputs, or a dict of keyword inputs. Needed
            for a module; for an ``ExportedProgram`` its own example inputs are the default, and given ones must
            be inputs it takes (checked as torch checks its inputs, and for dtype and layout); an inference graph
            is then the program at their sizes (a copy holding them as its example inputs where the sizes are
            its own, else ``program.module()`` exported again on them, its ``Dim``s kept), as a training graph
            is traced on them. (default: None)
        training: import the joint forward+backward graph instead of the forward one. (default: False)
        name: graph name. (default: the module's class name, with ``"_train"`` for a training graph)

    Returns:
        The op graph; its ``source`` is a :class:`TorchSource`.

    Raises:
        UnsupportedGraphError: the program cannot be exported or imported; the message names the node and the
            reason (a tracing failure, a control-flow operator, a data-dependent shape, ...), or a training graph
            of weights or inputs made under ``torch.inference_mode()`` (no backward can be traced).
        ValueError: a module (or, for ``training=True``, an ``ExportedProgram`` that holds none) given without
            ``example_inputs``; ``training`` is not ``True`` or ``False``.
        TypeError: ``example_inputs`` neither a tensor, a tuple or list, nor a dict of keyword inputs.
        ValueError: ``example_inputs`` given with an ``ExportedProgram`` that it would not take (another
            structure or keywords, a non-tensor for a tensor, another rank, dtype or layout, a size that is static
            and differs or outside its ``Dim``'s range), naming the input.
    """
    import torch

    check_flags("from_torch", training=training)  # np.bool_(True) or "no" failed inside nn.Module.train
    graph_name = name or _default_name(module_or_exported_program, training)
    values: dict[str, Any] = {}
    # a backward traced whatever the caller's mode; one trace at a time in the process (torch's tracers keep state)
    with tracing(), gradients_on() if training else contextlib.nullcontext():
        ep = _export(module_or_exported_program, example_inputs, training)
        if training:
            args, kwargs = _joint_inputs(ep, example_inputs)
            program = _joint_graph(ep, args, kwargs)
    if training:
        _warn_rnn_without_workspace(program, graph_name)
        state = _joint_state(program.graph)
        values = _joint_values(program.graph, ep, args, kwargs)
        tied = _tied(state, values)
    else:
        program, state = ep, _signature_state(ep)
        tensors = {**ep.state_dict, **ep.constants}
        tied = _tied(state, {name: tensors.get(fqn) for name, fqn in state.items()})
    graph_module = program if isinstance(program, torch.fx.GraphModule) else ep.graph_module
    trips, sparse = ({}, {}) if training else _example_run(ep)
    _warn_sparse_dense(graph_module, sparse, graph_name, training)
    try:
        builder = _FxBuilder(graph_module, state, trips, tied, graph_name, sparse)
        ops, edges, paths = builder.build()
        if training and not any(op.phase == "backward" for op in ops) and _requires_grad(ep, args, kwargs):
            raise UnsupportedGraphError(
                f"torch program {graph_name!r}: the training graph has no backward op, though weights or inputs "
                "require grad: autograd did not record its trace")
        source = TorchSource(program, paths, training, values, builder.calls)
        return OpGraph.from_ops(ops, edges, name=graph_name, source=source)
    except GraphError as err:
        if isinstance(err, UnsupportedGraphError):
            raise
        raise UnsupportedGraphError(f"torch program {graph_name!r}: {err}") from None


def from_module_shapes(module: torch.nn.Module, input_shapes: Any, *, dtype: str | torch.dtype = "float32",
                       training: bool = False, seed: int = 0, name: str | None = None,
                       align_to_modules: bool = False) -> OpGraph:
    """:func:`from_torch` on random inputs of the given shapes: the form a config (``graph=torch``) can give.

    Args:
        module: the ``nn.Module``.
        input_shapes: one shape per positional input, e.g. ``[[8, 3, 32, 32]]`` (``[]``: a 0-d tensor).
        dtype: their ``torch`` dtype or its name. (default: "float32")
        training: import the joint forward+backward graph. (default: False)
        seed: seed of the random inputs, a whole number (a numpy integer too). (default: 0)
        name: graph name. (default: as :func:`from_torch`)
        align_to_modules: colocate ops so that a pipeline split can only fall where a module begins
            (:func:`gplace.pipeline.stages.align_to_modules`). (default: False)

    Raises:
        ValueError: a shape is not a list of positive integers, or ``dtype`` is not a torch dtype or one without
            random inputs (quantized, bit and sub-byte dtypes; naming it); ``training`` or ``align_to_modules``
            is not ``True`` or ``False``; ``seed`` is not a whole number.
    """
    import torch

    check_flags("from_module_shapes", training=training, align_to_modules=align_to_modules)  # "no" was taken as true
    kind = dtype if isinstance(dtype, torch.dtype) else getattr(torch, dtype, None) if isinstance(dtype, str) else None
    if not isinstance(kind, torch.dtype):
        raise ValueError(f"dtype {dtype!r} is not a torch dtype (e.g. 'float32', 'int64')")
    # None, 1.5 or 2**64 failed inside torch's manual_seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not -2**63 <= seed < 2**64:
        raise ValueError(f"from_module_shapes: seed must be a 64-bit whole number, got {seed!r}")
    if not isinstance(input_shapes, Sequence) or not all(isinstance(s, Sequence) and not isinstance(s, str)
                                                         for s in input_shapes):
        raise ValueError(f"input_shapes must be one shape per positional input, e.g. [[8, 3, 32, 32]], got "
                         f"{input_shapes!r}")
    shapes = [list(s) for s in input_shapes]
    for k, shape in enumerate(shapes):
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):  # []: a 0-d input
            raise ValueError(f"input_shapes[{k}] must be a list of positive integers ([] for a 0-d tensor), got "
                             f"{shape!r}")
    graph = from_torch(module, _random_inputs(shapes, kind, int(seed)), training=training, name=name)
    if not align_to_modules:
        return graph
    from gplace.pipeline.stages import align_to_modules as aligned

    return aligned(graph)


def _random_inputs(shapes: list[list[int]], kind: torch.dtype, seed: int) -> tuple[torch.Tensor, ...]:
    """One random tensor of dtype ``kind`` per shape: normal values (floating and complex), else 0s and 1s.

    Raises:
        ValueError: torch makes no random tensor of ``kind`` (quantized, bit and sub-byte dtypes), naming it.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)
    name = str(kind).removeprefix("torch.")
    if name.startswith(("qint", "quint")):
        raise ValueError(f"dtype {name!r} is quantized: from_module_shapes makes no random inputs of it (pass "
                         "quantized example inputs to gplace.from_torch)")
    try:
        if kind.is_complex:
            return tuple(torch.randn(s, generator=generator, dtype=kind) for s in shapes)
        if kind.is_floating_point:
            return tuple(torch.randn(s, generator=generator).to(kind) for s in shapes)
        return tuple(torch.randint(0, 2, s, generator=generator, dtype=kind) for s in shapes)
    except (RuntimeError, NotImplementedError) as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ValueError(f"dtype {name!r}: torch makes no random inputs of it ({reason})") from None


# ---------------------------------------------------------------------- tracing
def example_args(example_inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` of example inputs given as a tensor, a tuple or list of positional inputs, or a dict of
    keyword inputs.

    Raises:
        TypeError: anything else, naming its type.
    """
    import torch

    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,), {}
    if isinstance(example_inputs, tuple | list):
        return tuple(example_inputs), {}
    if isinstance(example_inputs, Mapping):
        return (), dict(example_inputs)
    raise TypeError(f"example_inputs must be a tensor, a tuple/list or a dict, got {type(example_inputs).__name__}")


@contextlib.contextmanager
def _training_mode(module: torch.nn.Module, training: bool) -> Iterator[None]:
    """Put every submodule in train or eval mode, and restore each one's own mode afterwards."""
    modes = [(m, m.training) for m in module.modules()]
    try:
        _set_mode(module, training)
        yield
    finally:
        for m, mode in modes:
            m.training = mode


def _set_mode(module: torch.nn.Module, training: bool) -> None:
    """``module.train(training)``; where ``train()`` is not implemented (``ExportedProgram.module()``'s, whose mode
    torch fixed in its graph; a module holding one) only the flag is set, then each child's mode the same way."""
    try:
        module.train(training)
    except NotImplementedError:
        module.training = training
        for child in module.children():
            _set_mode(child, training)


def _export(obj: Any, example_inputs: Any, training: bool) -> ExportedProgram:
    import torch

    if isinstance(obj, torch.export.ExportedProgram):
        if example_inputs is None:
            return obj
        args, kwargs = example_args(example_inputs)
        _check_program_inputs(obj, args, kwargs)
        # a training graph is traced on them (_joint_inputs); an inference one is the program at their shapes
        return obj if training else _at_inputs(obj, args, kwargs)
    if not isinstance(obj, torch.nn.Module):
        raise TypeError(f"from_torch expects an nn.Module or an ExportedProgram, got {type(obj).__name__}")
    if example_inputs is None:
        raise ValueError(f"example_inputs are needed to export a module ({type(obj).__name__})")
    args, kwargs = example_args(example_inputs)
    if training:
        _check_not_inference(obj, args, kwargs)
    with _training_mode(obj, training):
        try:
            return torch.export.export(obj, args, kwargs)
        except Exception as err:  # torch raises UserError, Unsupported, GuardOnDataDependentSymNode, ...
            reason = _trace_failure(err)
            raise UnsupportedGraphError(f"torch.export could not trace {type(obj).__name__}: {reason}") from err


def _user_placeholders(ep: ExportedProgram) -> list[torch.fx.Node]:
    """The placeholders of ``ep``'s user inputs, in the order of its flattened ``(args, kwargs)``."""
    return [node for node, spec in zip(ep.graph.find_nodes(op="placeholder"), ep.graph_signature.input_specs,
                                       strict=True) if spec.kind.name == "USER_INPUT"]


def _program_kwargs(ep: ExportedProgram, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` in the order of ``ep``'s keyword inputs (its flattened inputs follow it).

    Raises:
        ValueError: other keywords than the program's.
    """
    in_spec = ep.call_spec.in_spec
    if in_spec is None or in_spec.num_children != 2 or in_spec.child(1).type is not dict:
        return kwargs
    expected = list(in_spec.child(1).context)
    if set(kwargs) != set(expected):
        raise ValueError(f"example_inputs do not match the ExportedProgram's inputs: keyword inputs "
                         f"{list(kwargs)}, the program takes {expected}")
    return {k: kwargs[k] for k in expected}


def _check_program_inputs(ep: ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse example inputs that ``ep`` would not take: another structure (number of inputs, keywords, nesting),
    a non-tensor where it takes a tensor, another rank, dtype or layout, a static size that differs, a size outside
    its ``Dim``'s range or breaking an equality between ``Dim``s (torch's own check of ``ExportedProgram`` inputs).

    Raises:
        ValueError: naming the input (its name in the program and its place in the inputs).
    """
    import torch
    from torch.utils import _pytree as pytree

    in_spec = ep.call_spec.in_spec
    kwargs = _program_kwargs(ep, kwargs)
    flat, spec = pytree.tree_flatten_with_path((args, kwargs))
    if in_spec is not None and spec != in_spec:
        raise ValueError(f"example_inputs do not match the ExportedProgram's inputs: their structure is "
                         f"{pytree.treespec_pprint(spec)}, the program takes {pytree.treespec_pprint(in_spec)}")
    placeholders = _user_placeholders(ep)
    for (path, given), node in zip(flat, placeholders, strict=True):
        traced = node.meta.get("val")
        where = f"example input {node.name!r} ({pytree.keystr(path)})"
        if not isinstance(traced, torch.Tensor):
            continue  # a constant input: torch's check below
        if not isinstance(given, torch.Tensor):
            raise ValueError(f"{where} must be a tensor like the program's ({traced.dtype}, {traced.dim()} "
                             f"dimensions), got {type(given).__name__}")
        for what, want, got in (("dimensions", traced.dim(), given.dim()), ("dtype", traced.dtype, given.dtype),
                                ("layout", traced.layout, given.layout)):
            if want != got:
                raise ValueError(f"{where} has {got} {what}, the program's has {want}" if what == "dimensions"
                                 else f"{where} has {what} {got}, the program's has {want}")
    try:
        ep._check_input_constraints(flat)
    except Exception as err:  # torch's RuntimeError, naming the input by its path
        raise ValueError(f"example_inputs do not match the ExportedProgram's inputs "
                         f"({', '.join(n.name for n in placeholders)}): {error_summary(err)}") from None


def _at_inputs(ep: ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ExportedProgram:
    """``ep`` with ``(args, kwargs)`` (checked by :func:`_check_program_inputs`) as its example inputs: a copy of it
    where their sizes are its own, else ``ep.module()`` exported again on them, each dimension that was a ``Dim``
    of ``ep`` one again (same range, the same ``Dim`` where ``ep`` had one symbol; ``Dim.AUTO`` for one derived from
    others); where that fails (a size torch's check accepts but the ``Dim`` cannot take), exported at their sizes.

    Raises:
        UnsupportedGraphError: ``ep.module()`` cannot be exported on them, with torch's reason.
    """
    import torch
    from torch.export import Dim, ShapesCollection
    from torch.utils import _pytree as pytree

    kwargs = _program_kwargs(ep, kwargs)
    leaves = pytree.tree_leaves((args, kwargs))
    placeholders = _user_placeholders(ep)
    if all(tuple(given.shape) == tuple(_dim(d, node) for d in node.meta["val"].shape)
           for given, node in zip(leaves, placeholders, strict=True) if isinstance(given, torch.Tensor)):
        same = copy.copy(ep)
        same.example_inputs = (tuple(args), dict(kwargs))
        return same
    dims: dict[Any, Any] = {}
    shapes = ShapesCollection()
    for given, node in zip(leaves, placeholders, strict=True):
        if not isinstance(given, torch.Tensor):
            continue
        dynamic = {}
        for k, d in enumerate(node.meta["val"].shape):
            expr = getattr(getattr(d, "node", None), "expr", None)
            if expr is None:
                continue
            if expr.is_Symbol and expr in ep.range_constraints:
                if expr not in dims:
                    span = ep.range_constraints[expr]
                    bounds = {"min": int(span.lower)} if span.lower.is_Integer else {}  # not torch's int_oo
                    bounds |= {"max": int(span.upper)} if span.upper.is_Integer else {}
                    dims[expr] = Dim(str(expr), **bounds)
                dynamic[k] = dims[expr]
            else:
                dynamic[k] = Dim.AUTO
        if dynamic:
            shapes[given] = dynamic
    module = ep.module()
    try:
        try:
            return torch.export.export(module, tuple(args), kwargs,
                                       dynamic_shapes=shapes.dynamic_shapes(module, tuple(args), kwargs))
        except Exception:  # the given sizes break a Dim (torch accepts a size 1 below a Dim's min of 2)
            return torch.export.export(module, tuple(args), kwargs)
    except Exception as err:
        raise UnsupportedGraphError(f"torch.export could not export the ExportedProgram again at the example "
                                    f"inputs' sizes: {_trace_failure(err)}") from err


def _check_not_inference(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse, naming the first, a weight or input made under ``torch.inference_mode()``: no backward traces."""
    import torch
    from torch.utils._pytree import tree_leaves

    named = [*module.named_parameters(), *module.named_buffers()]
    made = [f"weight {n!r}" for n, t in named if t.is_inference()] + [
        f"input {i}" for i, t in enumerate(tree_leaves((args, kwargs)))
        if isinstance(t, torch.Tensor) and t.is_inference()]
    if made:
        raise UnsupportedGraphError(
            f"the training graph of {type(module).__name__} cannot be traced: {made[0]} ({len(made)} in all) was "
            "made under torch.inference_mode(), and autograd cannot record through inference tensors; make the "
            "module and example inputs outside inference_mode (torch.no_grad() is fine)")


def _requires_grad(ep: ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a parameter of ``ep`` or an input requires grad: its joint graph must then have a backward."""
    import torch
    from torch.utils._pytree import tree_leaves

    params = [ep.state_dict.get(name) for name in ep.graph_signature.parameters]
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in [*params, *tree_leaves((args, kwargs))])


def _joint_inputs(ep: ExportedProgram, example_inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` a joint graph is traced with: ``example_inputs``, else the program's own."""
    if example_inputs is not None:
        args, kwargs = example_args(example_inputs)
    elif ep.example_inputs is not None:
        args, kwargs = ep.example_inputs
    else:
        raise ValueError("example_inputs are needed for the training graph of an ExportedProgram without them")
    return tuple(args), dict(kwargs or {})


def _joint_graph(ep: ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.fx.GraphModule:
    """The joint forward+backward graph of an exported program, traced with ``args`` and ``kwargs``."""
    try:
        from torch._functorch.aot_autograd import aot_export_joint_with_descriptors
    except ImportError:
        import torch

        raise UnsupportedGraphError(f"a training graph (training=True) needs torch >= 2.9 for its joint "
                                    f"forward+backward tracing; this is torch {torch.__version__}") from None
    try:
        with contextlib.ExitStack() as stack:
            joint = aot_export_joint_with_descriptors(stack, ep.module(), args, kwargs)
            return joint.graph_module
    except Exception as err:  # autograd tracing raises many kinds
        raise UnsupportedGraphError(f"joint forward+backward tracing failed: {_trace_failure(err)}") from err


def _warn_rnn_without_workspace(gm: torch.fx.GraphModule, name: str) -> None:
    """Warn where a joint graph's recurrent layers have no workspace for their backward: torch's CPU decomposition
    of ``aten.lstm`` traces ``mkldnn_rnn_layer`` with ``train=False`` (torch 2.13), so what eager training keeps
    for the backward is missing from the graph's memory and ``torch-v1`` cannot run the backward."""
    layers = [n.name for n in gm.graph.nodes if str(n.target) == "aten.mkldnn_rnn_layer.default"
              and isinstance(n.meta.get("val"), tuple | list) and len(n.meta["val"]) == 4
              and getattr(n.meta["val"][3], "numel", lambda: 1)() == 0]
    if layers:
        logger.warning("torch program %r: %d recurrent layer(s) traced for training without their backward "
                       "workspace (%s; torch's CPU decomposition of aten.lstm traces them for inference): the graph "
                       "undercounts their memory and torch-v1 cannot run their backward", name, len(layers),
                       ", ".join(layers[:5]))


def _trace_failure(err: Exception) -> str:
    """torch's tracing error on one line, cut to 400 characters, and the line of the user's code that raised it
    (which torch names at the end of a long message, after the cut), cut to 300."""
    summary = error_summary(err, limit=400)
    text = str(err)
    start = text.find(_USER_CALL)
    if start < 0:
        return summary
    call = error_summary(text[start + len(_USER_CALL):].strip().split("\n\n")[0], limit=300)
    return summary if call in summary else f"{summary} (raised by {call})"


def _signature_state(ep: ExportedProgram) -> dict[str, str]:
    """Placeholder name -> fully qualified name, for the parameters, buffers and constants of a program."""
    return {spec.arg.name: spec.target or spec.arg.name for spec in ep.graph_signature.input_specs
            if spec.kind.name in _STATE_KINDS}


def _joint_state(graph: torch.fx.Graph) -> dict[str, str]:
    """Placeholder name -> fully qualified name, for the parameters and buffers of a joint graph."""
    state = {}
    for node in graph.find_nodes(op="placeholder"):
        desc = node.meta.get("desc")
        if type(desc).__name__ in _STATE_DESCRIPTORS:
            state[node.name] = str(getattr(desc, "target", node.name))
    return state


def _joint_values(graph: torch.fx.Graph, ep: ExportedProgram, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> dict[str, Any]:
    """Placeholder name -> the real tensor of each parameter, buffer and example input (``args``, ``kwargs``: those
    the graph was traced with) of a joint graph whose shape and dtype match the traced ones (the rest, e.g. the
    loss's tangents, are left to be made up)."""
    import torch
    from torch.utils._pytree import tree_leaves

    leaves = tree_leaves((args, kwargs))
    state = {**ep.state_dict, **ep.constants}
    values = {}
    for node in graph.find_nodes(op="placeholder"):
        desc, traced = node.meta.get("desc"), node.meta.get("val")
        kind = type(desc).__name__
        if kind in _STATE_DESCRIPTORS:
            value = state.get(str(getattr(desc, "target", "")))
        elif kind == "PlainAOTInput" and 0 <= getattr(desc, "idx", -1) < len(leaves):
            value = leaves[desc.idx]
        else:
            continue
        if (isinstance(value, torch.Tensor) and isinstance(traced, torch.Tensor) and value.shape == traced.shape
                and value.dtype == traced.dtype):
            values[node.name] = value.detach()
    return values


def _tied(state: Mapping[str, str], tensors: Mapping[str, Any]) -> dict[str, str]:
    """State placeholder -> the first state placeholder holding the same memory (tied weights: an embedding and
    the output layer sharing one tensor), for every placeholder of such a set."""
    import torch

    first: dict[tuple, str] = {}
    tied: dict[str, str] = {}
    for name in state:
        t = tensors.get(name)
        if not isinstance(t, torch.Tensor) or t.device.type == "meta" or not t.untyped_storage().data_ptr():
            continue
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if key in first:
            tied[name] = tied[first[key]] = first[key]
        else:
            first[key] = name
    return tied


def _default_name(obj: Any, training: bool) -> str:
    base = type(obj).__name__
    return f"{base}_train" if training else base


# ---------------------------------------------------------------------- values
def _specs(node: torch.fx.Node, sparse: Mapping[str, list[int | None]] | None = None) -> list[TensorSpec | None]:
    """One spec per result of a node (a tuple result gives several; ``None`` for a missing result). A sparse result
    has its dense shape and the bytes ``sparse`` gives it (:func:`_example_run`), else its dense size."""
    import torch
    from torch.utils._pytree import tree_leaves

    val = node.meta.get("val")
    leaves = tree_leaves(val) if isinstance(val, list | tuple) else [val]
    real = (sparse or {}).get(node.name, [])
    specs: list[TensorSpec | None] = []
    for k, leaf in enumerate(leaves):
        if isinstance(leaf, torch.Tensor):
            shape = tuple(_dim(d, node) for d in leaf.shape)
            known = real[k] if k < len(real) and leaf.layout != torch.strided else None
            specs.append(TensorSpec(shape, math.prod(shape) * leaf.dtype.itemsize if known is None else known))
        elif isinstance(leaf, int | float | bool | torch.SymInt | torch.SymFloat | torch.SymBool):
            specs.append(_SCALAR)
        else:
            specs.append(None)  # no value (a missing gradient, an op with no result) or one gplace cannot size
    return specs


def _dim(d: Any, node: torch.fx.Node) -> int:
    if isinstance(d, int):
        return d
    hint = getattr(getattr(d, "node", None), "hint", None)
    if hint is None:
        raise UnsupportedGraphError(f"node {node.name!r} ({node.target}): dimension {d} is data-dependent")
    return int(hint)


def _total(specs: list[TensorSpec | None]) -> TensorSpec | None:
    if len(specs) == 1:
        return specs[0]
    known = [s for s in specs if s is not None]
    return TensorSpec((), sum(s.nbytes for s in known)) if known else None


def attribute_of(owner: torch.fx.GraphModule, node: torch.fx.Node) -> Any:
    """What a ``get_attr`` node of ``owner``'s graph names (a tensor, or a control-flow subgraph); ``None`` for
    other nodes."""
    if node.op != "get_attr":
        return None
    value: Any = owner
    for part in str(node.target).split("."):
        value = getattr(value, part, None)
    return value


def _control_flow_costs(node: torch.fx.Node, owner: torch.fx.GraphModule, trips: int | None = None,
                        graph: str = "", enclosing: torch.fx.Node | None = None) -> dict[str, float]:
    """A ``cond``'s dearer branch, or a ``while_loop``'s condition and body times ``trips`` (``None``: one pass,
    with a warning naming ``graph`` and the ``enclosing`` top-level node, if any; the condition is evaluated once
    more than the body, counted ``trips`` times too); the subgraphs are ``owner``'s."""
    import torch

    graphs = [attribute_of(owner, a) for a in node.args if isinstance(a, torch.fx.Node)]
    costs = [_subgraph_costs(g, graph, enclosing or node) for g in graphs if isinstance(g, torch.fx.GraphModule)]
    if _op_type(node.target) == "cond":
        return {kind: max(c[kind] for c in costs) for kind in costs[0]}
    if _op_type(node.target) in _WRAPPERS:
        return {kind: sum(c[kind] for c in costs) for kind in costs[0]}
    if trips is None:
        _warn_one_pass(node, graph, enclosing)
    return {kind: (1 if trips is None else trips) * sum(c[kind] for c in costs) for kind in costs[0]}


def _warn_one_pass(node: torch.fx.Node, graph: str, enclosing: torch.fx.Node | None) -> None:
    """Warn that the ``while_loop`` ``node`` costs one pass: nested in the top-level node ``enclosing`` (only
    top-level loops are counted), else because its passes could not be counted on example inputs."""
    where = f"torch program {graph!r}: " if graph else ""
    if enclosing is None:
        logger.warning("%snode %r (%s): its trip count depends on the data; its cost counts one pass", where,
                       node.name, node.target)
    else:
        logger.warning("%snode %r (%s), nested in top-level node %r (%s): its trip count is not counted; its cost "
                       "counts one pass", where, node.name, node.target, enclosing.name, enclosing.target)


def _example_run(ep: ExportedProgram) -> tuple[dict[str, int], dict[str, list[int | None]]]:
    """What one run of ``ep`` on its example inputs (without gradients) tells, where it has a top-level
    ``while_loop`` or a sparse value: node name -> the passes each top-level ``while_loop`` makes, and node name ->
    the bytes of each sparse result of a top-level node (:func:`sparse_nbytes`; ``None`` for a dense one). Both
    are empty where it has neither, or its example inputs are missing or fail to run (a warning)."""
    import torch

    gm = ep.graph_module
    loops = any(n.op == "call_function" and _op_type(n.target) == "while_loop" for n in gm.graph.nodes)
    if not loops and not any(_sparse_leaves(n) for n in gm.graph.nodes):
        return {}, {}
    values = exported_values(ep)
    placeholders = [n.name for n in gm.graph.find_nodes(op="placeholder")]
    if any(name not in values for name in placeholders):
        return {}, {}
    counting = _TripCounter(gm)
    try:
        with torch.no_grad():
            counting.run(*(values[name] for name in placeholders))
    except Exception as err:  # whatever the model raises: the loops count one pass, as without example inputs
        logger.warning("running the program on its example inputs failed (%s): each while_loop counts one pass, "
                       "each sparse value its dense size", error_summary(err))
        return {}, {}
    return counting.trips, counting.sparse


def _sparse_leaves(node: torch.fx.Node) -> bool:
    """Whether a result of ``node`` is a sparse tensor (``meta["val"]``)."""
    import torch
    from torch.utils._pytree import tree_leaves

    return any(isinstance(leaf, torch.Tensor) and leaf.layout != torch.strided
               for leaf in tree_leaves(node.meta.get("val")))


def sparse_nbytes(t: torch.Tensor) -> int | None:
    """The bytes a real sparse tensor holds: its values and indices (COO: ``values`` and ``indices``; CSR, CSC,
    BSR, BSC: ``values`` and the compressed and plain indices), as the ONNX importer sizes a sparse initializer;
    ``None`` for a dense tensor, or one whose parts cannot be read (a fake tensor's nnz is 0, unknown)."""
    import torch

    if not isinstance(t, torch.Tensor) or t.layout == torch.strided or isinstance(
            t, torch._subclasses.fake_tensor.FakeTensor):
        return None
    parts = {torch.sparse_coo: ("_values", "_indices"), torch.sparse_csr: ("values", "crow_indices", "col_indices"),
             torch.sparse_bsr: ("values", "crow_indices", "col_indices"),
             torch.sparse_csc: ("values", "ccol_indices", "row_indices"),
             torch.sparse_bsc: ("values", "ccol_indices", "row_indices")}.get(t.layout)
    if parts is None:
        return None
    try:
        return sum(getattr(t, part)().nbytes for part in parts)
    except (RuntimeError, NotImplementedError):
        return None


def _warn_sparse_dense(gm: torch.fx.GraphModule, sparse: Mapping[str, list[int | None]], graph: str,
                       training: bool) -> None:
    """Warn, naming the first nodes, that sparse values of unknown real size count their dense size: a fake tensor
    does not know its number of non-zeros, only a run on example inputs does (:func:`_example_run`)."""
    dense = [n.name for n in gm.graph.nodes if n.op != "output" and _sparse_leaves(n) and n.name not in sparse]
    if dense:
        why = ("a training graph is not run on example inputs" if training else
               "the run on the example inputs did not size them: it failed, or the inputs are missing")
        logger.warning("torch program %r: %d sparse value(s) count their dense size, an upper bound (their number "
                       "of non-zeros is known only from a run, and %s): %s", graph, len(dense), why,
                       ", ".join(dense[:5]))


def exported_values(ep: ExportedProgram) -> dict[str, Any]:
    """Placeholder name -> the program's state tensor or example input, where it holds a real one; buffers, and
    any input an op writes in place (:func:`written_inputs`), are copies, so that running the program (a counter,
    a batch norm's running statistics, a parameter or input updated in place) leaves the user's program and
    tensors as they were."""
    from torch.utils import _pytree as pytree

    values = {}
    written = written_inputs(ep.graph_module)
    for spec in ep.graph_signature.input_specs:
        if spec.kind.name in _STATE_KINDS:
            value = ep.state_dict.get(spec.target, ep.constants.get(spec.target))
            if value is not None:
                copy = spec.kind.name == "BUFFER" or spec.arg.name in written
                values[spec.arg.name] = value.detach().clone() if copy else value
    user = list(ep.graph_signature.user_inputs)
    leaves = pytree.tree_leaves(ep.example_inputs) if ep.example_inputs is not None else []
    if len(leaves) == len(user):
        values.update((name, _copied(leaf) if name in written else leaf)
                      for name, leaf in zip(user, leaves, strict=True))
    return values


def _copied(value: Any) -> Any:
    import torch

    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def written_inputs(gm: torch.fx.GraphModule) -> frozenset[str]:
    """Names of the placeholders and ``get_attr`` nodes of ``gm`` whose tensors some op writes in place
    (``aten.mul_``, ``aten.add_``, an ``out=`` argument): an argument its schema marks as written
    (``alias_info.is_write``), followed back through views and ``getitem`` to the inputs it aliases, ops inside
    higher-order-op subgraphs (``cond``, ``while_loop``, ``wrap_with_set_grad_enabled``) included. A value a
    higher-order op returns may alias any of its inputs."""
    aliases = _aliases(gm)
    sources = {n.name for n in gm.graph.nodes if n.op in ("placeholder", "get_attr")}
    return frozenset(b for written in aliases.writes.values() for b in written if b in sources)


@dataclass(frozen=True)
class _Aliases:
    """Which storage each node of a graph may alias, and which storage each node writes in place."""

    bases: Mapping[str, frozenset[str]]
    """Node name -> its bases: the names of the nodes that allocated the storage its value may alias (a
    placeholder, a ``get_attr`` or a call that allocates is its own base, a converting ``.to()`` too; a view,
    an in-place op returning an argument or a ``.to()`` that changes nothing (:func:`_to_result`) has that
    argument's; ``getitem`` its tuple's; a higher-order op's results may alias any input)."""
    writes: Mapping[str, frozenset[str]]
    """Node name -> the bases it writes in place (nodes that write none are absent)."""
    lineage: Mapping[str, frozenset[str]]
    """Node name -> the nodes its value derives from as an alias: itself, and where it aliases an argument (a
    view, an in-place op returning its argument, ``getitem``; a higher-order op: any input) that argument's
    lineage. A read through a value whose lineage holds a writer sees what that writer wrote."""


def _aliases(gm: torch.fx.GraphModule, tied: Mapping[str, str] | None = None) -> _Aliases:
    """The alias analysis of ``gm``'s nodes, in node order (:class:`_Aliases`): an ATen call's written arguments
    and aliased results come from its schema (``alias_info``: ``is_write``, and a result's ``before_set`` shared
    with an argument's); a higher-order op writes what its subgraphs write (:func:`_written_operands`). ``tied``:
    state placeholder -> the first placeholder holding the same tensor (:func:`_tied`), whose base it shares."""
    import torch
    from torch.utils import _pytree as pytree

    tied = tied or {}
    bases: dict[str, frozenset[str]] = {}
    writes: dict[str, frozenset[str]] = {}
    lineage: dict[str, frozenset[str]] = {}

    def of(value: Any, into: Mapping[str, frozenset[str]] = bases) -> set[str]:
        found: set[str] = set()
        for leaf in pytree.tree_leaves(value):
            if isinstance(leaf, torch.fx.Node):
                found |= into.get(leaf.name, frozenset())
        return found

    for node in gm.graph.nodes:
        if node.op in ("placeholder", "get_attr"):
            bases[node.name] = frozenset({tied.get(node.name, node.name)})
            lineage[node.name] = frozenset({node.name})
            continue
        if node.op != "call_function":
            continue
        target, own, written, aliased = node.target, {node.name}, set(), None
        if target is operator.getitem:
            own, aliased = of(node.args[0]), node.args[0]
        elif isinstance(target, torch._ops.OpOverload):
            arguments, returns = target._schema.arguments, target._schema.returns
            values = [node.args[i] if i < len(node.args) else node.kwargs.get(a.name) for i, a in enumerate(arguments)]
            for arg, value in zip(arguments, values, strict=True):
                if arg.alias_info is not None and arg.alias_info.is_write:
                    written |= of(value)
            sets = {s for r in returns if r.alias_info is not None for s in r.alias_info.before_set}
            aliased = [v for a, v in zip(arguments, values, strict=True)
                       if a.alias_info is not None and a.alias_info.before_set & sets]
            own = of(aliased)
            if any(r.alias_info is None for r in returns):  # a result of its own
                own.add(node.name)
            if _to_result(node) is False:  # a .to() that converts: a copy, not the alias its schema allows
                own, aliased = {node.name}, None
        elif isinstance(target, torch._ops.HigherOrderOperator):
            written = _written_operands(gm, node, of)
            aliased = (node.args, node.kwargs)
            own |= of(aliased)
        bases[node.name] = frozenset(own)
        lineage[node.name] = frozenset(of(aliased, lineage) | {node.name})
        if written:
            writes[node.name] = frozenset(written)
    return _Aliases(bases, writes, lineage)


def _shares_storage(node: torch.fx.Node) -> bool:
    """Whether every tensor ``node`` returns shares its storage with a tensor it reads, by their fake values: a
    schema's alias is a *may* alias (``reshape`` or ``contiguous`` of a non-contiguous tensor copies it)."""
    import torch
    from torch.utils import _pytree as pytree

    read = [d.meta.get("val") for d in node.all_input_nodes]
    read = [t for t in read if isinstance(t, torch.Tensor)]
    made = [t for t in pytree.tree_leaves(node.meta.get("val")) if isinstance(t, torch.Tensor)]
    return bool(made) and all(any(torch._C._is_alias_of(t, r) for r in read) for t in made)


def _hazards(gm: torch.fx.GraphModule, aliases: _Aliases) -> list[tuple[str, str]]:
    """``(earlier node, later node)`` pairs that must run in that order because of in-place writes, tracked per
    base in node order: a node reading a base (an argument aliasing it) follows the base's last writer; a node
    writing it follows every reader since that write, and the writer. ``getitem`` nodes read nothing (their
    readers do); a graph without in-place writes has none."""
    if not aliases.writes:
        return []
    last_writer: dict[str, str] = {}
    readers: dict[str, list[str]] = defaultdict(list)
    pairs: list[tuple[str, str]] = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        read = {b for n in node.all_input_nodes for b in aliases.bases.get(n.name, ())}
        for base in sorted(read):
            if last_writer.get(base, node.name) != node.name:
                pairs.append((last_writer[base], node.name))
            readers[base].append(node.name)
        for base in sorted(aliases.writes.get(node.name, ())):
            pairs.extend((r, node.name) for r in readers.pop(base, ()) if r != node.name)
            if last_writer.get(base, node.name) != node.name:
                pairs.append((last_writer[base], node.name))
            last_writer[base] = node.name
    return pairs


def _colocated_bases(gm: torch.fx.GraphModule, aliases: _Aliases) -> set[str]:
    """The written bases whose writes must stay on their tensor's device: a placeholder or ``get_attr`` (state, an
    input: the write must land in the real tensor), and a base some node (the output included) reads, after a
    write, through an argument whose lineage (:attr:`_Aliases.lineage`) does not hold the base's last writer (the
    tensor written, or a view of it made before the write). Where every later read goes through the writer's
    result, a write placed elsewhere writes a moved copy that the readers then read: no group is needed."""
    written = {b for bs in aliases.writes.values() for b in bs}
    grouped = written & {n.name for n in gm.graph.nodes if n.op in ("placeholder", "get_attr")}
    last_writer: dict[str, str] = {}
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "output") or node.target is operator.getitem:
            continue
        for arg in node.all_input_nodes:
            lineage = aliases.lineage.get(arg.name, frozenset())
            grouped.update(b for b in aliases.bases.get(arg.name, ())
                           if b in last_writer and last_writer[b] not in lineage)
        for base in aliases.writes.get(node.name, ()):
            last_writer[base] = node.name
    return grouped


def _written_operands(gm: torch.fx.GraphModule, node: torch.fx.Node, of: Any) -> set[str]:
    """The inputs of ``gm`` a higher-order op's subgraphs write: a subgraph's placeholders are the flat arguments
    after the last subgraph argument (``cond``'s operands, ``while_loop``'s carried and additional inputs,
    ``wrap_with_set_grad_enabled``'s arguments); where they do not line up, every input of the op."""
    import torch
    from torch.utils import _pytree as pytree

    last, subgraphs = -1, []
    for i, arg in enumerate(node.args):
        sub = getattr(gm, str(arg.target), None) if isinstance(arg, torch.fx.Node) and arg.op == "get_attr" else None
        if isinstance(sub, torch.fx.GraphModule):
            last, subgraphs = i, [*subgraphs, sub]
    operands = pytree.tree_leaves(node.args[last + 1:])
    written: set[str] = set()
    for sub in subgraphs:
        inner = written_inputs(sub)
        placeholders = list(sub.graph.find_nodes(op="placeholder"))
        if not inner.intersection(p.name for p in placeholders):
            continue
        if len(placeholders) != len(operands):
            return of((node.args, node.kwargs))
        written |= of([v for p, v in zip(placeholders, operands, strict=True) if p.name in inner])
    return written


class _TripCounter:
    """Runs a program's graph once (``torch.fx.Interpreter``), each top-level ``while_loop`` by hand, counting
    its passes in :attr:`trips`, and the bytes of each sparse result in :attr:`sparse`."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        import torch

        counter = self

        from torch.utils._pytree import tree_leaves

        class _Interpreter(torch.fx.Interpreter):
            def run_node(self, n: torch.fx.Node) -> Any:
                if n.op == "call_function" and _op_type(n.target) == "while_loop":
                    result = counter.loop(n.name, *self.fetch_args_kwargs_from_env(n)[0])
                else:
                    result = super().run_node(n)
                if _sparse_leaves(n):
                    counter.sparse[n.name] = [sparse_nbytes(leaf) for leaf in tree_leaves(result)]
                return result

        self.interpreter = _Interpreter(gm)
        self.trips: dict[str, int] = {}
        self.sparse: dict[str, list[int | None]] = {}
        """Node name -> the bytes of each of its results that is sparse (``None`` for a dense one)."""

    def run(self, *args: Any) -> Any:
        return self.interpreter.run(*args)

    def loop(self, name: str, cond_fn: Any, body_fn: Any, carried: Any, extra: Any = ()) -> tuple[Any, ...]:
        carried, passes = tuple(carried), 0
        while bool(cond_fn(*carried, *extra)):
            carried, passes = tuple(body_fn(*carried, *extra)), passes + 1
        self.trips[name] = passes
        return carried


def _control_flow_peak(node: torch.fx.Node, owner: torch.fx.GraphModule) -> int:
    """Bytes a higher-order op's subgraphs hold at once while it runs (its ``temporary_memory``): the largest
    :func:`_subgraph_peak` of its subgraphs (a ``cond`` runs one branch, a ``while_loop`` its condition and body
    one after the other); 0 for any other node."""
    import torch

    graphs = [attribute_of(owner, a) for a in node.args if isinstance(a, torch.fx.Node)]
    return max((_subgraph_peak(g) for g in graphs if isinstance(g, torch.fx.GraphModule)), default=0)


def _subgraph_peak(gm: torch.fx.GraphModule) -> int:
    """The most bytes a subgraph's intermediates hold at once, run in node order: a call's results from the call
    until its last reader there (a view's or a ``getitem``'s reader counts as its base's), a nested control-flow
    op's own peak while it runs; its operands and what it returns (the op's outputs) are not counted."""
    nodes = list(gm.graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    last = {read: i for i, n in enumerate(nodes) for read in n.all_input_nodes}
    returned = set(gm.graph.output_node().all_input_nodes)
    views = {n for n in nodes if n.op == "call_function" and (n.target is operator.getitem or _shares_storage(n))}
    for n in reversed(nodes):  # a view keeps what it aliases until its own last reader
        if n in views:
            for base in n.all_input_nodes:
                last[base] = max(last.get(base, position[base]), last.get(n, position[n]))
                if n in returned:
                    returned.add(base)
    steps = [([], 0) if n.op != "call_function" or n in views else
             ([(0 if n in returned else sum(s.nbytes for s in _specs(n) if s is not None), last.get(n, i))],
              _control_flow_peak(n, gm)) for i, n in enumerate(nodes)]
    return peak_held(steps)


def _subgraph_costs(gm: torch.fx.GraphModule, graph: str = "", enclosing: torch.fx.Node | None = None
                    ) -> dict[str, float]:
    """Summed seconds per device kind of the calls of a control-flow subgraph (shapes from ``meta["val"]``) of the
    top-level node ``enclosing`` of program ``graph`` (both named in warnings)."""
    import torch

    total = dict.fromkeys(roofline.REFERENCE, 0.0)
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        deps: list[torch.fx.Node] = []
        torch.fx.node.map_arg((node.args, node.kwargs), deps.append)
        specs = {d: s for d in deps if (s := _total(_specs(d))) is not None}
        inputs, outputs = [specs[d] for d in deps if d in specs], [s for s in _specs(node) if s is not None]
        for kind, seconds in _call_costs(node, gm, inputs, outputs, list(specs.values()), graph, enclosing).items():
            total[kind] += seconds
    return total


def _returns_input(node: torch.fx.Node) -> bool:
    """Whether ``node`` is an ATen ``.to()`` (``aten.to.*``) that returns its input itself (:func:`_to_result`).
    ``torch.export`` emits these in inference programs (a joint training graph drops them, and its
    ``_to_copy`` always copies); they cost nothing, like a view, and hold no bytes of their own."""
    return _to_result(node) is True


def _to_result(node: torch.fx.Node) -> bool | None:
    """For an ATen ``.to()`` (``aten.to.*``, whose schema says its result may alias its input): ``True`` where
    it returns its input (its result, ``meta["val"]``, has its input's dtype, device and layout, the input
    already has the memory format asked for, if any, and ``copy`` is not set), ``False`` where it makes a copy;
    ``None`` for other nodes and where the metadata does not tell."""
    import torch

    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or canonical_op_type(str(target)) != "to":
        return None
    bound = {a.name: node.args[i] if i < len(node.args) else node.kwargs.get(a.name, a.default_value)
             for i, a in enumerate(target._schema.arguments)}
    src = bound.get("self")
    before = src.meta.get("val") if isinstance(src, torch.fx.Node) else None
    after = node.meta.get("val")
    if not isinstance(before, torch.Tensor) or not isinstance(after, torch.Tensor):
        return None
    if bound.get("copy") or (after.dtype, after.device, after.layout) != (before.dtype, before.device, before.layout):
        return False
    fmt = bound.get("memory_format")
    return fmt in (None, torch.preserve_format) or bool(before.is_contiguous(memory_format=fmt))


def _call_costs(node: torch.fx.Node, owner: torch.fx.GraphModule, inputs: list[TensorSpec],
                outputs: list[TensorSpec], distinct: list[TensorSpec] | None = None, graph: str = "",
                enclosing: torch.fx.Node | None = None) -> dict[str, float]:
    """Seconds per device kind of one call: an ATen op's roofline (``inputs`` in argument order, a value read
    twice twice; ``distinct`` each once, for the traffic), or a control-flow operator's subgraphs
    (:func:`_control_flow_costs`; any other higher-order operator is refused, naming the node)."""
    import torch

    op_type = _op_type(node.target)
    if isinstance(node.target, torch._ops.HigherOrderOperator):
        if op_type not in _CONTROL_FLOW | _WRAPPERS:
            raise UnsupportedGraphError(f"node {node.name!r} ({node.target}): higher-order operator not handled "
                                        f"(handled: {', '.join(sorted(_CONTROL_FLOW | _WRAPPERS))})")
        return _control_flow_costs(node, owner, graph=graph, enclosing=enclosing)
    if _returns_input(node):
        return dict.fromkeys(roofline.REFERENCE, 0.0)
    attrs = _cost_attrs(canonical_op_type(op_type), node, outputs[0] if outputs else None)
    return op_kind_costs(op_type, inputs, outputs, attrs, distinct)


_CONTROL_FLOW = frozenset({"cond", "while_loop"})
"""The higher-order operators imported as one op (the module docstring)."""
_WRAPPERS = frozenset({"wrap_with_set_grad_enabled", "wrap_with_autocast"})
"""Higher-order operators that run their subgraph once under a setting (``torch.no_grad()``, ``torch.autocast``
inside ``forward``): one op costing one pass of it."""


def _op_type(target: Any) -> str:
    return str(target) if hasattr(target, "_schema") else getattr(target, "__name__", str(target))


def _cost_attrs(key: str, node: torch.fx.Node, out: TensorSpec | None) -> dict[str, Any]:
    """The attributes :func:`gplace.costmodel.op_flops` reads, from an ATen call's positional arguments."""
    args = node.args
    if key in ("convolution", "_convolution") and len(args) > 6:
        return {"transposed": bool(args[6])}
    if key == "convolution_backward" and len(args) > 7:
        mask = args[10] if len(args) > 10 else node.kwargs.get("output_mask")
        return {"transposed": bool(args[7]), **({"output_mask": [bool(m) for m in mask]} if mask else {})}
    at = 2 if key.endswith("_backward") else 1  # a backward's kernel_size follows grad_out and the input
    if "pool" in key and len(args) > at and isinstance(args[at], list | tuple) and out is not None:
        kernel = [int(k) for k in args[at]]
        spatial = max(len(out.shape) - 2, 1)
        return {"kernel_size": kernel * spatial if len(kernel) == 1 else kernel}
    if key == "batch_norm":
        return {"training": bool(args[5] if len(args) > 5 else node.kwargs.get("training"))}
    if key.rstrip("_") in ("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout") and len(args) > 2:
        return {"p": float(args[1]), "train": bool(args[2])}
    if key == "einsum" and args and isinstance(args[0], str):
        return {"equation": args[0]}
    if key == "_trilinear" and len(args) > 5:
        return {"expand": [[int(d) for d in dims] for dims in args[3:6]]}
    return {}


# ---------------------------------------------------------------------- graph building
class _FxBuilder:
    """Turns an FX graph with fake-tensor metadata into op and edge records (one pass over the nodes)."""

    def __init__(self, graph_module: torch.fx.GraphModule, state: Mapping[str, str],
                 trips: Mapping[str, int] | None = None, tied: Mapping[str, str] | None = None,
                 name: str = "", sparse: Mapping[str, list[int | None]] | None = None) -> None:
        self.gm = graph_module
        self.sparse = dict(sparse or {})
        """Node name -> the bytes of its sparse results on the example inputs (:func:`_example_run`)."""
        self.name = name
        """The graph's name, for warnings."""
        self.state = state
        self.tied = dict(tied or {})
        """State placeholder -> the first of the placeholders sharing its tensor (:func:`_tied`)."""
        self.trips = dict(trips or {})
        """``while_loop`` node name -> its passes on the example inputs (:func:`_example_run`)."""
        self.values: dict[str, tuple[str | None, TensorSpec | None]] = {}
        """FX node name -> (op producing it, or None for folded state; its spec)."""
        self.folded: dict[str, int] = {}
        """FX node name of folded state -> bytes."""
        self.ops: list[Op] = []
        self.paths: dict[str, str] = {}
        self.seq_paths: dict[int, str] = {}
        self.calls: dict[str, tuple[tuple[str, str], ...]] = {}
        """Op name -> its module calls (:attr:`TorchSource.module_calls`)."""
        self.seq_calls: dict[int, tuple[tuple[str, str], ...]] = {}
        self.seq_forward: dict[int, str] = {}
        """Autograd sequence number -> first forward op with it (the ``grad_of`` of its backward ops)."""
        self.edge_bytes: dict[tuple[str, str], int] = defaultdict(int)

    def build(self) -> tuple[list[Op], list[Edge], dict[str, str]]:
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self._placeholder(node)
            elif node.op == "get_attr":
                self._get_attr(node)
            elif node.op == "call_function":
                self._call(node)
            elif node.op != "output":
                raise UnsupportedGraphError(f"node {node.name!r}: FX op {node.op!r} not handled")
        self._tangent_edges()
        aliases = _aliases(self.gm, self.tied)
        self._in_place(aliases)
        edges = [Edge(src, dst, nbytes) for (src, dst), nbytes in self.edge_bytes.items()]
        return self.ops, edges, self.paths

    def _in_place(self, aliases: _Aliases) -> None:
        """What in-place writes add (the module docstring): 0-byte ordering edges (:func:`_hazards`) where no
        data edge runs, and one colocation group per storage written in place that needs one
        (:func:`_colocated_bases`), holding the ops whose values may alias it (its producer, its views, its
        writers), merged with any group they are in already."""
        if not aliases.writes:
            return
        op_of = {name: op for name, (op, _) in self.values.items()}
        for src, dst in _hazards(self.gm, aliases):
            first, then = op_of.get(src), op_of.get(dst)
            if first is not None and then is not None and first != then:
                self.edge_bytes[(first, then)] += 0  # a data edge stays as it is
        written = _colocated_bases(self.gm, aliases)
        parent: dict[tuple[str, str], tuple[str, str]] = {}  # union-find over ("op" | "base" | "group", name)

        def find(key: tuple[str, str]) -> tuple[str, str]:
            parent.setdefault(key, key)
            while parent[key] != key:
                parent[key] = parent[parent[key]]
                key = parent[key]
            return key

        for node in aliases.bases.keys() | aliases.writes.keys():
            op = op_of.get(node)
            for base in (aliases.bases.get(node, frozenset()) | aliases.writes.get(node, frozenset())) & written:
                if op is not None:
                    parent[find(("op", op))] = find(("base", base))
        if not parent:
            return
        for op in self.ops:
            if op.colocation is not None:
                parent[find(("op", op.name))] = find(("group", op.colocation))
        roots = {find(("base", b)) for b in written if ("base", b) in parent}
        members: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, op in enumerate(self.ops):
            if ("op", op.name) in parent and find(("op", op.name)) in roots:
                members[find(("op", op.name))].append(i)
        for group in members.values():
            if len(group) < 2:
                continue
            name = next((self.ops[i].colocation for i in group if self.ops[i].colocation is not None),
                        self.ops[group[0]].name)
            for i in group:
                self.ops[i] = dataclasses.replace(self.ops[i], colocation=name)

    # -- sources of values
    def _placeholder(self, node: torch.fx.Node) -> None:
        spec = _total(_specs(node, self.sparse))
        if node.name in self.state:
            self._state(node, spec, self.state[node.name])
            return
        self.ops.append(Op(node.name, "Input", 0.0, output_bytes=spec.nbytes if spec else 0,
                           output_shapes=(spec.shape,) if spec else (),
                           phase=_PHASES.get(node.meta.get("partitioner_tag"))))
        self.values[node.name] = (node.name, spec)

    def _tangent_edges(self) -> None:
        """An edge into each tangent placeholder (``TangentAOTInput``, the gradient of one output) from the op
        producing that output, paired by the output node's descriptors. The loss reads the output to make the
        tangent, so the edge carries the output's bytes: the tangent waits for its micro-batch's forward pass,
        and a tangent placed away from its output pays for moving the output to it, as a reader would."""
        tangents = [n for n in self.gm.graph.find_nodes(op="placeholder")
                    if type(n.meta.get("desc")).__name__ == "TangentAOTInput"]
        if not tangents:
            return
        output = self.gm.graph.output_node()
        outputs = dict(zip(output.meta.get("desc") or (), output.args[0], strict=False))
        for node in tangents:
            desc = node.meta["desc"]
            value = outputs.get(desc.output)
            if value is None or getattr(value, "name", None) not in self.values:
                raise UnsupportedGraphError(f"tangent {node.name!r}: the output it is the gradient of "
                                            f"({desc.output}) is not among the joint graph's outputs")
            src, spec = self.values[value.name]
            if src is not None and src != node.name:  # None: folded state, there from the start
                self.edge_bytes[(src, node.name)] += spec.nbytes if spec else 0

    def _get_attr(self, node: torch.fx.Node) -> None:
        import torch

        value = attribute_of(self.gm, node)
        if isinstance(value, torch.Tensor):
            shape = tuple(int(d) for d in value.shape)
            self._state(node, TensorSpec(shape, value.numel() * value.element_size()), str(node.target))

    def _state(self, node: torch.fx.Node, spec: TensorSpec | None, fqn: str) -> None:
        """A parameter, buffer or constant: folded into its one reader, else held by a Parameter op."""
        if spec is None:
            raise UnsupportedGraphError(f"node {node.name!r}: state tensor {fqn!r} has no shape metadata")
        readers = [u for u in node.users if u.op != "output"]
        first = self.tied.get(node.name)
        if len(readers) == 1 and first is None:
            self.folded[node.name] = spec.nbytes
            self.values[node.name] = (None, spec)
            return
        held = spec.nbytes if first in (None, node.name) else 0  # a tied tensor is held once, its ops colocated
        self.ops.append(Op(node.name, "Parameter", 0.0, persistent_memory=held,  # held once: no output_bytes,
                           output_shapes=(spec.shape,), colocation=first))  # its edges carry its bytes
        self.paths[node.name] = fqn.rpartition(".")[0]
        self.values[node.name] = (node.name, spec)

    # -- computations
    def _call(self, node: torch.fx.Node) -> None:

        if node.target is operator.getitem:
            parent = node.args[0]
            self.values[node.name] = (self._value(parent, node)[0], _total(_specs(node, self.sparse)))
            return
        outputs = _specs(node, self.sparse)
        inputs, distinct, persistent = self._read_inputs(node)
        known = [s for s in outputs if s is not None]
        if node.name in self.trips:
            costs = _control_flow_costs(node, self.gm, self.trips[node.name], self.name)
        else:
            costs = _call_costs(node, self.gm, inputs, known, distinct, self.name)
        phase, grad_of = self._phase(node)
        held = 0 if _returns_input(node) else sum(s.nbytes for s in known)  # a .to() returning its input: none
        self.ops.append(Op(node.name, _op_type(node.target), None, costs,
                           persistent_memory=persistent, temporary_memory=_control_flow_peak(node, self.gm),
                           output_bytes=held,
                           output_shapes=tuple(s.shape for s in known), phase=phase, grad_of=grad_of))
        self.values[node.name] = (node.name, _total(outputs))
        self._record_path(node)

    def _phase(self, node: torch.fx.Node) -> tuple[str | None, str | None]:
        """``(phase, grad_of)`` of a joint graph's node; ``(None, None)`` outside joint graphs."""
        phase = _PHASES.get(node.meta.get("partitioner_tag"))
        seq = node.meta.get("seq_nr")
        if phase == "forward" and seq is not None:
            self.seq_forward.setdefault(seq, node.name)
        return phase, (self.seq_forward.get(seq) if phase == "backward" else None)

    def _read_inputs(self, node: torch.fx.Node) -> tuple[list[TensorSpec], list[TensorSpec], int]:
        """Specs of the values a node reads in argument order (one read twice twice, as the FLOP rules count
        positions) and each once, and its folded state bytes; records edges."""
        import torch

        deps: list[torch.fx.Node] = []
        torch.fx.node.map_arg((node.args, node.kwargs), deps.append)
        deps = [d for d in deps if not isinstance(attribute_of(self.gm, d), torch.fx.GraphModule)]
        specs, persistent = {}, 0
        for dep in dict.fromkeys(deps):
            src, spec = self._value(dep, node)
            if spec is None:
                raise UnsupportedGraphError(
                    f"node {dep.name!r}: its output, read by {node.name!r}, has no shape metadata (meta['val'])"
                )
            specs[dep] = spec
            if src is not None:
                self.edge_bytes[(src, node.name)] += spec.nbytes
            persistent += self.folded.get(dep.name, 0)
        return [specs[d] for d in deps], list(specs.values()), persistent

    def _value(self, dep: Any, reader: torch.fx.Node) -> tuple[str | None, TensorSpec | None]:
        if getattr(dep, "name", None) not in self.values:
            raise UnsupportedGraphError(f"node {reader.name!r} reads {dep!r}, which is not a value gplace tracks")
        return self.values[dep.name]

    def _record_path(self, node: torch.fx.Node) -> None:
        stack = node.meta.get("nn_module_stack")
        seq = node.meta.get("seq_nr")
        if stack:
            path = str(list(stack.values())[-1][0])
            calls = tuple((str(value[0]), str(key)) for key, value in stack.items())
            self.paths[node.name], self.calls[node.name] = path, calls
            if seq is not None:
                self.seq_paths.setdefault(seq, path)
                self.seq_calls.setdefault(seq, calls)
        elif seq in self.seq_paths:
            self.paths[node.name], self.calls[node.name] = self.seq_paths[seq], self.seq_calls[seq]
