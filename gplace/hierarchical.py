"""The hierarchical planner (Mirhoseini et al., ICLR 2018): a learned grouper and a placer, trained jointly.

A feed-forward :class:`LearnedGrouper` reads every op's features and gives a softmax over ``num_groups`` groups;
each sampled grouping is coarsened with :func:`~gplace.grouping.make_grouping` and placed by an encoder and a
policy exactly as :class:`~gplace.placer.PolicyPlacer` places fixed groups. :class:`HierarchicalPlacer` ties the
two together for :class:`~gplace.training.ReinforceTrainer`: the log-probability of a sample is the grouper's
plus the placer's, so one REINFORCE gradient trains both, as in the paper.

Constraints the grouper must keep, since the runtime measures the original graph:

- colocated ops share a group: a colocation set is one *unit*, and its group is sampled once, from the logits of
  its first member (lowest op index);
- pins stay satisfiable: a group's allowed devices are the intersection of its members' (pins and per-kind
  costs, :meth:`~gplace.ir.OpGraph.allowed_devices`), so units that are restricted in different ways must never
  share a group. Each class of restricted units (one distinct allowed-device row, e.g. "CPU only") gets its own
  reserved slots of the ``num_groups`` and may choose only those; unrestricted units may choose any slot,
  joining a restricted group if that pays. A group thus mixes at most one kind of restriction and always has
  an allowed device.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from gplace.features import NUMERIC_FEATURES, POSITION_FEATURES, featurize
from gplace.grouping import identity_grouping, make_grouping
from gplace.interfaces import check_device_count
from gplace.ir import Cluster, GraphError, OpGraph, Placement
from gplace.ir.errors import check_sizes
from gplace.ir.placement import check_graph_and_cluster
from gplace.placer import (
    ContractError,
    PlacerSample,
    PolicyPlacer,
    check_one_dtype,
    checked_device_features,
    floating_dtype,
    follow_networks,
    greedy_placement,
)
from gplace.policies.base import check_num_samples, gumbel_argmax, masked_log_softmax, score


class GroupSample(NamedTuple):
    """K sampled groupings with their log-probabilities and entropies under the grouper."""

    op_group: np.ndarray
    """(K, N) int64 grouper slot of every op (not compacted: unused slots leave gaps)."""
    log_prob: torch.Tensor
    """(K,) log-probability of each grouping (with gradient)."""
    entropy: torch.Tensor
    """(K,) sum over units of the entropy of each unit's group distribution (with gradient)."""


class LearnedGrouper(nn.Module):
    """HDP's grouper: a feed-forward network giving each op a distribution over ``num_groups`` groups.

    An op's input is the embedding of its hashed op type plus a linear projection of its log-scaled cost,
    output bytes, memory and degrees and of its position and depth in the graph (the per-op rows of
    :func:`op_features`); two ReLU layers follow, then a linear layer to ``num_groups`` logits. The weights do
    not depend on the graph, so one grouper can group any graph.

    Args:
        num_groups: number of groups G to choose from (HDP: ``min(256, 20 x devices)``).
        hidden_size: width H of the hidden layers and of the type embedding (default: 64).
        num_type_buckets: number of hashed op-type ids (default: 512).

    Shapes:
        input: :func:`op_features` of N ops: ``type_ids (N,)`` int64, ``numeric (N, 7)``, ``position (N, 3)``;
        output: (N, G) float32 logits, row ``i`` for op ``i``.
    """

    def __init__(self, num_groups: int, hidden_size: int = 64, num_type_buckets: int = 512) -> None:
        super().__init__()
        check_sizes("LearnedGrouper", num_groups=num_groups, hidden_size=hidden_size, num_type_buckets=num_type_buckets)
        self.num_groups, self.hidden_size, self.num_type_buckets = num_groups, hidden_size, num_type_buckets
        self.types = nn.Embedding(num_type_buckets, hidden_size)
        self.numbers = nn.Linear(NUMERIC_FEATURES + POSITION_FEATURES, hidden_size)
        self.net = nn.Sequential(nn.ReLU(), nn.Linear(hidden_size, hidden_size), nn.ReLU(),
                                 nn.Linear(hidden_size, num_groups))

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Group logits of every op.

        Shapes:
            features as in the class docstring; returns (N, G).
        """
        numbers = torch.cat([features["numeric"], features["position"]], -1)
        return self.net(self.types(features["type_ids"]) + self.numbers(numbers))


def op_features(graph: OpGraph, num_type_buckets: int = 512) -> dict[str, torch.Tensor]:
    """The grouper's per-op input, in op index order: :func:`~gplace.features.featurize` of one group per op.

    Shapes:
        returns ``type_ids (N,)`` int64, ``numeric (N, 7)`` and ``position (N, 3)`` float32.
    """
    features = featurize(graph, identity_grouping(graph), num_type_buckets=num_type_buckets, max_neighbours=1)
    row = np.empty(graph.num_ops, dtype=np.int64)
    row[features.order] = np.arange(graph.num_ops)  # feature row of each op
    tensors = features.to_tensors()
    return {key: tensors[key][torch.from_numpy(row)] for key in ("type_ids", "numeric", "position")}


def colocation_units(graph: OpGraph, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Colocation sets as units: the unit of each op, each unit's first op, and each unit's allowed devices.

    Raises:
        GraphError: a colocation set has no device all its ops may run on.

    Shapes:
        allowed (N, D) bool; returns op_unit (N,) int64, unit_first (U,) int64, unit_allowed (U, D) bool.
    """
    first: dict[str, int] = {}
    rep = np.array([i if name is None else first.setdefault(name, i) for i, name in enumerate(graph.colocation)],
                   dtype=np.int64)
    unit_first, op_unit = np.unique(rep, return_inverse=True)
    unit_allowed = np.ones((unit_first.size, allowed.shape[1]), dtype=bool)
    np.logical_and.at(unit_allowed, op_unit, allowed)
    dead = np.flatnonzero(~unit_allowed.any(1))
    if dead.size:
        raise GraphError(f"graph {graph.name!r}: colocation group {graph.colocation[unit_first[dead[0]]]!r} has no "
                         "device all its ops may run on")
    return op_unit.astype(np.int64), unit_first.astype(np.int64), unit_allowed


def group_slots(unit_allowed: np.ndarray, num_groups: int) -> np.ndarray:
    """Which of the ``num_groups`` slots each unit may choose, so no group mixes two kinds of restriction.

    Units allowed on every device may choose any slot. Each class of restricted units (one distinct row of
    ``unit_allowed``) gets reserved slots at the end of the range, in proportion to its number of units and at
    least one, and may choose only those; the slots left over are for free units only (or go to the largest
    class when every unit is restricted).

    Raises:
        ValueError: more classes of restricted units than slots.

    Shapes:
        unit_allowed (U, D) bool; returns (U, num_groups) bool.
    """
    free = unit_allowed.all(1)
    rows, cls = np.unique(unit_allowed[~free], axis=0, return_inverse=True)
    if rows.shape[0] > num_groups:
        raise ValueError(f"{rows.shape[0]} kinds of pinned or kind-restricted ops need as many groups; "
                         f"num_groups is {num_groups}")
    counts = np.bincount(cls.reshape(-1), minlength=rows.shape[0])
    share = np.maximum(1, (num_groups * counts) // max(unit_allowed.shape[0], 1))
    while share.sum() > num_groups:  # at most num_groups in all, keeping one per class
        share[np.argmax(share)] -= 1
    if rows.shape[0] and free.sum() == 0:  # no free units: no slot is left to them alone
        share[np.argmax(counts)] += num_groups - share.sum()
    slots = np.ones((unit_allowed.shape[0], num_groups), dtype=bool)
    ends = num_groups - np.concatenate([[0], np.cumsum(share)])
    restricted = np.zeros((rows.shape[0], num_groups), dtype=bool)
    for c in range(rows.shape[0]):
        restricted[c, ends[c + 1]:ends[c]] = True
    slots[~free] = restricted[cls.reshape(-1)]
    return slots


class HierarchicalPlacer(nn.Module):
    """A learned grouper and a group placer for one graph on one cluster, trained jointly (HDP).

    For each sample the grouper draws a grouping (see the module docstring for colocation and pins), which is
    built with :func:`~gplace.grouping.make_grouping`, featurised, encoded and placed once by ``policy``; the
    sample's log-probability and entropy are the grouper's plus the placer's. The entropy is that of the
    grouper's distribution plus that of the placer's given this grouping: a one-sample estimate of the joint
    entropy. Per-op features and masks are non-persistent buffers, so ``state_dict`` holds only the weights of
    grouper, encoder and policy and ``.to(device)`` moves everything.

    Trains with :class:`~gplace.training.ReinforceTrainer`, not with PPO, a warm start or ``self_imitation``:
    :meth:`evaluate` would need the groupings the samples were drawn with (placements alone do not determine
    them), and :meth:`project` has no fixed groups to project onto; both raise ``NotImplementedError``, and the
    trainers refuse those settings before the first sample (:attr:`rescores`).

    Args:
        graph: the graph to place.
        cluster: the devices.
        grouper: e.g. :class:`LearnedGrouper`; its ``num_groups`` and ``num_type_buckets`` shape the inputs.
        encoder: maps group features to (G', S) states, as for :class:`~gplace.placer.PolicyPlacer`.
        policy: places the (G', S) states on ``cluster.num_devices`` devices.
        device_features: (D, F) device features for a device-aware policy (default: the cluster's).

    Raises:
        ValueError: ``device_features`` is not (D, F), one row per device of ``cluster``.

    Shapes:
        sampled ``devices`` (K, N) int64; ``log_prob`` and ``entropy`` (K,).
    """

    name = "hierarchical"

    rescores = False
    """No :meth:`evaluate` or :meth:`project` (see :class:`~gplace.interfaces.TrainablePlacer`)."""

    def __init__(self, graph: OpGraph, cluster: Cluster, grouper: nn.Module, encoder: nn.Module, policy: nn.Module,
                 *, device_features: np.ndarray | torch.Tensor | None = None) -> None:
        super().__init__()
        check_graph_and_cluster(graph, cluster)
        check_device_count(policy, cluster)
        check_one_dtype(encoder=encoder, policy=policy)  # the encoder's states feed the policy
        checked_device_features(cluster, device_features)  # a wrong shape fails here, not at the first sample
        self.graph, self.cluster, self._device_features = graph, cluster, device_features
        self.grouper, self.encoder, self.policy = grouper, encoder, policy
        features = op_features(graph, grouper.num_type_buckets)
        self._feature_keys = tuple(features)
        for key, value in features.items():
            self.register_buffer(f"op_{key}", value, persistent=False)
        op_unit, unit_first, unit_allowed = colocation_units(graph, graph.allowed_devices(cluster))
        self._op_unit = op_unit
        self.register_buffer("unit_first", torch.from_numpy(unit_first), persistent=False)
        self.register_buffer("slots", torch.from_numpy(group_slots(unit_allowed, grouper.num_groups)),
                             persistent=False)
        follow_networks(self, floating_dtype(grouper), grouper=grouper, encoder=encoder, policy=policy)  # op features

    @property
    def num_groups(self) -> int:
        """The most groups a grouping can have."""
        return int(self.grouper.num_groups)

    def op_features(self) -> dict[str, torch.Tensor]:
        """The grouper's input (see :func:`op_features`)."""
        return {key: getattr(self, f"op_{key}") for key in self._feature_keys}

    def group_log_probs(self) -> torch.Tensor:
        """Each unit's masked log-probabilities over group slots.

        Raises:
            ContractError: (a ValueError) the grouper's logits are not (N, G) floats.
            TypeError: the grouper returned something other than a tensor.

        Shapes:
            returns (U, G).
        """
        logits = self.grouper(self.op_features())
        name, expected = type(self.grouper).__name__, f"(N={self.graph.num_ops}, G={self.num_groups})"
        if not isinstance(logits, torch.Tensor):
            raise TypeError(f"grouper {name} must return its logits as a {expected} torch.Tensor, got a "
                            f"{type(logits).__name__}")
        if tuple(logits.shape) != (self.graph.num_ops, self.num_groups) or not logits.is_floating_point():
            raise ContractError(f"grouper {name} must return {expected} floating logits, one row per op and one "
                                f"column per group, got logits of dtype {str(logits.dtype).removeprefix('torch.')} "
                                f"and shape {tuple(logits.shape)}")
        return masked_log_softmax(logits[self.unit_first], self.slots)

    def sample_groups(self, num_samples: int, generator: torch.Generator | None = None) -> GroupSample:
        """Sample ``num_samples`` groupings.

        Raises:
            ValueError: ``num_samples`` is not a whole number >= 1.

        Shapes:
            returns op_group (K, N) int64 numpy, log_prob (K,), entropy (K,).
        """
        check_num_samples(num_samples)
        log_p = self.group_log_probs()
        out = score(log_p, gumbel_argmax(log_p, num_samples, generator), self.slots)
        return GroupSample(out.devices.cpu().numpy()[:, self._op_unit], out.log_prob, out.entropy)

    def placer_for(self, op_group: np.ndarray) -> PolicyPlacer:
        """A :class:`~gplace.placer.PolicyPlacer` over one grouping, sharing this placer's encoder and policy.

        Shapes:
            op_group (N,) int group slot per op; unused slots are dropped.
        """
        grouping = make_grouping(self.graph, np.unique(op_group, return_inverse=True)[1])
        return PolicyPlacer(self.graph, self.cluster, self.encoder, self.policy, grouping=grouping,
                            device_features=self._device_features)

    def sample(self, num_samples: int, generator: torch.Generator | None = None) -> PlacerSample:
        """Sample ``num_samples`` groupings, and one placement of each.

        Raises:
            ValueError: ``num_samples`` is not a whole number >= 1.

        Shapes:
            returns devices (K, N) int64 numpy, log_prob (K,), entropy (K,).
        """
        groups = self.sample_groups(num_samples, generator)
        placed = [self.placer_for(op_group).sample(1, generator=generator) for op_group in groups.op_group]
        devices = np.concatenate([p.devices for p in placed])
        log_prob = groups.log_prob + torch.cat([p.log_prob for p in placed])
        entropy = groups.entropy + torch.cat([p.entropy for p in placed])
        return PlacerSample(devices, log_prob, entropy)

    def greedy(self) -> Placement:
        """The most likely grouping, placed by argmax decoding."""
        with torch.no_grad():
            op_group = self.group_log_probs().argmax(-1).cpu().numpy()[self._op_unit]
        return self.placer_for(op_group).greedy()

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        """The greedy placement (the placer contract); only for the graph and cluster this placer was built for.

        Raises:
            ValueError: another graph or cluster.
        """
        return greedy_placement(self, graph, cluster)

    def evaluate(self, devices: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Not available: the probability of a placement sums over every grouping that could have produced it.

        Raises:
            NotImplementedError: always; train with :class:`~gplace.training.ReinforceTrainer`.
        """
        raise NotImplementedError("HierarchicalPlacer cannot re-score placements without the groupings they were "
                                  "sampled with; train it with ReinforceTrainer (no PPO, warm start or self_imitation)")

    def project(self, placement: Placement) -> Placement:
        """Not available: there are no fixed groups to project a warm-start placement onto.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("HierarchicalPlacer has no fixed groups to project a warm start onto")
