"""Ops whose output aliases storage another op allocated (a view, a reshape, an in-place op returning its
argument): their memory is the storage's, held as long as any alias of it is read.

``sim-v1`` (and the pipeline simulators) free an op's ``output_bytes`` after its last consumer on the device
has ended. An alias charged its own ``output_bytes`` counts the storage twice while both live (a torch training
step's views and in-place ops took 1.2x-3.4x the memory torch allocates); charged nothing, it lets the storage be
freed while the alias's readers still read it. :func:`hold_alias_storage` does neither: the alias holds no
bytes, and each reader of an alias gets a 0-byte edge from each op that allocated the storage, so that storage
stays allocated until the last such reader has ended. The alias's own edges keep the tensor's bytes, so a
reader on another device still pays for moving it (a reader there keeps the received copy until it ends).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from gplace.ir.graph import Edge, Op


def hold_alias_storage(ops: Sequence[Op], edges: Sequence[Edge],
                       bases: Mapping[str, Iterable[str]]) -> tuple[list[Op], list[Edge]]:
    """``ops`` and ``edges`` with each alias's storage held by the op that allocated it.

    Args:
        ops: the graph's ops.
        edges: its edges (one per (src, dst) pair).
        bases: alias op name -> the ops whose output storage it may alias; an alias of an alias is followed to
            the ops that allocated the storage. An alias no op reads (an output of the program) keeps its
            bytes, held to the end of the step as every such output is.

    Returns:
        The ops, each alias's ``output_bytes`` 0, and the edges, an alias's edges with explicit bytes (an
        edge's ``None`` took its source's ``output_bytes``) and a 0-byte edge from each allocating op with
        ``output_bytes`` to each reader of an alias of it where no edge runs already.
    """
    by_name = {op.name: op for op in ops}
    readers: dict[str, list[str]] = defaultdict(list)
    for edge in edges:
        readers[edge.src].append(edge.dst)
    aliases = {a: tuple(b for b in dict.fromkeys(bs) if b in by_name and b != a) for a, bs in bases.items()
               if a in by_name and readers[a]}
    storage = {a: _allocators(a, aliases) for a in aliases}
    present = {(e.src, e.dst) for e in edges}
    held = [dataclasses.replace(e, bytes=by_name[e.src].output_bytes) if e.src in aliases and e.bytes is None
            else e for e in edges]
    for alias, owners in storage.items():
        for reader in readers[alias]:
            for owner in owners:
                if by_name[owner].output_bytes and owner != reader and (owner, reader) not in present:
                    present.add((owner, reader))
                    held.append(Edge(owner, reader, 0))
    return [dataclasses.replace(op, output_bytes=0) if op.name in aliases else op for op in ops], held


def _allocators(alias: str, aliases: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The ops that allocated the storage ``alias`` may alias: its bases, an alias among them followed back."""
    found: dict[str, None] = {}
    pending, seen = list(aliases[alias]), {alias}
    while pending:
        base = pending.pop()
        if base in seen:
            continue
        seen.add(base)
        if base in aliases:
            pending.extend(aliases[base])
        else:
            found[base] = None
    return tuple(found)
