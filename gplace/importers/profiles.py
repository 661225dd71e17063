"""Importers for profiled and synthetic graph files: PipeDream, DOPPLER and GiPH.

Each loader reads one file format (see ``shared/graphs/README.md`` for their origins) into an
:class:`~gplace.ir.OpGraph` or :class:`~gplace.ir.Cluster`. Every parse error is a
:class:`~gplace.ir.GraphError` whose message starts with ``"<file>:<line>: "`` for the text formats and
``"<file>: <record>: "`` (e.g. ``nodes[3]``) for the JSON formats; errors the IR finds while building the graph
(a cycle, a self-loop) are re-raised with the file name in front.
"""

from __future__ import annotations

import logging
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from gplace.ir import Cluster, Device, Edge, GraphError, Link, Op, OpGraph
from gplace.ir.errors import check_flags, check_positive
from gplace.ir.graph import short_repr
from gplace.ir.serialize import JsonTextError, parse_json, refuse_special_file

logger = logging.getLogger(__name__)

_PIPEDREAM_KEYS = ("forward_compute_time", "backward_compute_time", "activation_size", "parameter_size")
_INPUT_DESC = re.compile(r"Input\d*")
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: \d matches other scripts' digits too
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:nan|inf|infinity)",
                      re.IGNORECASE)
"""A number written in ASCII as float() reads it, without the underscores and other scripts' digits it also takes
(nan and inf are read, then refused as not finite, with that message). No two parts match the same digits, so a
long run of digits that fails to match fails in linear time (``[0-9]+\\.?[0-9]*`` took 60 s on 20,000)."""
_OP_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# ---------------------------------------------------------------------- shared helpers
def _error(path: Path, line: int | str | None, message: str) -> GraphError:
    """A :class:`GraphError` whose message starts with the file and the line (or JSON record)."""
    if line is None:
        return GraphError(f"{path}: {message}")
    sep = ":" if isinstance(line, int) else ": "
    return GraphError(f"{path}{sep}{line}: {message}")


def _read_text(path: Path) -> str:
    refuse_special_file(path, "a profile text or JSON file")
    try:
        return path.read_text(encoding="utf-8-sig")  # a byte-order mark is skipped
    except UnicodeDecodeError as err:
        raise _error(path, None, f"not a UTF-8 text file ({err.reason} at byte {err.start})") from None


def text_lines(text: str) -> list[str]:
    """``text``'s lines, split at ``\n``, ``\r\n`` and ``\r`` only (``str.splitlines`` also splits at form feeds,
    U+2028 and other separators, which broke a node line in two and shifted every line number after them)."""
    lines = re.split(r"\r\n|\r|\n", text)
    return lines[:-1] if lines and not lines[-1] else lines


def _read_json(path: Path) -> Any:
    try:
        return parse_json(_read_text(path))
    except JsonTextError as err:
        raise _error(path, None, str(err)) from None  # the message names the line


def _build(ops: Sequence[Op], edges: Sequence[Edge], *, name: str, path: Path) -> OpGraph:
    """Build the graph, naming the file in any error the IR raises (cycle, self-loop, ...)."""
    try:
        graph = OpGraph.from_ops(ops, edges, name=name)
    except GraphError as err:
        raise GraphError(f"{path}: {err}") from err
    logger.debug("loaded %s: %d ops, %d edges", path, graph.num_ops, graph.num_edges)
    return graph


def _nonneg_float(path: Path, line: int | str, what: str, raw: Any) -> float:
    """``raw`` as a finite float >= 0 (a string or a JSON number)."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float) or (
            isinstance(raw, str) and not _DECIMAL.fullmatch(raw.strip())):
        raise _error(path, line, f"{what} must be a number, got {short_repr(raw)}")
    try:
        value = float(raw)
    except ValueError:
        raise _error(path, line, f"{what} must be a number, got {short_repr(raw)}") from None
    except OverflowError:  # an integer too large for a float
        raise _error(path, line, f"{what} is too large for a float ({len(str(raw))} digits)") from None
    if not (math.isfinite(value) and value >= 0):
        raise _error(path, line, f"{what} must be finite and >= 0, got {short_repr(raw)}")
    return value


# ---------------------------------------------------------------------- PipeDream
@dataclass(frozen=True)
class _PipeDreamNode:
    """One node line of a PipeDream ``graph.txt``, as written (times in ms, sizes in bytes)."""

    name: str
    desc: str
    forward_ms: float
    backward_ms: float
    activation_bytes: float
    parameter_bytes: float
    stage_id: int | None
    line: int


def load_pipedream(path: str | Path, *, training: bool = True, phases: bool = False) -> OpGraph:
    """Load a layer graph profiled by PipeDream (``profiles/<model>/graph.txt``).

    Modelling choices:

    * cost: PipeDream times are milliseconds per minibatch on one GPU, so each op gets
      ``kind_cost={"gpu": seconds}`` and no generic ``cost`` (it cannot run on a device of another kind).
      With ``training`` the cost is forward + backward time, else the forward time only.
    * The ``Input`` node(s) (``Input``, ``Input0``, ...) get cost 0: their forward time is data loading
      (636 ms for alexnet), not work a placer can move. They stay in the graph, with type ``"Input"``.
    * ``activation_size`` (bytes of the layer's output for the minibatch; a list ``[a; b; c]`` for a
      multi-output layer is summed) is the op's ``output_bytes`` and every out-edge's bytes, as in
      PipeDream's own partitioner.
    * ``parameter_size`` (bytes of weights) is the op's ``persistent_memory``, once: gradients and optimiser
      slots depend on the optimiser and are not added. Activation memory is not modelled.
    * op type: the layer class name, the description up to its first ``(`` (``Conv2d``, ``ReLU``, ``Add``).
    * ``stage_id`` (in ``test_graphs/*_partitioned.txt``) is read but not kept; see :func:`pipedream_stage_ids`.
    * With ``phases`` each layer ``L`` becomes a forward op ``L`` (forward time) and a backward op ``L/grad``
      (``L/grad_2``, ... where a layer has that name; backward time, ``grad_of=L``), colocated (group ``L``);
      the backward ops run the edges in reverse, each carrying the gradient of the source layer's activations,
      and ``L -> L/grad`` carries ``L``'s activations (kept for the backward). ``training`` is then ignored.

    The graph is named after the model directory for ``graph.txt``, else after the file stem.

    Args:
        path: the ``graph.txt`` file.
        training: count backward time too (default: ``True``).
        phases: split each layer into a forward and a backward op (default: ``False``).

    Raises:
        GraphError: a malformed line, a duplicate node or an edge to an undefined node (message
            ``"<file>:<line>: ..."``), or a cycle.
    """
    check_flags("load_pipedream", training=training, phases=phases)
    path = Path(path)
    nodes, edges = _parse_pipedream(path)
    ops = [_pipedream_op(node, training) for node in nodes]
    if phases:
        ops, edges = _pipedream_phases(nodes, ops, edges)
    name = path.parent.name if path.name == "graph.txt" and path.parent.name else path.stem
    return _build(ops, edges, name=name, path=path)


def _pipedream_phases(
    nodes: Sequence[_PipeDreamNode], ops: Sequence[Op], edges: Sequence[Edge]
) -> tuple[list[Op], list[Edge]]:
    """Forward and backward op per layer (see :func:`load_pipedream`)."""
    forward = [replace(op, kind_cost={"gpu": 0.0 if op.type == "Input" else node.forward_ms * 1e-3},
                       colocation=op.name, phase="forward") for node, op in zip(nodes, ops, strict=True)]
    grad = _grad_names([op.name for op in ops])
    backward = [Op(grad[op.name], f"{op.type}Grad", None,
                   kind_cost={"gpu": 0.0 if op.type == "Input" else node.backward_ms * 1e-3},
                   colocation=op.name, phase="backward", grad_of=op.name)
                for node, op in zip(nodes, ops, strict=True)]
    act = {op.name: op.output_bytes for op in ops}
    grads = [Edge(grad[e.dst], grad[e.src], act[e.src]) for e in edges]
    keep = [Edge(op.name, grad[op.name], op.output_bytes) for op in ops]
    return forward + backward, [*edges, *keep, *grads]


def _grad_names(names: Sequence[str]) -> dict[str, str]:
    """The backward op's name of each layer: ``L/grad``, or ``L/grad_2``, ``L/grad_3``, ... where a layer (or an
    earlier backward op) already has that name."""
    taken, out = set(names), {}
    for name in names:
        grad, k = f"{name}/grad", 2
        while grad in taken:
            grad, k = f"{name}/grad_{k}", k + 1
        taken.add(grad)
        out[name] = grad
    return out


def pipedream_stage_ids(path: str | Path) -> dict[str, int]:
    """The reference pipeline partition of a PipeDream file: node name -> ``stage_id`` (nodes that have one).

    Raises:
        GraphError: as :func:`load_pipedream`.
    """
    nodes, _ = _parse_pipedream(Path(path))
    return {n.name: n.stage_id for n in nodes if n.stage_id is not None}


def _parse_pipedream(path: Path) -> tuple[list[_PipeDreamNode], list[Edge]]:
    nodes: dict[str, _PipeDreamNode] = {}
    edges: list[tuple[int, Edge]] = []
    for lineno, line in enumerate(text_lines(_read_text(path)), start=1):
        if not line.strip():
            continue
        if line[0] in " \t":  # an indented line is an edge
            edges.append((lineno, _pipedream_edge(path, lineno, line)))
            continue
        node = _pipedream_node(path, lineno, line)
        if node.name in nodes:
            raise _error(path, lineno, f"duplicate node {node.name!r} (first on line {nodes[node.name].line})")
        nodes[node.name] = node
    if not nodes:
        raise _error(path, None, "no node lines ('nodeN -- Desc -- forward_compute_time=..., ...')")
    for lineno, edge in edges:
        for end in (edge.src, edge.dst):
            if end not in nodes:
                raise _error(path, lineno, f"edge {edge.src} -- {edge.dst} names undefined node {end!r}")
    return list(nodes.values()), _distinct_edges(path, [(f"line {n}", edge) for n, edge in edges])


def _distinct_edges(path: Path, edges: Sequence[tuple[str, Edge]]) -> list[Edge]:
    """The edges in file order, each pair of ends once: a repeated edge is the same tensor, not a second one.

    ``edges`` pairs each edge with where the file gives it (``"line 7"``), for the warning a repeat logs.
    """
    first: dict[tuple[str, str], str] = {}
    for where, edge in edges:
        seen = first.setdefault((edge.src, edge.dst), where)
        if seen != where:
            logger.warning("%s: edge %s -> %s at %s repeats %s; read once", path, edge.src, edge.dst, where, seen)
    return [Edge(src, dst) for src, dst in first]


def _pipedream_node(path: Path, lineno: int, line: str) -> _PipeDreamNode:
    parts = line.rstrip().split(" -- ")
    stage_id = None
    if len(parts) >= 4 and parts[-1].startswith("stage_id="):
        raw = parts.pop()[len("stage_id="):]
        if not (raw.isascii() and raw.isdigit()):
            raise _error(path, lineno, f"stage_id must be a non-negative integer, got {short_repr(raw)}")
        stage_id = int(raw)
    name = parts[0].strip()
    if len(parts) < 3 or not name or any(c.isspace() for c in name):
        raise _error(path, lineno, f"expected 'nodeN -- Desc -- forward_compute_time=..., ...', got {line[:80]!r}")
    metrics = _pipedream_metrics(path, lineno, parts[-1])
    return _PipeDreamNode(name, " -- ".join(parts[1:-1]).strip(), *metrics, stage_id=stage_id, line=lineno)


def _pipedream_metrics(path: Path, lineno: int, text: str) -> tuple[float, float, float, float]:
    """The four ``key=value`` fields, in :data:`_PIPEDREAM_KEYS` order."""
    values: dict[str, float] = {}
    for item in text.split(","):
        key, sep, raw = (s.strip() for s in item.partition("="))
        if not sep or key not in _PIPEDREAM_KEYS:
            expected = f"key=value with a key in {list(_PIPEDREAM_KEYS)}"
            raise _error(path, lineno, f"expected {expected}, got {short_repr(item.strip())}")
        if key in values:
            raise _error(path, lineno, f"{key} given twice")
        if key == "activation_size" and raw.startswith("[") and raw.endswith("]"):
            values[key] = sum(_nonneg_float(path, lineno, key, x) for x in raw[1:-1].split(";"))
            if not math.isfinite(values[key]):
                raise _error(path, lineno, f"{key} adds up to more than a float holds, got {raw[:80]!r}")
        else:
            values[key] = _nonneg_float(path, lineno, key, raw)
    missing = [k for k in _PIPEDREAM_KEYS if k not in values]
    if missing:
        raise _error(path, lineno, f"missing {', '.join(missing)}")
    fwd, bwd, act, par = (values[k] for k in _PIPEDREAM_KEYS)
    return fwd, bwd, act, par


def _pipedream_edge(path: Path, lineno: int, line: str) -> Edge:
    ends = [s.strip() for s in line.strip().split(" -- ")]
    if len(ends) != 2 or not all(ends) or any(c.isspace() for end in ends for c in end):
        raise _error(path, lineno, f"expected an edge '<tab>nodeA -- nodeB', got {line.strip()[:80]!r}")
    return Edge(ends[0], ends[1])


def _pipedream_op(node: _PipeDreamNode, training: bool) -> Op:
    op_type = node.desc.split("(", 1)[0].strip() or "Op"
    if _INPUT_DESC.fullmatch(op_type):
        op_type, seconds = "Input", 0.0
    else:
        seconds = (node.forward_ms + (node.backward_ms if training else 0.0)) * 1e-3
    return Op(
        name=node.name, type=op_type, cost=None, kind_cost={"gpu": seconds},
        persistent_memory=round(node.parameter_bytes), output_bytes=round(node.activation_bytes),
    )


# ---------------------------------------------------------------------- DOPPLER
def load_doppler(path: str | Path, *, flops_per_second: float = 1e12, activation_memory: bool = True) -> OpGraph:
    """Load a DOPPLER dataflow graph (``compute_graph/*.txt``).

    The format (line numbers 1-based): line 1 the number of ids, inputs included; line 2 the ids of the input
    nodes; lines 3 and 4 comma-separated edge sources and destinations; line ``5 + i``
    ``comp_cost,comm_cost[,op_type]`` for node ``i``. As in DOPPLER's own reader, the input nodes are dropped
    and the edge endpoints index the remaining nodes ``0..N-1`` directly (``N`` = ids - inputs).

    Modelling choices:

    * ``comp_cost`` is an analytic work count; the op's generic ``cost`` is ``comp_cost / flops_per_second``
      seconds, the same on every device kind.
    * ``comm_cost`` (the cost of moving the node's output to another device) is read as bytes: the op's
      ``output_bytes`` and the bytes of each of its out-edges (DOPPLER gives an edge its source's comm_cost).
      These are analytic counts, up to terabytes per op, which no device holds as activations: without
      ``activation_memory`` they are the edges' bytes alone (:func:`without_activation_memory`), so transfers
      cost as before and the graph fits the pipeline objective (``gplace ... graph=doppler`` reads them so; the
      step objective's ``sim-v1`` still holds each received copy).
    * op type: the third column (``einsummable``, ``formation``, ...) or ``"Op"`` where absent.
    * ops are named ``n0``, ``n1``, ... after their node index; the graph after the file stem.

    Args:
        path: the ``.txt`` file.
        flops_per_second: work units per second of a device of speed 1.0 (default: ``1e12``).
        activation_memory: whether an op's ``comm_cost`` is also its output's memory. (default: ``True``)

    Raises:
        GraphError: a malformed or missing line, or an edge endpoint out of range (message
            ``"<file>:<line>: ..."``), or a cycle.
        ValueError: ``flops_per_second`` is not a positive finite number, or ``activation_memory`` no flag.
    """
    check_positive("load_doppler", flops_per_second=flops_per_second)
    check_flags("load_doppler", activation_memory=activation_memory)
    path = Path(path)
    lines = text_lines(_read_text(path))
    num_ops = _doppler_num_ops(path, lines)
    src, dst = (_int_list(path, lines, n) for n in (3, 4))
    if len(src) != len(dst):
        raise _error(path, 4, f"{len(dst)} edge destinations for {len(src)} sources on line 3")
    ops = [_doppler_op(path, lines, i, flops_per_second) for i in range(num_ops)]
    extra = next((n for n in range(5 + num_ops, len(lines) + 1) if lines[n - 1].strip()), None)
    if extra is not None:
        raise _error(path, extra, f"unexpected line after the {num_ops} node lines")
    for lineno, ids in ((3, src), (4, dst)):
        bad = next((i for i in ids if i >= num_ops), None)
        if bad is not None:
            raise _error(path, lineno, f"edge endpoint {bad} is out of range for {num_ops} nodes")
    pairs = enumerate(zip(src, dst, strict=True))
    edges = [(f"position {i} of lines 3-4", Edge(f"n{s}", f"n{d}")) for i, (s, d) in pairs]
    graph = _build(ops, _distinct_edges(path, edges), name=path.stem, path=path)
    return graph if activation_memory else without_activation_memory(graph)


def without_activation_memory(graph: OpGraph) -> OpGraph:
    """``graph`` with every op's ``output_bytes`` set to 0 and the edges' bytes kept: transfers cost as before but
    activations take no memory (for graphs whose byte counts are analytic, e.g. DOPPLER's ``comm_cost``, up to
    terabytes per op, which no device could hold); its ``source`` is kept."""
    return OpGraph.from_ops([replace(op, output_bytes=0) for op in graph.ops()], graph.edges(), name=graph.name,
                            source=graph.source)


def _line(path: Path, lines: Sequence[str], lineno: int, what: str) -> str:
    if lineno > len(lines):
        raise _error(path, lineno, f"missing {what} (the file has {len(lines)} lines)")
    return lines[lineno - 1]


def _doppler_num_ops(path: Path, lines: Sequence[str]) -> int:
    """N = line 1's id count minus the input ids of line 2 (which must be distinct and in range)."""
    raw = _line(path, lines, 1, "the number of ids").strip()
    if not (raw.isascii() and raw.isdigit()):
        raise _error(path, 1, f"expected the number of ids (an integer), got {raw[:40]!r}")
    total = _whole(path, 1, raw)
    inputs = _int_list(path, lines, 2)
    if len(set(inputs)) != len(inputs) or any(i >= total for i in inputs):
        raise _error(path, 2, f"input ids must be distinct and below {total}")
    return total - len(inputs)


def _int_list(path: Path, lines: Sequence[str], lineno: int) -> list[int]:
    """Comma-separated non-negative integers; a trailing comma is allowed."""
    tokens = [t.strip() for t in _line(path, lines, lineno, "a list of ids").split(",")]
    if tokens and not tokens[-1]:
        tokens.pop()
    bad = next((t for t in tokens if not _DIGITS.fullmatch(t)), None)
    if bad is not None:
        raise _error(path, lineno, f"expected comma-separated non-negative integers, got {short_repr(bad)}")
    return [_whole(path, lineno, t) for t in tokens]


def _whole(path: Path, lineno: int, digits: str) -> int:
    """ASCII ``digits`` as an int, named with the file and line past Python's int-conversion limit."""
    try:
        return int(digits)
    except ValueError:
        raise _error(path, lineno, f"an integer of {len(digits)} digits, more than the "
                                   f"{sys.get_int_max_str_digits()} Python reads") from None


def _doppler_op(path: Path, lines: Sequence[str], index: int, flops_per_second: float) -> Op:
    lineno = 5 + index
    fields = [f.strip() for f in _line(path, lines, lineno, f"the line of node {index}").split(",")]
    if len(fields) not in (2, 3) or not all(_DIGITS.fullmatch(f) for f in fields[:2]):
        got = lines[lineno - 1][:80]
        raise _error(path, lineno, f"expected 'comp_cost,comm_cost[,op_type]' for node {index}, got {got!r}")
    op_type = fields[2] if len(fields) == 3 else "Op"
    if not _OP_TYPE.fullmatch(op_type):
        raise _error(path, lineno, f"op type must be a name, got {short_repr(op_type)}")
    comp, comm = _whole(path, lineno, fields[0]), _whole(path, lineno, fields[1])
    try:
        cost = comp / flops_per_second
    except OverflowError:
        raise _error(path, lineno, f"comp_cost of node {index} is too large ({len(fields[0])} digits)") from None
    return Op(name=f"n{index}", type=op_type, cost=cost, output_bytes=comm)


# ---------------------------------------------------------------------- GiPH
def load_giph_graph(path: str | Path) -> OpGraph:
    """Load a GiPH task graph (``task_graphs/*.json``).

    Modelling choices:

    * ``compute`` is the op's generic ``cost``: GiPH's op time is ``compute / speed``, which is what the IR
      computes on a device of that speed, so one GiPH time unit is read as one second.
    * ``allowed_device_types`` (the hardware type an op requires; GiPH's devices each offer a set of types)
      cannot be expressed as an IR pin, so no placement constraint is set. The type is kept as the op type:
      ``"type2"`` for ``[2]`` (``"type0+3"`` for several, ``"Op"`` for none), so a caller can rebuild the mask.
    * edge ``bytes`` are rounded to whole bytes; an op's ``output_bytes`` is the sum over its out-edges
      (GiPH's edges carry distinct data).
    * ops are named ``n<id>``; the graph takes the file's ``name`` (else the file stem).

    Raises:
        GraphError: invalid JSON (with its line), a malformed node or edge record (named ``nodes[i]`` /
            ``edges[i]``), duplicate ids, an edge to an unknown id, or a cycle.
    """
    path = Path(path)
    doc = _read_json(path)
    if not isinstance(doc, Mapping):
        raise _error(path, None, f"expected a JSON object with 'nodes' and 'edges', got {type(doc).__name__}")
    ids, types, costs = _giph_nodes(path, _json_list(path, doc, "nodes"))
    edges = _giph_edges(path, _json_list(path, doc, "edges"), ids)
    out_bytes = dict.fromkeys(ids, 0)
    for e in edges:
        out_bytes[e.src] += e.bytes or 0
    ops = [Op(name=n, type=t, cost=c, output_bytes=out_bytes[n]) for n, t, c in zip(ids, types, costs, strict=True)]
    return _build(ops, edges, name=str(doc.get("name") or path.stem), path=path)


def _json_list(path: Path, doc: Mapping[str, Any], key: str) -> list[Any]:
    value = doc.get(key)
    if not isinstance(value, list):
        raise _error(path, None, f"field {key!r} must be a list, got {type(value).__name__}")
    return value


def _json_id(path: Path, where: str, rec: Mapping[str, Any], key: str) -> int:
    value = rec.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _error(path, where, f"{key!r} must be a non-negative integer, got {short_repr(value)}")
    return value


def _giph_nodes(path: Path, records: list[Any]) -> tuple[list[str], list[str], list[float]]:
    """Op names, types and costs, in file order."""
    names: list[str] = []
    types: list[str] = []
    costs: list[float] = []
    seen: set[str] = set()
    for i, rec in enumerate(records):
        where = f"nodes[{i}]"
        if not isinstance(rec, Mapping):
            raise _error(path, where, f"must be an object with 'id' and 'compute', got {short_repr(rec)}")
        name = f"n{_json_id(path, where, rec, 'id')}"
        if name in seen:
            raise _error(path, where, f"duplicate id {rec['id']}")
        allowed = rec.get("allowed_device_types", [])
        if not isinstance(allowed, list) or any(isinstance(k, bool) or not isinstance(k, int) for k in allowed):
            raise _error(path, where, f"'allowed_device_types' must be a list of integers, got {short_repr(allowed)}")
        seen.add(name)
        names.append(name)
        types.append("type" + "+".join(map(str, sorted(allowed))) if allowed else "Op")
        costs.append(_nonneg_float(path, where, "'compute'", rec.get("compute")))
    return names, types, costs


def _giph_edges(path: Path, records: list[Any], names: list[str]) -> list[Edge]:
    known = set(names)
    edges = []
    for i, rec in enumerate(records):
        where = f"edges[{i}]"
        if not isinstance(rec, Mapping):
            raise _error(path, where, f"must be an object with 'src', 'dst' and 'bytes', got {short_repr(rec)}")
        src, dst = (f"n{_json_id(path, where, rec, key)}" for key in ("src", "dst"))
        for end, key in ((src, "src"), (dst, "dst")):
            if end not in known:
                raise _error(path, where, f"{key!r} {rec[key]} is not a node id")
        nbytes = round(_nonneg_float(path, where, "'bytes'", rec.get("bytes")))
        edges.append(Edge(src, dst, nbytes))
    return edges


def load_giph_network(path: str | Path) -> Cluster:
    """Load a GiPH device network (``device_network_<n>.json``) as a cluster.

    GiPH's own model (``FullNetwork``): an op takes ``compute / speed[i]`` on device ``i`` and a transfer of
    ``bytes`` from ``i`` to ``j != i`` takes ``delay[i][j] + bytes * comm_speed[i][j]``. So:

    * devices are ``dev0``, ``dev1``, ... of kind ``"gpu"`` with the file's ``speed`` and unbounded memory;
    * each pair's latency is ``delay[i][j]`` and its bandwidth ``1 / comm_speed[i][j]`` bytes per time unit
      (infinite where ``comm_speed`` is 0), one GiPH time unit read as one second;
    * ``bw`` is ignored: it is the raw draw ``comm_speed`` came from (in ``device_network_20.json``,
      ``comm_speed[i][j] = 1 / bw[max(i, j)][min(i, j)]``), kept by an older GiPH version;
    * ``device_constraints`` (the op types each device can run) has no IR counterpart and is dropped.

    Raises:
        GraphError: a missing or malformed field (named with the entry, e.g. ``delay[3][4]``), a matrix
            that is not ``n x n`` or not symmetric, or a speed that is not positive.
    """
    path = Path(path)
    doc = _read_json(path)
    if not isinstance(doc, Mapping) or not all(k in doc for k in ("speed", "delay", "comm_speed")):
        raise _error(path, None, "expected a GiPH device network with 'speed', 'delay' and 'comm_speed'")
    speed = _giph_vector(path, doc["speed"])
    delay = _giph_matrix(path, doc, "delay", len(speed))
    rate = _giph_matrix(path, doc, "comm_speed", len(speed))
    devices = [Device(f"dev{i}", "gpu", speed=s) for i, s in enumerate(speed)]
    links = [
        Link(f"dev{i}", f"dev{j}", bandwidth=1.0 / rate[i, j] if rate[i, j] > 0 else math.inf, latency=delay[i, j])
        for i in range(len(speed)) for j in range(i + 1, len(speed))
    ]
    try:
        return Cluster.build(devices, links, name=path.stem)
    except GraphError as err:
        raise GraphError(f"{path}: {err}") from err


def _giph_vector(path: Path, raw: Any) -> list[float]:
    if not isinstance(raw, list) or not raw:
        raise _error(path, "speed", f"must be a non-empty list of numbers, got {type(raw).__name__}")
    speed = [_nonneg_float(path, f"speed[{i}]", "speed", x) for i, x in enumerate(raw)]
    bad = next((i for i, s in enumerate(speed) if s <= 0), None)
    if bad is not None:
        raise _error(path, f"speed[{bad}]", "speed must be > 0")
    return speed


def _giph_matrix(path: Path, doc: Mapping[str, Any], key: str, n: int) -> np.ndarray:
    """An ``n x n`` symmetric matrix of finite numbers >= 0 (the diagonal is ignored)."""
    rows = doc[key]
    if not isinstance(rows, list) or len(rows) != n or any(not isinstance(r, list) or len(r) != n for r in rows):
        raise _error(path, key, f"must be a {n} x {n} list of lists (one row per device)")
    mat = np.array([[_nonneg_float(path, f"{key}[{i}][{j}]", key, x) for j, x in enumerate(r)]
                    for i, r in enumerate(rows)], dtype=np.float64)
    asym = np.argwhere(~np.isclose(mat, mat.T, rtol=1e-9, atol=0.0))
    if asym.size:
        i, j = asym[0]
        raise _error(path, f"{key}[{i}][{j}]", f"{mat[i, j]} differs from {key}[{j}][{i}] = {mat[j, i]}")
    return mat
