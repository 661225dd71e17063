"""Load a graph or cluster file of any supported format, chosen by looking at its content."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from gplace.importers.profiles import load_doppler, load_giph_graph, load_giph_network, load_pipedream, text_lines
from gplace.ir import Cluster, GraphError, OpGraph, UnsupportedGraphError, cluster_from_dict, graph_from_dict
from gplace.ir.serialize import (
    CLUSTER_FORMAT,
    GRAPH_FORMAT,
    DuplicateKeyError,
    JsonTextError,
    as_path,
    parse_json,
    refuse_special_file,
)

logger = logging.getLogger(__name__)

GraphFormat = Literal["gplace", "giph", "pipedream", "doppler"]

_GRAPH_FORMATS = (
    f"gplace JSON (\"format\": {GRAPH_FORMAT!r}), GiPH task-graph JSON (\"nodes\" with \"compute\", \"edges\"), "
    "PipeDream graph.txt (lines 'nodeN -- Desc -- forward_compute_time=...') "
    "or DOPPLER .txt (first line an integer)"
)
_CLUSTER_FORMATS = (
    f"gplace cluster JSON (\"format\": {CLUSTER_FORMAT!r}) "
    "or a GiPH device network JSON (\"speed\", \"delay\", \"comm_speed\")"
)


def load_graph(path: str | Path) -> OpGraph:
    """Load an op graph, detecting its format from the content (see :func:`detect_graph_format`).

    Args:
        path: a gplace graph JSON, a GiPH task graph, a PipeDream ``graph.txt`` or a DOPPLER ``.txt``.

    Raises:
        UnsupportedGraphError: the file is none of these; the message names the file and the formats.
        GraphError: the file is of a known format but malformed (the message names the file).
        FileNotFoundError: no such file.
        IsADirectoryError: ``path`` is a directory (the message names the file formats expected).
    """
    path = as_path(path, "load_graph: path", " (graph_from_dict reads a document already read)")
    fmt, doc = _detect(path)
    logger.debug("loading %s as %s", path, fmt)
    if fmt == "gplace":
        return _from_gplace_json(path, doc)
    if fmt == "giph":
        return load_giph_graph(path)
    if fmt == "pipedream":
        return load_pipedream(path)
    return load_doppler(path)


def detect_graph_format(path: str | Path) -> GraphFormat:
    """The format of a graph file, by content alone (the file name is not used).

    JSON with ``"format": "gplace.graph"`` is gplace's own; JSON with ``"nodes"`` (records with ``"compute"``)
    and ``"edges"`` is GiPH; text with a ``" -- "`` line is PipeDream; text whose first line is an integer
    is DOPPLER.

    Raises:
        UnsupportedGraphError: none of these; the message names the file and what was expected.
    """
    return _detect(as_path(path, "detect_graph_format: path"))[0]


def _detect(path: Path) -> tuple[GraphFormat, Mapping[str, Any] | None]:
    """The format of a graph file and, for JSON, the document read (so it is not read twice)."""
    text = _text(path, _GRAPH_FORMATS)
    if text.lstrip().startswith(("{", "[")):
        doc = _json(path, text, _GRAPH_FORMATS)
        if doc.get("format") == GRAPH_FORMAT:
            return "gplace", doc
        if _is_giph_graph(doc):
            return "giph", doc
        raise _unsupported(path, _GRAPH_FORMATS, f"a JSON document with format {doc.get('format')!r}")
    lines = [line for line in text_lines(text) if line.strip()]
    if any(" -- " in line for line in lines):
        return "pipedream", None
    if lines and lines[0].strip().isascii() and lines[0].strip().isdigit():
        return "doppler", None
    raise _unsupported(path, _GRAPH_FORMATS, "text in no known layout")


def load_cluster(path: str | Path) -> Cluster:
    """Load a cluster: a gplace cluster JSON or a GiPH device network.

    Raises:
        UnsupportedGraphError: the file is neither; the message names the file and the formats.
        GraphError: the file is of a known format but malformed (the message names the file).
        FileNotFoundError: no such file.
        IsADirectoryError: ``path`` is a directory (the message names the file formats expected).
    """
    path = as_path(path, "load_cluster: path", " (cluster_from_dict reads a document already read)")
    doc = _json(path, _text(path, _CLUSTER_FORMATS), _CLUSTER_FORMATS)
    if doc.get("format") == CLUSTER_FORMAT:
        try:
            return cluster_from_dict(doc)
        except GraphError as err:
            raise GraphError(f"{path}: {err}") from err
    if all(key in doc for key in ("speed", "delay", "comm_speed")):
        return load_giph_network(path)
    raise _unsupported(path, _CLUSTER_FORMATS, f"a JSON object with keys {sorted(doc)[:8]}")


def _from_gplace_json(path: Path, doc: Mapping[str, Any]) -> OpGraph:
    try:
        return graph_from_dict(doc)
    except GraphError as err:
        raise GraphError(f"{path}: {err}") from err


def _is_giph_graph(doc: Mapping[str, Any]) -> bool:
    nodes, edges = doc.get("nodes"), doc.get("edges")
    if not isinstance(nodes, list) or not isinstance(edges, list):
        return False
    return all(isinstance(n, Mapping) and "compute" in n for n in nodes[:1])


def _text(path: Path, expected: str) -> str:
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory; expected a file, one of {expected}")
    refuse_special_file(path, f"a file, one of {expected}")
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    try:
        return path.read_text(encoding="utf-8-sig")  # a byte-order mark (some Windows editors write one) is skipped
    except UnicodeDecodeError:
        raise _unsupported(path, expected, "a binary (non UTF-8) file") from None


def _json(path: Path, text: str, expected: str) -> Mapping[str, Any]:
    try:
        doc = parse_json(text)
    except DuplicateKeyError as err:  # JSON, of a kind gplace reads, with one mistake
        raise GraphError(f"{path}: {err}") from None
    except JsonTextError as err:
        raise _unsupported(path, expected, str(err)) from None
    if not isinstance(doc, Mapping):
        raise _unsupported(path, expected, f"a JSON {type(doc).__name__}, not an object")
    return doc


def _unsupported(path: Path, expected: str, found: str) -> UnsupportedGraphError:
    return UnsupportedGraphError(f"{path}: unsupported file, found {found}; expected {expected}")
