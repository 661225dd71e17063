"""The learned searches of a bench config: their settings checked before anything runs, their networks seeded."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

SEARCH_KEYS = {"overrides": "a list of overrides of the main config, e.g. [encoder=gnn, policy=list_scheduling]",
               "warm_start": "true (start from the best baseline's placement) or false"}
"""The settings of a learned search in a bench config, and what each must be."""


def check_search(search: Any, known: Sequence[str] = ("updates", "seconds", "plots")) -> None:
    """Refuse a ``search.updates`` that is not a whole number >= 1, a ``search.seconds`` that is not > 0 (or null),
    or a setting not in ``known`` (``+search.second=60`` was ignored), naming it, before anything runs (a trainer
    refused them after every baseline had run)."""
    unknown = sorted(set(search) - set(known))
    if unknown:
        raise ValueError(f"search.{unknown[0]}: unknown setting (search takes {', '.join(known)})")
    updates, seconds = search.get("updates"), search.get("seconds")
    if isinstance(updates, bool) or not isinstance(updates, int) or updates < 1:
        raise ValueError(f"search.updates must be a whole number >= 1, got {updates!r}")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0
                                or math.isinf(seconds)):
        raise ValueError(f"search.seconds must be a finite number > 0 or null, got {seconds!r}")


def search_overrides(search: Any) -> list[str]:
    """The main config's overrides every learned search of a bench starts from: no logger or progress bar,
    ``search.updates`` and ``search.seconds`` (``null``: no time limit) for its trainer."""
    seconds = "null" if search.get("seconds") is None else search.seconds
    return ["logger=none", "trainer.progress=false", f"trainer.updates={search.updates}",
            f"trainer.max_seconds={seconds}"]


SET_BY_BENCH = {
    "trainer.updates": ("to search.updates, after the case's overrides",
                        "set it with search.updates=N on the bench's command line for every search, or in "
                        "learned.<name>.overrides for one search"),
    "trainer.max_seconds": ("to search.seconds, after the case's overrides",
                            "set it with search.seconds=S (null: no time limit) on the bench's command line for "
                            "every search, or in learned.<name>.overrides for one search"),
    "trainer.progress": ("to false, after the case's overrides", "set it in learned.<name>.overrides for one search"),
    "logger": ("to none", "leave it out: a bench keeps no logger, each search writes metrics.jsonl in its run "
               "directory under out_dir"),
    "warm_start": ("from learned.<name>.warm_start: the case's best baseline's placement, or a cold start",
                   "set it with learned.<name>.warm_start=true|false"),
    "threads": ("from its own threads, one setting for every case", "set it with threads=N on the bench's command "
                "line"),
}
"""The main config's keys a bench case does not set: the bench sets each itself after the case's overrides
(:func:`search_overrides`) or reads it from its own config; why, and where to set it instead."""


def check_case(label: str, case: Sequence[str]) -> None:
    """Refuse an override in the bench case ``label`` (``cases[i]``) of a key the bench sets itself
    (:data:`SET_BY_BENCH`), naming the case, the key and where to set it, before anything runs: a case's
    ``trainer.updates=5`` was replaced by ``search.updates``, its ``warm_start=`` and ``threads=`` read nowhere."""
    for override in case:
        key = override.lstrip("+~").split("=", 1)[0].strip()
        top = key.split(".", 1)[0].split("/", 1)[0]
        found = key if key in SET_BY_BENCH else top if top in ("logger", "warm_start", "threads") else None
        if found is not None:
            why, where = SET_BY_BENCH[found]
            raise ValueError(f"{label}: {override!r} is not read from a case: the bench sets {found} {why}; "
                             f"{where}")


def check_learned(learned: Any, keys: Sequence[str], baselines: Iterable[str] = ()) -> None:
    """Refuse a ``learned`` that is not a mapping of search names to settings with exactly ``keys`` (of
    :data:`SEARCH_KEYS`), or a search named like one of ``baselines``, naming ``learned.<name>.<key>``."""
    from omegaconf import DictConfig, ListConfig

    if not isinstance(learned, DictConfig | dict):
        raise ValueError(f"learned must map each learned search's name to its settings ({', '.join(keys)}; "
                         f"none: '~learned' '+learned={{}}' on the command line, where learned={{}} merges into the "
                         f"config's searches), got {learned!r}")
    for name, spec in learned.items():
        if not isinstance(spec, DictConfig | dict):
            raise ValueError(f"learned.{name} must hold the search's settings ({', '.join(keys)}), got {spec!r}")
        for key in spec:
            if key not in keys:
                raise ValueError(f"learned.{name}.{key}: unknown setting (a search takes {', '.join(keys)})")
        for key in keys:
            value = spec.get(key)
            ok = (isinstance(value, bool) if key == "warm_start" else
                  isinstance(value, ListConfig | list) and all(isinstance(v, str) for v in value))
            if not ok:
                raise ValueError(f"learned.{name}.{key} must be {SEARCH_KEYS[key]}, got "
                                 f"{'nothing' if key not in spec else repr(value)}")
        _check_unread(name, spec.get("overrides") or [])
    clash = sorted(set(learned) & set(baselines))
    if clash:
        raise ValueError(f"learned.{clash[0]}: a learned search named like baselines.{clash[0]} (results are keyed by "
                         "method name, so one would hide the other); rename one")


UNREAD = ("graph", "cluster", "runtime", "warm_start", "logger", "threads")
"""Settings of the main config a bench's learned search does not read from its overrides: the case gives the graph,
cluster and runtime, and the bench its warm start, logger and threads."""


def _check_unread(name: str, overrides: Sequence[str]) -> None:
    """Refuse an override of ``learned.<name>`` that nothing reads (:data:`UNREAD`, or a new top-level key), naming
    it: ``['cluster=paper_4gpu']`` or ``['+foo=1']`` ran as if not given."""
    for override in overrides:
        key = override.lstrip("+~").split("=", 1)[0]
        top = key.split(".", 1)[0].split("/", 1)[0]
        if top in UNREAD:
            raise ValueError(f"learned.{name}: {override!r} is not read by a bench search (it takes the case's graph, "
                             "cluster and runtime, and its warm start, logger and threads from the bench): set it in "
                             "the cases or on the bench's command line")
        if override.startswith("+") and not override.startswith("++") and top == key:  # ++ forces an existing key
            raise ValueError(f"learned.{name}: {override!r} adds a top-level setting that nothing reads")


def prepare_search(name: str, overrides: Sequence[str], num_devices: Iterable[int]) -> Any:
    """The main config with ``overrides`` for the learned search ``name``, its trainer built once, and its encoder
    and policy for each of ``num_devices`` (the device counts it will place on), so a config error stops the bench
    before anything runs instead of becoming a failed result.

    Raises:
        ValueError: the overrides do not compose, or a part does not build (naming ``learned.<name>``).
    """
    from hydra import compose
    from hydra.errors import HydraException
    from hydra.utils import instantiate

    from gplace.placer import network_device

    try:
        c = compose(config_name="config", overrides=list(overrides))
        instantiate(c.trainer)
        network_device(c.device)
        for n in sorted(set(num_devices)):
            build_learner(c, n)
    except (HydraException, TypeError, ValueError) as err:
        raise ValueError(f"learned.{name}: {error_reason(err)}") from None
    return c


def searchpath_overrides() -> list[str]:
    """The command line's ``hydra.searchpath`` overrides (config folders of one's own), for the configs composed
    inside a job (a bench's cases and learned searches) to find what the job's own config found; none outside a
    Hydra job."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    return [o for o in HydraConfig.get().overrides.hydra if o.lstrip("+").startswith("hydra.searchpath")]


def build_learner(c: Any, num_devices: int) -> tuple[Any, Any]:
    """``c``'s encoder and policy (a ``_partial_`` policy given ``num_devices`` where its constructor takes it), their
    initial weights drawn from ``c.seed``: a search gives the same result whatever ran before it in the process."""
    import torch
    from hydra.utils import instantiate

    torch.manual_seed(c.seed)
    encoder = instantiate(c.encoder)
    policy = instantiate(c.policy)
    return encoder, policy if isinstance(policy, torch.nn.Module) else policy(
        **accepted(policy, {"num_devices": num_devices}))


def accepted(partial: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Those of ``kwargs`` that the callable ``partial`` takes (a parameter of that name, or ``**kwargs``; all where
    its signature cannot be read): a policy for any cluster takes no ``num_devices``."""
    import inspect

    try:
        params = inspect.signature(partial).parameters.values()
    except (TypeError, ValueError):
        return dict(kwargs)
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return dict(kwargs)
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return {k: v for k, v in kwargs.items() if k in names}


def place_with(c: Any, graph: Any, cluster: Any, runtime: Any, *, warm_start: Any = None,
               run_dir: Any = None) -> Any:
    """:func:`gplace.place` with ``c``'s networks (:func:`build_learner`, on ``c.device``), trainer,
    ``max_groups`` and ``refine``: one learned search of a bench. Returns its
    :class:`~gplace.experiment.PlacementReport`."""
    from hydra.utils import instantiate

    from gplace.experiment import place
    from gplace.placer import network_device

    device = network_device(c.device)  # device=cuda in a case or a search's overrides was ignored
    encoder, policy = (module.to(device) for module in build_learner(c, cluster.num_devices))
    return place(graph, cluster, encoder=encoder, policy=policy, runtime=runtime, trainer=instantiate(c.trainer),
                 max_groups=c.max_groups, run_dir=run_dir, warm_start=warm_start, refine=c.get("refine", 0))


def error_reason(err: Exception) -> str:
    """What went wrong, on one line: an instantiation's cause, up to the first blank line (Hydra's lists of
    options and search paths follow it)."""
    from hydra.errors import InstantiationException

    cause = err.__cause__ if isinstance(err, InstantiationException) and err.__cause__ is not None else err
    return " ".join(str(cause).strip().split("\n\n", 1)[0].split())
