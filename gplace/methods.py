"""What ``gplace.place(method=..., budget=...)`` accepts: baseline names, learned policies, policy files.

- a **baseline** name (:func:`baselines`): ``"heft"``, ``"m_etf"``, ``"m_sct"``, ``"m_topo"``, ``"metis"``,
  ``"round_robin"``, ``"random"``, ``"single"``; placed once, no search;
- a **pipeline placer** name (:func:`pipeline_placers`): ``"gpipe"``, ``"pipedream"``, ``"ideal_dp"``, ``"ilp"``,
  ``"local_search"`` (:mod:`gplace.baselines.pipeline`), for a runtime that measures a pipelined mini-batch
  (e.g. :class:`~gplace.pipeline.PipelineSimulator`), whose micro-batch count (and schedule) they take;
- ``"learned"`` (the default): a policy trained on this graph with REINFORCE (the paper's search), or another
  learned method by its policy's name (:data:`LEARNED`: ``"gdp"``, ``"device_aware"``, ``"list_scheduling"``,
  ...);
- ``"pretrained"`` (the policy file shipped in the package, :data:`PRETRAINED`) or the path of a policy file
  (:func:`gplace.pretrained.save_policy`): placed zero-shot, the fastest of the greedy and sampled placements.

A **budget** is seconds (a number, or ``"30s"``) or samples (``"500 samples"``): the search's wall-time limit,
or how many placements it may sample (whole updates of at most that many, so never more; the warm start and the
trained policy's greedy placement are measured besides). Time is checked between updates: the update in which it
runs out is finished, so a search runs at least one update (of ``samples_per_update`` placements) and then measures
its greedy placement, however small the budget; a resumed search counts the seconds spent before.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from gplace.interfaces import Placer
from gplace.ir.errors import MAX_SIZE, is_finite, short_repr
from gplace.torch_modes import float32_default

PRETRAINED = "list_scheduling_giph.pt"
"""The policy file shipped in ``gplace/data``: a ``ListSchedulingPolicy`` pretrained on GiPH's synthetic graphs;
it places any graph on any cluster."""

PIPELINE_SEARCH = "local_search"
"""The one pipeline placer that spends a budget (the others are exact or closed-form; ``ilp`` keeps its own time
limit)."""

LEARNED = {
    "learned": ("LSTMEncoder", "Seq2SeqPolicy"), "seq2seq": ("LSTMEncoder", "Seq2SeqPolicy"),
    "gdp": ("GNNEncoder", "GDPPolicy"), "device_aware": ("GNNEncoder", "DeviceAwarePolicy"),
    "list_scheduling": ("GNNEncoder", "ListSchedulingPolicy"), "mlp": ("GNNEncoder", "MLPPolicy"),
    "superposition": ("GNNEncoder", "SuperpositionPolicy"),
}
"""Method names that train a policy on the graph -> (encoder, policy) classes of :mod:`gplace.encoders` and
:mod:`gplace.policies`, built with their defaults: ``"learned"`` is the paper's (an LSTM encoder and the seq2seq
policy), ``"gdp"`` GDP's (GraphSAGE and a segment Transformer)."""


def baselines() -> dict[str, Callable[..., Placer]]:
    """Baseline name -> placer class (imported on call; each takes its own settings, e.g. ``seed``)."""
    from gplace.baselines import HEFT, METF, METIS, MSCT, MTopo, RandomPlacer, RoundRobin, SingleDevice

    return {cls.name: cls for cls in (HEFT, METF, MSCT, MTopo, METIS, RoundRobin, RandomPlacer, SingleDevice)}


def make_learner(name: str, num_devices: int) -> tuple[Any, Any]:
    """A fresh float32 ``(encoder, policy)`` for the learned method ``name`` (:data:`LEARNED`) on ``num_devices``
    devices.

    Raises:
        ValueError: no such learned method.
    """
    import gplace.encoders
    import gplace.policies

    if name not in LEARNED:
        raise ValueError(f"unknown learned method {name!r}; known: {sorted(LEARNED)}")
    encoder_name, policy_name = LEARNED[name]
    with float32_default():
        encoder = getattr(gplace.encoders, encoder_name)()
        policy = getattr(gplace.policies, policy_name)(num_devices=num_devices, state_size=encoder.hidden_size)
    return encoder, policy


def pipeline_placers() -> dict[str, Callable[..., Placer]]:
    """Pipeline placer name -> placer class (:mod:`gplace.baselines.pipeline`, imported on call)."""
    from gplace.baselines.pipeline import (
        GPipePartitioner,
        IdealDPPartitioner,
        PipeDreamPartitioner,
        PipelineILPPlacer,
        PipelineLocalSearch,
    )

    return {cls.name: cls for cls in (GPipePartitioner, PipeDreamPartitioner, IdealDPPartitioner, PipelineILPPlacer,
                                      PipelineLocalSearch)}


def unused_budget(method: object, budget: Budget | None) -> str | None:
    """Why ``budget`` (``None``: none given) is unused by ``method`` (a baseline, or a pipeline placer other than
    ``local_search`` and, in seconds, ``ilp``: they take none), for a WARNING; ``None`` where ``method`` takes it."""
    if not isinstance(method, str):
        return None
    timed = method == "ilp" and budget is not None and budget.seconds is not None  # HiGHS's time limit
    if method in baselines() or (method in pipeline_placers() and method != PIPELINE_SEARCH and not timed):
        return (f"method {method} takes no budget{' in samples' if method == 'ilp' else ''} (learned searches, "
                "policy files, local_search and, in seconds, ilp do)")
    return None


def make_baseline(name: str, seed: int = 0) -> Placer:
    """The baseline placer called ``name`` (seeded where it draws random numbers).

    Raises:
        ValueError: no such baseline; the message lists the known ones.
    """
    known = baselines()
    if name not in known:
        raise ValueError(f"unknown baseline {name!r}; known: {sorted(known)}")
    cls = known[name]
    return cls(seed=seed) if name in ("random", "metis") else cls()


def make_pipeline_placer(name: str, runtime: Any, budget: Budget | None = None, *, role: str = "method") -> Placer:
    """The pipeline placer called ``name`` (:func:`pipeline_placers`), set up for the objective ``runtime``
    measures: its ``microbatches`` and ``schedule`` (the contiguous partitioners fit their stages to its memory,
    gpipe's where it has none, as the steady-state score; the search measures it, and is refused where it has none),
    looked up inside any wrappers (a cache, a pool).
    ``local_search`` spends ``budget`` (default: its own 10 s) on as many threads as ``runtime``; ``ilp`` takes a
    budget in seconds as HiGHS's time limit (default: its own 10 s). ``role`` names what ``name`` is in a refusal
    (``"method"``, ``"placer"``).

    Raises:
        ValueError: no such pipeline placer, or ``runtime`` does not measure a pipelined mini-batch (for
            ``local_search``, ``pipe-v3``'s: the steady-state score is refused).
    """
    from gplace.runtime.wrapper import innermost, microbatches_of

    classes = pipeline_placers()
    if name not in classes:
        raise ValueError(f"unknown pipeline placer {name!r}; known: {sorted(classes)}")
    inner, microbatches = innermost(runtime), microbatches_of(runtime)
    if microbatches is None:
        raise ValueError(f"{role} {name!r} splits the graph into pipeline stages, but runtime "
                         f"{getattr(runtime, 'id', type(runtime).__name__)!r} measures no micro-batches; pass a "
                         "pipeline runtime, e.g. runtime=PipelineSimulator(microbatches=16, schedule='1f1b') "
                         "(from the command line: objective=pipeline)")
    if name == "ilp" and budget is not None and budget.seconds is not None:  # HiGHS's time limit
        return classes[name](microbatches=microbatches, time_limit=budget.seconds)
    schedule = getattr(inner, "schedule", None)  # None: a steady-state score, which holds no memory of its own
    if name in ("gpipe", "pipedream", "ideal_dp"):  # contiguous splits: the schedule's memory (1F1B holds fewer)
        return classes[name](microbatches=microbatches, schedule=schedule or "gpipe")
    if name != PIPELINE_SEARCH:
        return classes[name](microbatches=microbatches)
    if schedule is None:  # it measures pipe-v3's mini-batch: a result 0.57x one GPU by the score it was asked for
        raise ValueError(f"{role} {name!r} descends on pipe-v3's mini-batch time, but runtime "
                         f"{getattr(runtime, 'id', type(runtime).__name__)!r} measures another (the steady-state "
                         "score): pass runtime=PipelineSimulator(microbatches=16, schedule='1f1b') (from the command "
                         "line: objective=pipeline), or a partitioner (gpipe, pipedream, ideal_dp, ilp)")
    limits = {} if budget is None else {"time_limit": budget.seconds, "max_evaluations": budget.samples}
    return classes[name](microbatches, schedule, threads=getattr(inner, "threads", None), **limits)


def make_placer(name: str, seed: int = 0, runtime: Any = None, budget: Budget | None = None, *,
                role: str = "method") -> Placer:
    """The baseline (:func:`make_baseline`) or pipeline placer (:func:`make_pipeline_placer`, ``role`` naming what
    ``name`` is in its refusal) called ``name``.

    Raises:
        ValueError: no such placer, or a pipeline placer for a runtime that measures no micro-batches.
    """
    if name in pipeline_placers():
        return make_pipeline_placer(name, runtime, budget, role=role)
    return make_baseline(name, seed)


@functools.cache
def pretrained_path() -> Path:
    """The path of the policy file shipped with gplace (:data:`PRETRAINED`); where gplace is imported from a zip (a
    wheel or zipapp on ``sys.path``), a copy of it extracted once and removed when the process exits."""
    return _EXTRACTED.enter_context(resources.as_file(resources.files("gplace.data").joinpath(PRETRAINED)))


_EXTRACTED = contextlib.ExitStack()
"""Files extracted from a zipped gplace, removed at exit."""
atexit.register(_EXTRACTED.close)


_FILE_SUFFIXES = {".pt", ".pth", ".ckpt", ".bin", ".json", ".yaml", ".yml", ".pkl"}
"""Suffixes that make a missing ``method`` a file's name rather than a Python name."""


def policy_file(method: str | Path | Placer) -> Path | None:
    """The policy file ``method`` names (``"pretrained"`` or a path), or ``None`` for a baseline or learned name
    (or a placer).

    Raises:
        FileNotFoundError: ``method`` looks like a path (has a suffix or a slash) but no file is there (a run
            directory: the message names its ``policy.pt``).
    """
    if isinstance(method, Placer):
        return None
    if method == "pretrained":
        return pretrained_path()
    path = Path(method)
    if path.is_file():
        return path
    if isinstance(method, Path) or path.suffix or "/" in str(method) or (path.is_dir() and not _named(method)):
        hint = _directory_hint(path) if path.is_dir() else ""
        dotted = re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", str(method)) and path.suffix not in _FILE_SUFFIXES
        if dotted and not hint:
            hint = (" (a Python name? a Placer of one's own is given as an object: gplace.place(graph, cluster, "
                    "method=MyPlacer()))")
        raise FileNotFoundError(f"no policy file at {str(method)!r}{hint}")
    return None


def check_method(method: str | Path) -> None:
    """Raise ``ValueError`` naming the accepted methods unless ``method`` is one of them (``TypeError`` unless it is
    a ``str``, a path or a :class:`~gplace.interfaces.Placer` of one's own; the message names the type of anything
    else, and for a trainable placer such as a :class:`~gplace.hierarchical.HierarchicalPlacer` says how to use
    it)."""
    if isinstance(method, Placer):
        return
    if not isinstance(method, str | os.PathLike):
        raise TypeError(f"method must be a name, a policy file's path or a Placer, got {_kind_of(method)}")
    if _named(method):
        return
    if policy_file(method) is None:
        raise ValueError(f"unknown method {str(method)!r}; give a baseline {sorted(baselines())}, a pipeline "
                         f"placer {sorted(pipeline_placers())}, a learned method {sorted(LEARNED)}, 'pretrained', or "
                         "the path of a policy file")


def _named(method: object) -> bool:
    """Whether ``method`` is the name of a learned method, a baseline or a pipeline placer (never a path)."""
    return isinstance(method, str) and (method in LEARNED or method in baselines() or method in pipeline_placers())


def _directory_hint(path: Path) -> str:
    """Where the run directory ``path`` would keep its policy file, and why it has none where it holds a
    checkpoint (a run stopped before its end, or a multi-graph pretraining, which writes none)."""
    if (path / "policy.pt").is_file():
        return f": it is a directory; give its policy file, {str(path / 'policy.pt')!r}"
    hint = f": it is a directory; its policy file would be {str(path / 'policy.pt')!r}"
    if (path / "checkpoint.pt").is_file():
        hint += (" (it holds a training checkpoint, resumed by its run, not loaded as a policy: a training run "
                 "writes policy.pt at its end; after MultiGraphTrainer.fit, write one with "
                 "gplace.pretrained.save_policy)")
    return hint


def _kind_of(method: Any) -> str:
    """A refused ``method`` for an error message: its repr if a builtin, else its type (a module's repr runs to many
    lines), and for a trainable placer (one with ``sample`` or a ``policy``, e.g. a
    :class:`~gplace.hierarchical.HierarchicalPlacer`) how to use it."""
    kind = type(method)
    if kind.__module__ == "builtins":
        return repr(method)
    if not (hasattr(method, "sample") or hasattr(method, "policy")):
        return f"a {kind.__name__}"
    return (f"a {kind.__name__}, a trainable placer: train it with ReinforceTrainer().fit(placer, runtime, graph, "
            "cluster), then take placer.place(graph, cluster), or pass that placement as warm_start=, or pass a "
            "Placer (gplace.interfaces.Placer) as method")


def _seconds(value: float) -> float:
    """``value`` as float seconds; a whole number past a float's range (10**400) is infinite, refused as such."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


@dataclass(frozen=True)
class Budget:
    """A search budget: wall seconds, or placements measured (samples); one of them is set. ``0`` samples is
    for a policy file alone: its greedy placement, nothing sampled."""

    seconds: float | None = None
    samples: int | None = None

    def __post_init__(self) -> None:
        if (self.seconds is None) == (self.samples is None):
            raise ValueError(f"a budget is seconds or samples, not both or neither: {self}")
        if self.seconds is not None and not (is_finite(self.seconds) and self.seconds > 0):
            raise ValueError(f"budget seconds must be a finite number > 0, got {short_repr(self.seconds)}")
        whole = isinstance(self.samples, int | np.integer) and not isinstance(self.samples, bool)
        if self.samples is not None and not (whole and 0 <= self.samples <= MAX_SIZE):
            raise ValueError(f"budget samples must be a whole number from 0 to 2**63 - 1, got "
                             f"{short_repr(self.samples)}")

    @classmethod
    def parse(cls, budget: float | str | Budget) -> Budget:
        """From seconds (``30``, ``"30"``, ``"30s"``) or samples (``"500 samples"``, a whole number).

        >>> Budget.parse("500 samples"), Budget.parse(2.5), Budget.parse("90s")
        (Budget(seconds=None, samples=500), Budget(seconds=2.5, samples=None), Budget(seconds=90.0, samples=None))
        """
        if isinstance(budget, Budget):
            return budget
        if isinstance(budget, int | float | np.integer | np.floating) and not isinstance(budget, bool):
            return cls(seconds=_seconds(budget))
        match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(s|sec|seconds|samples?)?\s*", str(budget))
        if match is None:
            raise ValueError(f"budget {budget!r} is neither seconds (30, '30s') nor samples ('500 samples')")
        value, unit = match.groups()
        if unit and unit.startswith("sample"):
            whole, _, fraction = value.partition(".")
            if fraction.strip("0"):
                raise ValueError(f"budget {short_repr(budget)}: a number of samples is whole")
            if len(whole.lstrip("0")) > 19:  # past int64, and int() refuses 4,300 digits in a message naming no budget
                raise ValueError(f"budget samples must be a whole number from 0 to 2**63 - 1, got {short_repr(budget)}")
            return cls(samples=int(whole))
        return cls(seconds=float(value))
