"""The JSON formats for graphs, clusters and placements (see ``docs/format.md``).

This module is the IR's only serialisation boundary. Every document carries ``format`` and ``version``.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import logging
import math
import os
import secrets
import shutil
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gplace.ir.cluster import Cluster, Device, Link
from gplace.ir.errors import GraphError, InvalidPlacementError, OtherGraphError
from gplace.ir.graph import Edge, Op, OpGraph, short_repr
from gplace.ir.placement import Placement, check_cluster, check_graph_and_cluster, check_op_graph, check_placement

logger = logging.getLogger(__name__)

VERSION = 1
GRAPH_VERSION_PHASES = 2
"""Graph documents whose ops carry ``phase`` or ``grad_of`` are written as version 2; both versions are read."""
GRAPH_FORMAT, CLUSTER_FORMAT, PLACEMENT_FORMAT = "gplace.graph", "gplace.cluster", "gplace.placement"

_OP_FIELDS = {"name", "type", "cost", "kind_cost", "persistent_memory", "temporary_memory",
              "output_bytes", "output_shapes", "colocation", "pinned"}
_OP_FIELDS_V2 = _OP_FIELDS | {"phase", "grad_of"}
_GRAPH_FIELDS = {"format", "version", "name", "ops", "edges"}
_EDGE_FIELDS = {"src", "dst", "bytes"}
_CLUSTER_FIELDS = {"format", "version", "name", "devices", "links", "default_link"}
_DEVICE_FIELDS = {"name", "kind", "speed", "memory"}
_LINK_FIELDS = {"a", "b", "bandwidth", "latency"}
_LINK_FIELDS_V2 = _LINK_FIELDS | {"reverse_bandwidth", "reverse_latency"}
CLUSTER_VERSION_DIRECTED = 2
"""Cluster documents with a link whose directions differ are written as version 2; both versions are read."""
_DEFAULT_LINK_FIELDS = {"bandwidth", "latency"}


# ---------------------------------------------------------------------- graphs
def graph_to_dict(graph: OpGraph) -> dict[str, Any]:
    """A graph as a JSON-ready dict."""
    check_op_graph(graph)
    ops = []
    for op in graph.ops():
        rec: dict[str, Any] = {"name": op.name, "type": op.type, "cost": op.cost}
        if op.kind_cost:
            rec["kind_cost"] = dict(op.kind_cost)
        for key in ("persistent_memory", "temporary_memory", "output_bytes"):
            if getattr(op, key):
                rec[key] = getattr(op, key)
        if op.output_shapes:
            rec["output_shapes"] = [list(s) for s in op.output_shapes]
        for key in ("colocation", "pinned", "phase", "grad_of"):
            if getattr(op, key) is not None:
                rec[key] = getattr(op, key)
        ops.append(rec)
    edges = [{"src": e.src, "dst": e.dst, "bytes": e.bytes} for e in graph.edges()]
    version = GRAPH_VERSION_PHASES if graph.has_phases else VERSION
    return {"format": GRAPH_FORMAT, "version": version, "name": graph.name, "ops": ops, "edges": edges}


def graph_from_dict(doc: Mapping[str, Any]) -> OpGraph:
    """Parse a graph document; raise :class:`GraphError` naming the op and field that is wrong."""
    _check_header(doc, GRAPH_FORMAT, (VERSION, GRAPH_VERSION_PHASES))
    _check_fields(doc, _GRAPH_FIELDS, f"graph {short_repr(doc.get('name', 'graph'))}")
    known = _OP_FIELDS_V2 if doc["version"] == GRAPH_VERSION_PHASES else _OP_FIELDS
    ops = [_op_from_dict(i, rec, known) for i, rec in enumerate(_list(doc, "ops"))]
    edges = []
    for i, rec in enumerate(_list(doc, "edges")):
        if not isinstance(rec, Mapping) or "src" not in rec or "dst" not in rec:
            raise GraphError(f"edges[{i}] must be an object with 'src' and 'dst', got {short_repr(rec)}")
        _check_fields(rec, _EDGE_FIELDS, f"edges[{i}] ({short_repr(rec['src'])} -> {short_repr(rec['dst'])})")
        edges.append(Edge(_text(rec["src"], f"edges[{i}].src"), _text(rec["dst"], f"edges[{i}].dst"),
                          _opt_int(rec.get("bytes"), f"edges[{i}].bytes")))
    return OpGraph.from_ops(ops, edges, name=_text(doc.get("name", "graph"), "the graph's name"))


def _op_from_dict(i: int, rec: Any, known: set[str]) -> Op:
    if not isinstance(rec, Mapping) or "name" not in rec:
        raise GraphError(f"ops[{i}] must be an object with a 'name', got {short_repr(rec)}")
    where = f"op {short_repr(rec['name'])}"
    _check_fields(rec, known, where)
    if not isinstance(rec.get("kind_cost", {}), Mapping):
        raise GraphError(f"{where}.kind_cost must be an object mapping device kinds to seconds, "
                         f"got {short_repr(rec['kind_cost'])}")
    if not isinstance(rec.get("output_shapes", []), list):
        raise GraphError(f"{where}.output_shapes must be a list of shapes (lists of whole numbers), "
                         f"got {short_repr(rec['output_shapes'])}")
    try:
        return Op(
            name=_text(rec["name"], f"ops[{i}].name"),
            type=_text(rec.get("type", "Op"), f"{where}.type"),
            cost=_opt_float(rec.get("cost"), f"{where}.cost"),
            kind_cost={str(k): _opt_float(v, f"{where}.kind_cost[{k!r}]") for k, v in rec.get("kind_cost", {}).items()},
            persistent_memory=_opt_int(rec.get("persistent_memory", 0), f"{where}.persistent_memory"),
            temporary_memory=_opt_int(rec.get("temporary_memory", 0), f"{where}.temporary_memory"),
            output_bytes=_opt_int(rec.get("output_bytes", 0), f"{where}.output_bytes"),
            output_shapes=tuple(_dims(s, f"{where} output_shapes[{k}]")
                                for k, s in enumerate(rec.get("output_shapes", ()))),
            colocation=rec.get("colocation"),
            pinned=rec.get("pinned"),
            phase=rec.get("phase"),
            grad_of=rec.get("grad_of"),
        )
    except (TypeError, ValueError, AttributeError) as err:
        if isinstance(err, GraphError):
            raise
        raise GraphError(f"{where}: malformed field ({err})") from None


# ---------------------------------------------------------------------- clusters
def cluster_to_dict(cluster: Cluster) -> dict[str, Any]:
    """A cluster as a JSON-ready dict (one link record per unordered pair, with ``reverse_*`` where its directions
    differ); NumPy scalars become Python numbers and an infinite bandwidth the string ``"inf"``."""
    check_cluster(cluster)
    devices = [{"name": str(d.name), "kind": str(d.kind), "speed": float(d.speed), "memory": int(d.memory)}
               for d in cluster.devices]
    links = []
    n = cluster.num_devices
    for i in range(n):
        for j in range(i + 1, n):
            rec = {"a": cluster.device_names[i], "b": cluster.device_names[j],
                   "bandwidth": _bandwidth_to_json(cluster.bandwidth[i, j]), "latency": float(cluster.latency[i, j])}
            if cluster.bandwidth[j, i] != cluster.bandwidth[i, j]:
                rec["reverse_bandwidth"] = _bandwidth_to_json(cluster.bandwidth[j, i])
            if cluster.latency[j, i] != cluster.latency[i, j]:
                rec["reverse_latency"] = float(cluster.latency[j, i])
            links.append(rec)
    directed = any(label in rec for rec in links for label in ("reverse_bandwidth", "reverse_latency"))
    version = CLUSTER_VERSION_DIRECTED if directed else VERSION
    return {"format": CLUSTER_FORMAT, "version": version, "name": cluster.name, "devices": devices, "links": links}


def cluster_from_dict(doc: Mapping[str, Any]) -> Cluster:
    """Parse a cluster document; optional ``default_link: {bandwidth, latency}`` fills missing pairs."""
    _check_header(doc, CLUSTER_FORMAT, (VERSION, CLUSTER_VERSION_DIRECTED))
    where = f"cluster {short_repr(doc.get('name', 'cluster'))}"
    _check_fields(doc, _CLUSTER_FIELDS, where)
    try:
        records = {"devices": _list(doc, "devices"), "links": [] if doc.get("links") is None else _list(doc, "links")}
    except GraphError as err:
        raise GraphError(f"{where}: {err}") from None
    for key, known, required in (("devices", _DEVICE_FIELDS, ("name", "kind")),
                                 ("links", _LINK_FIELDS_V2 if doc["version"] == CLUSTER_VERSION_DIRECTED
                                  else _LINK_FIELDS, ("a", "b", "bandwidth"))):
        for i, rec in enumerate(records[key]):
            if not isinstance(rec, Mapping):
                raise GraphError(f"{where}: {key}[{i}] must be an object, got {type(rec).__name__} {short_repr(rec)}")
            _check_fields(rec, known, f"{where}: {key}[{i}]")
            missing = [f for f in required if f not in rec]
            if missing:
                raise GraphError(f"{where}: {key}[{i}] lacks field(s) {missing}")
    try:
        devices = [_device_from_dict(i, d) for i, d in enumerate(records["devices"])]
        links = [_link_from_dict(x) for x in records["links"]]
    except GraphError as err:
        raise GraphError(f"{where}: {err}") from None
    except (KeyError, TypeError, ValueError) as err:
        raise GraphError(f"{where}: malformed device or link ({err!r})") from None
    default = {} if doc.get("default_link") is None else doc["default_link"]
    if not isinstance(default, Mapping):
        raise GraphError(f"{where}: default_link must be an object with 'bandwidth' and "
                         f"'latency', got {short_repr(default)}")
    _check_fields(default, _DEFAULT_LINK_FIELDS, f"{where}: default_link")
    if doc.get("default_link") is not None and default.get("bandwidth") is None:  # it read as no default_link
        raise GraphError(f"{where}: " + ("default_link lacks field(s) ['bandwidth']" if "bandwidth" not in default
                                         else "default_link's bandwidth must be a number (bytes/s) or \"inf\", "
                                              "got null"))
    try:
        bandwidth = _opt_bandwidth(default.get("bandwidth"), "default_link's bandwidth")
        latency = _number(default.get("latency", 0.0), "default_link's latency")
    except GraphError as err:
        raise GraphError(f"{where}: {err}") from None
    if bandwidth is None and (pair := _unlinked_pair(devices, links)) is not None:
        raise GraphError(f"{where}: no link between {pair[0]!r} and {pair[1]!r}; add a link for the pair, or "
                         '"default_link": {"bandwidth": ..., "latency": ...} for every pair without one')
    return Cluster.build(devices, links, default_bandwidth=bandwidth, default_latency=latency,
                         name=_text(doc.get("name", "cluster"), "the cluster's name"))


def _unlinked_pair(devices: list[Device], links: list[Link]) -> tuple[str, str] | None:
    """The first two devices with no link between them, or ``None`` (also where a link names no device, which
    :meth:`Cluster.build` reports)."""
    names = [d.name for d in devices]
    linked = {frozenset((link.a, link.b)) for link in links}
    if not set().union(*linked) <= set(names):
        return None
    return next(((a, b) for i, a in enumerate(names) for b in names[i + 1:]
                 if a != b and frozenset((a, b)) not in linked), None)


def _device_from_dict(i: int, rec: Mapping[str, Any]) -> Device:
    """A device record; a string or boolean speed or memory (``"2"``, ``true``) is refused, as in graph documents."""
    name = _text(rec["name"], f"devices[{i}].name")
    kind = _text(rec["kind"], f"devices[{i}].kind")
    return Device(name, kind, _number(rec.get("speed", 1.0), f"device {name!r} speed"),
                  _opt_int(rec.get("memory", 2**63 - 1), f"device {name!r} memory"))


def _link_from_dict(rec: Mapping[str, Any]) -> Link:
    """A link record; a string (but ``"inf"`` for a bandwidth) or boolean bandwidth or latency is refused, as in graph
    documents."""
    a, b = _text(rec["a"], "a link's 'a'"), _text(rec["b"], "a link's 'b'")
    where = f"link {a}<->{b}"
    return Link(a, b, _bandwidth(rec["bandwidth"], f"{where} bandwidth"),
                _number(rec.get("latency", 0.0), f"{where} latency"),
                reverse_bandwidth=_opt_bandwidth(rec.get("reverse_bandwidth"), f"{where} reverse_bandwidth"),
                reverse_latency=_opt_float(rec.get("reverse_latency"), f"{where} reverse_latency"))


# ---------------------------------------------------------------------- placements
def placement_to_dict(
    placement: Placement, graph: OpGraph, cluster: Cluster, *, step_time: float | None = None,
    baselines: Mapping[str, float] | None = None, extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A placement as a JSON-ready dict, with optional simulated or measured step times; a NaN or infinite float
    (a failed step time, or one in ``extra``, at any depth) becomes ``None`` (JSON ``null``)."""
    check_placement(placement)
    check_graph_and_cluster(graph, cluster)
    doc: dict[str, Any] = {
        "format": PLACEMENT_FORMAT, "version": VERSION, "graph": graph.name,
        "graph_fingerprint": graph.fingerprint, "cluster": cluster.name,
        "devices": list(cluster.device_names), "placement": placement.to_names(graph, cluster),
    }
    if step_time is not None:
        doc["step_time"] = _json_float(step_time)
    if baselines:
        doc["baselines"] = {k: _json_float(v) for k, v in baselines.items()}
    if extra:
        doc.update({k: finite_or_null(v) for k, v in extra.items()})
    return doc


def placement_from_dict(doc: Mapping[str, Any], graph: OpGraph, cluster: Cluster, *,
                        by_name: bool = False) -> Placement:
    """Parse a placement document for ``graph`` on ``cluster`` and validate it.

    Args:
        by_name: also take a document made for another version of ``graph`` (another fingerprint: other costs,
            sizes or edges, e.g. the program re-imported after an export) whose ops have the same names, op by
            op name, with a WARNING; by default such a document is refused. A document without a
            ``graph_fingerprint`` (written by hand) is read by op name, with a WARNING.

    Raises:
        OtherGraphError: the document is for another graph (not ``by_name``; an :class:`InvalidPlacementError`).
        InvalidPlacementError: ``by_name``, the document names other ops; or it names a device the cluster lacks.
        TypeError: ``graph`` or ``cluster`` is not gplace's (names it).
    """
    check_graph_and_cluster(graph, cluster)
    _check_header(doc, PLACEMENT_FORMAT)
    mapping = doc.get("placement")
    if not isinstance(mapping, Mapping):
        raise InvalidPlacementError("placement document has no 'placement' object {op: device}")
    fp = doc.get("graph_fingerprint")
    if fp is None:  # written by hand or by another tool: nothing to check the graph against
        logger.warning("the placement document has no graph_fingerprint: placing %r by op name, unchecked against "
                       "the graph it was made for", graph.name)
    elif fp != graph.fingerprint:
        if not by_name:
            raise OtherGraphError(short_repr(doc.get("graph")), fp, graph.name, graph.fingerprint,
                                  "by_name=True places a graph with the same op names by name")
        logger.warning("the placement was made for graph %s with other contents (fingerprint %s, now %s); "
                       "placing %r by op name", short_repr(doc.get("graph")), fp, graph.fingerprint, graph.name)
    placement = Placement.from_names(graph, cluster, mapping)
    placement.validate(graph, cluster)
    return placement


# ---------------------------------------------------------------------- files
def as_path(path: object, what: str, hint: str = "") -> Path:
    """``path`` (a ``str``, ``bytes`` or ``os.PathLike``) as a :class:`Path`; ``what`` names it in the error,
    ``hint`` ends it.

    Raises:
        TypeError: anything else (a ``dict`` read from a file, ``None``), naming ``what``.
    """
    if isinstance(path, bytes):
        return Path(os.fsdecode(path))
    if isinstance(path, str | os.PathLike):
        return Path(path)
    raise TypeError(f"{what} must be a path (a str or os.PathLike), got {type(path).__name__}{hint}")


def save_json(doc: Mapping[str, Any], path: str | Path) -> Path:
    """Write a document as strict JSON, atomically (temp file, then rename).

    Raises:
        ValueError: a float in ``doc`` is NaN or infinite (no JSON number), naming its field.
    """
    try:
        text = json.dumps(doc, indent=1, allow_nan=False)
    except ValueError as err:
        if "JSON compliant" not in str(err):  # not a NaN or an infinity: a circular reference
            raise
        raise ValueError(f"{path}: {_non_finite_field(doc, '') or 'the document'} is not a finite number, which "
                         "JSON cannot hold (write null, or \"inf\" for a link's bandwidth)") from None
    return write_text_atomic(path, text)


def make_folder(folder: str | Path) -> Path:
    """``folder``, made with its parents where missing.

    Raises:
        NotADirectoryError: a file, or a symbolic link to nothing, stands where ``folder`` or a parent of it must
            be, naming it (``mkdir`` said "File exists" or "Not a directory" of a path, not which part).
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        for part in (*reversed(folder.parents), folder):
            if part.is_symlink() and not part.exists():
                what = "is a symbolic link to nothing"
            elif part.exists() and not part.is_dir():
                what = "is a file, not a folder"
            else:
                continue
            raise NotADirectoryError(errno.ENOTDIR, f"cannot make folder {folder}: {part} {what}") from None
        raise
    return folder


_TMP_PREFIX_BYTES = 200
"""Most bytes of a file's name that begin its temporary's (file systems take 255; the rest adds up to 32)."""
_STALE_SECONDS = 3600.0


def _remove_stale(folder: Path, prefix: str) -> None:
    """Remove ``<prefix>.<pid>-<hex>.tmp`` files and folders in ``folder`` older than an hour: writers killed
    mid-write (a write takes seconds, so no live writer's is that old)."""
    now = time.time()
    for stale in folder.glob(f"{glob.escape(prefix)}.*-*.tmp"):
        with contextlib.suppress(OSError):  # another writer removed it first, or it is not ours to remove
            if now - stale.lstat().st_mtime > _STALE_SECONDS:
                shutil.rmtree(stale) if stale.is_dir() and not stale.is_symlink() else stale.unlink()


def write_error(path: str | Path, err: OSError) -> OSError:
    """``err``, a failed write of ``path``, as an error that names the file and keeps its errno (a full disk's
    ``OSError`` says only "No space left on device"); a ``PermissionError`` stays one. An error that names the
    file already (:func:`atomic_path`'s own) is returned as it is."""
    if (err.strerror or str(err)).startswith(f"cannot write {Path(path)}"):
        return err
    if err.errno is None:
        return OSError(f"cannot write {path}: {err}")
    return OSError(err.errno, f"cannot write {path}: {err.strerror or err}")


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path of this writer's own beside ``path`` to write the new file at; renamed over ``path`` when
    the ``with`` block ends, removed if it raises: a process killed (or a disk filled) mid-write leaves the old
    file, never half of the new one, and of two processes writing one file at once the last rename wins whole. A
    block that makes no file there leaves ``path`` as it is. Temporaries of ``path`` an hour old (a writer killed
    mid-write) are removed. The block's errors pass as they are (name the file with :func:`write_error`)."""
    path = Path(path)
    make_folder(path.parent)
    prefix = path.name.encode()[:_TMP_PREFIX_BYTES].decode(errors="ignore")  # a long name leaves room for the rest
    _remove_stale(path.parent, prefix)
    tmp = path.with_name(f"{prefix}.{os.getpid()}-{secrets.token_hex(4)}.tmp")  # one per writer: two processes
    try:                                                                         # filling a cache at once
        yield tmp
    except BaseException:
        _remove_quietly(tmp)
        raise
    try:
        if tmp.exists():
            tmp.replace(path)
    except OSError as err:
        _remove_quietly(tmp)
        raise write_error(path, err) from None


def _remove_quietly(tmp: Path) -> None:
    """Remove the temporary ``tmp`` where it can be: on a read-only file system removing it raised too, and that
    error hid the one that names the file being written."""
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def staged(folder: str | Path, names: Sequence[str]) -> Iterator[Path]:
    """A new folder of this writer's own in ``folder`` (``.<names[0]>.<pid>-<hex>.tmp``) to write the entries
    ``names`` of ``folder`` in, files or folders. When the ``with`` block ends they are moved in together, each
    over its place (an entry the block did not make is removed there); the stage is removed in any case. A writer
    interrupted (Ctrl-C, a full disk) leaves the old entries whole, never a mix of old and new; stages an hour old
    (a writer killed) are removed. An ``OSError`` naming a path in the stage names its place in ``folder``."""
    folder = make_folder(folder)
    prefix = "." + names[0].encode()[:_TMP_PREFIX_BYTES].decode(errors="ignore")
    _remove_stale(folder, prefix)
    stage = folder / f"{prefix}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    stage.mkdir()
    try:
        yield stage
        _move_in(stage, folder, names)
    except OSError as err:
        raise _unstaged(err, stage, folder) from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _move_in(stage: Path, folder: Path, names: Sequence[str]) -> None:
    """Move ``stage/<name>`` over ``folder/<name>`` for each of ``names``, each old entry into ``stage/.old``
    first; where a move fails, those made are undone."""
    old = stage / ".old"
    old.mkdir()
    done: list[str] = []
    try:
        for name in names:
            done.append(name)
            if os.path.lexists(folder / name):
                os.rename(folder / name, old / name)
            if os.path.lexists(stage / name):
                os.rename(stage / name, folder / name)
    except BaseException:
        for name in reversed(done):
            if os.path.lexists(old / name):  # the new entry, if moved in, goes back to the stage
                if not os.path.lexists(stage / name) and os.path.lexists(folder / name):
                    os.rename(folder / name, stage / name)
                os.rename(old / name, folder / name)
        raise


def _unstaged(err: OSError, stage: Path, folder: Path) -> OSError:
    """``err`` naming the places in ``folder`` of the paths in ``stage`` it names."""
    if str(stage) not in str(err):
        return err
    if err.errno is None:
        return OSError(str(err).replace(str(stage), str(folder)))
    args = [str(a).replace(str(stage), str(folder)) for a in (err.strerror, err.filename) if a is not None]
    return OSError(err.errno, *args)


def write_text_atomic(path: str | Path, text: str | Iterable[str]) -> Path:
    """Write ``text`` (a string, or its pieces in order, written as they come so the whole need not be held)
    atomically (:func:`atomic_path`).

    Raises:
        OSError: the file cannot be written (a full disk), naming it; the old file is left as it was.
    """
    path = Path(path)
    with atomic_path(path) as tmp:
        try:
            with tmp.open("x", encoding="utf-8") as out:
                out.writelines([text] if isinstance(text, str) else text)
        except OSError as err:
            raise write_error(path, err) from None
    return path


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` atomically (:func:`atomic_path`); raises as :func:`write_text_atomic`."""
    path = Path(path)
    with atomic_path(path) as tmp:
        try:
            with tmp.open("xb") as out:
                out.write(data)
        except OSError as err:
            raise write_error(path, err) from None
    return path


def _dims(shape: Any, where: str) -> tuple[int, ...]:
    """A shape's dimensions, each a whole number (``-1``: unknown); a float or a boolean is an error."""
    if not isinstance(shape, list | tuple) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise GraphError(f"{where} must be a list of whole numbers (-1 where unknown), got {short_repr(shape)}")
    return tuple(shape)


def load_json(path: str | Path) -> dict[str, Any]:
    """Read a JSON document, naming the file on a parse error or a key given twice in one object."""
    try:
        return read_json(path)
    except JsonTextError as err:
        raise GraphError(f"{path}: {err}") from None


class JsonTextError(ValueError):
    """Text that gplace's JSON readers refuse; the message says why (and on which line), without naming a file."""


class DuplicateKeyError(JsonTextError):
    """A JSON object gives one key twice."""


def refuse_special_file(path: Path, expected: str) -> None:
    """Refuse, before anything reads it, a ``path`` that exists but is neither a regular file nor a folder: a FIFO
    (a read blocks for ever) or a device such as ``/dev/zero`` (a read fills the memory). A folder or nothing
    there is left to the caller, which names it in its own words.

    Raises:
        OSError: naming the path and ``expected`` (e.g. ``"a JSON file"``).
    """
    if path.exists() and not path.is_file() and not path.is_dir():
        raise OSError(f"{path} is not a regular file (a FIFO or a device); expected {expected}")


def read_json(path: str | Path) -> Any:
    """:func:`parse_json` of the UTF-8 file at ``path`` (a byte-order mark, which is not JSON, skipped).

    Raises:
        JsonTextError: the file is not UTF-8 text, or :func:`parse_json` refuses it.
        OSError: the file cannot be read, or is no regular file (a FIFO, which blocks for ever, or a device such as
            ``/dev/zero``, which fills the memory).
    """
    path = Path(path)
    refuse_special_file(path, "a JSON file")  # a folder: read_text's IsADirectoryError
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise JsonTextError(f"not UTF-8 text ({err.reason} at byte {err.start}), so not JSON") from None
    return parse_json(text)


def parse_json(text: str) -> Any:
    """``json.loads`` as every JSON reader of gplace calls it: a key given twice in one object is refused, and so
    are nesting too deep for Python and a number past its int-conversion limit, each in words.

    Raises:
        DuplicateKeyError: naming the key (:func:`unique_keys`).
        JsonTextError: the text is not JSON, or not JSON Python can read.
    """
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as err:
        raise JsonTextError(f"not valid JSON ({err.msg}: line {err.lineno} column {err.colno})") from None
    except JsonTextError:
        raise
    except RecursionError:
        raise JsonTextError("JSON nested too deeply to read") from None
    except ValueError:  # a number literal past Python's int-conversion limit
        raise JsonTextError(_number_too_long()) from None


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook`` for gplace's readers: the object, refusing a key given twice (JSON
    readers keep the last one silently: a second ``"memory"`` replaced the first).

    Raises:
        DuplicateKeyError: naming the key, and the object's ``name`` where it has one.
    """
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        named = f" (in the object named {short_repr(obj['name'])})" if "name" in obj else ""
        raise DuplicateKeyError(f"the key {key!r} is given twice in one object{named}; JSON keeps only the last")
    return obj


def _number_too_long() -> str:
    """Why ``json.loads`` refused a document with a ``ValueError`` that is no ``JSONDecodeError``: a number literal
    past Python's int-conversion limit."""
    return f"not valid JSON for gplace: a number in it has more than {sys.get_int_max_str_digits()} digits"


def check_placement_header(doc: Any, where: str | os.PathLike) -> None:
    """Raise :class:`GraphError` naming ``where`` unless ``doc`` is a ``gplace.placement`` document of a version
    this gplace reads (for readers of ``placement.json`` that do not rebuild the placement)."""
    if not isinstance(doc, Mapping) or doc.get("format") != PLACEMENT_FORMAT:
        found = doc.get("format") if isinstance(doc, Mapping) else type(doc).__name__
        raise GraphError(f"{os.fspath(where)} is not a {PLACEMENT_FORMAT} file (format {short_repr(found)})")
    try:
        _check_header(doc, PLACEMENT_FORMAT)
    except GraphError as err:
        raise GraphError(f"{os.fspath(where)}: {err}") from None


def _check_header(doc: Mapping[str, Any], fmt: str, versions: tuple[int, ...] = (VERSION,)) -> None:
    if not isinstance(doc, Mapping):
        raise GraphError(f"expected a {fmt} JSON object, got {type(doc).__name__}")
    if doc.get("format") != fmt:
        raise GraphError(f"expected format {fmt!r}, got {short_repr(doc.get('format'))}")
    if isinstance(doc.get("version"), bool) or doc.get("version") not in versions:  # True == 1 to Python
        raise GraphError(f"{fmt} version {short_repr(doc.get('version'))} is not supported (this gplace reads versions "
                         f"{list(versions)})")


def _check_fields(rec: Mapping[str, Any], known: set[str], where: str) -> None:
    """Refuse a record's unknown keys (a misspelt ``bytes`` or ``memory`` would otherwise take its default)."""
    unknown = set(rec) - known
    if unknown:
        raise GraphError(f"{where}: unknown field(s) {short_repr(sorted(unknown))}; known: {sorted(known)}")


def _list(doc: Mapping[str, Any], key: str) -> list[Any]:
    if key not in doc:
        raise GraphError(f"missing field {key!r} (a list)")
    value = doc[key]
    if not isinstance(value, list):
        raise GraphError(f"field {key!r} must be a list, got {type(value).__name__}")
    return value


def _opt_float(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GraphError(f"{where} must be a number, got {short_repr(value)}")
    try:
        return float(value)
    except OverflowError:  # an integer of hundreds of digits
        raise GraphError(f"{where} is too large for a float ({len(str(abs(value)))} digits)") from None


def _number(value: Any, where: str) -> float:
    """``value`` as a float; ``None``, a boolean or a string (``"1e9"``) is an error naming ``where``."""
    if value is None:
        raise GraphError(f"{where} must be a number, got None")
    return _opt_float(value, where)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise GraphError(f"{where} must be a non-empty string, got {short_repr(value)}")
    return value


def _opt_int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not _opt_float(value, where).is_integer():
        raise GraphError(f"{where} must be an integer, got {short_repr(value)}")
    return int(value)


def _json_float(value: float) -> float | None:
    return None if not math.isfinite(value) else float(value)


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN or infinite float in it, at any depth of dicts, lists and tuples, as ``None``."""
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, Mapping):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(v) for v in value]
    return value


def _non_finite_field(value: Any, where: str) -> str | None:
    """Where in ``value`` (``"per_device./GPU:0.bubble"``, ``"x[2]"``; ``""`` for ``value`` itself) the first NaN or
    infinite float is, or ``None``."""
    if isinstance(value, float) and not math.isfinite(value):
        return where
    if isinstance(value, Mapping):
        paths = ((f"{where}.{k}" if where else str(k), v) for k, v in value.items())
    elif isinstance(value, list | tuple):
        paths = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    return next((found for path, v in paths if (found := _non_finite_field(v, path)) is not None), None)


def _bandwidth_to_json(value: float) -> float | str:
    """A bandwidth for JSON: ``"inf"`` where infinite (a free link), else the number."""
    return "inf" if math.isinf(value) else float(value)


def _bandwidth(value: Any, where: str) -> float:
    """A bandwidth read back: a number, or ``"inf"`` for an infinite one."""
    return math.inf if value == "inf" else _number(value, where)


def _opt_bandwidth(value: Any, where: str) -> float | None:
    """A bandwidth read back, ``None`` where absent."""
    return None if value is None else _bandwidth(value, where)


_STEM_BYTES = 200
"""Most bytes of a run directory's or plot's name from :func:`file_stem` (file systems take 255; a plot's name adds
``-timeline.png``)."""


def file_stem(*names: str) -> str:
    """``names`` joined by ``-`` as one file name (a bench's run directory, its plots' names, a placed ONNX part's).

    As they are where that is one file name of at most 200 bytes in UTF-8, so a resumed bench finds the run
    directories an earlier one left; else path separators (``/``, ``\\``), unprintable characters and those the
    file system's encoding cannot write (``ü`` under an ASCII locale, ``LC_ALL=C``) become ``_``, the name is cut to
    fit, and 12 hex digits of a hash of the full names are added, so it stays one name inside its folder (a graph
    named ``../../x`` or ``/x`` is no path) and two names do not share one. The hash is added too where the join is
    ambiguous (several names, one with a ``-``: graph ``a-b`` on cluster ``c`` and graph ``a`` on ``b-c``).
    """
    full = "-".join(names)
    safe = "".join("_" if ch in "/\\" or not ch.isprintable() or not _encodable(ch) else ch for ch in full)
    ambiguous = len(names) > 1 and any("-" in name for name in names)
    if safe == full and len(full.encode()) <= _STEM_BYTES and not ambiguous:
        return full
    hashed = "\0".join(names) if ambiguous else full  # the names apart, where "-" cannot keep them so
    digest = hashlib.sha256(hashed.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{safe.encode()[:_STEM_BYTES - 13].decode(errors='ignore')}-{digest}"


def _encodable(ch: str) -> bool:
    """Whether the file system's encoding (``sys.getfilesystemencoding()``) writes ``ch``."""
    try:
        ch.encode(sys.getfilesystemencoding())
    except UnicodeEncodeError:
        return False
    return True
