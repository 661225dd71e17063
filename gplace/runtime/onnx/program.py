"""An ONNX model as an executable torch FX program, so that ``torch-v1`` runs graphs from ``from_onnx``.

:func:`onnx_program` turns the shape-inferred model an :class:`~gplace.importers.onnx.OnnxSource` holds into a
``torch.fx.GraphModule`` that :class:`~gplace.runtime.torch_runtime.TorchRuntime` executes node by node:

- **One ``call_function`` node per ONNX node**, its target a small torch function implementing the op, its
  inputs as arguments (``None`` for a skipped optional input) and its attributes as keyword arguments. A node
  with several outputs returns a tuple read by ``operator.getitem`` nodes. A ``Constant`` node returns its
  value, held by a placeholder. The functions: :mod:`gplace.runtime.onnx.ops` (element-wise, reductions,
  matrix products), :mod:`gplace.runtime.onnx.shape` (shape and indexing), :mod:`gplace.runtime.onnx.nn`
  (padding, convolution, pooling, normalisation, resizing), :mod:`gplace.runtime.onnx.rnn` (recurrent layers).
- **Placeholders** for the graph inputs and for every initialiser (dense or sparse).
- **Names**: FX node names are sanitised (``"/conv1/Conv"`` becomes ``"_conv1_Conv"``), so each node records
  its gplace op in ``node.meta["gplace_op"]``: ONNX nodes their op, ``Input`` ops their placeholder, shared
  ``Initializer`` ops theirs. A folded initialiser's or a constant's placeholder has none: it lives with its
  one reader.
- **Values**: initialisers from the model (``onnx.numpy_helper.to_array``), external data read from the
  directory the model was read from; one whose data is missing (or external, for a model given in memory),
  and every graph input, is made from its shape and type: floats uniform in ``[0, 1)`` from a
  generator seeded by the CRC-32 of the tensor name, integers and booleans 0 (the convention of ``torch-v1``).
- **Coverage**: the default ONNX domain from opset 6 on: element-wise math and activations, comparisons and
  logic, ``Cast``, reductions and arg-max/min, ``Gemm`` / ``MatMul`` / ``Einsum``, the shape ops (``Reshape``,
  ``Flatten``, ``Transpose``, ``Squeeze`` / ``Unsqueeze``, ``Concat``, ``Split``, ``Slice``, ``Expand``,
  ``Tile``, ``Shape``, ...), indexing (``Gather*``, ``Scatter*``, ``TopK``, ``OneHot``, ...), ``Pad``,
  convolutions, pools, normalisations, ``LRN``, ``Resize`` / ``Upsample``, ``LSTM`` / ``GRU`` / ``RNN`` (the
  tables in those modules), and control flow (``If``, ``Loop``, ``Scan``: :mod:`gplace.runtime.onnx.control`).
  Anything else (another domain, string tensors, sequences, quantised and random ops), an attribute no
  converter reads (a newer opset's, say) or an attribute value a converter does not handle raises
  :class:`~gplace.ir.UnsupportedGraphError` naming the node at conversion time.
"""

from __future__ import annotations

import keyword
import logging
import operator
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gplace.importers.onnx import OnnxSource, node_reads
from gplace.ir import OpGraph, UnsupportedGraphError
from gplace.ir.errors import short_repr
from gplace.runtime.onnx import nn as onnx_nn
from gplace.runtime.onnx import ops as onnx_ops
from gplace.runtime.onnx import rnn as onnx_rnn
from gplace.runtime.onnx import shape as onnx_shape
from gplace.runtime.onnx.control import CONTROL_FLOW, convert_control_flow, outer_reads
from gplace.runtime.onnx.known import known_inputs
from gplace.runtime.onnx.ops import Attrs, Known, constant_value, sparse_to_dense, tensor_from_proto, torch_dtype
from gplace.runtime.synthetic import synthesised

logger = logging.getLogger(__name__)

__all__ = ["OnnxProgram", "onnx_program"]

_CONVERTERS = {**onnx_ops.CONVERTERS, **onnx_shape.CONVERTERS, **onnx_nn.CONVERTERS, **onnx_rnn.CONVERTERS}
_DEFAULT_DOMAINS = ("", "ai.onnx")


@dataclass(frozen=True, eq=False)
class OnnxProgram:
    """An ONNX model as an FX program with the host values of its placeholders."""

    module: torch.fx.GraphModule
    """One ``call_function`` node per ONNX node; placeholders for graph inputs, initialisers and constants."""
    values: Mapping[str, torch.Tensor | None]
    """Placeholder node name -> host value."""
    placeholders: Mapping[str, str]
    """ONNX tensor name (graph input or initialiser) -> placeholder node name."""
    inputs: tuple[str, ...]
    """The graph inputs that are not initialisers, in order."""
    _known: dict[str, Any] = field(default_factory=dict, repr=False)

    def known(self, given: Mapping[str, torch.Tensor]) -> dict[str, dict[int, Known]]:
        """Call name -> {argument position: host value} for the shape-like inputs known before a step runs,
        with the placeholder values ``given`` (see :mod:`gplace.runtime.onnx.known`); cached without them."""
        if not given and "" in self._known:
            return self._known[""]
        data = {self.placeholders[name] for name in self.inputs}
        found = known_inputs(self.module, {**self.values, **given}, data)
        if not given:
            self._known[""] = found
        return found

    def given(self, inputs: Mapping[str, Any] | Sequence[Any] | Any | None) -> dict[str, torch.Tensor]:
        """Placeholder name -> value for ``inputs`` given by ONNX name, or in graph-input order.

        Raises:
            ValueError: an unknown name, or the wrong number of inputs.
        """
        if inputs is None:
            return {}
        if isinstance(inputs, Mapping):
            unknown = sorted(set(inputs) - set(self.placeholders))
            if unknown:
                raise ValueError(f"inputs name {unknown[0]!r}, not an input or initialiser of the model; "
                                 f"its inputs are {list(self.inputs)}")
            return {self.placeholders[name]: _as_tensor(name, value) for name, value in inputs.items()}
        values = list(inputs) if isinstance(inputs, list | tuple) else [inputs]
        if len(values) != len(self.inputs):
            raise ValueError(f"got {len(values)} inputs, the model takes {len(self.inputs)}: {list(self.inputs)}")
        return {self.placeholders[name]: _as_tensor(name, v) for name, v in zip(self.inputs, values, strict=True)}


def onnx_program(source: OnnxSource, graph: OpGraph) -> OnnxProgram:
    """Convert the model of an ONNX-imported graph into an executable FX program (see the module docstring).

    Args:
        source: the graph's ``source``, from :func:`~gplace.importers.onnx.from_onnx`.
        graph: the graph itself (its ``Input`` and ``Initializer`` op names).

    Returns:
        The program and its values.

    Raises:
        UnsupportedGraphError: a node has no torch implementation or uses an unsupported attribute value (the
            message names the node), a tensor has a type torch lacks, or the graph does not match the model.
    """
    return _Builder(source, graph).build()


def check_convertible(source: OnnxSource, graph: OpGraph) -> None:
    """Raise what :func:`onnx_program` would for a node without a torch implementation (or an unsupported
    attribute value), converting the nodes only: no weights are read or kept.

    Raises:
        UnsupportedGraphError: naming the node.
    """
    builder = _Builder(source, graph)
    for i, node in enumerate(builder.onnx.node):
        builder._convert(i, node)


def _as_tensor(name: str, value: Any) -> torch.Tensor:
    """``value`` given for input ``name`` as a tensor; ``ValueError`` naming the input where it is none."""
    if isinstance(value, torch.Tensor):
        return value
    try:
        return torch.from_numpy(np.array(value, copy=True)) if isinstance(value, np.ndarray) else torch.tensor(value)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"input {name!r}: cannot make a tensor of {short_repr(value)} ({err})") from None


def _identifier(name: str, taken: set[str]) -> str:
    """A unique Python identifier made from a tensor name (placeholder targets become argument names)."""
    base = re.sub(r"\W", "_", name) or "value"
    base = f"_{base}" if base[0].isdigit() or keyword.iskeyword(base) else base
    candidate, k = base, 1
    while candidate in taken:
        candidate, k = f"{base}_{k}", k + 1
    taken.add(candidate)
    return candidate


def _opset(model: Any) -> int:
    versions = [o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS]
    return max(versions) if versions else 1


class _Builder:
    """One pass over the model: placeholders first, then one call per node."""

    def __init__(self, source: OnnxSource, graph: OpGraph) -> None:
        self.model, self.graph = source.model, graph
        self.onnx = source.model.graph
        self.base_dir = source.base_dir
        self.opset = _opset(source.model)
        self.op_of_node = {i: name for name, i in source.node_index.items()}
        self.fx = torch.fx.Graph()
        self.env: dict[str, torch.fx.Node] = {}
        self.values: dict[str, torch.Tensor | None] = {}
        self.placeholders: dict[str, str] = {}
        self.taken: set[str] = set()

    def build(self) -> OnnxProgram:
        calls = [self._convert(i, node) for i, node in enumerate(self.onnx.node)]  # unsupported ops fail first
        inputs = self._inputs()
        self._initializers()
        constants = {i: self._constant(i, node) for i, node in enumerate(self.onnx.node) if _is_constant(node)}
        for i, node in enumerate(self.onnx.node):
            self._node(node, calls[i], constants.get(i))
        self.fx.output(tuple(self._read(out.name, "the graph output") for out in self.onnx.output))
        module = torch.fx.GraphModule(torch.nn.Module(), self.fx)
        return OnnxProgram(module, self.values, self.placeholders, tuple(inputs))

    # ------------------------------------------------------------------ placeholders
    def _placeholder(self, tensor: str, op: str | None, value: torch.Tensor | None) -> torch.fx.Node:
        node = self.fx.placeholder(_identifier(tensor, self.taken))
        if op is not None:
            node.meta["gplace_op"] = op
        self.values[node.name] = value
        self.placeholders[tensor] = node.name
        self.env[tensor] = node
        return node

    def _ops_of_type(self, op_type: str) -> list[str]:
        return [name for name, t in zip(self.graph.op_names, self.graph.op_types, strict=True) if t == op_type]

    def _inputs(self) -> list[str]:
        initializers = {t.name for t in self.onnx.initializer} | {s.values.name for s in self.onnx.sparse_initializer}
        values = {}
        for value in self.onnx.input:
            if value.name not in initializers:
                values.setdefault(value.name, value)
        ops = self._ops_of_type("Input")
        _check_count("Input", ops, list(values))
        for (name, value), op in zip(values.items(), ops, strict=True):
            self._placeholder(name, op, _input_value(value))
        return list(values)

    def _initializers(self) -> None:
        protos: dict[str, Any] = {t.name: t for t in self.onnx.initializer}
        protos.update({s.values.name: s for s in self.onnx.sparse_initializer})
        readers = Counter(t for node in self.onnx.node for t in node_reads(node))
        shared = [name for name in protos if readers[name] != 1]
        op_names = self._ops_of_type("Initializer")
        _check_count("Initializer", op_names, shared)
        ops = dict(zip(shared, op_names, strict=True))
        made = [name for name, proto in protos.items() if self._initializer(name, proto, ops.get(name))]
        if made:
            logger.info("%d initialiser(s) without data were made from their shape: %s", len(made),
                        ", ".join(made[:5]))

    def _initializer(self, name: str, proto: Any, op: str | None) -> bool:
        """Add the placeholder; True when its value had to be made up."""
        what = f"initializer {name!r}"
        sparse = hasattr(proto, "values")
        value = sparse_to_dense(proto, what, self.base_dir) if sparse else tensor_from_proto(proto, what, self.base_dir)
        made = value is None
        if made:
            data_type = proto.values.data_type if sparse else proto.data_type
            value = synthesised(name, [int(d) for d in proto.dims], torch_dtype(data_type, what=what))
        self._placeholder(name, op, value)
        return made

    def _constant(self, i: int, node: Any) -> torch.fx.Node:
        label = self.op_of_node[i]
        attrs = Attrs(node, self.opset, label)
        value = constant_value(attrs)
        attrs.finish()
        return self._placeholder(f"{label}_value", None, value)

    # ------------------------------------------------------------------ calls
    def _convert(self, i: int, node: Any) -> tuple[str, Any, dict[str, Any]]:
        """(op name, torch function, keyword arguments) of node ``i``."""
        label = self.op_of_node.get(i)
        if label is None:
            raise UnsupportedGraphError(f"ONNX node {i} ({node.op_type}) is not an op of graph {self.graph.name!r}")
        if _is_constant(node):
            return label, onnx_ops._constant, {}
        if node.op_type in CONTROL_FLOW and node.domain in _DEFAULT_DOMAINS:
            return label, *convert_control_flow(Attrs(node, self.opset, label), _convert, self.base_dir)
        return (label, *_convert(node, self.opset, label))

    def _node(self, node: Any, call_spec: tuple[str, Any, dict[str, Any]], constant: torch.fx.Node | None) -> None:
        label, target, kwargs = call_spec
        if constant is not None:
            args: tuple[Any, ...] = (constant,)
        else:
            reads = (*node.input, *outer_reads(node))  # a control-flow node's subgraphs read outer values too
            args = tuple(self._read(t, f"node {label!r}") if t else None for t in reads)
        call = self.fx.create_node("call_function", target, args, kwargs, name=_identifier(label, set()))
        call.meta["gplace_op"] = label
        call.meta["onnx_op_type"] = node.op_type
        if len(node.output) == 1:
            self.env[node.output[0]] = call
            return
        for k, tensor in enumerate(node.output):
            if tensor:
                self.env[tensor] = self.fx.call_function(operator.getitem, (call, k))

    def _read(self, tensor: str, reader: str) -> torch.fx.Node:
        node = self.env.get(tensor)
        if node is None:
            raise UnsupportedGraphError(f"{reader} reads tensor {tensor!r}, which nothing before it produces")
        return node


def _is_constant(node: Any) -> bool:
    return node.op_type == "Constant" and node.domain in _DEFAULT_DOMAINS


def _convert(node: Any, opset: int, label: str) -> tuple[Any, dict[str, Any]]:
    """The torch function and keyword arguments of one node."""
    if node.domain not in _DEFAULT_DOMAINS:
        raise UnsupportedGraphError(f"node {label!r} ({node.domain}::{node.op_type}): ops of domain "
                                    f"{node.domain!r} have no torch implementation")
    attrs = Attrs(node, opset, label)
    converter = _CONVERTERS.get(node.op_type)
    if converter is None:
        raise attrs.error("no torch implementation of this ONNX op")
    try:
        target, kwargs = converter(attrs)
    except UnsupportedGraphError:
        raise
    except Exception as err:  # a malformed attribute (wrong type, missing required value)
        raise attrs.error(f"cannot read its attributes ({type(err).__name__}: {err})") from err
    attrs.finish()
    return target, kwargs


def _check_count(op_type: str, ops: Sequence[str], tensors: Sequence[str]) -> None:
    if len(ops) != len(tensors):
        raise UnsupportedGraphError(f"the graph has {len(ops)} {op_type} ops but its model {len(tensors)} such "
                                    "tensors: the graph does not come from this model")


def _input_value(value: Any) -> torch.Tensor | None:
    """A made-up value for a graph input (``None`` for a non-tensor input nobody reads)."""
    if not value.type.HasField("tensor_type"):
        return None
    tensor_type = value.type.tensor_type
    dtype = torch_dtype(tensor_type.elem_type, what=f"input {value.name!r}")
    return synthesised(value.name, [int(d.dim_value) for d in tensor_type.shape.dim], dtype)
