"""The op graph: gplace's one intermediate representation of a computation."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any

import numpy as np

from gplace.ir.cluster import Cluster
from gplace.ir.errors import SHORT_REPR_CHARS as SHORT_REPR_CHARS
from gplace.ir.errors import GraphError, short_repr
from gplace.ir.frozen import FrozenDict, frozen_array
from gplace.ir.locks import ForkSafeLock

Shape = tuple[int, ...]
"""A tensor shape; -1 marks an unknown dimension."""

PHASES = ("forward", "backward", "update")
"""The phases an op may carry; ``update`` ops (the optimiser) run once per mini-batch."""
VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable"})
"""Op types of a variable (TensorFlow's resource handle or reference variable): what the optimiser updates."""
FORWARD, BACKWARD, UPDATE = range(len(PHASES))
"""The codes of :meth:`OpGraph.phase_codes`: the index of each phase in :data:`PHASES`."""
_DURATIONS_LOCK = ForkSafeLock()
"""Guards every graph's per-cluster durations cache (:meth:`OpGraph.durations`)."""


@dataclass(frozen=True)
class Op:
    """One op, as an importer or a user describes it before the graph is built."""

    name: str
    type: str
    cost: float | None
    """Seconds on a device of speed 1.0 of any kind; ``None`` is an error unless every kind has a cost."""
    kind_cost: Mapping[str, float | None] = field(default_factory=dict, hash=False)
    """Seconds on a device of speed 1.0 of this kind (e.g. ``{"gpu": 1e-4}``); overrides ``cost``; ``None`` for a
    kind is no cost given for it. Compared, but not hashed (a dict is unhashable)."""
    persistent_memory: int = 0
    """Bytes resident for the whole step (weights, optimiser slots)."""
    temporary_memory: int = 0
    """Bytes held only while the op runs (workspace)."""
    output_bytes: int = 0
    """Bytes of all outputs together."""
    output_shapes: tuple[Shape, ...] = ()
    colocation: str | None = None
    """Ops sharing a colocation name must run on one device."""
    pinned: str | None = None
    """Device kind the op must run on (e.g. ``"cpu"`` for an op with no GPU kernel)."""
    phase: str | None = None
    """Training phase: ``"forward"``, ``"backward"`` or ``"update"`` (once per mini-batch); ``None``: unknown."""
    grad_of: str | None = None
    """For a backward op, the name of the forward op it differentiates."""


@dataclass(frozen=True)
class Edge:
    """A tensor flowing from ``src`` to ``dst`` (op names)."""

    src: str
    dst: str
    bytes: int | None = None
    """Bytes carried; ``None`` takes the source op's ``output_bytes``."""


@dataclass(frozen=True, eq=False)
class OpGraph:
    """An immutable, validated op graph over N ops and E edges.

    Build one with :meth:`from_ops`; arrays are read-only. Op indices are positions in ``op_names``. Two graphs
    compare by identity (``==`` is ``is``; as onnx-ir's graphs): compare :attr:`fingerprint` for equal contents, which
    a copy or a pickled graph keeps.
    """

    name: str
    op_names: tuple[str, ...]
    op_types: tuple[str, ...]
    compute_cost: np.ndarray = field(repr=False)
    """(N,) float64 seconds at speed 1.0, NaN where only per-kind costs are known."""
    kind_cost: Mapping[str, np.ndarray] = field(repr=False)
    """kind -> (N,) float64 seconds at speed 1.0, NaN where unknown for that kind."""
    persistent_memory: np.ndarray = field(repr=False)
    """(N,) int64 bytes."""
    temporary_memory: np.ndarray = field(repr=False)
    """(N,) int64 bytes."""
    output_bytes: np.ndarray = field(repr=False)
    """(N,) int64 bytes."""
    output_shapes: tuple[tuple[Shape, ...], ...] = field(repr=False)
    colocation: tuple[str | None, ...] = field(repr=False)
    pinned: tuple[str | None, ...] = field(repr=False)
    edge_index: np.ndarray = field(repr=False)
    """(2, E) int64 source and destination op indices (PyG's convention)."""
    edge_bytes: np.ndarray = field(repr=False)
    """(E,) int64 bytes per edge."""
    source: Any = field(default=None, repr=False, compare=False)
    """Optional handle to the program it came from (a GraphDef, an ExportedProgram); never serialised."""
    phase: tuple[str | None, ...] = field(default=(), repr=False)
    """Per-op phase (see :attr:`Op.phase`); empty when no op has one."""
    grad_of: tuple[int, ...] = field(default=(), repr=False)
    """Per-op index of the forward op a backward op differentiates, -1 for none; empty when no op has one."""

    def __post_init__(self) -> None:
        self._freeze()
        self.validate()

    def _freeze(self) -> None:
        """Make the array fields read-only copies (the caller's arrays stay theirs and writable), integers as native
        int64 and floats as native float64: a big-endian or int32 array gave other step times (9e12 s for 6) or
        another fingerprint than the same graph read back from JSON. Other dtypes are kept for :meth:`validate`
        to name."""
        for name in ("compute_cost", "persistent_memory", "temporary_memory", "output_bytes", "edge_index",
                     "edge_bytes"):
            object.__setattr__(self, name, _native(getattr(self, name), "f" if name == "compute_cost" else "i"))
        object.__setattr__(self, "kind_cost", FrozenDict((k, _native(v, "f")) for k, v in self.kind_cost.items()))

    def __getstate__(self) -> dict[str, Any]:
        """Pickles the fields only; derived values (fingerprint, durations, CSR) are rebuilt on use."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restores the fields read-only (numpy unpickles arrays writable), dropping any derived values."""
        self.__dict__.update({f.name: state[f.name] for f in fields(self) if f.name in state})
        self._freeze()

    def __repr__(self) -> str:
        """A summary (name, sizes, fingerprint), not every op's name and type: a large graph shows in one line."""
        return (f"OpGraph(name={self.name!r}, ops={self.num_ops}, edges={self.num_edges}, "
                f"fingerprint={self.fingerprint!r})")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_ops(
        cls, ops: Iterable[Op], edges: Iterable[Edge], *, name: str = "graph", source: Any = None
    ) -> OpGraph:
        """Build and validate a graph from op and edge records.

        Raises:
            GraphError: duplicate op, edge to a missing op, missing or negative cost, cycle, ...
            TypeError: an op is not an :class:`Op` or an edge not an :class:`Edge` (a ``(src, dst)`` tuple, say).
        """
        if not isinstance(name, str):
            raise TypeError(f"a graph's name must be a string, got {type(name).__name__} {short_repr(name)}")
        ops, edges = list(ops), list(edges)  # a generator was used up by the type checks: its edges were dropped
        for i, op in enumerate(ops):
            if not isinstance(op, Op):
                raise TypeError(f"graph {name!r}: ops[{i}] must be an Op(name, type, cost), got "
                                f"{type(op).__name__} {short_repr(op)}")
        for i, e in enumerate(edges):
            if not isinstance(e, Edge):
                raise TypeError(f"graph {name!r}: edges[{i}] must be an Edge(src, dst), got {type(e).__name__} "
                                f"{short_repr(e)}")
        index: dict[str, int] = {}
        for i, op in enumerate(ops):
            _check_op_fields(op, f"graph {name!r}")
            if op.name in index:
                raise GraphError(f"graph {name!r}: duplicate op name {op.name!r}")
            index[op.name] = i
        kinds = sorted({k for op in ops for k, seconds in op.kind_cost.items() if seconds is not None})
        kind_cost = {
            k: np.array([_as_cost(op.kind_cost.get(k), f"graph {name!r}: op {op.name!r} kind_cost[{k!r}]")
                         for op in ops], dtype=np.float64) for k in kinds
        }
        src, dst, nbytes = [], [], []
        for e in edges:
            for end in (e.src, e.dst):
                if end not in index:
                    raise GraphError(f"graph {name!r}: edge {e.src!r} -> {e.dst!r} refers to missing op {end!r}")
            src.append(index[e.src])
            dst.append(index[e.dst])
            where = f"graph {name!r}: edge {e.src!r} -> {e.dst!r} bytes"
            nbytes.append(ops[index[e.src]].output_bytes if e.bytes is None else _as_bytes(e.bytes, where))
        phase, grad_of = _phases(ops, index, name)
        return cls(
            name=name,
            op_names=tuple(op.name for op in ops),
            op_types=tuple(op.type for op in ops),
            compute_cost=np.array([_as_cost(op.cost, f"graph {name!r}: op {op.name!r} cost") for op in ops],
                                  dtype=np.float64),
            kind_cost=kind_cost,
            persistent_memory=np.array([op.persistent_memory for op in ops], dtype=np.int64),
            temporary_memory=np.array([op.temporary_memory for op in ops], dtype=np.int64),
            output_bytes=np.array([op.output_bytes for op in ops], dtype=np.int64),
            output_shapes=tuple(tuple(tuple(int(d) for d in s) for s in op.output_shapes) for op in ops),
            colocation=tuple(op.colocation for op in ops),
            pinned=tuple(op.pinned for op in ops),
            edge_index=np.array([src, dst], dtype=np.int64).reshape(2, -1),
            edge_bytes=np.array(nbytes, dtype=np.int64),
            source=source,
            phase=phase,
            grad_of=grad_of,
        )

    def ops(self) -> list[Op]:
        """The graph as op records (inverse of :meth:`from_ops`)."""
        return [
            Op(
                name=self.op_names[i],
                type=self.op_types[i],
                cost=None if math.isnan(self.compute_cost[i]) else float(self.compute_cost[i]),
                kind_cost={k: float(v[i]) for k, v in self.kind_cost.items() if not math.isnan(v[i])},
                persistent_memory=int(self.persistent_memory[i]),
                temporary_memory=int(self.temporary_memory[i]),
                output_bytes=int(self.output_bytes[i]),
                output_shapes=self.output_shapes[i],
                colocation=self.colocation[i],
                pinned=self.pinned[i],
                phase=self.phase[i] if self.phase else None,
                grad_of=self.op_names[self.grad_of[i]] if self.grad_of and self.grad_of[i] >= 0 else None,
            )
            for i in range(self.num_ops)
        ]

    def edges(self) -> list[Edge]:
        """The edges as records with op names."""
        names = self.op_names
        return [
            Edge(names[s], names[d], int(b))
            for (s, d), b in zip(self.edge_index.T.tolist(), self.edge_bytes.tolist(), strict=True)
        ]

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Check shapes, costs, memory, edges, acyclicity and colocation; raise :class:`GraphError`."""
        n = self.num_ops
        where = f"graph {self.name!r}"
        for label, arr in self._per_op_arrays():
            if arr.shape != (n,):
                raise GraphError(f"{where}: {label} has shape {arr.shape}, expected ({n},)")
        for label, seq in (("op_types", self.op_types), ("output_shapes", self.output_shapes),
                           ("colocation", self.colocation), ("pinned", self.pinned)):
            if len(seq) != n:
                raise GraphError(f"{where}: {label} has {len(seq)} entries, expected {n}")
        if len(self.op_index) != n:
            twice = next(name for i, name in enumerate(self.op_names) if self.op_index[name] != i)
            raise GraphError(f"{where}: duplicate op name {twice!r}")
        for label, arr in self._per_op_arrays():
            kind = "i" if label in ("persistent_memory", "temporary_memory", "output_bytes") else "f"
            if arr.dtype.kind != kind:
                raise GraphError(f"{where}: {label} has dtype {arr.dtype}, expected "
                                 f"{'int64 bytes' if kind == 'i' else 'float64 seconds'}")
        self._validate_costs()
        for label in ("persistent_memory", "temporary_memory", "output_bytes"):
            bad = np.flatnonzero(getattr(self, label) < 0)
            if bad.size:
                i = bad[0]
                raise GraphError(f"{where}: op {self.op_names[i]!r} has negative {label} {getattr(self, label)[i]}")
        total = sum(float(getattr(self, label).sum(dtype=np.float64))
                    for label in ("persistent_memory", "temporary_memory", "output_bytes"))
        if total > MAX_TOTAL_BYTES:
            raise GraphError(f"{where}: its ops hold {total:.4g} bytes in all (persistent, temporary and output), "
                             f"more than the {MAX_TOTAL_BYTES} the simulators' int64 memory totals can sum")
        self._validate_edges()
        self._validate_edge_total(total)
        self._validate_colocation()
        self._validate_phases()
        _ = self.topological_order  # raises on a cycle

    def _per_op_arrays(self) -> list[tuple[str, np.ndarray]]:
        arrays = [("compute_cost", self.compute_cost), ("persistent_memory", self.persistent_memory),
                  ("temporary_memory", self.temporary_memory), ("output_bytes", self.output_bytes)]
        return arrays + [(f"kind_cost[{k!r}]", self.kind_cost[k]) for k in sorted(self.kind_cost)]

    def _validate_costs(self) -> None:
        for label, arr in self._per_op_arrays()[:1] + self._per_op_arrays()[4:]:
            bad = np.flatnonzero(arr < 0)
            if bad.size:
                i = bad[0]
                raise GraphError(f"graph {self.name!r}: op {self.op_names[i]!r} has negative {label} {arr[i]}")
        for label, arr in self._per_op_arrays()[:1] + self._per_op_arrays()[4:]:
            with np.errstate(over="ignore"):
                total = float(np.nansum(arr))
            if not total <= MAX_TOTAL_SECONDS:
                raise GraphError(f"graph {self.name!r}: its ops' {label} add up to {total:.4g} s, more than the "
                                 f"{MAX_TOTAL_SECONDS:.0e} s (about 30 billion years) a step may take here: are the "
                                 "costs in seconds?")
        missing = np.isnan(self.compute_cost)
        for arr in self.kind_cost.values():
            missing &= np.isnan(arr)
        if missing.any():
            i = int(np.flatnonzero(missing)[0])
            raise GraphError(
                f"graph {self.name!r}: op {self.op_names[i]!r} ({self.op_types[i]}) has no compute cost "
                f"({int(missing.sum())} op(s) missing a cost); give 'cost' or 'kind_cost'"
            )

    def _validate_edges(self) -> None:
        ei, n = self.edge_index, self.num_ops
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise GraphError(f"graph {self.name!r}: edge_index has shape {ei.shape}, expected (2, E)")
        for label, arr in (("edge_index", ei), ("edge_bytes", self.edge_bytes)):
            if arr.dtype.kind != "i":
                raise GraphError(f"graph {self.name!r}: {label} has dtype {arr.dtype}, expected int64")
        if self.edge_bytes.shape != (ei.shape[1],):
            raise GraphError(
                f"graph {self.name!r}: edge_bytes has shape {self.edge_bytes.shape}, expected ({ei.shape[1]},)"
            )
        bad = np.flatnonzero((ei < 0).any(0) | (ei >= n).any(0))
        if bad.size:
            raise GraphError(
                f"graph {self.name!r}: edge {bad[0]} {ei[:, bad[0]].tolist()} refers to a missing op (N={n})"
            )
        loops = np.flatnonzero(ei[0] == ei[1])
        if loops.size:
            raise GraphError(f"graph {self.name!r}: self-loop on op {self.op_names[ei[0, loops[0]]]!r}")
        neg = np.flatnonzero(self.edge_bytes < 0)
        if neg.size:
            s, d = ei[:, neg[0]]
            raise GraphError(
                f"graph {self.name!r}: edge {self.op_names[s]!r} -> {self.op_names[d]!r} has negative bytes"
            )

    def _validate_edge_total(self, op_total: float) -> None:
        """Refuse ops' and edges' bytes adding up past :data:`MAX_TOTAL_BYTES` (summed edges overflowed int64 in
        grouping's merged edges and the simulators' bytes moved)."""
        edges = float(self.edge_bytes.sum(dtype=np.float64))
        if op_total + edges > MAX_TOTAL_BYTES:
            raise GraphError(f"graph {self.name!r}: its ops and edges hold {op_total + edges:.4g} bytes in all "
                             f"({edges:.4g} on its edges), more than the {MAX_TOTAL_BYTES} the simulators' and "
                             "grouping's int64 byte totals can sum")

    def _validate_colocation(self) -> None:
        pins: dict[str, tuple[str, str]] = {}
        for name, group, pin in zip(self.op_names, self.colocation, self.pinned, strict=True):
            if group is None or pin is None:
                continue
            if group in pins and pins[group][0] != pin:
                other_pin, other = pins[group]
                raise GraphError(
                    f"graph {self.name!r}: colocation group {group!r} pins {other!r} to {other_pin!r} "
                    f"but {name!r} to {pin!r}"
                )
            pins.setdefault(group, (pin, name))

    def _validate_phases(self) -> None:
        for label, seq in (("phase", self.phase), ("grad_of", self.grad_of)):
            if len(seq) not in (0, self.num_ops):
                raise GraphError(f"graph {self.name!r}: {label} has {len(seq)} entries, expected 0 or {self.num_ops}")
        for name, phase in zip(self.op_names, self.phase, strict=False):
            if phase is not None and phase not in PHASES:
                raise GraphError(f"graph {self.name!r}: op {name!r} has unknown phase {phase!r}; known: {PHASES}")
        for i, (name, j) in enumerate(zip(self.op_names, self.grad_of, strict=False)):
            if not -1 <= j < self.num_ops:
                raise GraphError(f"graph {self.name!r}: op {name!r} has grad_of index {j} out of range")
            if j == i:
                raise GraphError(f"graph {self.name!r}: op {name!r} has grad_of naming itself (the forward op it "
                                 "differentiates is another)")
            if j >= 0:
                self._check_grad_of(name, i, j)

    def _check_grad_of(self, name: str, i: int, j: int) -> None:
        """``grad_of`` links a backward op to a forward one (an op without a phase counts as forward)."""
        phase = self.phase[i] if self.phase else None
        if phase != "backward":
            raise GraphError(f"graph {self.name!r}: op {name!r} has grad_of {self.op_names[j]!r} but phase {phase!r}: "
                             "only a backward op names the forward op it differentiates")
        target = self.phase[j] if self.phase else None
        if target not in (None, "forward"):
            raise GraphError(f"graph {self.name!r}: op {name!r} has grad_of {self.op_names[j]!r}, a {target} op: "
                             "grad_of names a forward op")

    @property
    def has_phases(self) -> bool:
        """Whether any op carries a phase or a ``grad_of``."""
        return bool(self.phase or self.grad_of)

    def phase_codes(self) -> np.ndarray:
        """(N,) int64: :data:`FORWARD` (also ops without a phase), :data:`BACKWARD` or :data:`UPDATE`."""
        codes = [PHASES.index(p) if p else FORWARD for p in self.phase] if self.phase else np.zeros(self.num_ops)
        return np.array(codes, dtype=np.int64)

    # ------------------------------------------------------------------ derived structure
    @property
    def num_ops(self) -> int:
        """Number of ops N."""
        return len(self.op_names)

    @property
    def num_edges(self) -> int:
        """Number of edges E."""
        return int(self.edge_index.shape[1])

    @cached_property
    def op_index(self) -> Mapping[str, int]:
        """Op name -> index (read-only)."""
        return FrozenDict((n, i) for i, n in enumerate(self.op_names))

    @cached_property
    def out_csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Outgoing edges as CSR: ``(ptr (N+1,), dst (E,), edge id (E,))``, grouped by source; read-only."""
        return tuple(map(frozen_array, csr(self.edge_index[0], self.edge_index[1], self.num_ops)))

    @cached_property
    def in_csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Incoming edges as CSR: ``(ptr (N+1,), src (E,), edge id (E,))``, grouped by destination; read-only."""
        return tuple(map(frozen_array, csr(self.edge_index[1], self.edge_index[0], self.num_ops)))

    @cached_property
    def topological_order(self) -> np.ndarray:
        """(N,) int64 op indices in a topological order (Kahn, smallest index first among ready ops); read-only.

        Raises:
            GraphError: the graph has a cycle; the message names ops on it.
        """
        import heapq

        ptr, dst, _ = self.out_csr
        indeg = np.bincount(self.edge_index[1], minlength=self.num_ops).tolist()
        ready = [i for i in range(self.num_ops) if indeg[i] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for j in dst[ptr[i]:ptr[i + 1]].tolist():
                indeg[j] -= 1
                if indeg[j] == 0:
                    heapq.heappush(ready, j)
        if len(order) < self.num_ops:
            cycle = [repr(name) for name in self._find_cycle(indeg)]
            if len(cycle) > 10:  # a 100,000-op cycle made a message of a million characters
                cycle = [*cycle[:5], f"... ({len(cycle) - 1} ops in all)", *cycle[-3:]]
            raise GraphError(f"graph {self.name!r} has a cycle through ops {' -> '.join(cycle)}")
        return frozen_array(np.array(order, dtype=np.int64))

    @cached_property
    def topological_position(self) -> np.ndarray:
        """(N,) int64 position of each op in :attr:`topological_order` (its inverse); read-only."""
        position = np.empty(self.num_ops, dtype=np.int64)
        position[self.topological_order] = np.arange(self.num_ops)
        return frozen_array(position)

    def first_positions(self, labels: np.ndarray, count: int) -> np.ndarray:
        """(count,) int64 earliest :attr:`topological_position` of the ops of each label (``num_ops`` for a label
        no op has). Shapes: ``labels`` (N,) int in ``[0, count)``."""
        first = np.full(count, self.num_ops, dtype=np.int64)
        np.minimum.at(first, labels, self.topological_position)
        return first

    def _find_cycle(self, indeg: list[int]) -> list[str]:
        """Names of ops on one cycle among the ops Kahn's algorithm could not order."""
        ptr, src, _ = self.in_csr
        start = next(i for i, d in enumerate(indeg) if d > 0)
        seen: dict[int, int] = {}
        path = []
        node = start
        while node not in seen:
            seen[node] = len(path)
            path.append(node)
            node = next(int(p) for p in src[ptr[node]:ptr[node + 1]] if indeg[p] > 0)
        cycle = path[seen[node]:][::-1]
        return [self.op_names[i] for i in [*cycle, cycle[0]]]

    @cached_property
    def fingerprint(self) -> str:
        """Content hash (sha256 hex, 16 chars) of everything a placement depends on."""
        h = hashlib.sha256()
        h.update(json.dumps([self.op_names, self.op_types, self.colocation, self.pinned,
                             sorted(self.kind_cost)]).encode())
        for _, arr in self._per_op_arrays():
            h.update(np.ascontiguousarray(arr + 0).tobytes())  # + 0: a cost of -0.0 hashes as 0.0
        h.update(np.ascontiguousarray(self.edge_index).tobytes())
        h.update(np.ascontiguousarray(self.edge_bytes).tobytes())
        if self.has_phases:  # graphs without phases keep their old fingerprints
            h.update(json.dumps([self.phase, self.grad_of]).encode())
        return h.hexdigest()[:16]

    # ------------------------------------------------------------------ costs on a cluster
    def durations(self, cluster: Cluster) -> np.ndarray:
        """(N, D) float64 seconds each op takes on each device of ``cluster``.

        An op's per-kind cost for the device's kind is used where known, else its generic cost;
        either is divided by the device's speed. ``inf`` where the op has neither. Read-only; cached per cluster.
        """
        key = cluster.fingerprint
        with _DURATIONS_LOCK:  # threads measuring one graph on many clusters share this cache
            cache = self.__dict__.setdefault("_durations", {})
            found = cache.get(key)
        if found is not None:
            return found
        out = self._compute_durations(cluster)
        with _DURATIONS_LOCK:
            while len(cache) >= 8:
                del cache[next(iter(cache))]
            cache[key] = out
        return out

    def _compute_durations(self, cluster: Cluster) -> np.ndarray:
        out = np.empty((self.num_ops, cluster.num_devices), dtype=np.float64)
        for j, dev in enumerate(cluster.devices):
            cost = self.compute_cost
            if dev.kind in self.kind_cost:
                kc = self.kind_cost[dev.kind]
                cost = np.where(np.isnan(kc), cost, kc)
            out[:, j] = np.where(np.isnan(cost), np.inf, cost) / dev.speed
        out.setflags(write=False)
        return out

    def allowed_devices(self, cluster: Cluster) -> np.ndarray:
        """(N, D) bool: where each op may run (its pinned kind, and a finite duration).

        Raises:
            GraphError: an op can run on no device of the cluster.
        """
        kinds = np.array(cluster.kinds)
        pinned = np.array([p if p is not None else "" for p in self.pinned])
        ok = (pinned[:, None] == "") | (pinned[:, None] == kinds[None, :])
        ok &= np.isfinite(self.durations(cluster))
        dead = np.flatnonzero(~ok.any(1))
        if dead.size:
            i = dead[0]
            pin = self.pinned[i]
            why = ""
            if pin is None or pin in cluster.kinds:  # else the pin names a kind the cluster lacks: said above
                lacking = "any of them" if pin is None else f"kind {pin!r}"
                why = f": it has no cost for {lacking} (its costs are for {self._costed_kinds(i)})"
            raise GraphError(
                f"graph {self.name!r}: op {self.op_names[i]!r} (pinned={pin!r}) can run on no device of cluster "
                f"{cluster.name!r} (kinds {sorted(set(cluster.kinds))}){why}"
            )
        return ok

    def _costed_kinds(self, op: int) -> str:
        """The device kinds op ``op`` has a cost for, as words: ``['gpu']``, or ``every kind`` (a generic cost)."""
        if np.isfinite(self.compute_cost[op]):
            return "every kind"
        return str(sorted(kind for kind, cost in self.kind_cost.items() if np.isfinite(cost[op])))


MAX_BYTES = 2**63 - 1
"""The largest byte count an op, edge or device may hold (int64)."""
MAX_TOTAL_SECONDS = 1e18
"""The most seconds of work (at speed 1) a graph's ops may add up to, per device kind: the step times, and the
rewards made from them, stay finite in float32 and float64 (costs of 1e308 s overflowed to an ``inf`` step time
reported ``ok``, and of 1e76 s to NaN policy weights), while costs given in flops (``load_doppler(path,
flops_per_second=1)``: 3.9e12 for a transformer layer) still load."""
MAX_TOTAL_BYTES = 2**62
"""The most bytes all of a graph's ops may hold together (persistent, temporary and output) plus all its edges
carry, so that the simulators' int64 memory and transfer totals (per device, times micro-batches in flight) and
grouping's merged edges cannot overflow."""


def _native(value: Any, kind: str) -> np.ndarray:
    """A read-only copy of ``value``; as native int64 (``kind`` ``"i"``) or float64 (``"f"``) where its dtype is
    of that kind (a bool, unsigned or other dtype stays as given, for :meth:`OpGraph.validate` to name)."""
    arr = np.array(value)
    if arr.dtype.kind == kind:
        arr = arr.astype(np.int64 if kind == "i" else np.float64, copy=False)
    return frozen_array(arr)


def _as_cost(value: Any, where: str) -> float:
    """A cost in seconds: ``None`` (unknown) is NaN; anything but a finite number is a :class:`GraphError`."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise GraphError(f"{where} must be a number of seconds, got {short_repr(value)}")
    try:
        cost = float(value)
    except OverflowError:  # a Python int past float64's range
        raise GraphError(f"{where} is {short_repr(value)}, too large a number of seconds") from None
    if not math.isfinite(cost):
        raise GraphError(f"{where} is {cost} (a cost must be finite; leave it out when unknown)")
    return cost  # a negative cost is named by OpGraph.validate


def _as_bytes(value: Any, where: str) -> int:
    """A whole number of bytes that fits int64, else a :class:`GraphError` naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise GraphError(f"{where} must be a whole number of bytes, got {short_repr(value)}")
    if isinstance(value, float | np.floating) and not (math.isfinite(value) and float(value).is_integer()):
        raise GraphError(f"{where} must be a whole number of bytes, got {short_repr(value)}")
    number = int(value)  # compared exactly: float(MAX_BYTES) rounds up to 2**63, which int64 cannot hold
    if not -MAX_BYTES <= number <= MAX_BYTES:  # a negative count is named by OpGraph.validate
        raise GraphError(f"{where} is {short_repr(value)} bytes, more than the largest supported ({MAX_BYTES})")
    return number


def _check_op_fields(op: Op, where: str) -> None:
    """Raise :class:`GraphError` naming the op and field unless every field of ``op`` has its declared type."""
    if not isinstance(op.name, str) or not op.name:
        raise GraphError(f"{where}: an op name must be a non-empty string, got {short_repr(op.name)}")
    where = f"{where}: op {op.name!r}"
    if not isinstance(op.type, str) or not op.type:
        raise GraphError(f"{where} type must be a non-empty string, got {short_repr(op.type)}")
    for label in ("persistent_memory", "temporary_memory", "output_bytes"):
        _as_bytes(getattr(op, label), f"{where} {label}")
    for label in ("colocation", "pinned", "phase", "grad_of"):
        value = getattr(op, label)
        if value is not None and (not isinstance(value, str) or not value):
            raise GraphError(f"{where} {label} must be a non-empty string or null, got {short_repr(value)}")
    if not isinstance(op.kind_cost, Mapping) or not all(isinstance(k, str) and k for k in op.kind_cost):
        raise GraphError(f"{where} kind_cost must map device kinds (non-empty strings) to seconds, "
                         f"got {short_repr(op.kind_cost)}")
    if not isinstance(op.output_shapes, Sequence) or isinstance(op.output_shapes, str):
        raise GraphError(f"{where} output_shapes must be a sequence of shapes (lists of dimensions), "
                         f"got {short_repr(op.output_shapes)}")
    for shape in op.output_shapes:
        if not isinstance(shape, Sequence) or not all(
                isinstance(d, int | np.integer) and not isinstance(d, bool) and -1 <= d <= MAX_BYTES for d in shape):
            raise GraphError(f"{where} output_shapes must be lists of dimensions >= -1, got {short_repr(shape)}")


def _phases(
    ops: Sequence[Op], index: Mapping[str, int], name: str
) -> tuple[tuple[str | None, ...], tuple[int, ...]]:
    """Per-op phases and ``grad_of`` indices, both empty when no op has one."""
    for op in ops:
        if op.grad_of is not None and op.grad_of not in index:
            raise GraphError(f"graph {name!r}: op {op.name!r} has grad_of {op.grad_of!r}, which is not an op")
    phase = tuple(op.phase for op in ops) if any(op.phase is not None for op in ops) else ()
    has_grad = any(op.grad_of is not None for op in ops)
    grad_of = tuple(index[op.grad_of] if op.grad_of is not None else -1 for op in ops) if has_grad else ()
    return phase, grad_of


def csr(keys: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Compressed rows of ``(key, value)`` pairs: ``ptr`` (n + 1,), then the values and the pair indices in key
    order (stable), so row ``k`` is ``values[ptr[k]:ptr[k + 1]]``."""
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, values[order].astype(np.int64), order.astype(np.int64)
