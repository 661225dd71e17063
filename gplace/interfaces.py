"""The contracts between gplace's parts, written down: Encoder, Policy, TrainablePlacer, Trainer, Placer, Runtime.

Every part is swappable; what one part may assume of another is what these types say, and nothing else.
:mod:`gplace.conformance` (and :mod:`gplace.runtime.conformance` for runtimes) checks an implementation against
them, the way a third-party part is tested::

    from gplace.conformance import check_policy
    from gplace.encoders import GNNEncoder
    from gplace.testing import cpu_gpu_cluster, random_dag
    check_policy(MyPolicy(num_devices=3), random_dag(20), cpu_gpu_cluster(2), GNNEncoder())

The protocols are structural (:class:`typing.Protocol`): any class with these members conforms, no inheritance
needed. :class:`Placer` and :class:`~gplace.runtime.Runtime` are abstract bases, since they supply the validating
:meth:`Placer.place` and :meth:`Runtime.measure`: subclass them. A trainer given to :func:`gplace.place` with a
``seed`` or ``budget`` must be a dataclass with ``seed``, ``updates``, ``samples_per_update`` and ``max_seconds``
fields (as the built-in ones are); without them it is called as it is. A budget in seconds sets ``updates`` to
10**9 and ``max_seconds`` to the budget, so ``fit`` must stop at ``max_seconds``; one in samples sets ``updates``.
What the built-in trainers do beyond the protocol is each trainer's own work: checkpoints in ``run_dir`` and
resuming from them, ``run_dir/metrics.jsonl``, and scalars through the ``logger``
(:class:`gplace.loggers.Logger`: ``log_scalars(step, {name: value})``). :func:`gplace.place` checks what ``fit``
returns: a ``TrainResult`` whose best placement fits the graph and, on a deterministic runtime, takes the time it
reports.
"""

from __future__ import annotations

import abc
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np

from gplace.ir import Cluster, OpGraph, Placement
from gplace.ir.placement import check_graph_and_cluster
from gplace.runtime.base import Runtime

if TYPE_CHECKING:
    import torch

    from gplace.loggers import Logger
    from gplace.placer import PlacerSample
    from gplace.policies.base import PolicyOutput
    from gplace.search_result import TrainResult

__all__ = [
    "Encoder", "Placer", "Policy", "PolicyCapabilities", "Runtime", "TrainablePlacer", "Trainer", "capabilities_of",
    "check_device_count", "feature_sizes_of",
]


@dataclass(frozen=True)
class PolicyCapabilities:
    """What a policy declares about itself, so placers pass it the right inputs without probing.

    Attributes:
        num_devices: the device count D it was built for, or ``None`` when it serves any cluster.
        uses_device_features: it reads the cluster's (D, F) ``device_features``.
        uses_schedule: it reads a :class:`~gplace.policies.schedule_context.ScheduleContext` as ``schedule``.
        merge_consumers: the default grouping merges each op into its only consumer (``True``), never
            (``False``), or only when the graph has more ops than ``max_groups`` (``"if_needed"``).
    """

    num_devices: int | None = None
    uses_device_features: bool = False
    uses_schedule: bool = False
    merge_consumers: bool | Literal["if_needed"] = True

    def __post_init__(self) -> None:
        devices = self.num_devices
        if devices is not None and (isinstance(devices, bool) or not isinstance(devices, int) or devices < 1):
            raise ValueError(f"PolicyCapabilities.num_devices must be a positive int or None, got {devices!r}")
        for name in ("uses_device_features", "uses_schedule"):
            if not isinstance(getattr(self, name), bool):  # 'no' read as true
                raise ValueError(f"PolicyCapabilities.{name} must be True or False, got {getattr(self, name)!r}")
        merge = self.merge_consumers
        if not (isinstance(merge, bool) or merge == "if_needed"):  # 0.0 == False and 1 == True, but are neither
            raise ValueError(f"PolicyCapabilities.merge_consumers must be True, False or 'if_needed', got {merge!r}")

    def inputs(self, device_features: torch.Tensor, schedule: Any) -> dict[str, Any]:
        """The keyword inputs a policy with these capabilities reads (``schedule`` may be a zero-argument callable
        that builds it, so it is only built when used)."""
        out: dict[str, Any] = {}
        if self.uses_device_features:
            out["device_features"] = device_features
        if self.uses_schedule:
            out["schedule"] = schedule() if callable(schedule) else schedule
        return out


@runtime_checkable
class Encoder(Protocol):
    """Maps the group features of :func:`gplace.features.featurize` to one state per group.

    Attributes:
        num_type_buckets: number of hashed op-type ids the features must use.
        max_neighbours: width K of the adjacency features.
        hidden_size: (optional) S, the width of the states: :func:`gplace.place` sizes a policy given as a class
            or factory with it (``state_size``), and the ``policy`` configs read ``${encoder.hidden_size}``, so an
            encoder config of one's own sets it.

    Shapes:
        ``encoder(features)``: :meth:`gplace.features.GroupFeatures.to_tensors`'s dict in (per-group (G, ...)
        tensors, and the per-op ``type_ids`` (N,) with their bags, ``edge_index`` (2, E) and ``edge_attr`` (E, 1)
        of the coarse graph); (G, S) float states out, with a gradient to the encoder's parameters.
    """

    num_type_buckets: int
    max_neighbours: int

    def __call__(self, features: dict[str, torch.Tensor]) -> torch.Tensor: ...


@runtime_checkable
class Policy(Protocol):
    """Chooses a device per group from encoder states and a mask of allowed devices.

    Methods, each given the keyword inputs (``device_features``, ``schedule``) exactly when :attr:`capabilities`
    says, so a policy's signatures name only the inputs it declares (typed here as callables for that reason):

    - ``sample(states, allowed, num_samples, generator=None, **inputs) -> PolicyOutput``: ``num_samples``
      placements drawn with ``generator``.
    - ``greedy(states, allowed, **inputs) -> Tensor``: (G,) int64, the most likely device of each group.
    - ``evaluate(states, allowed, devices, **inputs) -> (log_prob, entropy)``: of given (K, G) placements.

    Shapes:
        states (G, S) float, allowed (G, D) bool, devices (K, G) int64; log_prob and entropy (K,).
    """

    @property
    def capabilities(self) -> PolicyCapabilities: ...

    @property
    def sample(self) -> Callable[..., PolicyOutput]: ...

    @property
    def greedy(self) -> Callable[..., torch.Tensor]: ...

    @property
    def evaluate(self) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]: ...


@runtime_checkable
class TrainablePlacer(Protocol):
    """What a trainer needs of a learned placer for one graph and cluster (e.g. :class:`gplace.placer.PolicyPlacer`).

    A placer that cannot re-score or project placements (``evaluate`` and ``project`` raise
    ``NotImplementedError``, as :class:`gplace.hierarchical.HierarchicalPlacer`'s) sets ``rescores = False``: PPO, a
    warm start and ``self_imitation`` then refuse it before the first sample.

    Shapes:
        ``sample`` returns devices (K, N) int64 per op, log_prob (K,), entropy (K,); ``evaluate`` takes (K, N).
    """

    graph: OpGraph
    cluster: Cluster

    def sample(self, num_samples: int, generator: torch.Generator | None = None) -> PlacerSample: ...

    def greedy(self) -> Placement: ...

    def evaluate(self, devices: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]: ...

    def project(self, placement: Placement) -> Placement:
        """The nearest placement this placer can emit (a warm start's starting point)."""

    def parameters(self) -> Any: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any], /) -> Any: ...  # positional: names differ


@runtime_checkable
class Trainer(Protocol):
    """Improves a :class:`TrainablePlacer` against a runtime and returns the best placement measured."""

    def fit(self, placer: TrainablePlacer, runtime: Runtime, graph: OpGraph, cluster: Cluster, *,
            run_dir: str | Path | None = None, logger: Logger | None = None,
            warm_start: Placement | None = None) -> TrainResult: ...


class Placer(abc.ABC):
    """Maps every op of a graph to a device of a cluster. Subclasses implement :meth:`_place`.

    :meth:`place` builds the :class:`~gplace.ir.Placement` and validates it (length, device range,
    colocation groups, pinned kinds), so every placer returns a placement the runtimes accept or fails
    loudly.
    """

    name: str = "placer"
    """Short identifier used in tables and result files, e.g. ``"heft"``."""

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        """Place ``graph`` on ``cluster``.

        Raises:
            PlacementInfeasibleError: an op fits on no device it may run on.
            GraphError: an op, or a colocation group, may run on no device of the cluster.
            TypeError: ``graph`` or ``cluster`` is not gplace's (an ONNX model, say: import it first).

        Shapes:
            returned ``Placement.devices`` (N,) int64, device indices into ``cluster.devices``.
        """
        check_graph_and_cluster(graph, cluster)
        made = self._place(graph, cluster)
        if made is None:
            raise TypeError(f"{type(self).__name__}._place returned None (no return?): it returns the (N,) device "
                            "index of every op")
        if isinstance(made, Placement):  # of this graph: one made for another is refused, naming both
            made.check_graph(graph)
        try:
            given = np.asarray(made.devices if isinstance(made, Placement) else made)
        except ValueError:  # a ragged list: numpy's "inhomogeneous shape", naming no placer
            raise TypeError(f"{type(self).__name__}._place must return the (N,) device index of every op, got a "
                            f"ragged sequence {made!r:.120}") from None
        if given.size and (given.dtype == bool or not np.issubdtype(given.dtype, np.integer)):
            raise TypeError(f"{type(self).__name__}._place must return integer device indices, got dtype "
                            f"{given.dtype}")
        placement = Placement.for_graph(graph, given)  # an index past int64 is named, not wrapped to < 0
        placement.validate(graph, cluster)
        return placement

    @abc.abstractmethod
    def _place(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        """Return the (N,) device index of every op (a :class:`~gplace.ir.Placement` of ``graph`` is taken too)."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({args})"


_LEGACY = ("num_devices", "uses_device_features", "uses_schedule", "merge_consumers")


def capabilities_of(policy: Any) -> PolicyCapabilities:
    """``policy.capabilities``; for a policy written before the protocol, its loose attributes (deprecated).

    Raises:
        TypeError: ``capabilities`` is there but is not a :class:`PolicyCapabilities`.
    """
    declared = getattr(policy, "capabilities", None)
    if isinstance(declared, PolicyCapabilities):
        return declared
    if declared is not None:
        raise TypeError(f"{type(policy).__name__}.capabilities is a {type(declared).__name__}, "
                        "expected gplace.interfaces.PolicyCapabilities")
    warnings.warn(f"{type(policy).__name__} declares no `capabilities`; reading its loose attributes "
                  f"{', '.join(_LEGACY)} (deprecated: add a PolicyCapabilities property)", FutureWarning,
                  stacklevel=user_stacklevel())
    found = {name: getattr(policy, name) for name in _LEGACY if hasattr(policy, name)}
    return PolicyCapabilities(**found)


def check_device_count(policy: Any, cluster: Cluster) -> PolicyCapabilities:
    """``policy``'s capabilities (:func:`capabilities_of`), after checking that a policy placing on a fixed number
    of devices places on ``cluster``'s.

    Raises:
        ValueError: the counts differ (the message names both).
    """
    capabilities = capabilities_of(policy)
    if capabilities.num_devices not in (None, cluster.num_devices):
        raise ValueError(f"{type(policy).__name__} has {capabilities.num_devices} devices, cluster {cluster.name!r} "
                         f"has {cluster.num_devices} (a device-aware or list-scheduling policy places on clusters "
                         "of any size)")
    return capabilities


def feature_sizes_of(encoder: Any) -> dict[str, int]:
    """The feature widths an :class:`Encoder` declares, as :func:`gplace.features.featurize` keywords; an encoder
    written before the protocol that lacks them gets the defaults, 512 type buckets and 20 neighbours (deprecated).
    """
    sizes = {"num_type_buckets": 512, "max_neighbours": 20}
    missing = [name for name in sizes if not hasattr(encoder, name)]
    if missing:
        warnings.warn(f"{type(encoder).__name__} lacks {', '.join(missing)} (gplace.interfaces.Encoder); using "
                      "the defaults (deprecated)", FutureWarning, stacklevel=user_stacklevel())
    return {name: int(getattr(encoder, name, default)) for name, default in sizes.items()}


def user_stacklevel() -> int:
    """The ``stacklevel`` of :func:`warnings.warn`, called in the function calling this, that names the first
    frame outside gplace: a warning a user's call or part causes points at the user's line, not at gplace's."""
    package = str(Path(__file__).parent) + os.sep  # not a sibling such as gplace_contrib
    frame, level = sys._getframe(2), 2  # the warning function's caller
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level
