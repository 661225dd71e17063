"""Contiguous pipeline partitioners: GPipe's balanced split, PipeDream's DP, and the exact DP over ideals.

A contiguous split gives stage ``s`` to device ``s`` of the stage devices in some order (each order worth trying:
:meth:`~gplace.baselines.pipeline.stages.StageProblem.orders`) and keeps every forward edge going from a stage to
the same or a later one. All three minimise, or balance, the bottleneck of :mod:`gplace.baselines.pipeline.stages`.
"""

from __future__ import annotations

import logging

import numpy as np

from gplace.baselines._common import PlacementInfeasibleError
from gplace.baselines.base import Placer
from gplace.baselines.pipeline.stages import (
    Blocks,
    StageProblem,
    check_kind,
    fits_1f1b,
    held_microbatches,
    stage_time,
)
from gplace.ir import Cluster, OpGraph
from gplace.ir.errors import check_flags, check_sizes
from gplace.pipeline.simulator import check_microbatches

log = logging.getLogger(__name__)

MAX_DP_BYTES = 4 * 2**30
"""Most memory :func:`ideal_partition` may take (about 100 bytes per pair of ideals): past it the blocks are
coarsened further, with a WARNING (``max_ideals=20000`` on a 30-op DAG of 18,880 ideals had the process killed
for memory)."""
CHAIN_BLOCKS = 1024
"""Blocks of the chain DP (:func:`chain_split`) by default: PipeDream's ``max_blocks``, the exact DP's
``chain_blocks`` and the split the ILP's answer is checked against."""


class StagePlacer(Placer):
    """A placer that solves a :class:`StageProblem` on the devices of ``kind``.

    Args:
        kind: device kind of the stages (every device if the cluster has none of it). (default: ``"gpu"``)
        microbatches: M, the micro-batches per mini-batch. (default: 1)
        overlap: transfers overlap compute (a stage costs the max, else the sum; see
            :func:`~gplace.baselines.pipeline.stages.stage_time`). (default: ``True``)
        schedule: the schedule whose memory the stages must fit: ``"gpipe"`` (every micro-batch's activations
            held: a split that fits runs under either schedule) or ``"1f1b"`` (later stages hold fewer, so
            splits that ``gpipe`` runs out of memory with are found; see
            :func:`~gplace.baselines.pipeline.stages.held_microbatches`). (default: ``"gpipe"``)
        join_gradients: keep each backward op on the stage of the forward op it differentiates (``grad_of``), as
            ``torch.distributed.pipelining``, GPipe and PipeDream run them; else a backward op outside its forward
            op's colocation group comes after every forward op in pipeline order, so backward ops may form stages
            of their own (an unfolded pipeline ``pipe-v3`` runs, sometimes faster: docs/pipeline.md).
            (default: ``False``)

    Raises:
        ValueError: a bad kind, micro-batch count, flag or schedule, naming it.
    """

    def __init__(self, kind: str | None = "gpu", microbatches: int = 1, overlap: bool = True, *,
                 schedule: str = "gpipe", join_gradients: bool = False) -> None:
        self.kind = check_kind(kind)
        self.microbatches = check_microbatches(microbatches)
        check_flags(type(self).__name__, overlap=overlap, join_gradients=join_gradients)
        held_microbatches(schedule, self.microbatches, 0)  # checks the schedule
        self.overlap, self.schedule, self.join_gradients = overlap, schedule, join_gradients

    contiguous = True
    """Whether the stages are contiguous runs of the pipeline order (then the order of the stage devices matters)."""
    schedule = "gpipe"
    """The schedule whose memory the stages fit (a subclass that skips ``__init__`` keeps gpipe's)."""
    join_gradients = False
    """Whether backward ops stay on their forward op's stage (a subclass that skips ``__init__`` lets them go)."""

    def _place(self, graph: OpGraph, cluster: Cluster) -> np.ndarray:
        """The split for :attr:`schedule`'s memory; under ``1f1b``, gpipe's where ``pipe-v3``'s own stage ranks
        would hold more than the split's order lets it (:func:`~gplace.baselines.pipeline.stages.fits_1f1b`)."""
        devices = self._split(graph, cluster, self.schedule)
        if self.schedule == "1f1b" and not fits_1f1b(graph, cluster, devices, self.microbatches):
            log.info("%s: pipe-v3 ranks the stages of the 1F1B split of %r otherwise and would run out of memory "
                     "in the static model; splitting with gpipe's memory", type(self).__name__, graph.name)
            try:
                devices = self._split(graph, cluster, "gpipe")
            except PlacementInfeasibleError as err:  # say which memory refused it: the user asked for 1F1B
                raise PlacementInfeasibleError(
                    f"{type(self).__name__}: the 1F1B split of {graph.name!r} would run out of memory as pipe-v3 "
                    f"ranks its stages, and with gpipe's memory (every stage holding all {self.microbatches} "
                    f"micro-batches) {err}") from None
        return devices

    def _split(self, graph: OpGraph, cluster: Cluster, schedule: str) -> np.ndarray:
        """The stages in each order of the stage devices worth trying (:meth:`StageProblem.orders`; the index
        order alone where the devices are alike): the lowest bottleneck, else the first error."""
        first = self._problem(graph, cluster, None, schedule)
        best, error = None, None
        for order in first.orders():
            problem = first if order == tuple(range(first.num_stages)) else self._problem(graph, cluster, order,
                                                                                           schedule)
            try:
                stages = self.stages(problem) if problem.num_units else np.zeros(0, dtype=np.int64)
            except PlacementInfeasibleError as infeasible:
                error = error or infeasible
            else:
                if best is None or problem.bottleneck(stages) < best[0].bottleneck(best[1]):
                    best = problem, stages
        if best is None:
            raise error
        return best[0].devices_for_units(best[1])

    def _problem(self, graph: OpGraph, cluster: Cluster, order: tuple[int, ...] | None,
                 schedule: str) -> StageProblem:
        return StageProblem(graph, cluster, kind=self.kind, microbatches=self.microbatches, overlap=self.overlap,
                            order=order, contiguous=self.contiguous, schedule=schedule,
                            join_gradients=self.join_gradients)

    def stages(self, problem: StageProblem) -> np.ndarray:
        """(P,) stage of every pipelined unit of ``problem``."""
        raise NotImplementedError


class GPipePartitioner(StagePlacer):
    """A balanced split in GPipe's manner (Huang et al. 2019: stages of about equal compute), by gplace's own rule,
    not torchgpipe's ``balance_by_time``: a unit goes to the stage where its compute's midpoint falls, as a share
    ``s / S`` of the total (on devices of different speeds, each stage's share is its device's speed on the units
    every stage device may run), ignoring transfers; a stage also ends where the next unit would not fit its
    device's memory. On the chain of costs 1..8 over 4 stages it gives loads 10, 5, 13, 8 where torchgpipe's block
    partition and :class:`IdealDPPartitioner` give 10, 11, 7, 8.

    Raises:
        PlacementInfeasibleError: the units do not fit the stage devices' memory this way.
    """

    name = "gpipe"

    def stages(self, problem: StageProblem) -> np.ndarray:
        return balanced_split(problem)


def balanced_split(problem: StageProblem) -> np.ndarray:
    """(P,) stage of every pipelined unit: GPipe's split (see :class:`GPipePartitioner`)."""
    weight = problem.cost.mean(1)
    cum = np.cumsum(weight) - weight / 2  # the unit's midpoint decides its stage
    total = float(weight.sum()) or 1.0
    target = np.minimum((cum / total * problem.num_stages).astype(np.int64), problem.num_stages - 1)
    speed = _speeds(problem)
    if speed is not None:  # stage s takes the share of the work its device's speed gives it
        ends = np.cumsum(speed)[:-1] / speed.sum()
        target = np.searchsorted(ends, cum / total, side="right")
    stage = np.zeros(problem.num_units, dtype=np.int64)
    current, used = 0, 0
    for u in range(problem.num_units):
        want = max(int(target[u]), current)
        while want < problem.num_stages and not _fits(problem, u, want, used if want == current else 0):
            want += 1
        if want >= problem.num_stages:
            raise _no_room(problem, u, current)
        used = (used if want == current else 0) + int(problem.memory[u, want])
        current = stage[u] = want
    return stage


def _speeds(problem: StageProblem) -> np.ndarray | None:
    """(S,) each stage device's speed on the units every stage device may run (1 / their seconds there), or
    ``None`` where these are the same on every device (or there are none, or they take no time)."""
    common = problem.allowed.all(1)
    seconds = problem.cost[common].sum(0)
    if not common.any() or (seconds == seconds[0]).all() or not (seconds > 0).all():
        return None
    return 1.0 / seconds


def _fits(problem: StageProblem, unit: int, stage: int, used: int) -> bool:
    room = int(problem.capacity[stage]) - used
    return bool(problem.allowed[unit, stage]) and int(problem.memory[unit, stage]) <= room


class _PinOutOfOrder(PlacementInfeasibleError):
    """No split in pipeline order meets a unit's pins (the reason the exact DP, which says only that no split
    fits, passes on)."""


def _no_room(problem: StageProblem, unit: int, current: int) -> PlacementInfeasibleError:
    named = problem.named_unit(int(problem.order[unit]))
    allowed = np.flatnonzero(problem.allowed[unit]).tolist()
    if not any(s >= current for s in allowed):
        return _out_of_order(problem, unit, current)
    needed = problem.memory[unit]
    bytes_needed = f"{int(needed[0])}" if (needed == needed[0]).all() else f"{needed.tolist()} (by stage)"
    return _short_of_memory(problem) or PlacementInfeasibleError(
        f"{named} fits no stage device after the earlier stages: {bytes_needed} bytes needed, stage "
        f"devices' capacities {problem.capacity.tolist()}"
    )


def _out_of_order(problem: StageProblem, unit: int, current: int) -> _PinOutOfOrder:
    allowed = np.flatnonzero(problem.allowed[unit]).tolist()
    return _PinOutOfOrder(
        f"{problem.named_unit(int(problem.order[unit]))} may run only on stages {allowed} (its pins and kinds) but "
        f"comes after ops placed on stage {current}: no split in pipeline order has it")


def _pins_out_of_order(problem: StageProblem) -> _PinOutOfOrder | None:
    """The error naming the first unit whose pins no split in pipeline order meets, whatever the memory (each unit
    on the first stage it may run on from its predecessor's), ``None`` where the pins allow a split."""
    current = 0
    for unit in range(problem.num_units):
        later = np.flatnonzero(problem.allowed[unit, current:])
        if later.size == 0:
            return _out_of_order(problem, unit, current)
        current += int(later[0])
    return None


def _short_of_memory(problem: StageProblem) -> PlacementInfeasibleError | None:
    """The error naming what memory alone rules out (:meth:`StageProblem.memory_shortfall`: one unit too large for
    every stage device, or all of them for all together), ``None`` where it rules out nothing by itself."""
    shortfall = problem.memory_shortfall()
    return None if shortfall is None else PlacementInfeasibleError(
        f"no split fits the stage devices' memory: {shortfall}")


class PipeDreamPartitioner(StagePlacer):
    """PipeDream's partitioner (Narayanan et al. 2019): a dynamic program over the pipeline order for the split
    into at most S contiguous stages with the smallest bottleneck, transfers included (no stage replication).

    Graphs with more than ``max_blocks`` units are first coarsened into ``max_blocks`` runs of about equal
    compute (:meth:`StageProblem.blocks`); the DP is exact over the cut points that remain. Cost
    O(S x B^2) time, O(B^2) memory.

    Raises:
        PlacementInfeasibleError: no contiguous split fits the stage devices' memory.
    """

    name = "pipedream"

    def __init__(self, kind: str | None = "gpu", microbatches: int = 1, overlap: bool = True,
                 max_blocks: int = CHAIN_BLOCKS, *, schedule: str = "gpipe", join_gradients: bool = False) -> None:
        super().__init__(kind, microbatches, overlap, schedule=schedule, join_gradients=join_gradients)
        check_sizes(type(self).__name__, 1, max_blocks=max_blocks)
        self.max_blocks = max_blocks

    def stages(self, problem: StageProblem) -> np.ndarray:
        try:
            return chain_split(problem, self.max_blocks)
        except PlacementInfeasibleError as err:  # the pins or the totals say more than the capacities alone
            why = _pins_out_of_order(problem) or _short_of_memory(problem)
            if why is None:
                raise
            raise why from err


def chain_split(problem: StageProblem, max_blocks: int) -> np.ndarray:
    """(P,) stage of every pipelined unit in the best split of the pipeline order into contiguous stages, over
    ``problem``'s units coarsened into at most ``max_blocks`` blocks (:func:`chain_partition`, PipeDream's DP).

    Raises:
        PlacementInfeasibleError: every split overflows some device's memory.
    """
    blocks = problem.blocks(max_blocks)
    return problem.unit_stages(blocks, chain_partition(blocks, problem.capacity))


def chain_partition(blocks: Blocks, capacity: np.ndarray) -> np.ndarray:
    """(B,) stage of each block: the linear-partition DP, ``f_s(b) = min_a max(f_{s-1}(a), cost_s(a, b))``.

    ``cost_s(a, b)`` is the compute of blocks ``[a, b)`` on stage device ``s`` plus every transfer into or out
    of them; a range over memory or holding a block not allowed on ``s`` costs ``inf``.

    Raises:
        PlacementInfeasibleError: every split overflows some device's memory.
    """
    n = blocks.num_blocks
    cum_cost = np.vstack([np.zeros((1, blocks.cost.shape[1])), np.cumsum(blocks.cost, 0)])
    cum_mem = np.vstack([np.zeros((1, blocks.memory.shape[1]), np.int64), np.cumsum(blocks.memory, 0)])
    cum_banned = np.vstack([np.zeros((1, blocks.allowed.shape[1]), np.int64), np.cumsum(~blocks.allowed, 0)])
    cum_sent = np.concatenate([[0.0], np.cumsum(blocks.sent)])
    cum_received = np.concatenate([[0.0], np.cumsum(blocks.received)])
    square = np.zeros((n + 1, n + 1))
    square[1:, 1:] = blocks.transfer.cumsum(0).cumsum(1)
    diag = np.diag(square)
    inner = diag[None, :] - square - square.T + diag[:, None]  # transfers inside [a, b), for a <= b
    sent = cum_sent[None, :] - cum_sent[:, None] - inner
    received = cum_received[None, :] - cum_received[:, None] - inner
    order = np.subtract.outer(np.arange(n + 1), np.arange(n + 1)) <= 0  # a <= b
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    choices = []
    for s in range(blocks.cost.shape[1]):
        cost = stage_time(cum_cost[None, :, s] - cum_cost[:, None, s], sent, received, blocks.overlap)
        mem = cum_mem[None, :, s] - cum_mem[:, None, s]
        banned = (cum_banned[None, :, s] - cum_banned[:, None, s] > 0) | (mem > capacity[s])
        cost = np.where(order & ~banned, np.maximum(cost, 0.0), np.inf)
        cost[np.diag_indices(n + 1)] = 0.0  # an empty stage
        total = np.maximum(best[:, None], cost)
        choices.append(np.argmin(total, 0))
        best = total.min(0)
    if not np.isfinite(best[n]):
        raise PlacementInfeasibleError(f"no contiguous split of {n} blocks into {len(choices)} stages fits the "
                                       f"stage devices' memory (capacities {capacity.tolist()})")
    stage = np.empty(n, dtype=np.int64)
    end = n
    for s in range(len(choices) - 1, -1, -1):
        start = int(choices[s][end])
        stage[start:end] = s
        end = start
    return stage


class IdealDPPartitioner(StagePlacer):
    """The exact contiguous split of a DAG (Tarnawski et al., NeurIPS 2020): a DP over the graph's ideals.

    An ideal is a set of units closed under predecessors; a contiguous split into S stages is a chain of
    ideals ``I_0 = {} <= I_1 <= ... <= I_S = all`` with stage ``s = I_{s+1} - I_s``, and
    ``f_s(J) = min over ideals I <= J of max(f_{s-1}(I), cost_s(J - I))``. On a chain the ideals are the
    prefixes and this is the classic linear-partition DP.

    Coarsening: ideals are enumerated over blocks (:meth:`StageProblem.blocks`), starting from one block per
    unit and halving the number of blocks until the block DAG has at most ``max_ideals`` ideals (a chain of
    B blocks has B + 1), and the DP over them within :data:`MAX_DP_BYTES` of memory. The result is exact when no
    coarsening was needed (every graph up to ``max_ideals`` ideals, and that memory); coarsened, its blocks follow
    the graph's topological order, whose ties go by how the ops are listed, so the split can depend on that
    listing (19 % apart on a 20-op DAG of 538 ideals at the default; invariant with ``max_ideals=1000``). The
    placer also runs the chain DP (:class:`PipeDreamPartitioner`, over up to ``chain_blocks`` blocks of the same
    order, whose prefixes are ideals too) and GPipe's split (:class:`GPipePartitioner`, unit by unit) and returns
    the split with the smallest bottleneck, so it is never behind either in that model (a steady state:
    ``pipe-v3``'s mini-batch time can rank them otherwise, most with few micro-batches; ``docs/pipeline.md``);
    past ``chain_blocks`` units a finer contiguous split than the chain DP's may still be faster.

    Args:
        kind, microbatches, overlap, schedule, join_gradients: as for :class:`StagePlacer`.
        max_ideals: the most ideals the DP enumerates before the blocks are coarsened (at least 2: the empty
            and the full set). (default: 512)
        chain_blocks: the most blocks of the chain DP run beside it (at least 1). (default: 1024)

    Raises:
        ValueError: a bad setting, naming it.
        PlacementInfeasibleError: no contiguous split fits the stage devices' memory.
    """

    name = "ideal_dp"

    def __init__(self, kind: str | None = "gpu", microbatches: int = 1, overlap: bool = True,
                 max_ideals: int = 512, chain_blocks: int = CHAIN_BLOCKS, *, schedule: str = "gpipe",
                 join_gradients: bool = False) -> None:
        super().__init__(kind, microbatches, overlap, schedule=schedule, join_gradients=join_gradients)
        check_sizes(type(self).__name__, 2, max_ideals=max_ideals)  # the empty and the full set
        check_sizes(type(self).__name__, 1, chain_blocks=chain_blocks)
        self.max_ideals = max_ideals
        self.chain_blocks = chain_blocks

    def stages(self, problem: StageProblem) -> np.ndarray:
        blocks, ideals = self._ideals(problem)
        found, error = [], None
        for solve in (lambda: problem.unit_stages(blocks, ideal_partition(blocks, ideals, problem.capacity)),
                      lambda: chain_split(problem, self.chain_blocks),
                      lambda: balanced_split(problem)):
            try:
                found.append(solve())
            except PlacementInfeasibleError as err:
                # the exact DP's (no contiguous split fits), not GPipe's greedy stop, unless that names a pin
                error = err if isinstance(err, _PinOutOfOrder) else error or err
        if not found:
            short = _short_of_memory(problem)
            if short is not None:
                raise short from error
            raise error
        return min(found, key=problem.bottleneck)

    def _ideals(self, problem: StageProblem) -> tuple[Blocks, np.ndarray]:
        count = min(problem.num_units, self.max_ideals - 1)
        warned = False
        while True:
            blocks = problem.blocks(count)
            ideals = enumerate_ideals(blocks.forward, self.max_ideals)
            if ideals is not None and dp_bytes(len(ideals)) <= MAX_DP_BYTES:
                return blocks, ideals
            if ideals is not None and not warned:
                warned = True
                log.warning("%s: the DP over the %d ideals of %d blocks would take about %.1f GB (more than "
                            "MAX_DP_BYTES, %.1f GB): coarsened further (max_ideals=%d)", type(self).__name__,
                            len(ideals), blocks.num_blocks, dp_bytes(len(ideals)) / 1e9, MAX_DP_BYTES / 1e9,
                            self.max_ideals)
            count = max(1, min(count, blocks.num_blocks) // 2)


def dp_bytes(num_ideals: int) -> int:
    """About the memory :func:`ideal_partition` takes over ``num_ideals`` ideals: a dozen (K, K) arrays."""
    return 100 * num_ideals * num_ideals


def enumerate_ideals(forward: np.ndarray, limit: int) -> np.ndarray | None:
    """(K, B) bool, every ideal of the DAG ``forward`` (B, B) ordered by size, or ``None`` if there are more than
    ``limit``."""
    n = forward.shape[0]
    preds = [sum(1 << int(a) for a in np.flatnonzero(forward[:, b])) for b in range(n)]
    seen = {0}
    frontier = [0]
    while frontier:
        grown = []
        for ideal in frontier:
            for b in range(n):
                bit = 1 << b
                if not ideal & bit and preds[b] & ideal == preds[b] and ideal | bit not in seen:
                    seen.add(ideal | bit)
                    grown.append(ideal | bit)
                    if len(seen) > limit:
                        return None
        frontier = grown
    ordered = sorted(seen, key=lambda m: (m.bit_count(), m))
    return np.array([[(m >> b) & 1 for b in range(n)] for m in ordered], dtype=bool).reshape(len(ordered), n)


def ideal_partition(blocks: Blocks, ideals: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """(B,) stage of each block: the DP over ``ideals`` (K, B) bool (the empty and the full set included).

    Raises:
        PlacementInfeasibleError: every split overflows some device's memory.
    """
    member = ideals.astype(np.float64)
    k, stages = len(ideals), blocks.cost.shape[1]
    subset = member @ (1.0 - member).T == 0  # subset[i, j]: ideal i within ideal j (no block of i outside j)
    # transfers out of J - I: out(J - I) - W(J - I, J - I) (into it likewise), where
    # W(J - I, J - I) = W(J, J) - W(I, J) - W(J, I) + W(I, I) for I within J
    w_ij = member @ blocks.transfer @ member.T
    w_self = np.diag(w_ij)
    inner = w_self[None, :] - w_ij - w_ij.T + w_self[:, None]
    out, into = member @ blocks.sent, member @ blocks.received
    sent = out[None, :] - out[:, None] - inner
    received = into[None, :] - into[:, None] - inner
    mem = ideals.astype(np.int64) @ blocks.memory.astype(np.int64)  # whole bytes: float64 lost one past 2**53
    banned = member @ (~blocks.allowed).astype(np.float64)
    best = np.full(k, np.inf)
    best[0] = 0.0
    choices = []
    for s in range(stages):
        work = member @ blocks.cost[:, s]
        cost = np.maximum(stage_time(work[None, :] - work[:, None], sent, received, blocks.overlap), 0.0)
        fits = mem[None, :, s] - mem[:, None, s] <= capacity[s]
        ok = subset & fits & (banned[None, :, s] - banned[:, None, s] <= 0)
        cost = np.where(ok, cost, np.inf)
        cost[np.diag_indices(k)] = 0.0
        total = np.maximum(best[:, None], cost)
        choices.append(np.argmin(total, 0))
        best = total.min(0)
    if not np.isfinite(best[k - 1]):
        raise PlacementInfeasibleError(f"no contiguous split into {stages} stages fits the stage devices' memory "
                                       f"(capacities {capacity.tolist()})")
    stage = np.empty(blocks.num_blocks, dtype=np.int64)
    end = k - 1
    for s in range(stages - 1, -1, -1):
        start = int(choices[s][end])
        stage[ideals[end] & ~ideals[start]] = s
        end = start
    return stage
