"""Shapes of an ONNX model's values: input dimensions fixed, ``onnx.shape_inference``, shape arithmetic folded
(the package docstring)."""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from gplace.importers.onnx.tensors import (
    call_key,
    function_key,
    node_reads,
    spec_of,
    subgraphs,
    tensor_spec,
    value_types,
)
from gplace.ir import UnsupportedGraphError
from gplace.ir.errors import error_summary

if TYPE_CHECKING:
    import onnx

logger = logging.getLogger(__name__)

_FOLD_LIMIT = 4096
"""Most elements a value read or made while folding shape arithmetic may have (no weights are evaluated)."""
_FOLD_ROUNDS = 64
"""Most rounds of folding and re-inference (each must make a new value known)."""
_SAME_SHAPE = frozenset({"GroupNormalization", "MeanVarianceNormalization"})
"""Ops (defined as ONNX functions) whose output has their first input's type, which onnx's inference leaves out."""
_CARRY_PASSES = 1024
"""Most passes of a ``Loop`` body inferred to find the shape of a value that changes from pass to pass."""
_NOT_FOLDED = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
                         "Bernoulli", "Dropout"})
"""Nodes never evaluated while folding: their outputs are random."""


_MAX_DIM = 2**63 - 1
"""Largest dimension an ONNX shape holds (int64)."""


def input_shape_map(input_shapes: Any) -> dict[str, list[int]]:
    """``input_shapes`` as ``{name: [int, ...]}``, refusing anything but a mapping of names to integer lists (a
    ``None`` shape counts as not given). An integer key is the name it writes (the command line's
    ``graph.input_shapes={1:[8,64]}`` gives the int 1 for an input named ``"1"``)."""
    if input_shapes is None:
        return {}
    if not isinstance(input_shapes, Mapping):
        raise UnsupportedGraphError("input_shapes must map input names to shapes, e.g. {'x': [8, 3, 224, 224]}, "
                                    f"got a {type(input_shapes).__name__}")
    shapes: dict[str, list[int]] = {}
    for name, shape in input_shapes.items():
        if isinstance(name, numbers.Integral) and not isinstance(name, bool):
            name = str(int(name))
        if shape is None:
            continue
        dims = None if isinstance(shape, str | bytes) or not hasattr(shape, "__iter__") else list(shape)
        if dims is None or not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in dims):
            raise UnsupportedGraphError(f"input_shapes[{name!r}] must be a list of integers, got {shape!r}")
        big = next((int(d) for d in dims if d > _MAX_DIM), None)
        if big is not None:
            raise UnsupportedGraphError(f"input_shapes[{name!r}]: dimension {big} is larger than ONNX's int64 allows")
        negative = next((i for i, d in enumerate(dims) if d < 0), None)
        if negative is not None:
            raise UnsupportedGraphError(f"input_shapes[{name!r}]: dimension {negative} is {int(dims[negative])}; "
                                        "a size is a whole number >= 0")
        shapes[name] = [int(d) for d in dims]
    return shapes


def fix_input_shapes(graph: onnx.GraphProto, given: dict[str, Sequence[int]]) -> None:
    """Write concrete dimensions into the graph inputs, and into every use of the symbols they resolve. An input
    that is also an initialiser (as models of IR version < 4 declare weights) takes the initialiser's dims, which a
    shape given for it must equal."""
    initializers = {t.name: [int(d) for d in t.dims] for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in initializers]
    unknown = sorted(set(given) - {v.name for v in graph.input})
    if unknown:
        raise UnsupportedGraphError(
            f"input_shapes names {unknown}, which are not inputs of the model; inputs: {[v.name for v in inputs]}"
        )
    symbols: dict[str, tuple[int, str]] = {}
    for value in graph.input:
        if value.name in initializers:  # known shapes first: their symbols fix the rest
            _fix_initializer_input(value, initializers[value.name], given.get(value.name), symbols)
    for value in sorted(inputs, key=lambda v: v.name not in given):  # the given first: their symbols fix the rest
        _fix_one_input(value, given.get(value.name), symbols)
    for value in [*graph.value_info, *graph.output]:
        if value.type.HasField("tensor_type"):
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_param") and dim.dim_param in symbols:
                    dim.dim_value = symbols[dim.dim_param][0]
                elif dim.HasField("dim_value") and dim.dim_value < 0:  # an exporter's dynamic one: inference's to fill
                    dim.ClearField("dim_value")


def _fix_initializer_input(value: onnx.ValueInfoProto, dims: list[int], shape: Sequence[int] | None,
                           symbols: dict[str, tuple[int, str]]) -> None:
    """Give an input that is also an initialiser the initialiser's ``dims`` (its declared ones may be symbols);
    ``shape``, given for it, must equal them."""
    if shape is not None and list(shape) != dims:
        raise UnsupportedGraphError(f"input {value.name!r} is an initializer of shape {dims}, input_shapes gives "
                                    f"{list(shape)}")
    if value.type.HasField("tensor_type"):
        _fix_one_input(value, dims, symbols)


def _fix_one_input(value: onnx.ValueInfoProto, shape: Sequence[int] | None,
                   symbols: dict[str, tuple[int, str]]) -> None:
    """Fix one input's shape from ``shape`` (given) or ``symbols`` (``{symbol: (size, the input giving it)}``,
    to which a given shape adds its symbols)."""
    if not value.type.HasField("tensor_type"):
        if shape is not None:
            raise UnsupportedGraphError(f"input {value.name!r} is a {value.type.WhichOneof('value')}, not a tensor")
        return  # a sequence/map/optional input: its readers fail later if its size matters
    tensor_type = value.type.tensor_type
    if shape is None:
        if not tensor_type.HasField("shape"):
            raise UnsupportedGraphError(f"input {value.name!r} has no shape; give it in input_shapes")
        for i, dim in enumerate(tensor_type.shape.dim):
            if dim.HasField("dim_param") and dim.dim_param in symbols:  # named in another input's given shape
                dim.dim_value = symbols[dim.dim_param][0]
            if not dim.HasField("dim_value") or dim.dim_value < 0:  # some exporters write -1 for a dynamic one
                raise UnsupportedGraphError(
                    f"input {value.name!r}: dimension {i} ({dim.dim_param or dim.dim_value or 'unnamed'}) is unknown; "
                    f"give the full shape in input_shapes={{{value.name!r}: [...]}}"
                )
        return
    shape = [int(d) for d in shape]
    dims = tensor_type.shape.dim
    if tensor_type.HasField("shape") and len(dims) != len(shape):
        raise UnsupportedGraphError(f"input {value.name!r} has rank {len(dims)}, input_shapes gives {shape}")
    for i, (dim, size) in enumerate(zip(dims, shape, strict=False)):
        if size < 0 or (dim.HasField("dim_value") and dim.dim_value >= 0 and dim.dim_value != size):
            declared = (dim.dim_value if dim.HasField("dim_value")
                        else repr(dim.dim_param) if dim.dim_param else "unknown")
            raise UnsupportedGraphError(
                f"input {value.name!r}: dimension {i} is {declared}, input_shapes gives {size}"
            )
        if dim.HasField("dim_param"):
            earlier = symbols.setdefault(dim.dim_param, (size, value.name))
            if earlier[0] != size:
                raise UnsupportedGraphError(
                    f"input_shapes gives the dimension {dim.dim_param!r} two sizes: {earlier[0]} (input "
                    f"{earlier[1]!r}) and {size} (input {value.name!r}, dimension {i})"
                )
    tensor_type.shape.Clear()
    for size in shape:
        tensor_type.shape.dim.add().dim_value = size


def infer_shapes(model: onnx.ModelProto, graph_name: str) -> onnx.ModelProto:
    """The shape-inferred model; while consumed shapes stay unknown, shape arithmetic is folded and loop outputs
    are inferred through their bodies (package doc).

    The types ``model`` declares for its values (``value_info``, graph outputs' shapes) are set aside first
    (``model``, the caller's copy, is changed): shapes follow from the inputs', and a declared type is taken only
    where inference leaves the value unknown (:func:`_fallbacks`), then inference runs again from it. A declared
    fixed shape that the inferred one contradicts (one a tool left at the size the model was exported at) is
    logged, once."""
    _explicit_defaults(model.graph)
    declared = _set_aside(model.graph)
    inferred = _inferred(model, graph_name)
    chosen: dict[str, onnx.TypeProto] = {}
    for k in range(_FOLD_ROUNDS + 1):
        new = _fallbacks(inferred, declared, chosen, every=k == _FOLD_ROUNDS)
        if not new:
            break
        chosen.update(new)
        _declare(model.graph, new)
        inferred = _inferred(model, graph_name)
    _log_contradicted(inferred.graph, declared, chosen, graph_name)
    return inferred


def _explicit_defaults(graph: onnx.GraphProto) -> None:
    """Write out the defaults that onnx's inference gets wrong (in ``graph`` and its subgraphs): an ``STFT``
    without ``onesided`` is one-sided (``n / 2 + 1`` bins), which onnx's inference took as two-sided (``n``)."""
    import onnx

    for node in graph.node:
        if (node.op_type == "STFT" and node.domain in ("", "ai.onnx")
                and not any(a.name == "onesided" for a in node.attribute)):
            node.attribute.append(onnx.helper.make_attribute("onesided", 1))
        for body in subgraphs(node):
            _explicit_defaults(body)


def _set_aside(graph: onnx.GraphProto) -> dict[str, onnx.TypeProto]:
    """Remove ``graph``'s ``value_info`` and its outputs' shapes (an output that is an input or an initialiser
    takes that one's type); the types they declared, by name."""
    import onnx

    declared = {v.name: _copied(v.type) for v in graph.value_info}
    del graph.value_info[:]
    inputs = {v.name: v.type for v in graph.input}
    initializers = {t.name: t for t in graph.initializer}
    for value in graph.output:
        declared[value.name] = _copied(value.type)
        if value.name in inputs:
            value.type.CopyFrom(inputs[value.name])
        elif value.name in initializers:
            tensor = initializers[value.name]
            value.type.CopyFrom(onnx.helper.make_tensor_type_proto(tensor.data_type, tensor.dims))
        elif value.type.HasField("tensor_type"):
            value.type.tensor_type.ClearField("shape")
    return declared


def _copied(type_proto: onnx.TypeProto) -> onnx.TypeProto:
    copy = type(type_proto)()
    copy.CopyFrom(type_proto)
    return copy


def _declare(graph: onnx.GraphProto, types: Mapping[str, onnx.TypeProto]) -> None:
    """Give ``graph``'s values ``types``: an output's type, else a ``value_info`` entry."""
    import onnx

    outputs = {v.name: v for v in graph.output}
    for name, type_proto in types.items():
        if name in outputs:
            outputs[name].type.CopyFrom(type_proto)
        else:
            graph.value_info.append(onnx.helper.make_value_info(name, type_proto))


def _known(types: Mapping[str, onnx.TypeProto], name: str) -> bool:
    """Whether ``name`` has a tensor type of known size, or another type (a sequence's, ...) at all."""
    type_proto = types.get(name)
    if type_proto is None:
        return False
    return tensor_spec(type_proto) is not None if type_proto.HasField("tensor_type") else \
        type_proto.WhichOneof("value") is not None


def _fallbacks(inferred: onnx.ModelProto, declared: Mapping[str, onnx.TypeProto],
               chosen: Mapping[str, onnx.TypeProto], every: bool = False) -> dict[str, onnx.TypeProto]:
    """The declared types to take for values ``inferred`` leaves unknown (each merged with what inference knows of
    it), none of ``chosen`` (taken already).

    The nodes are walked in order, each unknown output inferred node by node from what is known so far; a node whose
    outputs stay unknown takes their declared types where it reads only values inference knows, or where onnx has no
    inference of its own for it (a custom op's): another node's wait for inference to run again from the types
    taken, which may know them (shape arithmetic folded). ``every``: every value left unknown takes its declared
    type.
    """
    import onnx

    graph = inferred.graph
    full = value_types(graph)
    full.update({t.values.name: onnx.helper.make_tensor_type_proto(t.values.data_type, t.dims)
                 for t in graph.sparse_initializer})
    local = dict(full)
    functions = {function_key(f) for f in inferred.functions}
    new: dict[str, onnx.TypeProto] = {}
    for node in graph.node:
        unknown = [t for t in node.output if t and not _known(local, t)]
        if not unknown:
            continue
        if not every:
            reads = node_reads(node)
            if not all(_known(local, t) for t in reads):
                continue
            infer_node(node, local, inferred.opset_import)
            unknown = [t for t in unknown if not _known(local, t)]
            domain = "" if node.domain == "ai.onnx" else node.domain
            inferable = call_key(node) in functions or onnx.defs.has(node.op_type, domain)
            if not unknown or (inferable and not all(_known(full, t) for t in reads)):
                continue
        for t in unknown:
            if t in declared and t not in chosen:
                merged = _merged(local.get(t), declared[t])
                if merged != local.get(t):
                    local[t] = new[t] = merged
    return new


def _merged(inferred: onnx.TypeProto | None, declared: onnx.TypeProto) -> onnx.TypeProto:
    """``declared``, but the element type and each dimension ``inferred`` knows (of the same kind and rank)."""
    merged = _copied(declared)
    if inferred is None or not (inferred.HasField("tensor_type") and declared.HasField("tensor_type")):
        return merged
    mine, theirs = merged.tensor_type, inferred.tensor_type
    if theirs.elem_type:
        mine.elem_type = theirs.elem_type
    if not theirs.HasField("shape"):
        pass
    elif not mine.HasField("shape"):
        mine.shape.CopyFrom(theirs.shape)
    elif len(mine.shape.dim) == len(theirs.shape.dim):  # (ranks that differ: the declared shape, which gives sizes)
        for dim, known in zip(mine.shape.dim, theirs.shape.dim, strict=True):
            if known.HasField("dim_value") and known.dim_value >= 0:
                dim.dim_value = known.dim_value
    return merged


def _log_contradicted(graph: onnx.GraphProto, declared: Mapping[str, onnx.TypeProto],
                      chosen: Mapping[str, onnx.TypeProto], graph_name: str) -> None:
    """Log, once, the values whose declared fixed shape the inferred one replaced."""
    types = value_types(graph)
    contradicted = []
    for name, type_proto in declared.items():
        was, now = tensor_spec(type_proto), spec_of(types, name)
        if name not in chosen and was is not None and now is not None and was.shape != now.shape:
            contradicted.append(f"{name!r} declared {list(was.shape)}, inferred {list(now.shape)}")
    if contradicted:
        logger.info("ONNX model %r: %d value(s) declared with a fixed shape other than the one inferred from the "
                    "input shapes take the inferred one (value_info or graph outputs a tool left stale): %s",
                    graph_name, len(contradicted), "; ".join(contradicted[:3]))


def _inferred(model: onnx.ModelProto, graph_name: str) -> onnx.ModelProto:
    """``model`` shape-inferred, shape arithmetic folded and loop outputs inferred while consumed shapes stay
    unknown."""
    sparse = list(model.graph.sparse_initializer)
    if sparse:  # onnx's inference types them sparse, which dense ops reject: infer as if they were dense inputs
        model = _dense_inputs(model)
    inferred = _run_inference(model, graph_name)
    values: dict[str, np.ndarray] = {}
    learned: dict[str, onnx.ValueInfoProto] = {}
    for _ in range(_FOLD_ROUNDS):
        if not _unknown_needed(inferred.graph):
            break
        new_values = fold(inferred.graph, inferred.opset_import, values)
        types = value_types(inferred.graph)
        new_types = _carry(inferred.graph, types, learned, values, inferred.opset_import)
        new_types |= _keep_shape(inferred.graph, types, learned)
        new_types |= _taken_branch(inferred.graph, types, learned, values, inferred.opset_import)
        if not (new_values or new_types):
            break
        inferred = _run_inference(_taught(model, values, learned), graph_name)
        del inferred.graph.node[:]
        inferred.graph.node.extend(model.graph.node)  # the original nodes, with the shapes learned on the copy
    if sparse:
        names = {t.values.name for t in sparse}
        inputs = [v for v in inferred.graph.input if v.name not in names]
        del inferred.graph.input[:]
        inferred.graph.input.extend(inputs)
        inferred.graph.sparse_initializer.extend(sparse)
    return inferred


def _taught(model: onnx.ModelProto, values: Mapping[str, np.ndarray],
            learned: Mapping[str, onnx.ValueInfoProto]) -> onnx.ModelProto:
    """A copy of ``model`` whose nodes with every output in ``values`` are ``Constant`` nodes of those values and
    whose graph outputs and value_info hold the ``learned`` types (a graph output's in the output: a value_info
    entry beside it left the model's output without a shape, which onnx's checker refuses)."""
    import onnx

    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    graph_outputs = {v.name: v for v in folded.graph.output}
    for name, info in learned.items():
        if name in graph_outputs:
            graph_outputs[name].type.CopyFrom(info.type)
    kept = [v for v in folded.graph.value_info if v.name not in learned]
    del folded.graph.value_info[:]
    folded.graph.value_info.extend([*kept, *(v for name, v in learned.items() if name not in graph_outputs)])
    del folded.graph.node[:]
    for node in model.graph.node:
        outputs = [t for t in node.output if t]
        if node.op_type == "Constant" or not outputs or any(t not in values for t in outputs):
            folded.graph.node.append(node)
            continue
        for t in outputs:
            folded.graph.node.append(onnx.helper.make_node(
                "Constant", [], [t], value=onnx.numpy_helper.from_array(values[t])))
    return folded


def _dense_inputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose sparse initialisers are graph inputs of their dense type."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.graph.input.extend(onnx.helper.make_tensor_value_info(t.values.name, t.values.data_type, list(t.dims))
                            for t in copy.graph.sparse_initializer)
    del copy.graph.sparse_initializer[:]
    return copy


def _unknown_needed(graph: onnx.GraphProto) -> bool:
    """Whether a tensor that a node reads, or a graph output, has a shape unknown."""
    known = {v.name for v in [*graph.input, *graph.value_info, *graph.output] if tensor_spec(v.type) is not None}
    known.update(t.name for t in graph.initializer)
    known.update(t.values.name for t in graph.sparse_initializer)
    needed = [*(t for node in graph.node for t in node.input), *(v.name for v in graph.output)]
    return any(t and t not in known for t in needed)


def _carry(graph: onnx.GraphProto, types: Mapping[str, onnx.TypeProto], carried: dict[str, onnx.ValueInfoProto],
           values: Mapping[str, np.ndarray], opset_import: Any) -> bool:
    """Add to ``carried`` the type of each ``Loop`` or ``Scan`` output that inference left unknown (``types``: the
    graph's), as :func:`_loop_outputs` finds it; True if anything is new."""
    import onnx

    before = len(carried)
    for node in graph.node:
        if node.op_type not in ("Loop", "Scan") or all(
                not t or t in carried or spec_of(types, t) is not None for t in node.output):
            continue
        for out, final in zip(node.output, _loop_outputs(node, types, values, opset_import), strict=False):
            if out and out not in carried and final is not None and spec_of(types, out) is None:
                carried[out] = onnx.helper.make_value_info(out, final)
    return len(carried) > before


def _keep_shape(graph: onnx.GraphProto, types: Mapping[str, onnx.TypeProto],
                learned: dict[str, onnx.ValueInfoProto]) -> bool:
    """Add to ``learned`` the output type of each node of :data:`_SAME_SHAPE` that inference left unknown
    (``types``: the graph's): its first input's; True if anything is new."""
    import onnx

    before = len(learned)
    for node in graph.node:
        if (node.op_type in _SAME_SHAPE and node.domain in ("", "ai.onnx") and node.input and node.output
                and node.output[0] not in learned and spec_of(types, node.output[0]) is None
                and spec_of(types, node.input[0]) is not None):
            learned[node.output[0]] = onnx.helper.make_value_info(node.output[0], types[node.input[0]])
    return len(learned) > before


def _taken_branch(graph: onnx.GraphProto, types: Mapping[str, onnx.TypeProto],
                  learned: dict[str, onnx.ValueInfoProto], values: Mapping[str, np.ndarray], opset_import: Any) -> bool:
    """Add to ``learned`` the output types that inference left unknown of each ``If`` whose condition is a known
    value (shape arithmetic, folded: ``torch.onnx.export`` writes one on an input's rank or size): those of the
    branch it takes, inferred node by node (``types``: the graph's); True if anything is new."""
    import onnx

    before = len(learned)
    for node in graph.node:
        condition = values.get(node.input[0]) if node.op_type == "If" and node.input else None
        if condition is None or condition.size != 1 or all(
                not t or t in learned or spec_of(types, t) is not None for t in node.output):
            continue
        taken = next(a.g for a in node.attribute if a.name == ("then_branch" if condition.item() else "else_branch"))
        inside, known = body_types(taken, types), dict(values)
        fold(taken, opset_import, known)  # the branch's constants: a Squeeze's axes, say
        for inner in taken.node:
            infer_node(inner, inside, opset_import, known)
        for out, result in zip(node.output, taken.output, strict=False):
            if out and out not in learned and spec_of(types, out) is None and spec_of(inside, result.name):
                learned[out] = onnx.helper.make_value_info(out, inside[result.name])
    return len(learned) > before


def initial_values(node: onnx.NodeProto) -> list[str]:
    """A ``Loop``'s or ``Scan``'s inputs that give its carried values their initial values (a ``Scan``'s last
    ``num_scan_inputs`` inputs, at least one, are its sequences)."""
    if node.op_type == "Loop":
        return list(node.input[2:])
    scans = next((a.i for a in node.attribute if a.name == "num_scan_inputs"), 1)
    return list(node.input[:len(node.input) - scans])


def _loop_outputs(node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto], values: Mapping[str, np.ndarray],
                  opset_import: Any) -> list[onnx.TypeProto | None]:
    """The types of a ``Loop``'s or ``Scan``'s outputs after its passes, the body inferred node by node from the
    carried values' initial types (``None``: unknown).

    Carried values: where one pass gives every known one back with its shape, those shapes; else, for a
    ``Loop`` whose trip count ``M`` is a constant in ``values`` (at most :data:`_CARRY_PASSES`), the types after
    ``M`` passes (a value that grows, as a decoder's output does); else only the values one pass keeps. A
    ``Loop``'s scan outputs: ``M`` of the body's last pass's, stacked (``M`` known); a ``Scan``'s: one pass's,
    stacked as long as its sequence (:func:`_scan_outputs`).
    """
    body, loop = subgraphs(node)[0], node.op_type == "Loop"
    initial = initial_values(node)
    inputs = [v.name for v in body.input][2 if loop else 0:][:len(initial)]
    returned = [v.name for v in body.output][1 if loop else 0:]
    seeds = {**types, **carried_types(node, body, types)}
    current: list[onnx.TypeProto | None] = [types[t] if spec_of(types, t) is not None else None for t in initial]

    def one_pass(now: list[onnx.TypeProto | None]) -> list[onnx.TypeProto | None]:
        inside = body_types(body, {**seeds, **{b: t for b, t in zip(inputs, now, strict=False) if t is not None}})
        for inner in body.node:
            infer_node(inner, inside, opset_import, values)
        return [inside[r] if spec_of(inside, r) is not None else None for r in returned]

    after = one_pass(current)
    kept = [a if a is not None and b is not None and tensor_spec(a) == tensor_spec(b) else None
            for a, b in zip(current, after, strict=False)]
    if not loop:
        return [*kept, *_scan_outputs(node, types, after[len(current):], opset_import)]
    trips = values.get(node.input[0]) if node.input and node.input[0] else None
    count = int(trips.reshape(())) if trips is not None and trips.size == 1 else None
    if count is None or not 0 <= count <= _CARRY_PASSES:
        return kept
    carried = current if count == 0 else kept
    if any(k is None and a is not None for k, a in zip(kept, current, strict=False)):  # a value changes shape
        carried = current
        for _ in range(count):
            after = one_pass(carried)
            if any(b is None and a is not None for a, b in zip(carried, after, strict=False)):
                return kept
            carried = after[:len(current)]
    return [*carried, *(_stacked(t, count) for t in after[len(current):])]


def _scan_outputs(node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto], elements: list[onnx.TypeProto | None],
                  opset_import: Any) -> list[onnx.TypeProto | None]:
    """A ``Scan``'s scan outputs: its body's ``elements`` stacked along each one's ``scan_output_axes`` axis, as
    many as its first sequence's length along its ``scan_input_axes`` axis (``None`` where unknown, and for
    opset 8's ``Scan``, whose inputs have a batch axis and a ``sequence_lens``)."""
    if next((o.version for o in opset_import if o.domain in ("", "ai.onnx")), 9) < 9:
        return [None] * len(elements)
    states = len(initial_values(node))
    sequence = spec_of(types, node.input[states]) if len(node.input) > states else None
    in_axis = next((a.ints[0] for a in node.attribute if a.name == "scan_input_axes" and a.ints), 0)
    if sequence is None or not sequence.shape:
        return [None] * len(elements)
    count = sequence.shape[in_axis % len(sequence.shape)]
    out_axes = next((list(a.ints) for a in node.attribute if a.name == "scan_output_axes"), [])
    out_axes += [0] * (len(elements) - len(out_axes))
    return [_stacked(t, count, axis) for t, axis in zip(elements, out_axes, strict=False)]


def _stacked(element: onnx.TypeProto | None, count: int, axis: int = 0) -> onnx.TypeProto | None:
    """The type of ``count`` values of type ``element`` stacked on a new axis ``axis`` (negative: from the end
    of the result's dimensions)."""
    import onnx

    spec = None if element is None else tensor_spec(element)
    if spec is None:
        return None
    shape = list(spec.shape)
    shape.insert(axis % (len(shape) + 1), count)
    return onnx.helper.make_tensor_type_proto(element.tensor_type.elem_type, shape)


def fold(graph: onnx.GraphProto, opset_import: Any, values: dict[str, np.ndarray]) -> bool:
    """Add to ``values`` what is computable from small known values, in node order; True if anything is new.

    Known values: small dense initialisers, ``Shape``/``Size`` of tensors whose inferred shape is static, and
    the outputs of evaluated nodes (default domain, not random, all inputs known).
    """
    import onnx

    specs = {v.name: tensor_spec(v.type) for v in [*graph.input, *graph.value_info, *graph.output]}
    overridable = {v.name for v in graph.input}  # an initialiser that is also an input is only a default
    for tensor in graph.initializer:
        if (tensor.name not in values and tensor.name not in overridable and math.prod(tensor.dims) <= _FOLD_LIMIT
                and tensor.data_location != onnx.TensorProto.EXTERNAL):
            values[tensor.name] = onnx.numpy_helper.to_array(tensor)
    before = len(values)
    for node in graph.node:
        inputs = [t for t in node.input if t]
        if all(t in values for t in node.output if t):
            continue
        if node.op_type in ("Shape", "Size") and specs.get(node.input[0]) is not None:
            shape = specs[node.input[0]].shape
            bounds = {a.name: a.i for a in node.attribute}
            dims = shape[bounds.get("start", 0):bounds.get("end")] if node.op_type == "Shape" else math.prod(shape)
            values[node.output[0]] = np.array(dims, dtype=np.int64)
        elif (node.domain in ("", "ai.onnx") and node.op_type not in _NOT_FOLDED and not subgraphs(node)
              and all(t in values for t in inputs)):
            values.update(_evaluate(node, {t: values[t] for t in inputs}, opset_import))
    return len(values) > before


def _evaluate(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset_import: Any) -> dict[str, np.ndarray]:
    """The node's outputs on ``feeds`` (``onnx.reference``), or nothing unless onnx infers them all small."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    opsets = {o.domain or "": o.version for o in opset_import}
    try:
        types = {t: onnx.helper.make_tensor_type_proto(onnx.helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                 for t, v in feeds.items()}
        data = {t: onnx.numpy_helper.from_array(v, t) for t, v in feeds.items()}
        schema = onnx.defs.get_schema(node.op_type, opsets.get("", 1), "")
        inferred = onnx.shape_inference.infer_node_outputs(schema, node, types, data, None, list(opset_import))
        specs = [tensor_spec(inferred[t]) if t in inferred else None for t in node.output if t]
        if any(s is None or math.prod(s.shape) > _FOLD_LIMIT for s in specs):
            return {}
        results = ReferenceEvaluator(_one_node_model(node, types, inferred, opset_import)).run(None, feeds)
    except Exception:  # an op that onnx cannot infer or run here: its outputs stay unknown
        return {}
    return {t: np.asarray(r) for t, r in zip(node.output, results, strict=False) if t}


def _one_node_model(node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto], inferred: Mapping[str, Any],
                    opset_import: Any) -> onnx.ModelProto:
    """``node`` alone in a model of the model's opsets: onnx.reference runs a bare node at the newest opset (an
    ``Unsqueeze`` with opset 11's ``axes`` attribute failed as opset 13's)."""
    import onnx

    inputs = [onnx.helper.make_value_info(t, types[t]) for t in dict.fromkeys(node.input) if t]
    outputs = [onnx.helper.make_value_info(t, inferred[t]) for t in node.output if t]
    graph = onnx.helper.make_graph([node], "fold", inputs, outputs)
    return onnx.helper.make_model(graph, opset_imports=list(opset_import))


def _run_inference(model: onnx.ModelProto, graph_name: str) -> onnx.ModelProto:
    import onnx

    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception as err:  # onnx raises InferenceError, ValidationError, RuntimeError, ...
        reason = error_summary(err)
        raise UnsupportedGraphError(f"ONNX model {graph_name!r}: shape inference failed ({reason})") from None


def body_types(graph: onnx.GraphProto, outer: Mapping[str, onnx.TypeProto]) -> dict[str, onnx.TypeProto]:
    """Types in scope inside a subgraph: ``outer``'s, then the subgraph's own where known (or absent outside)."""
    return {**outer, **{t: v for t, v in value_types(graph).items() if t not in outer or tensor_spec(v)}}


def infer_node(node: onnx.NodeProto, types: dict[str, onnx.TypeProto], opset_import: Any,
               values: Mapping[str, np.ndarray] | None = None) -> None:
    """Add to ``types`` the types of ``node``'s outputs that are unknown, as onnx infers them from its inputs'
    (and the inputs' values where ``values`` holds them: a ``Slice``'s bounds, say), if it can."""
    import onnx

    if all(spec_of(types, t) is not None for t in node.output if t):
        return
    opsets = {o.domain or "": o.version for o in opset_import}
    data = {t: onnx.numpy_helper.from_array(values[t], t) for t in node.input if t and values and t in values}
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get(node.domain or "", 1), node.domain or "")
        inferred = onnx.shape_inference.infer_node_outputs(
            schema, node, {t: types[t] for t in node.input if t}, data or None, None, list(opset_import))
    except Exception:  # an op onnx cannot infer here: its outputs stay unknown
        return
    for t, type_proto in inferred.items():
        if spec_of(types, t) is None:
            types[t] = type_proto


def carried_types(node: onnx.NodeProto, body: onnx.GraphProto,
                   types: Mapping[str, onnx.TypeProto]) -> dict[str, onnx.TypeProto]:
    """Types for a ``Loop``'s or ``Scan``'s body inputs from the node's inputs in scope ``types``: a carried value
    has its initial value's type (it is taken to keep its shape), a ``Scan`` element its sequence's without the
    scanned axis. A body input of known shape keeps its own (:func:`body_types`)."""
    import onnx

    if node.op_type not in ("Loop", "Scan"):
        return {}
    initial = initial_values(node)
    names = [v.name for v in body.input][2 if node.op_type == "Loop" else 0:]
    seeds = {b: types[t] for b, t in zip(names, initial, strict=False) if t in types}
    if node.op_type == "Loop":
        return seeds
    states = len(initial)
    axes = next((list(a.ints) for a in node.attribute if a.name == "scan_input_axes"), [0] * (len(node.input) - states))
    for b, t, axis in zip(names[states:], node.input[states:], axes, strict=False):
        spec = spec_of(types, t)
        if spec is not None and spec.shape:
            shape = list(spec.shape)
            del shape[axis % len(shape)]
            seeds[b] = onnx.helper.make_tensor_type_proto(types[t].tensor_type.elem_type, shape)
    return seeds
