"""What a placement-aware policy needs to list-schedule the groups as it places them: durations, memory, edges.

A :class:`ScheduleContext` describes the G groups of one graph on one cluster, indexed by *feature position*
(the encoder's order, :attr:`gplace.features.GroupFeatures.order`), so a policy can estimate, for every group
and device, when the group would start and finish given the devices already chosen for its predecessors.
It is the model HEFT uses: a device runs its groups one after another, an input from another device arrives
``latency + bytes / bandwidth`` after its producer finishes, links are not contended.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from gplace.baselines._common import mean_durations, mean_edge_cost, op_memory, rank_order, upward_rank
from gplace.ir import Cluster, OpGraph


@dataclass(frozen=True, eq=False)
class ScheduleContext:
    """Per-group costs and the coarse graph's in-edges, by feature position; float64 on the CPU.

    Shapes:
        durations (G, D) seconds (0 where the device is barred), memory (G,) bytes, capacity (D,) bytes,
        pred_ptr (G + 1,) CSR offsets into pred_src (E,) positions and pred_bytes (E,), latency and
        inv_bandwidth (D, D) with zero diagonals, order (G,) positions in decoding order.
    """

    durations: torch.Tensor
    memory: torch.Tensor
    capacity: torch.Tensor
    pred_ptr: torch.Tensor
    pred_src: torch.Tensor
    pred_bytes: torch.Tensor
    latency: torch.Tensor
    inv_bandwidth: torch.Tensor
    order: torch.Tensor
    """A topological order of the positions: decreasing HEFT upward rank (mean durations and transfers)."""

    @cached_property
    def fair_share(self) -> float:
        """The time T at which the devices would all finish the graph's work, each given a share in proportion
        to its speed: ``1 / T = sum_d 1 / W_d``, ``W_d`` the groups' durations on device ``d`` (barred groups
        count 0; devices with no work are left out); 0 for a graph without work."""
        work = self.durations.sum(0)
        work = work[work > 0]
        return float(1.0 / (1.0 / work).sum()) if work.numel() else 0.0

    @cached_property
    def stage_order(self) -> torch.Tensor:
        """A depth-first topological order for pipeline stages: after a group, the groups it made ready (most
        critical first, by :attr:`order`), so a branch or chain is decoded to its end before the next starts;
        each group without inputs just before its first consumer (groups without inputs or consumers last), so a
        source such as a weight is placed when the pipeline reaches its consumer. Shapes: (G,) int64."""
        ptr, src = self.pred_ptr.tolist(), self.pred_src.tolist()
        is_source = [ptr[g] == ptr[g + 1] for g in range(self.num_groups)]
        rank = [0] * self.num_groups
        for i, g in enumerate(self.order.tolist()):
            rank[g] = i
        waiting, succ = [0] * self.num_groups, [[] for _ in range(self.num_groups)]
        for g in range(self.num_groups):
            for s in src[ptr[g]:ptr[g + 1]]:
                if not is_source[s]:
                    waiting[g] += 1
                    succ[s].append(g)
        stack = sorted((g for g in range(self.num_groups) if not is_source[g] and not waiting[g]),
                       key=rank.__getitem__, reverse=True)
        placed, order = [False] * self.num_groups, []
        while stack:
            g = stack.pop()
            for s in src[ptr[g]:ptr[g + 1]]:
                if is_source[s] and not placed[s]:
                    placed[s] = True
                    order.append(s)
            order.append(g)
            for s in sorted(succ[g], key=rank.__getitem__, reverse=True):
                waiting[s] -= 1
                if not waiting[s]:
                    stack.append(s)
        order += [g for g in self.order.tolist() if is_source[g] and not placed[g]]
        return torch.as_tensor(order, dtype=torch.int64)

    @cached_property
    def source_peers(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """For each group without inputs, the other inputs of its first consumer that :attr:`stage_order` places
        before it (where the consumer's data already is) and the bytes each sends the consumer; none for other
        groups. A consumer's in-edges are laid out once, in :attr:`stage_order`, and each of its sources takes
        the prefix before itself, so the arrays grow with the edges, not with the square of a consumer's inputs.
        Shapes: start and stop (G,) int64, group ``g``'s peers being ``peers[start[g]:stop[g]]`` (P,) int64
        with bytes (P,) float64."""
        ptr, src = self.pred_ptr.tolist(), self.pred_src.tolist()
        at = [0] * self.num_groups
        for i, g in enumerate(self.stage_order.tolist()):
            at[g] = i
        start, stop = np.zeros(self.num_groups, dtype=np.int64), np.zeros(self.num_groups, dtype=np.int64)
        seen, edges = [False] * self.num_groups, []
        for c in self.stage_order.tolist():  # a source's first consumer comes first
            sources = [s for s in src[ptr[c]:ptr[c + 1]] if ptr[s] == ptr[s + 1] and not seen[s]]
            if not sources:
                continue
            laid = sorted(range(ptr[c], ptr[c + 1]), key=lambda e: at[src[e]])
            firsts = [at[src[e]] for e in laid]
            for s in sources:
                seen[s] = True
                start[s], stop[s] = len(edges), len(edges) + bisect.bisect_left(firsts, at[s])
            edges += laid
        edges = torch.as_tensor(edges, dtype=torch.int64)
        return torch.as_tensor(start), torch.as_tensor(stop), self.pred_src[edges], self.pred_bytes[edges]

    @cached_property
    def out_bytes(self) -> torch.Tensor:
        """Bytes on every out-edge of each group, summed. Shapes: (G,) float64."""
        return torch.zeros(self.num_groups, dtype=torch.float64).index_add_(0, self.pred_src, self.pred_bytes)

    @property
    def num_groups(self) -> int:
        """Number of groups G."""
        return int(self.durations.shape[0])

    @property
    def num_devices(self) -> int:
        """Number of devices D."""
        return int(self.durations.shape[1])

    @classmethod
    def build(cls, coarse: OpGraph, cluster: Cluster, order: np.ndarray) -> ScheduleContext:
        """The context of the groups of ``coarse`` (one op per group) on ``cluster``.

        Args:
            coarse: the grouped graph (:attr:`gplace.grouping.Grouping.graph`).
            cluster: the devices.
            order: (G,) group id at each feature position (:attr:`gplace.features.GroupFeatures.order`).
        """
        order = np.asarray(order, dtype=np.int64)
        pos = np.empty(coarse.num_ops, dtype=np.int64)
        pos[order] = np.arange(order.size)
        allowed = coarse.allowed_devices(cluster)
        durations = np.where(allowed, coarse.durations(cluster), 0.0)
        src, dst = pos[coarse.edge_index[0]], pos[coarse.edge_index[1]]
        by_dst = np.argsort(dst, kind="stable")
        ptr = np.zeros(order.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=order.size), out=ptr[1:])
        rank = upward_rank(coarse, mean_durations(durations, allowed), mean_edge_cost(coarse, cluster))
        off = ~np.eye(cluster.num_devices, dtype=bool)
        f64 = torch.float64
        return cls(
            durations=torch.as_tensor(durations[order], dtype=f64),
            memory=torch.as_tensor(op_memory(coarse)[order], dtype=f64),
            capacity=torch.tensor(cluster.memory, dtype=f64),
            pred_ptr=torch.as_tensor(ptr),
            pred_src=torch.as_tensor(src[by_dst]),
            pred_bytes=torch.as_tensor(coarse.edge_bytes[by_dst], dtype=f64),
            latency=torch.as_tensor(np.where(off, cluster.latency, 0.0), dtype=f64),
            inv_bandwidth=torch.as_tensor(np.where(off, 1.0 / np.where(off, cluster.bandwidth, 1.0), 0.0), dtype=f64),
            order=torch.as_tensor(pos[rank_order(coarse, rank)]),
        )
