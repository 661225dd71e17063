"""A human expert's placement: regex rules on op names, and the paper's expert placements per model family.

An expert placement is what an engineer writes with ``tf.device`` scopes: whole layers on chosen GPUs. The
rules name the layers; everything a scope would not name is filled in as TensorFlow fills it in:

1. **Forward ops**: the first rule whose pattern matches the op name (``re.search``) gives its device;
   :class:`InceptionExpert` then assigns the ops its structural analysis finds.
2. **Gradient ops** (``backward`` ops where the graph has phases, else names under ``gradient_tape/`` or
   ``grad/``) follow their forward op, as ``colocate_gradients_with_ops`` does: the op the graph's
   :attr:`~gplace.ir.OpGraph.grad_of` names, else the one found by name prefix
   (``gradient_tape/a/b/MatMul/MatMul_1`` follows ``a/b/MatMul``, else ``a/b``, ...); a gradient op with no
   placed forward op goes by the rules.
3. With ``follow_neighbours``, an op still without a device takes the device of the producer that sends it
   the most bytes (in topological order, so chains follow), else of its heaviest consumer: the gradient
   sums (``AddN``), the constants and the optimiser ops no variable owns land next to the tensors they use.
   Unnamed forward ops downstream of placed ones are filled from their producers before step 2, so a
   gradient op follows them too.
4. Every op left goes to ``default``, except the **optimiser ops** (``update`` phase) the rules left unnamed
   that belong to one variable (:func:`update_owners`): they and the variable's slots (momentum,
   accumulators) go where the variable goes, as TensorFlow colocates slots and updates with their variable.

Device specs: ``"gpu:k"`` is the k-th GPU of the cluster modulo the number of GPUs (``"gpu:-1"`` the last);
any ``"kind:k"`` or ``"kind"`` likewise (``"cpu"`` = the first CPU); anything else is a device name
(``"/GPU:1"``). Colocation groups go where their first member (lowest op index) goes; an op or group pinned to
a kind its device is not goes to the fastest device it may run on; a gradient op or optimiser op then goes where
the op or variable it follows went. Not memory-aware (a human expert's plan
is taken as written; a plan too big for a device is reported failed by the runtime).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from gplace.baselines._common import build_units, unit_durations
from gplace.baselines.base import Placer
from gplace.baselines.single import SingleDevice
from gplace.ir import Cluster, GraphError, OpGraph
from gplace.ir.errors import check_flags, check_sizes
from gplace.ir.graph import UPDATE, VARIABLE_OPS

GRADIENT_PREFIXES: tuple[str, ...] = ("gradient_tape/", "grad/")
"""Name prefixes of backward ops: TF2's ``GradientTape`` scope and :func:`gplace.zoo.lstm_lm`'s."""

UNSET = -1


def resolve_device(spec: str, cluster: Cluster) -> int:
    """Device index of a spec: a device name, else ``"gpu:k"`` (k-th GPU modulo their number) or ``"kind"`` (a
    device named ``"gpu:0"`` is that device, wherever the cluster lists it).

    Raises:
        GraphError: the spec names no device of the cluster (the message lists kinds and names).
    """
    if spec in cluster.device_names:
        return cluster.index(spec)
    kind, _, k = spec.partition(":")
    of_kind = [d for d, x in enumerate(cluster.kinds) if x == kind]
    if of_kind and (k == "" or re.fullmatch(r"-?\d+", k)):
        return of_kind[int(k or 0) % len(of_kind)]
    raise GraphError(f"device spec {spec!r} names no device of cluster {cluster.name!r}: kinds "
                     f"{sorted(set(cluster.kinds))}, devices {list(cluster.device_names)}")


def _names(where: str, field: str, names: object) -> tuple[str, ...]:
    """``names`` as a tuple of strings; one string (``"gradients/"``, read as its letters) is refused."""
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise ValueError(f"{where}: {field} must be a list of strings, got {names!r}")
    names = tuple(names)
    if not all(isinstance(n, str) for n in names):
        raise ValueError(f"{where}: {field} must be a list of strings, got {list(names)!r}")
    return names


def _rules(where: str, rules: object) -> list[tuple[str, str]]:
    """``rules`` as a list of ``(pattern, spec)`` string pairs; one string or a pair given as one string
    (``"a0"``, read as pattern ``"a"`` and spec ``"0"``), a triple or a non-string part is refused, naming the
    entry."""
    if isinstance(rules, str | bytes) or not isinstance(rules, Iterable):
        raise ValueError(f"{where}: rules must be a list of (pattern, device spec) pairs, got {rules!r}")
    checked = []
    for i, rule in enumerate(rules):
        pair = None if isinstance(rule, str | bytes) or not isinstance(rule, Iterable) else tuple(rule)
        if pair is None or len(pair) != 2 or not all(isinstance(x, str) for x in pair):
            raise ValueError(f"{where}: rules[{i}] must be a (pattern, device spec) pair of strings such as "
                             f"('lstm0', 'gpu:0'), got {rule!r}")
        checked.append(pair)
    return checked


class Expert(Placer):
    """A human-expert placement from ``(regex, device spec)`` rules on op names; first match wins.

    Args:
        rules: ``(pattern, spec)`` pairs, tried in order with ``re.search`` on each op name.
        default: spec for ops no rule (nor gradient, variable or neighbour following) places. (default:
            ``"gpu:0"``)
        follow_neighbours: fill unplaced ops from their heaviest placed producer, else consumer.
            (default: ``False``: unmatched ops go to ``default``)
        gradient_prefixes: name prefixes of backward ops (in a graph without phases), which follow their forward
            op by name (the prefix stripped). (default: :data:`GRADIENT_PREFIXES`)

    Raises:
        ValueError: ``rules`` is no sequence of ``(pattern, spec)`` pairs of strings (the message names the
            entry), a pattern is not a valid regular expression, ``default`` is no string, ``follow_neighbours``
            is no bool, or ``gradient_prefixes`` is no sequence of strings (one string, which would be read as its
            letters).
    """

    name = "expert"

    def __init__(self, rules: Sequence[tuple[str, str]] = (), default: str = "gpu:0", *,
                 follow_neighbours: bool = False, gradient_prefixes: Sequence[str] = GRADIENT_PREFIXES) -> None:
        self.rules = _rules(type(self).__name__, rules)
        check_flags(type(self).__name__, follow_neighbours=follow_neighbours)
        if not isinstance(default, str):
            raise ValueError(f"{type(self).__name__}: default must be a device spec such as 'gpu:0', 'gpu' or a "
                             f"device name, got {default!r}")
        self.default = default
        self.follow_neighbours = follow_neighbours
        self.gradient_prefixes = _names(type(self).__name__, "gradient_prefixes", gradient_prefixes)
        self._compiled = [(_compile(p), s) for p, s in self.rules]

    def _place(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        device, followed = self._plan(graph, cluster)
        placed = _constrain(graph, cluster, device)
        again = followed != UNSET  # a pin or colocation group moved what they follow: they go where it went
        for _ in range(_REFOLLOW_ROUNDS):
            if np.array_equal(placed[again], placed[followed[again]]):
                break
            device = placed.copy()
            device[again] = placed[followed[again]]
            moved = _constrain(graph, cluster, device)
            if np.array_equal(moved, placed):  # a follower pinned elsewhere, or leading another group: as it is
                break
            placed = moved
        return placed

    def op_devices(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        """(N,) int64 device of every op by the expert's plan, before pins and colocation groups are applied."""
        return self._plan(graph, cluster)[0]

    def _plan(self, graph: OpGraph, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`op_devices`, and (N,) int64 the op each gradient op or owned optimiser op follows (else -1)."""
        backward = self._backward(graph)
        updating = graph.phase_codes() == UPDATE
        owner = update_owners(graph)
        device = np.full(graph.num_ops, UNSET, dtype=np.int64)
        followed = np.full(graph.num_ops, UNSET, dtype=np.int64)
        specs: dict[str, int] = {}
        for i in np.flatnonzero(~backward).tolist():
            device[i] = self._match(graph.op_names[i], cluster, specs)
        self._structural(graph, cluster, device, ~backward & ~updating)
        if self.follow_neighbours:  # the forward ops only: the optimiser's follow their variable, or come last
            _follow_neighbours(graph, device, movable=~backward & ~updating & (owner == UNSET), consumers=False)
        self._follow_forward(graph, cluster, device, backward, specs, followed)
        follows = ((owner != UNSET) | (followed != UNSET)) & (device == UNSET)
        followed = np.where(follows & (owner != UNSET), owner, followed)
        if self.follow_neighbours:
            _follow_neighbours(graph, device, movable=~follows, consumers=True)
        device[(device == UNSET) & ~follows] = resolve_device(self.default, cluster)
        device[follows] = device[followed[follows]]
        return device, followed

    def _backward(self, graph: OpGraph) -> np.ndarray:
        """(N,) bool: the backward ops, by :attr:`OpGraph.phase` where the graph has phases (a variable named
        ``gradient_tape/kernel`` is forward; the tape's seed ``ones`` backward), else (and for an op whose phase is
        unknown) by :attr:`gradient_prefixes`."""
        phases = graph.phase or (None,) * graph.num_ops
        return np.array([n.startswith(self.gradient_prefixes) if p is None else p == "backward"
                         for n, p in zip(graph.op_names, phases, strict=True)], dtype=bool)

    def _structural(self, graph: OpGraph, cluster: Cluster, device: np.ndarray, forward: np.ndarray) -> None:
        """Hook: assign forward ops the rules left unset (``device`` == -1) from the graph's structure."""

    def _match(self, name: str, cluster: Cluster, specs: dict[str, int]) -> int:
        for pattern, spec in self._compiled:
            if pattern.search(name):
                if spec not in specs:
                    specs[spec] = resolve_device(spec, cluster)
                return specs[spec]
        return UNSET

    def _follow_forward(self, graph: OpGraph, cluster: Cluster, device: np.ndarray, backward: np.ndarray,
                        specs: dict[str, int], followed: np.ndarray) -> None:
        """Gradient ops follow their forward op (noted in ``followed``): the one ``grad_of`` names (its device now,
        or, not placed yet, where it lands: :meth:`_plan` fills it in), else the longest placed name prefix; else
        the rules place them."""
        index = graph.op_index
        grad_of = graph.grad_of or (UNSET,) * graph.num_ops
        for i in np.flatnonzero(backward).tolist():
            j = grad_of[i]
            if j == UNSET or backward[j]:
                name = graph.op_names[i]
                parts = name[next((len(p) for p in self.gradient_prefixes if name.startswith(p)), 0):].split("/")
                found = (index.get("/".join(parts[:k])) for k in range(len(parts), 0, -1))
                j = next((j for j in found if j is not None and not backward[j] and device[j] != UNSET), None)
            if j is None:
                device[i] = self._match(graph.op_names[i], cluster, specs)
            else:
                device[i], followed[i] = device[j], j


class InceptionExpert(Expert):
    """Inception's expert placement: the parallel branches of every Inception block on different GPUs.

    Blocks are found from the graph, not from names: a block ends in a forward concat op (``concat_types``)
    with two or more non-constant inputs, unless a later concat reaches it through some of its inputs but
    not all: such a concat lies inside one branch (Inception-V3's ``mixed9_0``, ``concatenate``) and stays
    with that branch. Going through the blocks in topological order, branch ``j`` of a block is every op that
    reaches the block's ``j``-th non-constant input and no other input, and no earlier block's output (its
    convolutions, batch norms, weights and reads); it goes to ``gpu:j`` (round robin, restarting at GPU 0
    in each block). The stem, ops shared by several branches and the block concats go to ``default``; ops
    after the last block (pooling, classifier, loss) follow their producers. Gradient ops follow their
    forward op (``grad_of``, else by name); optimiser ops and slots follow the variable they update, gradient sums
    and shared optimiser ops their neighbours.

    Args:
        rules: ``(pattern, spec)`` rules applied before the structural pass. (default: none)
        default: spec for the stem, block concats and unplaced ops. (default: ``"gpu:0"``)
        concat_types: op types that join a block's branches. (default: TF's ``ConcatV2``, ONNX's ``Concat``,
            ``torch.export``'s ``aten.cat.default``)
        gradient_prefixes: name prefixes of backward ops (in a graph without phases), which follow their forward
            op by name (the prefix stripped). (default: :data:`GRADIENT_PREFIXES`)

    Raises:
        ValueError: as :class:`Expert`'s, or ``concat_types`` is no sequence of strings.
    """

    def __init__(self, rules: Sequence[tuple[str, str]] = (), default: str = "gpu:0", *,
                 concat_types: Sequence[str] = ("ConcatV2", "Concat", "aten.cat.default"),
                 gradient_prefixes: Sequence[str] = GRADIENT_PREFIXES) -> None:
        super().__init__(rules, default, follow_neighbours=True, gradient_prefixes=gradient_prefixes)
        self.concat_types = _names(type(self).__name__, "concat_types", concat_types)

    def _structural(self, graph: OpGraph, cluster: Cluster, device: np.ndarray, forward: np.ndarray) -> None:
        blocks = inception_branches(graph, forward, self.concat_types)
        if not blocks:
            return
        for block in blocks:
            for j, ops in enumerate(block.branches):
                ops = ops[device[ops] == UNSET]
                device[ops] = resolve_device(f"gpu:{j}", cluster)
        home = resolve_device(self.default, cluster)
        last = blocks[-1].concat
        up_to_last = _ancestors(graph, last, forward)
        device[up_to_last & (device == UNSET)] = home


@dataclass(frozen=True, eq=False)
class InceptionBlock:
    """One Inception block found in a graph."""

    concat: int
    """Index of the op that joins the branches."""
    branches: tuple[np.ndarray, ...]
    """Op indices ((K,) int64, ascending) of each branch, in the order of the concat's inputs."""


def inception_branches(graph: OpGraph, forward: np.ndarray, concat_types: Sequence[str]) -> list[InceptionBlock]:
    """The blocks of an Inception-style graph, in topological order, each with its branches' ops.

    See :class:`InceptionExpert` for what a block and a branch are.

    Shapes:
        ``forward`` (N,) bool, the ops to consider (backward ops excluded).
    """
    concats = _block_concats(graph, forward, set(concat_types))
    ptr, src, _ = graph.in_csr
    ptr_l, src_l = ptr.tolist(), src.tolist()
    claimed = ~forward.copy()
    blocks = []
    for c in concats:
        inputs = [u for u in dict.fromkeys(src_l[ptr_l[c]:ptr_l[c + 1]]) if graph.op_types[u] != "Const"]
        owner = _branch_owners(inputs, ptr_l, src_l, claimed)
        claimed[list(owner)] = True
        claimed[c] = True
        branches = tuple(np.array(sorted(v for v, o in owner.items() if o == j), dtype=np.int64)
                         for j in range(len(inputs)))
        blocks.append(InceptionBlock(c, branches))
    return blocks


def _branch_owners(inputs: list[int], ptr: list[int], src: list[int], claimed: np.ndarray) -> dict[int, int]:
    """Op -> index of the one input it reaches (-1 if it reaches several), over unclaimed ancestors."""
    owner: dict[int, int] = {}
    for j, start in enumerate(inputs):
        if claimed[start]:
            continue
        stack = [start]
        while stack:
            v = stack.pop()
            prev = owner.get(v)
            if prev == j or prev == -1:
                continue
            owner[v] = j if prev is None else -1
            stack.extend(u for u in src[ptr[v]:ptr[v + 1]] if not claimed[u])
    return owner


def _block_concats(graph: OpGraph, forward: np.ndarray, types: set[str]) -> list[int]:
    """Forward concats with two or more non-constant inputs that no later concat has inside one branch only."""
    ptr, src, _ = graph.in_csr
    ptr_l, src_l = ptr.tolist(), src.tolist()
    order = [i for i in graph.topological_order.tolist() if forward[i]]
    inputs = {i: [u for u in set(src_l[ptr_l[i]:ptr_l[i + 1]]) if graph.op_types[u] != "Const"]
              for i in order if graph.op_types[i] in types}
    concats = [i for i in order if len(inputs.get(i, ())) >= 2]
    bit = {c: 1 << k for k, c in enumerate(concats)}
    above = [0] * graph.num_ops
    for v in order:
        mask = 0
        for u in src_l[ptr_l[v]:ptr_l[v + 1]]:
            mask |= above[u] | bit.get(u, 0)
        above[v] = mask
    inner = 0
    for d in concats:
        reach = [above[u] | bit.get(u, 0) for u in inputs[d]]
        everywhere = reach[0]
        for r in reach[1:]:
            everywhere &= r
        inner |= (above[d] & ~everywhere)
    return [c for c in concats if not inner & bit[c]]


def _ancestors(graph: OpGraph, op: int, within: np.ndarray) -> np.ndarray:
    """(N,) bool: ``op`` and every op in ``within`` it depends on (through ops in ``within``)."""
    ptr, src, _ = graph.in_csr
    ptr_l, src_l = ptr.tolist(), src.tolist()
    seen = np.zeros(graph.num_ops, dtype=bool)
    stack = [op]
    while stack:
        v = stack.pop()
        if seen[v] or not within[v]:
            continue
        seen[v] = True
        stack.extend(src_l[ptr_l[v]:ptr_l[v + 1]])
    return seen


# ---------------------------------------------------------------------- filling in and constraints
def _follow_neighbours(graph: OpGraph, device: np.ndarray, movable: np.ndarray, consumers: bool) -> None:
    """Unset movable ops take the device of their heaviest placed unpinned producer (in topological order),
    then, with ``consumers``, those still unset that of their heaviest placed consumer (in reverse order)."""
    pinned = np.array([p is not None for p in graph.pinned], dtype=bool)
    order = graph.topological_order.tolist()
    edge_bytes = graph.edge_bytes.tolist()
    passes = [(graph.in_csr, order)] + ([(graph.out_csr, order[::-1])] if consumers else [])
    for csr, ops in passes:
        ptr, other, eid = (a.tolist() for a in csr)
        for v in ops:
            if device[v] != UNSET or not movable[v]:
                continue
            best, heaviest = UNSET, -1
            for k in range(ptr[v], ptr[v + 1]):
                u = other[k]
                if device[u] != UNSET and not pinned[u] and edge_bytes[eid[k]] > heaviest:
                    best, heaviest = int(device[u]), edge_bytes[eid[k]]
            device[v] = best


_REFOLLOW_ROUNDS = 8
"""At most this many rounds of putting followers where pins and colocation groups put what they follow."""


def update_owners(graph: OpGraph) -> np.ndarray:
    """(N,) int64: the variable each optimiser op or slot variable belongs to (its op index), else -1.

    A variable (``VarHandleOp``, ``VariableV2``) read outside the ``update`` phase is a model variable; one read
    only by ``update`` ops is a slot (momentum, accumulator) or optimiser state. Ownership spreads over the
    ``update`` ops and the slots until nothing changes: an op owns what its consumers own (shared ones have no
    say), else (an assignment, which has none) what its variable inputs own (a model variable owns itself), else,
    where it has consumers, the one variable its producers own (the arithmetic of a moving average); where its
    consumers or variable inputs own different variables, the op is shared, for good. Shared ops (the gradients'
    ``IdentityN``, the learning rate, the step count) are unowned. Every op is unowned in a graph without phases.
    """
    owner = np.full(graph.num_ops, UNSET, dtype=np.int64)
    if not graph.has_phases:
        return owner
    update = graph.phase_codes() == UPDATE
    out_ptr, dst, _ = (a.tolist() for a in graph.out_csr)
    in_ptr, src, _ = (a.tolist() for a in graph.in_csr)
    variable = [t in VARIABLE_OPS for t in graph.op_types]
    slots = [v for v in np.flatnonzero(variable).tolist() if all(update[w] for w in dst[out_ptr[v]:out_ptr[v + 1]])]
    label = [v if variable[v] else UNSET for v in range(graph.num_ops)]  # model variables own themselves
    spread = [i for i in graph.topological_order.tolist()[::-1] if update[i]] + slots
    for v in spread:
        label[v] = UNSET
    changed = True
    while changed:  # a label only rises (unowned, owned, shared), so this ends
        changed = False
        for v in spread:
            consumers = dst[out_ptr[v]:out_ptr[v + 1]]
            now = _join([label[w] for w in consumers if label[w] != SHARED])  # a shared group or counter: no say
            if now == UNSET:  # no consumer owned (an assignment has none): the variable it writes
                now = _join([label[u] for u in src[in_ptr[v]:in_ptr[v + 1]] if variable[u]])
            if now == UNSET and consumers:  # nor a variable input: its producers' one owner (an average's sum)
                owners = {label[u] for u in src[in_ptr[v]:in_ptr[v + 1]]} - {UNSET, SHARED}
                now = owners.pop() if len(owners) == 1 else UNSET
            if label[v] not in (UNSET, now):  # owned by one variable, then by another: shared
                now = SHARED
            if now != label[v]:
                label[v], changed = now, True
    owner[spread] = [max(label[v], UNSET) for v in spread]
    return owner


SHARED = -2
"""An op of several variables' updates, in :func:`update_owners`."""


def _join(labels: list[int]) -> int:
    """The one owner among ``labels`` (unowned ones ignored); :data:`SHARED` where they name several, or one is."""
    owners = set(labels) - {UNSET}
    return owners.pop() if len(owners) == 1 else SHARED if owners else UNSET


def _constrain(graph: OpGraph, cluster: Cluster, device: np.ndarray) -> np.ndarray:
    """Each colocation group on its first member's device; a unit that may not run there on its fastest device."""
    units = build_units(graph, cluster)
    first = np.full(units.num_units, graph.num_ops, dtype=np.int64)
    np.minimum.at(first, units.unit_of, np.arange(graph.num_ops))
    unit_device = device[first]
    ok = units.allowed[np.arange(units.num_units), unit_device]
    time = np.where(units.allowed, unit_durations(units, graph.durations(cluster)), np.inf)
    return np.where(ok, unit_device, np.argmin(time, axis=1))[units.unit_of]


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as err:
        raise ValueError(f"expert rule {pattern!r} is not a valid regular expression: {err}") from None


# ---------------------------------------------------------------------- the paper's experts
def _scope(name: str) -> str:
    """A regex for a Keras layer scope ``name`` (``name/``, ``model_1/name_1/``, ``grad/name/`` ...)."""
    return rf"(?:^|/){name}(?:_\d+)?(?:/|$)"


def rnnlm_expert(layers: int = 2) -> Expert:
    """The paper's RNNLM expert: LSTM layer ``l`` on GPU ``l`` mod G, the embedding with layer 0, the
    softmax (logits and loss) on the last GPU. Matches :func:`gplace.zoo.keras_models.rnnlm` and
    :func:`gplace.zoo.lstm_lm` names.

    Args:
        layers: LSTM layers. (default: ``2``)

    Raises:
        ValueError: ``layers`` is not a whole number >= 1.
    """
    check_sizes("rnnlm_expert", layers=layers)  # 0 gave no LSTM rules, "2" a TypeError from range
    rules = [(_scope(r"embed(?:ding)?"), "gpu:0")]
    rules += [(_scope(f"lstm{layer}"), f"gpu:{layer}") for layer in range(layers)]
    rules += [(_scope("(?:logits|softmax|loss|sparse_categorical_crossentropy)"), "gpu:-1")]
    return Expert(rules, "gpu:0", follow_neighbours=True)


def nmt_expert(layers: int = 2) -> Expert:
    """The GNMT-style expert for attentional NMT: encoder layer ``l`` and decoder layer ``l`` on GPU ``l`` mod
    G (embeddings with layer 0), the attention on GPU ``layers`` mod G and the softmax (output projection,
    logits, loss) on GPU ``layers + 1`` mod G. Matches :func:`gplace.zoo.keras_models.nmt` and ``gnmt8``.

    The attention's unnamed ops (``nmt_1/Tanh_3``, ``Softmax``, ``Sum``, ``Mul``, ``ExpandDims``, ``Add``
    directly under the model scope) are matched by type name; in ``gnmt8`` that also catches the decoder's
    residual ``Add`` ops (cheap element-wise adds).

    Args:
        layers: LSTM layers in the encoder and in the decoder. (default: ``2``)

    Raises:
        ValueError: ``layers`` is not a whole number >= 1.
    """
    check_sizes("nmt_expert", layers=layers)
    rules = [(_scope("(?:source|target)_embedding"), "gpu:0")]
    for layer in range(layers):
        rules += [(_scope(f"encoder{layer}(?:_bidi)?"), f"gpu:{layer}"), (_scope(f"decoder{layer}"), f"gpu:{layer}")]
    rules += [(_scope("attention_(?:keys|query|score)"), f"gpu:{layers}"),
              (r"^(?:gradient_tape/)?g?nmt_\d+/(?:Tanh|Softmax|Sum|Mul|ExpandDims|Add)(?:_\d+)?(?:/|$)",
               f"gpu:{layers}"),
              (_scope("(?:attention_out|logits|sparse_categorical_crossentropy)"), f"gpu:{layers + 1}")]
    return Expert(rules, "gpu:0", follow_neighbours=True)


def inception_expert() -> InceptionExpert:
    """The Inception expert: each block's parallel branches on different GPUs (see :class:`InceptionExpert`)."""
    return InceptionExpert()


def expert_for(graph_name: str) -> Placer:
    """The expert placer for a graph, by its name's model family; a single GPU when the family is unknown.

    ``rnnlm*`` / ``lstm_lm*`` -> :func:`rnnlm_expert`, ``nmt*`` / ``gnmt*`` -> :func:`nmt_expert`, names with
    ``inception`` -> :func:`inception_expert`. The layer count is read from the name where the zoo writes it
    (``..._layers4_...``, ``lstm_lm_3x...``). Name rules need TF/Keras op names: on a graph with anonymous
    names (PipeDream's ``nodeN``), an RNNLM or NMT expert places every op on its default GPU.
    """
    name = graph_name.lower()
    found = re.search(r"layers(\d+)", name) or re.match(r"lstm_lm_(\d+)x", name)
    layers = int(found.group(1)) if found else None
    if name.startswith(("rnnlm", "lstm_lm")):
        return rnnlm_expert(layers or 2)
    if name.startswith(("nmt", "gnmt")):
        return nmt_expert(layers or (8 if name.startswith("gnmt8") else 2))
    if "inception" in name:
        return inception_expert()
    return SingleDevice(kind="gpu")


class FamilyExpert(Placer):
    """The expert of the graph's model family, chosen when placing (:func:`expert_for` on ``graph.name``),
    so one configured baseline serves every graph of a bench."""

    name = "expert"

    def place_with(self, graph: OpGraph) -> Placer:
        """The placer :func:`expert_for` picks for ``graph``."""
        return expert_for(graph.name)

    def _place(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        return self.place_with(graph)._place(graph, cluster)
