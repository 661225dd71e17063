"""Atomic checkpoints of a training run, and the checks that a checkpoint fits the run that resumes it."""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from gplace.ir.errors import error_summary
from gplace.ir.serialize import atomic_path, make_folder, refuse_special_file
from gplace.run_dir import RunDirConflictError

log = logging.getLogger(__name__)

_NEW_RUN = "use a new run directory or delete this one"
_UNPICKLER_ERROR = "WeightsUnpickler error:"
"""Where the reason of torch's ``weights_only`` refusal starts, after its advice."""
_TORCH_LOAD_DOCS = "Check the documentation of torch.load"
"""Where torch's advice resumes, after that reason."""
_WEIGHTS_ONLY_FAILED = "Weights only load failed"
"""How torch's ``weights_only`` refusal starts (torch 2.6 and later word its reason without the marker above)."""
_LEGACY_TAR = "legacy .tar format"
"""torch's refusal of what it takes for its pre-1.6 tar format (a file of zeros, say), with its advice to load it
with ``weights_only=False``."""


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Write ``state`` with ``torch.save`` to a temporary file of this writer's own, then rename it over ``path``
    (:func:`~gplace.ir.serialize.atomic_path`), so a kill never leaves half a file, and a symbolic link planted at
    a temporary name (a shared run directory's ``checkpoint.pt.tmp``) is never written through.

    ``state`` holds tensors and plain data (dicts, lists, numbers, strings) only, so that :func:`load_checkpoint`
    reads it with ``weights_only=True``.

    Raises:
        OSError: the file could not be written (a full disk: torch says so with a ``RuntimeError``; a folder
            without permission); names the file and why, removes the partial temp file and leaves the last whole
            checkpoint as it was.
    """
    path = Path(path)
    make_folder(path.parent)
    try:
        with atomic_path(path) as tmp:  # removes the temporary file on any error, Ctrl-C too
            torch.save(state, tmp)
            tmp.replace(path)  # here, so that a folder at ``path`` refusing it is told as a failed write
    except (RuntimeError, OSError) as err:
        kept = "the last whole one is kept" if path.is_file() else "none was written before"
        error = OSError(f"cannot write {path} ({error_summary(err)}); {kept}{_why_not_written(err, path)}")
        error.errno = _errno(err)  # a full disk's ENOSPC kept for a caller to tell it apart (the CLI's exit status)
        raise error from None


def _errno(err: Exception) -> int | None:
    """``err``'s errno; ENOSPC for torch's C++ writer's words for a full disk (a ``RuntimeError`` without one)."""
    code = getattr(err, "errno", None)
    if code is None and any(m in str(err) for m in (os.strerror(errno.ENOSPC), "unexpected pos", "iostream error")):
        return errno.ENOSPC
    return code if isinstance(code, int) else None


def _why_not_written(err: Exception, path: Path) -> str:
    """What a failed ``torch.save`` of ``path`` means, where the error says: a folder that cannot be written (no
    permission, read-only: an errno, or torch's C++ writer's ``strerror``), a full disk ("No space left", torch's
    "unexpected pos" or "iostream error"); else only that the last whole checkpoint is as it was."""
    refused, full = (errno.EACCES, errno.EPERM, errno.EROFS), (errno.ENOSPC, errno.EDQUOT)
    code = _errno(err)
    if code in refused or any(os.strerror(c) in str(err) for c in refused):
        return f": its folder {path.parent} cannot be written"
    if code in full:
        return ": is the disk full?"
    return ""


def load_checkpoint(path: str | Path, fingerprint: str, *, runtime_id: str | None = None,
                    param_shapes: Sequence[tuple[int, ...]] | None = None, grouping: str | None = None,
                    seed: int | None = None, trainer: str | None = None,
                    settings: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The checkpoint at ``path`` if it exists and fits this run, else ``None``.

    A checkpoint fits when it belongs to the graph (and cluster) ``fingerprint``, was measured by the runtime
    ``runtime_id``, trains parameters of ``param_shapes``, on the ``grouping`` of the graph (its number of groups
    and a digest), with ``seed``, by the ``trainer`` (its class name; each checked when both the run and the
    checkpoint give it; older checkpoints give fewer, and for parameters only their count is checked). Other
    ``settings`` (the encoder's, policy's and trainer's) than the checkpoint's are resumed with a WARNING naming
    each that differs (a prior weight or an entropy weight changes what the run learns). Its
    tensors are read onto the CPU; ``load_state_dict`` of a module or optimizer moves each to where that module's
    parameters are, so a run checkpointed on a GPU resumes on a machine without one, and back.

    Raises:
        RunDirConflictError: (a ``ValueError``) the checkpoint cannot be read, or is for another graph or cluster,
            another runtime, model, grouping, seed or trainer (resuming would mix runs), naming what differs.
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        refuse_special_file(path, "the checkpoint.pt gplace writes")
    except OSError as err:
        raise RunDirConflictError(f"checkpoint {err}; {_NEW_RUN}") from None
    damaged = damaged_part(path)
    if damaged is not None:
        raise RunDirConflictError(f"checkpoint {path} cannot be read (a damaged file: {damaged}); {_NEW_RUN}")
    try:
        with _numpy_allowed():
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises RuntimeError, UnpicklingError, EOFError, ... on a damaged file
        raise RunDirConflictError(f"checkpoint {path} cannot be read (a damaged or truncated file: "
                                  f"{torch_load_reason(err)}); {_NEW_RUN}") from None
    if not isinstance(state, dict):
        raise RunDirConflictError(f"checkpoint {path} is not a gplace checkpoint (it holds a "
                                  f"{type(state).__name__}); {_NEW_RUN}")
    if state.get("fingerprint") != fingerprint:
        raise RunDirConflictError(_other_run(path, str(state.get("fingerprint")), fingerprint))
    _check_runtime(state, path, runtime_id)
    if param_shapes is not None:
        _check_model(state, path, [tuple(s) for s in param_shapes])
    if grouping is not None and state.get("grouping", grouping) != grouping:
        raise RunDirConflictError(f"checkpoint {path} was written for another grouping of the graph "
                                  f"({state['grouping']}, not {grouping}): max_groups or the grouping's settings "
                                  f"differ; {_NEW_RUN}")
    if seed is not None and state.get("seed", seed) != seed:
        raise RunDirConflictError(f"checkpoint {path} was written by a run with seed {state['seed']}, this one has "
                                  f"seed {seed}: it would go on drawing seed {state['seed']}'s samples; {_NEW_RUN}, "
                                  f"or resume with seed={state['seed']}")
    if trainer is not None and state.get("trainer", trainer) not in (None, trainer):
        raise RunDirConflictError(f"checkpoint {path} was written by {state['trainer']}, this run trains with "
                                  f"{trainer}: another algorithm would go on from its optimizer state; {_NEW_RUN}, "
                                  + _or_warm_start(path, f"resume it with trainer {state['trainer']}"))
    _warn_unrecorded(state, path, grouping=grouping, seed=seed, trainer=trainer)
    _warn_changed_settings(state.get("settings"), settings, path)
    _check_counts(state, path)
    log.info("resuming from %s at update %d", path, state["update"])
    return state


def _other_run(path: Path, saved: str, now: str) -> str:
    """Why checkpoint ``path`` of run id ``saved`` is not this run's (``now``), naming what differs: the graph, the
    cluster (``<graph>/<cluster>`` fingerprints), or a multi-graph run's tasks (``multigraph:<n>:<digest>``)."""
    if saved.startswith("multigraph:") != now.startswith("multigraph:"):
        kinds = ("a multi-graph pretraining (MultiGraphTrainer)", "a search of one graph")
        was, is_now = kinds if saved.startswith("multigraph:") else kinds[::-1]
        return f"checkpoint {path} belongs to {was}, and this run is {is_now}; {_NEW_RUN}"
    if saved.startswith("multigraph:"):
        return (f"checkpoint {path} belongs to another list of tasks ({saved}, not {now}: other graphs or clusters, "
                f"another order, or a task more or less); resume with the tasks it ran on, or {_NEW_RUN}")
    pairs = zip(("graph", "cluster"), saved.split("/"), now.split("/"), strict=False)
    differ = [what for what, was, is_now in pairs if was != is_now] or ["graph", "cluster"]
    examples = {"graph": "a built-in graph whose costs a newer gplace changed",
                "cluster": "a cluster with other memory or links"}
    what, same = " and ".join(differ), "the same ones" if len(differ) > 1 else "the same one"
    return (f"checkpoint {path} belongs to another {what} ({saved}, not {now}: another {what}, or {same} with "
            f"other contents, e.g. {' or '.join(examples[d] for d in differ)}); resume with the {what} it ran on, or "
            f"{_NEW_RUN}")


def _check_counts(state: dict[str, Any], path: Path) -> None:
    """Refuse a checkpoint whose counts a resume goes on from are out of range, or whose ``update`` is missing (an
    edited file; a ``seconds`` of NaN never reached a time budget). A part missing is found as it is restored."""
    wrong = [f"{name}={state.get(name)!r} ({must})" for name, must, fine in (
        ("update", "a whole number >= 0", _whole(state.get("update"), 0)),
        ("samples", "a whole number >= 0", _whole(state.get("samples", 0), 0)),
        ("seconds", "a finite number >= 0", _seconds_fine(state.get("seconds", 0.0))),
        ("history", "a list of updates", isinstance(state.get("history", []), list)),
    ) if not fine]
    if wrong:
        raise RunDirConflictError(f"checkpoint {path} cannot be resumed: {'; '.join(wrong)}; {_NEW_RUN}")


def _whole(value: object, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _seconds_fine(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


@contextlib.contextmanager
def restoring(path: Path | None) -> Iterator[None]:
    """Turn an error while loading a checkpoint's parts into the run (a part missing, of another type or size: an
    edited or foreign file) into a :class:`RunDirConflictError` naming the file."""
    try:
        yield
    except (KeyError, TypeError, AttributeError, IndexError, ValueError, RuntimeError) as err:
        if isinstance(err, RunDirConflictError):
            raise
        raise RunDirConflictError(
            f"checkpoint {path} cannot be resumed: a part does not fit this run ({type(err).__name__}: "
            f"{error_summary(err)}; a checkpoint of an older gplace, whose networks differ, reads so too); "
            f"{_NEW_RUN}, " + _or_warm_start(path, "resume it with the gplace that wrote it")) from err


def damaged_part(path: Path) -> str | None:
    """What is wrong with a part of a file ``torch.save`` wrote (a zip archive), ``"its part 'x' fails its
    checksum"`` or ``"its part 'x' is compressed ..."``, else ``None`` (also for a file that is no zip archive:
    ``torch.load`` then says what it is). ``torch.load`` does not check CRCs: flipped bits inside the weights load
    as other weights. A part stored with a CRC of 0 has none to check (``torch.serialization.set_crc32_options(False)``
    saves so). ``torch.save`` stores every part uncompressed, so a compressed one is foreign, refused before it is
    inflated (a 1.4 MB file unpacked into a 1.2 GB tensor)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.compress_type != zipfile.ZIP_STORED:
                    return (f"its part {info.filename!r} is compressed ({info.compress_size} bytes for "
                            f"{info.file_size}), which torch.save never writes")
                if info.CRC == 0:
                    continue
                try:
                    with archive.open(info) as part:
                        while part.read(1 << 24):
                            pass
                except zipfile.BadZipFile:  # "Bad CRC-32 for file ..."
                    return f"its part {info.filename!r} fails its checksum"
    except Exception:  # noqa: BLE001 - not a readable archive: torch.load names the reason
        return None
    return None


def torch_load_reason(err: BaseException) -> str:
    """Why ``torch.load`` could not read a file, on one line: a ``weights_only`` refusal's own reason
    (``WeightsUnpickler error: Unsupported operand 123``) without torch's advice around it (to load with
    ``weights_only=False``, wrong for a file that is not torch's; a file torch takes for its legacy tar format, a
    file of zeros, is not torch's zip archive), else the message's first line.

    >>> torch_load_reason(RuntimeError("Weights only load failed. Re-run ... WeightsUnpickler error: \\n\\n"
    ...                                "Unsupported operand 123\\n\\nCheck the documentation of torch.load ..."))
    'WeightsUnpickler error: Unsupported operand 123'
    >>> torch_load_reason(RuntimeError("Weights only load failed. ... `False` will likely succeed, but ...\\n\\n"
    ...                                "\\nTrying to load unsupported GLOBAL os.system\\n\\nCheck the documentation"))
    'Trying to load unsupported GLOBAL os.system'
    >>> torch_load_reason(RuntimeError("Cannot use ``weights_only=True`` with files saved in the legacy .tar format. "
    ...                                "In PyTorch 2.6, ... Re-running `torch.load` with `weights_only=False`"))
    'not the zip archive torch.save writes (torch took it for its legacy .tar format)'
    """
    text = str(err).strip()
    if _LEGACY_TAR in text.split(". ")[0]:
        return "not the zip archive torch.save writes (torch took it for its legacy .tar format)"
    start = text.find(_UNPICKLER_ERROR)
    if start >= 0:
        return error_summary(text[start:].split(_TORCH_LOAD_DOCS)[0])
    if text.startswith(_WEIGHTS_ONLY_FAILED):  # torch 2.6 and later: its advice, then the reason, then its docs
        reasons = [p.strip() for p in text.split("\n\n")[1:] if p.strip() and not p.startswith(_TORCH_LOAD_DOCS)]
        if reasons:
            return error_summary(reasons[0])
    return error_summary(text.splitlines()[0] if text else err)


def _numpy_allowed() -> contextlib.AbstractContextManager:
    """Allow, while loading with ``weights_only``, the numpy arrays and scalars older checkpoints held (torch 2.5 and
    later; before, such a checkpoint is refused as unreadable)."""
    allow = getattr(torch.serialization, "safe_globals", None)
    return contextlib.nullcontext() if allow is None else allow(_numpy_arrays())


def _numpy_arrays() -> list[Any]:
    """What ``weights_only`` loading needs to read numpy arrays and scalars, under numpy 2's names and numpy 1's
    (``numpy.core.multiarray``: a checkpoint written before an upgrade of numpy)."""
    import numpy as np

    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray
    functions = [multiarray._reconstruct, multiarray.scalar]
    if _torch_version() >= (2, 6):  # (object, name) entries: torch 2.5 read __module__ of each, a tuple's too
        functions += [(f, f"{module}.multiarray.{f.__name__}") for f in functions for module in ("numpy._core",
                                                                                                "numpy.core")]
    return [np.ndarray, np.dtype, *functions, *_dtype_classes(np)]


def _torch_version() -> tuple[int, int]:
    """torch's (major, minor) version."""
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def _dtype_classes(np: Any) -> list[type]:
    """numpy 2's dtype classes (``numpy.dtypes.Float64DType``, ...), which a pickled dtype may name."""
    dtypes = getattr(np, "dtypes", None)
    return [] if dtypes is None else [c for c in vars(dtypes).values() if isinstance(c, type)]


def _check_runtime(state: dict[str, Any], path: Path, runtime_id: str | None) -> None:
    """Raise if the checkpoint was measured by another runtime than ``runtime_id``. One without the field (written
    before gplace recorded it, 2026-11-27: most likely sim-v1's step time) resumes only a ``sim-v1`` run, with a
    WARNING that its runtime, seed, grouping and trainer could not be checked."""
    if runtime_id is None:
        return
    if "runtime" not in state:
        if runtime_id != "sim-v1":
            raise RunDirConflictError(
                f"checkpoint {path} does not say which runtime measured it (written by a gplace before 2026-11-27, "
                f"most likely sim-v1's step time), this run measures with {runtime_id!r}: resuming could mix their "
                f"times; {_NEW_RUN}, " + _or_warm_start(path, "resume it with sim-v1 if sim-v1 measured it (a run "
                                                        "of objective=pipeline before then was not)"))
        log.warning("checkpoint %s does not record its runtime, seed, grouping or trainer (written by a gplace "
                    "before 2026-11-27): resumed as sim-v1's, unchecked", path)
        return
    saved = state["runtime"]
    if saved is not None and saved != runtime_id:
        raise RunDirConflictError(
            f"checkpoint {path} was measured by runtime {saved!r}, this run measures with {runtime_id!r} "
            f"({_how_runtimes_differ(saved, runtime_id)}): resuming would mix their times; {_NEW_RUN}, "
            + _or_warm_start(path, f"resume it measuring with {saved!r}")
        )


def _warn_unrecorded(state: dict[str, Any], path: Path, **given: Any) -> None:
    """Log a WARNING naming what this run gives that a checkpoint with a runtime does not record (written between
    2026-11-27 and the day each was recorded), as it resumes unchecked: a change since would mix two runs."""
    missing = [name for name, value in given.items() if value is not None and name not in state]
    if "runtime" in state and missing:
        log.warning("checkpoint %s does not record its %s (written by an older gplace): resumed unchecked; if this "
                    "run's %s differ from the run that wrote it, their samples mix (start a new run directory "
                    "instead)", path, " or ".join(missing), ", ".join(missing))


def _or_warm_start(path: Path | None, resume: str) -> str:
    """A refusal's last advice: start a new run from the run's placement where one was written beside the
    checkpoint, else ``resume`` (a run killed before its end, or a trainer's alone, wrote none)."""
    if path is None:
        return f"or {resume}"
    placement = path.parent / "placement.json"
    if placement.is_file():
        return f"or start a new run from its placement with warm_start={placement}"
    return (f"or {resume} (no {placement.name} beside it to warm-start a new run from: `gplace` writes one when a "
            f"run ends)")


def _how_runtimes_differ(saved: str, now: str) -> str:
    """Why two runtime ids (``name-vN[/schedule/mM]``) differ, in words."""
    (head_saved, *rest_saved), (head_now, *rest_now) = saved.split("/"), now.split("/")
    if rest_saved == rest_now and head_saved.rsplit("-v", 1)[0] == head_now.rsplit("-v", 1)[0]:
        return f"the same settings, but a newer gplace's simulator: {head_saved} became {head_now}"
    return "another runtime, objective, schedule or number of micro-batches"


def _warn_changed_settings(saved: dict[str, Any] | None, settings: dict[str, Any] | None, path: Path) -> None:
    """Log a WARNING naming each encoder, policy or trainer setting that differs from the checkpoint's run."""
    if not saved or not settings:
        return
    changed = []
    for part in sorted(set(saved) & set(settings)):
        was, now = saved[part], settings[part]
        if was.get("class") != now.get("class"):
            continue  # another class trains other parameters: refused by their shapes, or the same shapes
        kwargs_was, kwargs_now = was.get("kwargs", {}), now.get("kwargs", {})
        changed += [f"{part}.{key}: {kwargs_was.get(key)!r} -> {kwargs_now.get(key)!r}"
                    for key in sorted(set(kwargs_was) | set(kwargs_now))
                    if repr(kwargs_was.get(key)) != repr(kwargs_now.get(key))]  # repr: an array has no one ===
    if changed:
        log.warning("resuming %s with other settings than its run's (%s): the trained weights were learned with "
                    "the old ones", path, "; ".join(changed))


def _check_model(state: dict[str, Any], path: Path, shapes: list[tuple[int, ...]]) -> None:
    """Raise if the checkpoint trains other parameters than ``shapes`` (another grouper, encoder, policy or size)."""
    saved = state.get("param_shapes")
    if saved is None:  # an older checkpoint: its optimizer still says how many tensors it trained
        count = sum(len(g["params"]) for g in state["optimizer"]["param_groups"])
        if count == len(shapes):
            return
        detail = f"it trains {count} parameter tensors, this run's model {len(shapes)}"
    else:
        saved = [tuple(s) for s in saved]
        if saved == shapes:
            return
        detail = (f"it trains {len(saved)} parameter tensors ({_numel(saved):,} numbers), this run's model "
                  f"{len(shapes)} ({_numel(shapes):,})")
        first = next((i for i, (a, b) in enumerate(zip(saved, shapes, strict=False)) if a != b), None)
        if first is not None:
            detail += f"; tensor {first} is {saved[first]} there and {shapes[first]} here"
    raise RunDirConflictError(f"checkpoint {path} was written by another model ({detail}): the placer's networks "
                              f"(grouper, encoder or policy) or their sizes differ; {_NEW_RUN}")


def _numel(shapes: list[tuple[int, ...]]) -> int:
    return sum(int(torch.Size(s).numel()) for s in shapes)
