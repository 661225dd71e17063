"""A learned placer for one graph on one cluster: grouping, features, encoder and policy tied together."""

from __future__ import annotations

import warnings
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from gplace.defaults import MAX_GROUPS
from gplace.features import device_features as describe_devices
from gplace.features import featurize
from gplace.grouping import (
    Grouping,
    check_colocation_kept,
    check_grouping_of,
    group_ops,
    memory_cap,
    split_groups,
    uncuttable_edges,
)
from gplace.interfaces import check_device_count, feature_sizes_of
from gplace.ir import Cluster, InvalidPlacementError, OpGraph, Placement
from gplace.ir.errors import error_summary
from gplace.ir.placement import check_graph_and_cluster, check_has_ops, check_placement
from gplace.policies.base import check_num_samples, parameter_dtype
from gplace.policies.schedule_context import ScheduleContext


class ContractError(ValueError):
    """An encoder or policy returned what its contract (:mod:`gplace.interfaces`) rules out: the message names the
    component's class, the field, and what was expected and given (:func:`gplace.conformance.check_policy` reports
    it as the broken rule it is, an ``AssertionError``)."""


class ContractTypeError(ContractError, TypeError):
    """A :class:`ContractError` where the part is, or returned, the wrong kind of object (a tuple for states, a
    policy without ``sample``): a ``TypeError`` too, as Python raises for a wrong type, and bad input to the
    command line (exit 2, one line) like every ``ValueError`` of gplace."""


class PlacerSample(NamedTuple):
    """K sampled placements, per op, with their log-probabilities and entropies."""

    devices: np.ndarray
    """(K, N) int64 device index of every op."""
    log_prob: torch.Tensor
    """(K,) log-probability of each placement (with gradient)."""
    entropy: torch.Tensor
    """(K,) entropy of the policy along each sample (with gradient)."""


class PolicyPlacer(nn.Module):
    """Groups a graph once, then places it with ``policy(encoder(features))``.

    The grouping (:func:`~gplace.grouping.group_ops`), group features and the allowed-device mask of each group
    are computed at construction; features and mask are non-persistent buffers, so ``state_dict`` holds only
    the encoder's and policy's weights and ``.to(device)`` moves everything. So are the cluster's device
    features (:func:`~gplace.features.device_features`), passed as ``device_features=`` to a policy whose
    ``uses_device_features`` is true (e.g. :class:`~gplace.policies.DeviceAwarePolicy`); a policy whose
    ``uses_schedule`` is true (:class:`~gplace.policies.ListSchedulingPolicy`) also gets the groups' costs and
    edges as ``schedule=`` (:attr:`schedule`).

    Args:
        graph: the graph to place.
        cluster: the devices.
        encoder: maps the feature dict to (G, S) states (:class:`~gplace.interfaces.Encoder`); its
            ``num_type_buckets`` and ``max_neighbours`` shape the features.
        policy: a policy with ``sample``, ``greedy`` and ``evaluate`` over (G, S) states and a (G, D) mask,
            e.g. :class:`~gplace.policies.Seq2SeqPolicy` with ``num_devices = cluster.num_devices``.
        max_groups: at most this many groups, ``None`` for no limit (default: 256).
        grouping: use this grouping instead of :func:`group_ops` (default: ``None``: ``group_ops(graph,
            max_groups)`` with the :func:`~gplace.grouping.uncuttable_edges` of ``cluster`` kept inside groups;
            where the policy's ``merge_consumers`` is ``"if_needed"``, ops are merged into their only consumer
            only when the graph has more than ``max_groups`` ops).
        merge_consumers: overrides the policy's ``merge_consumers`` for the default grouping (``True``,
            ``False`` or ``"if_needed"``; default: ``None``, the policy's). The pipeline objective needs
            ``"if_needed"``: a chain merged into its consumer is one group, which no search can split into stages.
        device_features: (D, F) features of the cluster's devices for a device-aware policy (default: ``None``,
            :func:`gplace.features.device_features` of ``cluster``).
        express: a placement the groups must express exactly: each group is split by the devices it puts the
            group's ops on (:func:`~gplace.grouping.split_groups`), so a search warm-started from it starts
            where it is (default: ``None``).

    Raises:
        ValueError: ``encoder`` and ``policy`` are on different devices or of different floating dtypes;
            :class:`~gplace.ir.errors.GraphError` for a graph without ops.
        ContractTypeError: (a TypeError) ``encoder`` or ``policy`` is a class, not an instance; ``policy`` has no
            ``sample`` or ``encoder`` is not callable (names which, and whether the two look swapped).

    Shapes:
        sampled ``devices`` (K, N) int64; ``log_prob`` and ``entropy`` (K,); ``device_features`` (D, F).
    """

    name = "policy"

    def __init__(self, graph: OpGraph, cluster: Cluster, encoder: nn.Module, policy: nn.Module, *,
                 max_groups: int | None = MAX_GROUPS, grouping: Grouping | None = None,
                 device_features: np.ndarray | torch.Tensor | None = None, express: Placement | None = None,
                 merge_consumers: bool | str | None = None) -> None:
        super().__init__()
        check_graph_and_cluster(graph, cluster)
        check_has_ops(graph)
        for role, network in (("encoder", encoder), ("policy", policy)):
            if isinstance(network, type):
                raise ContractTypeError(f"{role} must be an instance, got the class {network.__name__}: call it "
                                        f"({network.__name__}(...))")
        _check_roles(encoder, policy)
        self.capabilities = check_device_count(policy, cluster)
        self.graph, self.cluster, self.encoder, self.policy = graph, cluster, encoder, policy
        if grouping is None:
            merge = self.capabilities.merge_consumers if merge_consumers is None else merge_consumers
            grouping = _default_grouping(graph, cluster, merge, max_groups)
        check_grouping_of(graph, grouping)
        check_colocation_kept(grouping)
        self.grouping = grouping
        if express is not None:
            self.grouping = split_groups(self.grouping, express)
        features = featurize(graph, self.grouping, **feature_sizes_of(encoder))
        self._feature_keys = tuple(features.to_tensors())
        for key, value in features.to_tensors().items():
            self.register_buffer(f"feature_{key}", value, persistent=False)
        allowed = self.grouping.graph.allowed_devices(cluster)[features.order]
        self.register_buffer("allowed", torch.from_numpy(allowed), persistent=False)
        self._some_device_barred = not bool(allowed.all())  # _check_devices checks the mask only then
        self.register_buffer("device_features", checked_device_features(cluster, device_features), persistent=False)
        pos = np.empty(features.num_groups, dtype=np.int64)
        pos[features.order] = np.arange(features.num_groups)
        self._op_pos = pos[self.grouping.op_group]  # (N,) feature position of each op's group
        follow_networks(self, floating_dtype(encoder), encoder=encoder, policy=policy)  # features and mask
        check_one_dtype(encoder=encoder, policy=policy)  # the encoder's states feed the policy
        self._finite_checked = False  # _states(): the first states are checked for NaN and inf
        self._gradient_checked = False  # and the first with gradients on for a gradient to a trainable encoder

    @property
    def num_groups(self) -> int:
        """Number of groups G the policy places."""
        return self.grouping.num_groups

    def features(self) -> dict[str, torch.Tensor]:
        """The encoder's input (see :meth:`gplace.features.GroupFeatures.to_tensors`)."""
        return {key: getattr(self, f"feature_{key}") for key in self._feature_keys}

    def policy_inputs(self) -> dict[str, Any]:
        """Extra inputs the policy declares it reads: ``device_features`` where ``uses_device_features``, and
        ``schedule`` (a :class:`~gplace.policies.schedule_context.ScheduleContext`) where ``uses_schedule``."""
        return self.capabilities.inputs(self.device_features, lambda: self.schedule)

    @cached_property
    def schedule(self) -> ScheduleContext:
        """Costs, memory and edges of the groups by feature position, for placement-aware policies."""
        return ScheduleContext.build(self.grouping.graph, self.cluster, self.features()["order"].cpu().numpy())

    def sample(self, num_samples: int, generator: torch.Generator | None = None) -> PlacerSample:
        """Sample ``num_samples`` placements.

        Shapes:
            returns devices (K, N) int64 numpy, log_prob (K,), entropy (K,).

        Raises:
            ValueError: ``num_samples`` is not a whole number >= 1.
            ContractError: (a ValueError) the encoder's states or the policy's output break their contract
                (:mod:`gplace.interfaces`): states not (G, S) floats in the policy's dtype; devices not (K, G) integers
                in [0, D) that the allowed-device mask allows; log_prob or entropy not (K,) floats; log_prob > 0.
            ContractTypeError: (a TypeError) the encoder or policy returned something other than tensors.
        """
        check_num_samples(num_samples)
        out = self.policy.sample(self._states(), self.allowed, num_samples, generator=generator,
                                 **self.policy_inputs())
        fields = ("devices", "log_prob", "entropy")
        if not all(hasattr(out, f) for f in fields):
            raise ContractTypeError(f"{type(self.policy).__name__}.sample must return a PolicyOutput (devices, "
                                    f"log_prob, entropy), got a {_described(out)}")
        devices, log_prob, entropy = (getattr(out, f) for f in fields)
        self._check_devices(devices, "sample", "PolicyOutput.devices", (int(num_samples), self.num_groups))
        self._check_scores(log_prob, entropy, "sample", int(num_samples))
        return PlacerSample(self.op_devices(devices), log_prob, entropy)

    def evaluate(self, devices: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probability and entropy of given placements under the current policy (e.g. for PPO).

        Raises:
            InvalidPlacementError: (a ValueError) ``devices`` is not (K, N) device indices for this placer's graph
                of N ops, or a row puts two ops of one group on different devices (names the row, ops and devices).
            ContractError: (a ValueError) the encoder's states, or the policy's log_prob and entropy, break their
                contract (see :meth:`sample`).
            ContractTypeError: (a TypeError) the encoder or policy returned something other than tensors.

        Shapes:
            devices (K, N) int; returns log_prob (K,), entropy (K,).
        """
        given = np.asarray(devices)
        if given.size and not np.issubdtype(given.dtype, np.integer):
            raise InvalidPlacementError(f"devices must be integer device indices, got dtype {given.dtype}")
        devices = given.astype(np.int64)
        n = self.graph.num_ops
        if devices.ndim != 2 or devices.shape[1] != n:
            raise InvalidPlacementError(f"devices has shape {devices.shape}, expected (K, {n}): one row per "
                                        f"placement of graph {self.graph.name!r}, which has {n} ops")
        first = np.full(self.num_groups, devices.shape[-1], dtype=np.int64)
        np.minimum.at(first, self._op_pos, np.arange(self._op_pos.size))
        actions = devices[:, first]
        self._check_groups_kept(devices, first)
        out = self.policy.evaluate(self._states(), self.allowed, torch.as_tensor(actions, device=self.allowed.device),
                                   **self.policy_inputs())
        if not isinstance(out, tuple | list) or len(out) != 2:
            raise ContractTypeError(f"{type(self.policy).__name__}.evaluate must return (log_prob, entropy), got a "
                                    f"{_described(out)}")
        log_prob, entropy = out
        self._check_scores(log_prob, entropy, "evaluate", devices.shape[0])
        return log_prob, entropy

    def _check_groups_kept(self, devices: np.ndarray, first: np.ndarray) -> None:
        """Raise :class:`InvalidPlacementError` naming the first row of ``devices`` (K, N) that puts two ops of one
        group on different devices; ``first`` (G,) is each group's first op."""
        split = np.argwhere(devices[:, first[self._op_pos]] != devices)
        if split.size:
            k, i = (int(x) for x in split[0])
            j, names = int(first[self._op_pos[i]]), self.graph.op_names
            raise InvalidPlacementError(
                f"devices row {k} splits a group of this placer's grouping: op {names[j]!r} on device "
                f"{devices[k, j]}, op {names[i]!r} on device {devices[k, i]}; ops of one group share a device"
            )

    def greedy(self) -> Placement:
        """The policy's most likely placement (argmax decoding).

        Raises:
            ContractError: (a ValueError) the encoder's states break their contract (see :meth:`sample`), or the
                policy's devices are not (G,) integers in [0, D) that the allowed-device mask allows.
            ContractTypeError: (a TypeError) the encoder or policy returned something other than tensors.
        """
        with torch.no_grad():
            actions = self.policy.greedy(self._states(), self.allowed, **self.policy_inputs())
        self._check_devices(actions, "greedy", "devices", (self.num_groups,))
        return Placement.for_graph(self.graph, self.op_devices(actions[None])[0])

    def _states(self) -> torch.Tensor:
        """The encoder's (G, S) states of this placer's groups, checked against what the policy reads (every call:
        O(1) checks of type, shape, dtype and device; the first call also for NaN and inf, and the first with
        gradients on for states without a gradient from an encoder with trainable parameters, warned about
        (``RuntimeWarning``): such an encoder still places, but its placements carry no information, or it does
        not learn).

        Raises:
            ContractTypeError: (a TypeError) the encoder did not return a torch tensor.
            ContractError: (a ValueError) the states are not (G, S) floats in the policy's dtype on the placer's
                device (S the encoder's ``hidden_size`` and the policy's ``state_size``, where they declare one).
        """
        states = self.encoder(self.features())
        name, g = type(self.encoder).__name__, self.num_groups
        declared = declared_size(self.encoder, "hidden_size")  # S, the encoder's own (gplace.interfaces.Encoder)
        size = declared_size(self.policy, "state_size")
        expected = f"(G={g}, S={size})" if size is not None else f"(G={g}, S)"
        if not isinstance(states, torch.Tensor):
            raise ContractTypeError(f"encoder {name} must return its states as a {expected} torch.Tensor, got a "
                                    f"{_described(states)}")
        if states.ndim == 2 and states.shape[0] == g and declared is not None and states.shape[1] != declared:
            raise ContractError(f"encoder {name} must return (G={g}, S={declared}) states (S its hidden_size), got "
                                f"states of shape {tuple(states.shape)}")
        if states.ndim != 2 or states.shape[0] != g or size is not None and states.shape[1] != size:
            where = f" (the state_size of {type(self.policy).__name__})" if size is not None else ""
            raise ContractError(f"encoder {name} must return {expected} states{where}, one row per group, got states "
                                f"of shape {tuple(states.shape)}")
        if states.device != self.allowed.device:  # first: autocast knows no device type such as meta
            raise ContractError(f"encoder {name} must return its states on the placer's device "
                                f"{self.allowed.device}, got states on {states.device}")
        dtype = parameter_dtype(self.policy)
        if dtype is not None and torch.is_autocast_enabled(states.device.type):
            dtype = None  # autocast runs the policy's layers in its own dtype
        if not states.is_floating_point() or dtype is not None and states.dtype != dtype:
            wanted = (f"states of dtype {dtype}, the dtype of {type(self.policy).__name__}'s parameters" if dtype
                      else "floating states")
            raise ContractError(f"encoder {name} must return {wanted}, got states of dtype {states.dtype}")
        if not self._finite_checked and not bool(torch.isfinite(states).all()):
            bad = int((~torch.isfinite(states)).any(1).sum())
            warnings.warn(f"encoder {name} returned states that are not finite (NaN or inf) in {bad} of {g} groups: "
                          "the policy's placements carry no information (has training diverged?)", RuntimeWarning,
                          stacklevel=3)
        self._finite_checked = True
        if not self._gradient_checked and torch.is_grad_enabled():
            self._gradient_checked = True
            if not states.requires_grad and _trainable(self.encoder):
                warnings.warn(f"encoder {name} returned states without a gradient (detached?) though it has parameters "
                              "to train: they will not learn (gplace.interfaces.Encoder)", RuntimeWarning, stacklevel=3)
        return states

    def _check_devices(self, devices: Any, method: str, field: str, shape: tuple[int, ...]) -> None:
        """Raise unless ``devices``, the ``field`` ``policy.<method>`` returned, is an integer tensor of ``shape`` whose
        values are devices the allowed-device mask allows for each group (one min/max, a gather where the mask bars
        a device, one sync; the offending entry is located only on failure)."""
        name, g = type(self.policy).__name__, self.num_groups
        expected = f"(K, G={g}) integer devices" if len(shape) == 2 else f"(G={g},) integer devices"
        asked = f" (K={shape[0]} asked)" if len(shape) == 2 else ""
        if not isinstance(devices, torch.Tensor):
            raise ContractTypeError(f"policy {name} must give {expected} as a torch.Tensor from {method}, got "
                                    f"{field} as a {_described(devices)}")
        if (tuple(devices.shape) != shape or devices.dtype.is_floating_point or devices.dtype.is_complex
                or devices.dtype == torch.bool):
            raise ContractError(f"policy {name} must give {expected} from {method}{asked}, got {field} as a "
                                f"{_described(devices)}")
        d = self.allowed.shape[1]
        at = devices.to(self.allowed.device, torch.long).reshape(-1, g)
        if not at.numel():
            return
        lo, hi = torch.aminmax(at)  # the fast path: the range, and the mask only where it bars a device
        kept = self.allowed.gather(1, at.T.clamp(0, d - 1)).all() if self._some_device_barred else hi.new_ones(())
        lo, hi, kept = torch.stack((lo, hi, kept.to(hi.dtype))).tolist()  # one sync
        if lo >= 0 and hi < d and kept:
            return
        in_range = (at >= 0) & (at < d)
        ok = in_range & self.allowed[torch.arange(g, device=at.device), at.clamp(0, d - 1)]
        k, group = (~ok).nonzero()[0].tolist()
        device = int(at[k, group])
        where = f"{field}[{k}, {group}]" if len(shape) == 2 else f"{field}[{group}]"
        if not bool(in_range[k, group]):
            raise ContractError(f"policy {name} must give devices in [0, {d}) from {method}, got {where} = {device}: "
                                f"cluster {self.cluster.name!r} has {d} devices")
        allowed = self.allowed[group].nonzero().flatten().tolist()
        raise ContractError(f"policy {name} must give devices the allowed-device mask allows from {method}, got "
                            f"{where} = {device}, a device the group at position {group} may not run on (allowed: "
                            f"{allowed}; the allowed-device mask ignored?)")

    def _check_scores(self, log_prob: Any, entropy: Any, method: str, k: int) -> None:
        """Raise unless ``log_prob`` and ``entropy``, what ``policy.<method>`` returned, are (K,) float tensors, and
        ``log_prob`` <= 0 (up to rounding; one sync)."""
        name = type(self.policy).__name__
        for field, value, what in (("log_prob", log_prob, "log-probabilities"), ("entropy", entropy, "entropies")):
            if not isinstance(value, torch.Tensor):
                raise ContractTypeError(f"policy {name} must give ({k},) {what}, one per placement, as a torch.Tensor "
                                        f"from {method}, got {field} as a {_described(value)}")
            if tuple(value.shape) != (k,) or not value.is_floating_point():
                raise ContractError(f"policy {name}'s {method} must give ({k},) {what}, one per placement, as "
                                    f"floats, got {field} as a {_described(value)}")
        if log_prob.numel():  # probabilities given as log-probabilities trained silently; NaN is not refused here
            top = float(log_prob.detach().max())
            if top > max(1e-4, 8 * torch.finfo(log_prob.dtype).eps * self.num_groups):  # rounding in low precision
                raise ContractError(f"policy {name}'s {method} must give log-probabilities (<= 0), got log_prob up "
                                    f"to {top:.4g} (probabilities instead of their logarithm?)")

    def place(self, graph: OpGraph, cluster: Cluster) -> Placement:
        """The greedy placement (the placer contract); only for the graph and cluster this placer was built for.

        Raises:
            ValueError: another graph or cluster.
        """
        return greedy_placement(self, graph, cluster)

    def project(self, placement: Placement) -> Placement:
        """The nearest placement this policy can emit: each group on the allowed device holding most of its ops'
        cost under ``placement`` (e.g. to warm-start from a heuristic placement that splits groups).

        Raises:
            InvalidPlacementError: ``placement`` does not fit this placer's graph and cluster
                (:meth:`Placement.validate`: another graph, the wrong length, an unknown device, ...).
            TypeError: ``placement`` is not a :class:`~gplace.ir.Placement`.
        """
        from gplace.grouping import op_cost

        check_placement(placement)
        placement.validate(self.graph, self.cluster)
        weight = np.nan_to_num(op_cost(self.graph), nan=0.0) + 1e-12
        votes = np.zeros((self.num_groups, self.cluster.num_devices))
        np.add.at(votes, (self._op_pos, placement.devices), weight)
        votes[~self.allowed.cpu().numpy()] = -1.0
        return Placement.for_graph(self.graph, votes.argmax(1)[self._op_pos])

    def op_devices(self, actions: torch.Tensor) -> np.ndarray:
        """Per-op devices from per-group devices in feature order.

        Shapes:
            actions (K, G) int; returns (K, N) int64.

        Raises:
            ValueError: ``actions`` (what the policy decoded) is not a (K, G) tensor of integer devices.
        """
        if (not isinstance(actions, torch.Tensor) or actions.ndim != 2 or actions.shape[1] != self.num_groups
                or actions.dtype.is_floating_point or actions.dtype == torch.bool):
            raise ValueError(f"policy {type(self.policy).__name__} must give (K, G={self.num_groups}) integer "
                             f"devices, got {getattr(actions, 'dtype', type(actions).__name__)} of shape "
                             f"{tuple(getattr(actions, 'shape', ()))}")
        return actions.detach().cpu().numpy().astype(np.int64)[:, self._op_pos]


def _described(value: Any) -> str:
    """``value``'s type, and for arrays and tensors its dtype and shape (for error messages)."""
    kind = type(value)
    kind = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    if isinstance(value, torch.Tensor | np.ndarray):
        return f"{kind} of dtype {str(value.dtype).removeprefix('torch.')} and shape {tuple(value.shape)}"
    return kind


def declared_size(network: Any, attribute: str) -> int | None:
    """``network``'s ``attribute`` (``hidden_size``, ``state_size``) where it declares one as an int, else ``None``."""
    size = getattr(network, attribute, None)
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def greedy_placement(placer: nn.Module, graph: OpGraph, cluster: Cluster) -> Placement:
    """The placer contract for a policy built for one graph and cluster: its greedy placement, validated.

    Raises:
        ValueError: ``graph`` or ``cluster`` is not the one ``placer`` was built for.
    """
    if graph.fingerprint != placer.graph.fingerprint or cluster.device_names != placer.cluster.device_names:
        raise ValueError(f"this {type(placer).__name__} places graph {placer.graph.name!r} on cluster "
                         f"{placer.cluster.name!r}, not {graph.name!r} on {cluster.name!r}")
    placement = placer.greedy()
    placement.validate(graph, cluster)
    return placement


def follow_networks(holder: nn.Module, dtype: torch.dtype, **networks: nn.Module) -> None:
    """Move ``holder``'s own buffers (features, masks) to the one device of ``networks``, and its floating ones to
    ``dtype`` (float64 networks get float64 features).

    Raises:
        ValueError: the networks are on different devices (naming each one's).
    """
    holder.to(module_device(**networks))
    for name, buffer in holder.named_buffers(recurse=False):
        if buffer.is_floating_point():
            setattr(holder, name, buffer.to(dtype))


def floating_dtype(module: nn.Module) -> torch.dtype:
    """The dtype of the module's first floating-point parameter (the default dtype for one without any)."""
    return parameter_dtype(module) or torch.get_default_dtype()


def check_one_dtype(**modules: nn.Module) -> None:
    """Raise ``ValueError`` unless the floating parameters of ``modules`` share one dtype (naming each module's).

    For networks that feed one another (encoder into policy): mixed dtypes would fail at the first forward with
    torch's "mat1 and mat2 must have the same dtype".
    """
    where = {name: {str(p.dtype).removeprefix("torch.") for p in m.parameters() if p.is_floating_point()}
             if isinstance(m, nn.Module) else set() for name, m in modules.items()}
    if len(set().union(*where.values())) > 1:
        listed = ", ".join(f"{name} {', '.join(sorted(d))}" for name, d in where.items() if d)
        target = next(min(d) for d in where.values() if d)  # the first network's
        fixes = " and ".join(f"{name}.to(torch.{target})" for name, d in where.items() if d and d != {target})
        raise ValueError(f"the networks of one placer must have one floating dtype: {listed}; convert them to one, "
                         f"e.g. {fixes}")


def module_device(**modules: nn.Module) -> torch.device:
    """The one device the parameters and buffers of ``modules`` are on (the CPU for modules without any).

    Raises:
        ValueError: they are on different devices (naming each module's).
    """
    where = {name: {t.device for t in (*m.parameters(), *m.buffers())} if isinstance(m, nn.Module) else set()
             for name, m in modules.items()}
    devices = set().union(*where.values())
    if len(devices) > 1:
        listed = ", ".join(f"{name} on {', '.join(sorted(map(str, d)))}" for name, d in where.items() if d)
        raise ValueError(f"the networks of one placer must be on one device: {listed}; move them together, "
                         "e.g. encoder.to(device) and policy.to(device)")
    return devices.pop() if devices else torch.device("cpu")


def network_device(name: str | torch.device) -> torch.device:
    """The torch device called ``name`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``) for a placer's networks, checked.

    Raises:
        ValueError: not a device name, not a CPU or CUDA device, or a CUDA device this machine does not have.
    """
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device={name!r} is not a torch device name (cpu, cuda, cuda:N): "
                         f"{error_summary(err, limit=120)}") from None
    if device.type not in ("cpu", "cuda"):  # mps failed deep in Module.to, meta once training started
        raise ValueError(f"device={name!r}: gplace runs its networks on cpu or cuda (cuda:N), not {device.type}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={name!r}: this machine has no CUDA device (torch.cuda.is_available() is False)")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ValueError(f"device={name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


def merge_for(runtime: object) -> str | None:
    """The ``merge_consumers`` of a search measured by ``runtime``: ``"if_needed"`` for a pipeline runtime (a chain
    merged into its consumer is one group, which no search can split into stages), else ``None`` (the policy's
    own). Training, fine-tuning and reusing a policy group alike with it."""
    from gplace.runtime.wrapper import microbatches_of

    return "if_needed" if microbatches_of(runtime) is not None else None


def _trainable(module: object) -> bool:
    """Whether ``module`` has a parameter that requires a gradient (an encoder need not be a Module)."""
    parameters = module.parameters() if hasattr(module, "parameters") else ()
    return any(p.requires_grad for p in parameters)


def _check_roles(encoder: object, policy: object) -> None:
    """Raise a :class:`ContractTypeError` naming the part unless ``encoder`` is callable and ``policy`` has a
    policy's ``sample`` (:class:`gplace.interfaces.Policy`; one that only samples may lack the rest); says so where
    the two look swapped."""
    if not callable(getattr(policy, "sample", None)):
        swapped = " (encoder and policy swapped?)" if callable(getattr(encoder, "sample", None)) else ""
        raise ContractTypeError(f"policy must be a gplace Policy; {type(policy).__name__} has no sample "
                                f"method{swapped}")
    if not callable(encoder):
        raise ContractTypeError(f"encoder must be a callable module (features -> states), got "
                                f"{type(encoder).__name__}")


def _default_grouping(graph: OpGraph, cluster: Cluster, merge: bool | str, max_groups: int | None) -> Grouping:
    if merge == "if_needed":  # no limit (None): nothing to merge for
        merge = max_groups is not None and graph.num_ops > max_groups
    return group_ops(graph, max_groups, merge_consumers=bool(merge), uncuttable=uncuttable_edges(graph, cluster),
                     memory_cap=memory_cap(graph, cluster))


def checked_device_features(cluster: Cluster, given: np.ndarray | torch.Tensor | None) -> torch.Tensor:
    """Given device features as float32, or the cluster's (:func:`~gplace.features.device_features`).

    Raises:
        ValueError: ``given`` is not (D, F), one row per device of ``cluster``, or holds a value that is not finite
            (in float32: the message names the device and column).

    Shapes:
        given (D, F); returns (D, F).
    """
    out = torch.as_tensor(describe_devices(cluster) if given is None else given, dtype=torch.float32)
    if out.ndim != 2 or out.shape[0] != cluster.num_devices:
        raise ValueError(f"device_features has shape {tuple(out.shape)}, expected ({cluster.num_devices}, F)")
    bad = (~torch.isfinite(out)).nonzero()
    if len(bad):
        d, f = bad[0].tolist()
        raise ValueError(f"device_features[{d}, {f}] (device {cluster.device_names[d]!r}) is {out[d, f].item()} in "
                         f"float32: every feature must be finite ({len(bad)} are not)")
    return out
