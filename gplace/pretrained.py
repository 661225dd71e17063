"""Pretrained placement policies: save and load an encoder + policy pair, and place new graphs with it.

A policy file is one ``torch.save`` of a plain dict (so it loads with ``weights_only=True``)::

    {"format": "gplace.policy", "version": 1,
     "encoder": {"class": "gplace.encoders.gnn.GNNEncoder", "kwargs": {...}},
     "policy": {"class": "gplace.policies.device_aware.DeviceAwarePolicy", "kwargs": {...}},
     "state": {"encoder": <state_dict>, "policy": <state_dict>},
     "meta": {...}}

The constructor arguments come from each module's own record (:meth:`gplace.configurable.Configurable.config`:
every built-in encoder and policy keeps one); another module is built with :func:`build`, or given an
``init_kwargs`` dict by hand. Loading finds each class by its qualified name, importing only gplace's own
modules (import a module of your own before loading a file that names it: importing runs a module's code), builds
it on the meta device to check the weights' names and shapes against those arguments (so a file cannot make it
allocate more than it holds), then rebuilds it for real and loads the weights.

Example::

    encoder = build(GNNEncoder, conv="sage", hidden_size=64)
    policy = build(DeviceAwarePolicy, hidden_size=64)
    ...  # train, e.g. with gplace.training.multigraph.MultiGraphTrainer
    save_policy("policy.pt", encoder, policy, meta={"max_groups": 256})
    placement = place_with_pretrained(graph, cluster, "policy.pt")
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np
import torch
from torch import nn

from gplace.baselines._common import PlacementInfeasibleError
from gplace.configurable import Configurable, ModuleNotImportedError, class_by_name
from gplace.defaults import MAX_GROUPS, SAMPLES
from gplace.interfaces import user_stacklevel
from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.locks import ForkSafeLock
from gplace.ir.placement import check_graph_and_cluster, check_has_ops
from gplace.ir.serialize import refuse_special_file
from gplace.runtime.base import Measurement, Runtime, check_runtime, measure_each
from gplace.torch_modes import float32_default, forked_rng
from gplace.training import TrainResult
from gplace.training.checkpoint import damaged_part, save_checkpoint, torch_load_reason

__all__ = [
    "FORMAT", "VERSION", "PretrainedPolicy", "build", "check_objective", "check_policy_fits", "load_policy",
    "module_spec", "pick_pretrained", "place_with_pretrained", "place_zero_shot", "recorded_max_groups", "save_policy",
    "zero_shot_search",
]

FORMAT = "gplace.policy"
"""The ``"format"`` field of a policy file."""
VERSION = 1
"""The version of the policy file layout this module writes and reads."""
MAX_PLAIN_VALUES = 100_000
"""Values (every number, name, list and dict, counted where they are reached) a module's kwargs (:func:`build`) or
a policy file's ``meta`` (:func:`save_policy`) may hold; a file's kwargs are checked on load too (its ``meta`` is
handed over as read)."""
MAX_PLAIN_DEPTH = 100
"""How deep those values may nest (lists in lists): 5,000 deep failed in pickle, as a failed write of the file."""
MAX_LAYERS = 1024
"""The largest ``*layers`` setting a policy file may give a class (gplace's classes: no more than the file holds
weights, too)."""

log = logging.getLogger(__name__)

M = TypeVar("M", bound=nn.Module)


class PretrainedPolicy(NamedTuple):
    """What :func:`load_policy` returns; unpacks as ``encoder, policy, meta``."""

    encoder: nn.Module
    policy: nn.Module
    meta: dict[str, Any]
    """The ``meta`` dict given to :func:`save_policy` (e.g. ``max_groups``, the training graphs)."""


def build(cls: type[M], /, **kwargs: Any) -> M:
    """``cls(**kwargs)``, with ``kwargs`` recorded as the module's ``init_kwargs`` so it can be saved.

    Raises:
        ValueError: a keyword value is not plain data (None, bool, int, float, str, or lists, tuples and
            str-keyed dicts of those), so a policy file could not hold it; or more than :data:`MAX_PLAIN_VALUES`
            values in all.
    """
    _check_plain(kwargs, f"{cls.__name__} kwargs")
    module = cls(**kwargs)
    module.init_kwargs = dict(kwargs)
    return module


def module_spec(module: nn.Module) -> dict[str, Any]:
    """``{"class": qualified name, "kwargs": constructor arguments}`` of a module: its ``init_kwargs`` where
    :func:`build` (or the user) set them, else its own :meth:`~gplace.configurable.Configurable.config`.

    Raises:
        ValueError: the module records no arguments, holds non-plain values there, or its class cannot be
            imported by its qualified name (e.g. a class defined inside a function). A class of ``__main__`` (a
            script or notebook) is saved with a warning: no other process can import it.
    """
    cls = type(module)
    kwargs = getattr(module, "init_kwargs", None)
    if kwargs is None and isinstance(module, Configurable):
        kwargs = module.config()["kwargs"]
    if not isinstance(kwargs, Mapping):
        raise ValueError(f"{cls.__name__} has no init_kwargs: build it with gplace.pretrained.build({cls.__name__}, "
                         "...) or set module.init_kwargs to its constructor arguments")
    if cls.__module__ == "__main__":  # loads here (a notebook saving and reloading), not in another process
        warnings.warn(f"{cls.__name__} is defined in __main__ (a script or notebook): the policy file loads only in "
                      "a process whose __main__ defines it; define it in an importable module to load it elsewhere",
                      UserWarning, stacklevel=user_stacklevel())
    name = f"{cls.__module__}.{cls.__qualname__}"
    try:
        found = class_by_name(name)
    except ValueError:
        found = None
    if found is not cls:
        raise ValueError(f"class {name} cannot be imported by its qualified name; define it at module level")
    _check_plain(kwargs, f"{cls.__name__}.init_kwargs")
    spec = {"class": name, "kwargs": dict(kwargs)}
    if isinstance(getattr(module, "temperature", None), int | float):  # a policy's, set after construction
        spec["temperature"] = float(module.temperature)
    dtype = next((p.dtype for p in module.parameters() if p.is_floating_point()), None)
    if dtype not in (None, torch.float32):
        spec["dtype"] = str(dtype).removeprefix("torch.")
    return spec


def save_policy(path: str | Path, encoder: nn.Module, policy: nn.Module, *,
                meta: Mapping[str, Any] | None = None) -> Path:
    """Write ``encoder`` and ``policy`` (classes, constructor arguments, weights) and ``meta`` to one file.

    The write is atomic (a temporary file, then a rename).

    Args:
        path: the file to write (parent directories are created).
        encoder: the encoder, built with :func:`build` (or given ``init_kwargs``).
        policy: the policy, likewise.
        meta: plain data to keep beside the weights, e.g. ``{"max_groups": 256, "graphs": [...]}``; a
            ``"max_groups"`` entry is used by :func:`place_with_pretrained` (default: empty).

    Raises:
        TypeError: the arguments are not ``(path, encoder, policy)`` (e.g. the path given last), or ``meta`` is not
            a mapping.
        ValueError: see :func:`module_spec`; or ``meta`` holds a value that is not plain data, more than
            :data:`MAX_PLAIN_VALUES` values, or a ``max_groups`` that is not a whole number >= 1 or ``None``; or
            the encoder and policy are swapped, or a weight is NaN or inf (files :func:`load_policy` refuses).

    Returns:
        the path written.
    """
    if not (isinstance(path, str | os.PathLike) and isinstance(encoder, nn.Module) and isinstance(policy, nn.Module)):
        got = ", ".join(type(arg).__name__ for arg in (path, encoder, policy))
        raise TypeError(f"save_policy(path, encoder, policy) takes the file first, then the modules; got ({got})")
    if meta is not None and not isinstance(meta, Mapping):
        raise TypeError(f"save_policy: meta must be a mapping (a dict of plain data), got {type(meta).__name__}")
    meta = dict(meta or {})
    _check_plain(meta, "meta")
    recorded_max_groups(meta)  # a file load_policy would refuse is not written
    doc = {
        "format": FORMAT, "version": VERSION,
        "encoder": module_spec(encoder), "policy": module_spec(policy),
        "state": {"encoder": _cpu_state(encoder), "policy": _cpu_state(policy)},
        "meta": meta,
    }
    _check_savable(encoder, policy)
    path = Path(path)
    save_checkpoint(path, doc)
    return path


def _check_savable(encoder: nn.Module, policy: nn.Module) -> None:
    """Refuse what :func:`load_policy` would refuse of the modules: a swapped pair, or weights that are not finite
    (a training run that diverged), naming the module and weight."""
    mismatch = _interface_mismatch(encoder, policy)
    if mismatch:
        field, module, kind = mismatch
        raise ValueError(f"save_policy: the {field} is a {type(module).__name__}, not a gplace {field} (it lacks "
                         f"the {kind.__name__} interface of gplace.interfaces; save_policy(path, encoder, policy))")
    for field, module in (("encoder", encoder), ("policy", policy)):
        name = _first_nonfinite(module.state_dict())
        if name is not None:
            raise ValueError(f"save_policy: weight {name!r} of the {field} {type(module).__name__} holds NaN or "
                             "inf values (a training run that diverged): load_policy would refuse the file")


def _interface_mismatch(encoder: nn.Module, policy: nn.Module) -> tuple[str, nn.Module, type] | None:
    """The first of ``(field, module, interface)`` whose module lacks its gplace interface, or ``None``."""
    from gplace.interfaces import Encoder, Policy

    for field, module, kind in (("encoder", encoder, Encoder), ("policy", policy, Policy)):
        if not isinstance(module, kind):
            return field, module, kind
    return None


def _first_nonfinite(state: Mapping[str, Any]) -> str | None:
    """The name of the first floating-point tensor of ``state`` holding NaN or inf, or ``None``."""
    for name, tensor in state.items():
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            return name
    return None


def load_policy(path: str | Path) -> PretrainedPolicy:
    """Rebuild the encoder and policy saved by :func:`save_policy`, on the CPU, with their weights (float32 unless
    the file records another dtype, whatever torch's default).

    The file is read with ``torch.load(weights_only=True)``; a class it names is imported only from gplace's own
    modules, or taken from a module the caller has imported already (a module of one's own: import it first).

    Raises:
        FileNotFoundError: no such file, or a run directory (names its ``policy.pt``).
        ValueError: the file is not a ``gplace.policy`` file of version :data:`VERSION` (e.g. a trainer
            checkpoint: names its run's ``policy.pt``), a class it names is in a module neither gplace's nor
            imported (or in the ``__main__`` of the process that wrote it), does not import, or its kwargs do not
            build it, its weights do not fit the classes it names (checked before anything is
            allocated), or its ``meta`` records a bad ``max_groups``; the message starts with the file's path.
    """
    path = Path(path)
    doc = _read(path)
    # built on the CPU in float32 (the dtype the file records, if another), their first weights replaced: the
    # caller's draws and default dtype kept
    with forked_rng(), float32_default():
        encoder = _rebuild(doc["encoder"], doc["state"]["encoder"], path)
        policy = _rebuild(doc["policy"], doc["state"]["policy"], path)
    mismatch = _interface_mismatch(encoder, policy)
    if mismatch:
        field, module, kind = mismatch
        raise ValueError(f"{path}: field '{field}' is a {type(module).__name__}, not a gplace {field} (it lacks "
                         f"the {kind.__name__} interface of gplace.interfaces)")
    meta = doc.get("meta") or {}
    if not isinstance(meta, Mapping):
        raise ValueError(f"{path}: field 'meta' must be a mapping, got {type(meta).__name__}")
    try:
        recorded_max_groups(meta)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    return PretrainedPolicy(encoder, policy, dict(meta))


def check_policy_fits(policy: nn.Module, cluster: Cluster, path: str | Path,
                      meta: Mapping[str, Any] | None = None) -> None:
    """Raise ``ValueError`` naming the policy file ``path`` when its policy places on a fixed number of devices
    that is not ``cluster``'s. Such a policy picks devices by position: where the file's ``meta`` records the
    kinds of the devices it was trained on (``"device_kinds"``, in order) and ``cluster`` lists other kinds in
    that order, a WARNING names both (a CPU where the GPU was: 387.5 ms against 94.5 ms for lstm_lm)."""
    from gplace.interfaces import check_device_count

    try:
        fixed = check_device_count(policy, cluster).num_devices is not None
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    trained = (meta or {}).get("device_kinds")
    if fixed and isinstance(trained, list) and trained != list(cluster.kinds):
        log.warning("%s: its policy picks devices by position and was trained on devices of kinds %s, in that "
                    "order; cluster %r lists %s: list its devices in the order the policy was trained on", path,
                    trained, cluster.name, list(cluster.kinds))


def place_zero_shot(encoder: nn.Module, policy: nn.Module, graph: OpGraph, cluster: Cluster, *, samples: int = 0,
                    runtime: Runtime | None = None, max_groups: int | None = MAX_GROUPS, seed: int = 0) -> Placement:
    """Place ``graph`` on ``cluster`` with a trained encoder and policy, without training.

    With ``samples = 0`` this is the greedy (argmax) placement. Otherwise up to ``samples`` distinct placements,
    none the greedy one, are drawn from the policy and measured with ``runtime`` beside the greedy one, and the
    fastest is returned. A draw that repeats a placement is dropped and drawn again at a higher temperature (doubled
    each round, for up to 8 rounds), so a sharp policy still tries ``samples`` placements; fewer are measured only
    where the graph has fewer or the rounds run out.

    Args:
        encoder: the trained encoder.
        policy: the trained policy; a device-aware one places on a cluster of any size.
        graph: the graph to place (need not have been seen in training).
        cluster: the devices.
        samples: distinct placements to sample and measure besides the greedy one (default: 0).
        runtime: measures the candidates (default: :class:`~gplace.runtime.Simulator`).
        max_groups: coarsen the graph to at most this many groups, as in training; ``None``: no limit
            (default: 256).
        seed: seeds the sampling (default: 0).

    Raises:
        ValueError: ``samples < 0``, or a policy with a fixed device count that is not the cluster's;
            :class:`~gplace.ir.errors.GraphError` for a graph without ops.
        TypeError: ``runtime`` is not a gplace Runtime, or ``encoder`` and ``policy`` are not an encoder and a
            policy (swapped, say).
        PlacementInfeasibleError: every candidate failed (e.g. out of memory); the message gives the last reason.
    """
    candidates = _zero_shot_candidates(encoder, policy, graph, cluster, samples, max_groups, seed, runtime)
    best = candidates[0] if len(candidates) == 1 else candidates[_fastest(graph, cluster, candidates, runtime)[0]]
    best.validate(graph, cluster)
    return best


def zero_shot_search(encoder: nn.Module, policy: nn.Module, graph: OpGraph, cluster: Cluster, *, samples: int = SAMPLES,
                     runtime: Runtime | None = None, max_groups: int | None = MAX_GROUPS, seed: int = 0) -> TrainResult:
    """:func:`place_zero_shot` reported as a search: its result, the distinct sampled placements it measured (up to
    ``samples``) as its sample count (the greedy one is measured too but not counted, as a learned search's greedy
    decode), and their step times in the order drawn (``inf`` where one failed), so
    :attr:`~gplace.training.TrainResult.best_sample` says which sample found the result (``None``: the greedy one).

    Raises:
        ValueError: as :func:`place_zero_shot`.
        PlacementInfeasibleError: every candidate failed; the message gives the last reason, and its ``result``
            attribute the search's :class:`~gplace.training.TrainResult` (samples, seconds, their times).
    """
    started = time.monotonic()
    candidates = _zero_shot_candidates(encoder, policy, graph, cluster, samples, max_groups, seed, runtime)
    measurements = _measured(graph, cluster, candidates, runtime)
    times = np.array([m.step_time if m.ok else np.inf for m in measurements[1:]], dtype=np.float64)

    def result(best: int) -> TrainResult:
        return TrainResult(candidates[best], measurements[best], len(candidates) - 1, time.monotonic() - started,
                           sample_step_times=times)

    try:
        return result(_fastest_measured(graph, cluster, measurements))
    except PlacementInfeasibleError as err:  # the samples and seconds go with it, for a fallback to one device
        err.result = result(0)
        raise


def _zero_shot_candidates(encoder: nn.Module, policy: nn.Module, graph: OpGraph, cluster: Cluster, samples: int,
                          max_groups: int | None, seed: int, runtime: Runtime | None) -> list[Placement]:
    """The greedy placement, then up to ``samples`` distinct drawn ones (seeded by ``seed``; see
    :func:`_distinct_samples`), on the groups a search measured by ``runtime`` trains on
    (:func:`~gplace.placer.merge_for`)."""
    from gplace.placer import PolicyPlacer, merge_for

    check_runtime(runtime)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        raise ValueError(f"samples must be a whole number >= 0, got {samples!r}")
    placer = PolicyPlacer(graph, cluster, encoder, policy, max_groups=max_groups, merge_consumers=merge_for(runtime))
    candidates = [placer.greedy()]
    if samples:
        candidates += _distinct_samples(placer, graph, samples, seed, candidates[0])
    return candidates


_REDRAW_ROUNDS = 8  # redraws of the samples that repeated a placement, each at twice the temperature before
_TEMPERING = ForkSafeLock(reentrant=True)
"""Held while :func:`_distinct_samples` has raised a policy's temperature: a policy shared by threads was left hot
(16-256x) by one thread restoring what another had raised, and sampled other placements."""


def _distinct_samples(placer: nn.Module, graph: OpGraph, samples: int, seed: int,
                      greedy: Placement) -> list[Placement]:
    """Up to ``samples`` placements drawn by ``placer``, none equal to another or to ``greedy``, in the order drawn.

    The first draw is ``samples`` at the policy's temperature, as a plain draw; a repeat is dropped and the missing
    ones drawn again, up to :data:`_REDRAW_ROUNDS` times, at double the temperature each round (the
    ``temperature`` of gplace's policies, :class:`~gplace.policies.base.Tempered`, restored after; another policy
    redraws at its own). Fewer come back where the graph has fewer placements or the rounds run out.
    """
    from gplace.policies.base import Tempered

    generator, policy = torch.Generator().manual_seed(seed), placer.policy
    seen, kept = {_key(greedy.devices)}, []
    tempered = isinstance(policy, Tempered)  # one of one's own may mean another thing by the name, or refuse it
    with _TEMPERING:
        original = policy.temperature if tempered else None
        try:
            for round_ in range(_REDRAW_ROUNDS + 1):
                if round_ and tempered:
                    policy.temperature = original * 2**round_
                with torch.no_grad():
                    drawn = placer.sample(samples - len(kept), generator=generator)
                for devices in drawn.devices:
                    if _key(devices) not in seen:
                        seen.add(_key(devices))
                        kept.append(Placement.for_graph(graph, devices))
                if len(kept) == samples:
                    break
        finally:
            if tempered:
                policy.temperature = original
    return kept


def _key(devices: Any) -> bytes:
    """A hashable key of a placement's device indices."""
    return np.asarray(devices, dtype=np.int64).tobytes()


def check_objective(meta: Mapping[str, Any], runtime: Runtime | None, path: str | Path) -> None:
    """Log a warning where a policy file's ``meta`` records the runtime it learned from (``"runtime"``, as
    ``python -m gplace`` writes it) and that runtime's objective, one step or a pipelined mini-batch (with its schedule
    and M), is not the one ``runtime`` measures (default ``sim-v1``): its placements are measured, but it learned
    another objective."""
    trained = meta.get("runtime")
    now = "sim-v1" if runtime is None else str(getattr(runtime, "id", type(runtime).__name__))
    if isinstance(trained, str) and _objective_of(trained) != _objective_of(now):
        log.warning("policy file %s learned from %r (%s) and now places for %s (%s): its placements are measured "
                    "by %s, but it learned another objective", path, trained, _objective_of(trained), now,
                    _objective_of(now), now)


def _objective_of(runtime_id: str) -> str:
    """``one step``; or, for an id ending in ``/m<M>`` (or a ``pipe-`` one), a pipelined mini-batch with what the id
    says after its runtime's name (``pipe-v3/1f1b/m8`` and ``torch-pipeline-v1/1f1b/m8``: one objective, two
    runtimes; ``pipe-steady-v1/m8``, the steady-state score, another)."""
    name, _, settings = runtime_id.partition("/")
    if not (name.startswith("pipe-") or re.search(r"(^|/)m[1-9][0-9]*$", settings)):
        return "one step"
    kind = "steady-state score" if name.startswith("pipe-steady") else "mini-batch"
    return f"a pipelined {kind} ({settings})" if settings else f"a pipelined {kind}"


def place_with_pretrained(graph: OpGraph, cluster: Cluster, checkpoint_path: str | Path, *, samples: int = SAMPLES,
                          runtime: Runtime | None = None) -> Placement:
    """Place a new graph in seconds with a policy file written by :func:`save_policy`.

    Loads the policy, then :func:`place_zero_shot` with the ``max_groups`` recorded in the file's ``meta``
    (256 if absent): the fastest of the greedy placement and up to ``samples`` distinct sampled ones. A policy that
    learned another objective than ``runtime``'s is used with a warning (:func:`check_objective`).

    Args:
        graph: the graph to place.
        cluster: the devices.
        checkpoint_path: the policy file.
        samples: distinct placements to sample and measure besides the greedy one; 0 for the greedy one only
            (default: 16).
        runtime: measures the candidates (default: :class:`~gplace.runtime.Simulator`).

    Raises:
        ValueError: not a policy file (see :func:`load_policy`), or a fixed-size policy on a cluster of
            another size; :class:`~gplace.ir.errors.GraphError` for a graph without ops.
        TypeError: ``graph`` or ``cluster`` is not gplace's (an ONNX model, say: import it first), or ``runtime``
            is not a gplace Runtime.
    """
    check_graph_and_cluster(graph, cluster)
    check_has_ops(graph)
    check_runtime(runtime)
    encoder, policy, meta = load_policy(checkpoint_path)
    check_policy_fits(policy, cluster, checkpoint_path, meta)
    check_objective(meta, runtime, checkpoint_path)
    return place_zero_shot(encoder, policy, graph, cluster, samples=samples, runtime=runtime,
                           max_groups=recorded_max_groups(meta))


def recorded_max_groups(meta: Mapping[str, Any]) -> int | None:
    """The ``max_groups`` a policy file's ``meta`` records (256 if absent; ``None``, no limit, as recorded).

    Raises:
        ValueError: it records something else than a whole number >= 1 or ``None``.
    """
    value = meta.get("max_groups", 256)  # files from before meta recorded it were trained at 256
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"the policy file's meta max_groups must be a whole number >= 1 or None, got {value!r}")
    return value


def pick_pretrained(pretrained: Sequence[tuple[nn.Module, nn.Module]], graph: OpGraph, cluster: Cluster, *,
                    runtime: Runtime | None = None, max_groups: int = MAX_GROUPS) -> int:
    """Which of several pretrained ``(encoder, policy)`` pairs to start from on ``graph``: the index of the one
    whose greedy placement is fastest under ``runtime`` (one measurement each; a failed one counts as infinitely
    slow). Equal times go to the earlier pair, so list them best first (e.g. by their training graphs' greedy
    ratio). Pretrainings that differ only in their seed transfer to different graphs
    (``benchmarks/generalization_superposition.md``); fine-tune the one picked with
    :func:`gplace.training.multigraph.finetune`.

    Raises:
        ValueError: ``pretrained`` is empty, or a pair cannot place on ``cluster`` (a fixed-size policy of
            another size; names the pair's index); :class:`~gplace.ir.errors.GraphError` for a graph without ops.
        TypeError: an entry is not an ``(encoder, policy)`` pair of an encoder and a policy (names its index), or
            ``graph``, ``cluster`` or ``runtime`` is not gplace's.
    """
    check_graph_and_cluster(graph, cluster)
    check_has_ops(graph)
    check_runtime(runtime)
    if not pretrained:
        raise ValueError("pick_pretrained needs at least one (encoder, policy) pair")
    greedy = []
    for i, pair in enumerate(pretrained):
        if isinstance(pair, str) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise TypeError(f"pretrained[{i}] must be an (encoder, policy) pair, got {type(pair).__name__}")
        try:
            greedy.append(place_zero_shot(*pair, graph, cluster, max_groups=max_groups, runtime=runtime))
        except TypeError as err:  # not an encoder, or not a policy (a ContractTypeError is a ValueError too)
            raise TypeError(f"pretrained[{i}]: {err}") from None
        except ValueError as err:
            raise ValueError(f"pretrained[{i}]: {err}") from None
    times = [m.step_time if m.ok else math.inf for m in _measured(graph, cluster, greedy, runtime)]
    return min(range(len(times)), key=times.__getitem__)


# ---------------------------------------------------------------------- helpers
def _measured(graph: OpGraph, cluster: Cluster, candidates: list[Placement], runtime: Runtime | None) -> list:
    """Each candidate's measurement by ``runtime`` (default: :class:`~gplace.runtime.Simulator`)."""
    if runtime is None:
        from gplace.runtime import Simulator

        runtime = Simulator()
    return measure_each(runtime, graph, cluster, candidates)


def _fastest(graph: OpGraph, cluster: Cluster, candidates: list[Placement],
             runtime: Runtime | None) -> tuple[int, list[Measurement]]:
    """The index of the candidate with the smallest measured step time (the first of equals), and every
    candidate's measurement."""
    measurements = _measured(graph, cluster, candidates, runtime)
    return _fastest_measured(graph, cluster, measurements), measurements


def _fastest_measured(graph: OpGraph, cluster: Cluster, measurements: list[Measurement]) -> int:
    """The index of the smallest step time among ``measurements`` that ran (the first of equals).

    Raises:
        PlacementInfeasibleError: none ran; the message gives the last reason.
    """
    measured = [(m.step_time, i) for i, m in enumerate(measurements) if m.ok]
    if not measured:
        raise PlacementInfeasibleError(f"no placement of {graph.name!r} on {cluster.name!r} succeeded; the last "
                                       f"failure: {measurements[-1].reason}")
    return min(measured)[1]


def _read(path: Path) -> dict[str, Any]:
    """The file's dict after checking its format and version."""
    if path.is_dir():
        hint = f": use {path / 'policy.pt'}" if (path / "policy.pt").is_file() else ""
        raise FileNotFoundError(f"{path} is a directory, not a policy file{hint}")
    refuse_special_file(path, "a policy file")
    if not path.is_file():
        raise FileNotFoundError(f"no such policy file: {path}")
    damaged = damaged_part(path)
    if damaged is not None:
        raise ValueError(f"{path} is damaged: {damaged} (a bad copy or disk, or not a file gplace wrote); write or "
                         "copy the policy file again")
    try:
        doc = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises UnpicklingError, RuntimeError, EOFError, struct.error, ... on bad bytes
        raise ValueError(f"{path} is not a {FORMAT} file (it cannot be read as plain data: "
                         f"{torch_load_reason(err)})") from None
    fmt = doc.get("format") if isinstance(doc, Mapping) else None
    if fmt != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} file (format {fmt!r}){_what_instead(path, doc)}")
    if doc.get("version") != VERSION:
        raise ValueError(f"{path} is a {FORMAT} file of version {doc.get('version')!r}; this gplace reads "
                         f"version {VERSION}")
    states = doc.get("state") if isinstance(doc.get("state"), Mapping) else {}
    for part in ("encoder", "policy"):
        spec, state = doc.get(part), states.get(part)
        if not (isinstance(spec, Mapping) and isinstance(spec.get("class"), str)
                and isinstance(spec.get("kwargs"), Mapping)):
            raise ValueError(f"{path}: field {part!r} must be {{'class': str, 'kwargs': dict}}, got {spec!r}")
        if not isinstance(state, Mapping):
            raise ValueError(f"{path}: field 'state' lacks the {part}'s weights")
    return doc


def _what_instead(path: Path, doc: Any) -> str:
    """What to load instead of ``doc``, read from ``path``: a training checkpoint (its fingerprint and optimizer
    state) names its run's ``policy.pt``; anything else, how a policy file is written."""
    if not (isinstance(doc, Mapping) and {"fingerprint", "optimizer"} <= set(doc)):
        return "; write one with gplace.pretrained.save_policy"
    if str(doc.get("fingerprint")).startswith("multigraph:"):
        return (": it is a multi-graph pretraining's checkpoint (MultiGraphTrainer, resumed by its run, not loaded "
                "as a policy); after MultiGraphTrainer.fit, write a policy file with "
                "gplace.pretrained.save_policy(path, encoder, policy)")
    policy = path.parent / "policy.pt"
    if policy.is_file():
        return f": it is a training checkpoint; use {policy}"
    return (": it is a search's training checkpoint (resumed by its run, not loaded as a policy); a training run "
            "(gplace train) writes its policy file as policy.pt")


def _rebuild(spec: Mapping[str, Any], state: Mapping[str, torch.Tensor], path: Path) -> nn.Module:
    """Construct the module ``spec`` names and load ``state`` into it (finite weights only: NaN or inf is damage).

    The class is built first on the meta device (no memory) and its weights' names and shapes compared with
    ``state``, so kwargs that ask for more than the file holds are refused before anything is allocated."""
    name = _first_nonfinite(state)
    if name is not None:
        raise ValueError(f"{path}: weight {name!r} of {spec['class']} holds NaN or inf values (a damaged file, or "
                         "a training run that diverged)")
    try:
        _check_plain(spec["kwargs"], f"field '{spec['class']}' kwargs")  # before anything walks or builds them
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    cls = _module_class(spec["class"], path)
    _check_layer_counts(spec, state, path)
    on_meta = {"device": "meta"} if "device" in spec["kwargs"] else {}  # a device given would override the context
    try:
        with torch.device("meta"):
            shapes = _state_shapes(build(cls, **{**spec["kwargs"], **on_meta}).state_dict())
    except (TypeError, ValueError, RuntimeError, NotImplementedError) as err:
        raise ValueError(f"{path}: field '{spec['class']}' could not be built on the meta device (without memory) "
                         f"to check its weights' shapes before the real build: {err}") from None
    _check_fits(shapes, _state_shapes(state), spec, path)
    module = _construct(cls, spec, path)
    if "dtype" in spec:
        dtype = getattr(torch, str(spec["dtype"]), None)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:  # int8 failed in Module.to
            raise ValueError(f"{path}: field '{spec['class']}' dtype {spec['dtype']!r} is not a torch floating "
                             "point dtype (float32, float16, bfloat16, float64)")
        module.to(dtype)
    try:
        module.load_state_dict(state)
    except RuntimeError as err:
        raise ValueError(f"{path}: the weights do not fit {spec['class']}({spec['kwargs']}): {err}") from None
    if "temperature" in spec:
        try:
            module.temperature = spec["temperature"]
        except ValueError as err:
            raise ValueError(f"{path}: field '{spec['class']}' {err}") from None
    return module


def _check_layer_counts(spec: Mapping[str, Any], state: Mapping[str, torch.Tensor], path: Path) -> None:
    """Refuse a ``*layers`` kwarg above :data:`MAX_LAYERS`, or for one of gplace's classes (each of their layers
    has a weight at least) above the number of weights in the file: building a billion layers, even on the meta
    device, never ended (``torch.nn.LSTM`` and ``Transformer`` too, and a file padded with views of one storage
    holds as many "weights" as it likes)."""
    own = str(spec["class"]).startswith("gplace.")
    for name, value in spec["kwargs"].items():
        if not (name.endswith("layers") and isinstance(value, int)):
            continue
        if own and value > len(state):
            raise ValueError(f"{path}: field '{spec['class']}' {name}={value} asks for more layers than the file "
                             f"holds weights ({len(state)}): a damaged or edited file")
        if value > MAX_LAYERS:
            raise ValueError(f"{path}: field '{spec['class']}' {name}={value} asks for more layers than it may (a "
                             f"policy file {MAX_LAYERS} at most): a damaged or edited file")


def _module_class(name: str, path: Path) -> type[nn.Module]:
    """The ``nn.Module`` class a policy file names. Only gplace's own modules are imported: another module must
    have been imported by the caller already, as importing a module runs its code."""
    try:
        cls = class_by_name(name)
    except ModuleNotImportedError as err:
        raise ValueError(f"{path}: class {name!r} is in module {err.module!r}, which is not imported; gplace imports "
                         "no module a policy file names but its own (importing a module runs its code), so import "
                         f"{err.module} before loading the file if you trust it (gplace place: "
                         f"'imports=[{err.module}]')") from None
    except ValueError as err:
        if name.startswith("__main__."):
            raise ValueError(f"{path}: class {name!r} was defined in __main__ (a script or notebook) of the process "
                             "that wrote the file, which no other process can import: define it in an importable "
                             "module and save the policy again") from None
        raise ValueError(f"{path}: {err} (a file written by another gplace version, or by code not installed "
                         "here)") from None
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ValueError(f"{path}: {name} is not a torch.nn.Module class")
    return cls


def _construct(cls: type[M], spec: Mapping[str, Any], path: Path) -> M:
    """``build(cls, **spec["kwargs"])``, a failure named as the file's."""
    try:
        return build(cls, **spec["kwargs"])
    except (TypeError, ValueError, RuntimeError, NotImplementedError) as err:
        raise ValueError(f"{path}: field '{spec['class']}' kwargs do not build it: {err}") from None


def _state_shapes(state: Mapping[str, Any]) -> dict[str, tuple[int, ...] | None]:
    """Each entry's shape (``None`` for one that is not a tensor, e.g. a module's extra state)."""
    return {name: tuple(value.shape) if isinstance(value, torch.Tensor) else None for name, value in state.items()}


def _check_fits(want: Mapping[str, Any], have: Mapping[str, Any], spec: Mapping[str, Any], path: Path) -> None:
    """Raise the "weights do not fit" ``ValueError`` unless the file's weights ``have`` the names and shapes the
    class built from its kwargs ``want``."""
    if want == have:
        return
    problems = [f"missing {k!r}" for k in want if k not in have][:3]
    problems += [f"unexpected {k!r}" for k in have if k not in want][:3]
    problems += [f"{k!r} is {have[k]} in the file, {want[k]} when built" for k in want
                 if k in have and have[k] != want[k]][:3]
    raise ValueError(f"{path}: the weights do not fit {spec['class']}({spec['kwargs']}): {'; '.join(problems)} (a "
                     "file written by another gplace version, whose networks differ, or an edited one: train again, "
                     "or warm-start a new run from its placement.json)")


def _cpu_state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu() for k, v in module.state_dict().items()}


def _check_plain(value: Any, where: str) -> None:
    """Raise ``ValueError`` unless ``value`` is JSON-like data (tuples allowed) that ``weights_only`` loads, of at most
    :data:`MAX_PLAIN_VALUES` values (lists that hold one list twice, 40 deep, made 2**40 of them from a few bytes),
    counted before they are walked, nested at most :data:`MAX_PLAIN_DEPTH` deep (pickle's recursion limit)."""
    todo, seen = [(value, where, 0)], 1
    while todo:
        value, where, depth = todo.pop()
        if value is None or isinstance(value, bool | int | float | str):
            continue
        if not isinstance(value, list | tuple | Mapping):
            raise ValueError(f"{where} is a {type(value).__name__} ({value!r:.60}); a policy file holds only plain "
                             "data")
        if depth >= MAX_PLAIN_DEPTH:
            raise ValueError(f"{where.partition('[')[0]} is nested more than {MAX_PLAIN_DEPTH} deep; a policy's "
                             "settings are a few numbers and names")
        seen += len(value)
        if seen > MAX_PLAIN_VALUES:
            raise ValueError(f"{where}: more than {MAX_PLAIN_VALUES:,} values in all (lists that repeat themselves?); "
                             "a policy's settings are a few numbers and names")
        if isinstance(value, Mapping):
            for key in value:
                if not isinstance(key, str):
                    raise ValueError(f"{where} has a non-string key {key!r}")
            todo += reversed([(item, f"{where}[{key!r}]", depth + 1) for key, item in value.items()])
        else:
            todo += reversed([(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)])
