"""A mixed-integer program for the best non-contiguous pipeline split of a small graph (SciPy's HiGHS)."""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING

import numpy as np

from gplace.baselines._c_stdout import c_stdout_to_debug_log
from gplace.baselines._common import PlacementInfeasibleError
from gplace.baselines.pipeline.contiguous import CHAIN_BLOCKS, StagePlacer, chain_split
from gplace.baselines.pipeline.stages import StageProblem
from gplace.ir import GraphError
from gplace.ir.errors import check_positive, check_sizes

if TYPE_CHECKING:
    from scipy.optimize import LinearConstraint

log = logging.getLogger(__name__)

MAX_MEMORY_ROUNDS = 20
"""Rounds :class:`PipelineILPPlacer` solves again after an assignment that overfills a device by HiGHS' tolerance."""


class ProblemTooLargeError(GraphError):
    """The integer program is beyond this placer: more variables than its limit, or numbers HiGHS refuses (a byte
    count of about 1e15 or more; seconds are given to it in units of the largest); the message gives the sizes."""


class PipelineILPPlacer(StagePlacer):
    """Minimise the bottleneck of :mod:`~gplace.baselines.pipeline.stages` over *any* assignment of units to
    stage devices (no contiguity), as a MILP solved by HiGHS through :func:`scipy.optimize.milp`.

    Variables: ``x[u, s]`` (unit ``u`` on stage device ``s``); for each pair of units joined by edges
    ``a -> b``, ``sent[e, s] >= x[a, s] - x[b, s]`` and ``received[e, s] >= x[b, s] - x[a, s]`` (the transfer
    leaves, or reaches, device ``s``); the bottleneck ``T``. Minimise ``T`` subject to ``T >=`` the stage time
    of every device (work, sends and receives combined as
    :func:`~gplace.baselines.pipeline.stages.stage_time` does: each of the three, or their sum), each unit on
    one allowed device, and memory per device (``gpipe``'s, every micro-batch held: a device's rank among the
    stages, which sets its 1F1B bound, is not known before the assignment). When every stage device is alike,
    the first unit is fixed to the first device (symmetry breaking). For small graphs only: the variable count
    is ``(units + 2 x unit pairs) x S + 1``.

    With ``overlap`` (the default) a cut costs nothing while a stage's transfers stay below its work, so the
    optimum may hop between devices many times along the pipeline order; ``pipe-v3`` pays for each hop in
    latency and, under ``1f1b``, in the in-flight cap of the devices it ranks late (benchmarks/PIPELINE.md
    measures both models). ``overlap=False`` charges every cut.

    Args:
        kind, microbatches, overlap, join_gradients: as for
            :class:`~gplace.baselines.pipeline.contiguous.StagePlacer` (the memory is ``gpipe``'s).
        max_variables: larger problems raise :class:`ProblemTooLargeError`. (default: 5000)
        time_limit: seconds for HiGHS; the best placement found by then is returned (logged); ``inf``: no limit.
            (default: 10, a placer's time target; 30 took 30 s on a 200-op graph of 3,777 variables)

    HiGHS stops within its default relative gap (``mip_rel_gap``, 1e-4) of the optimum: the bottleneck found may
    exceed the model's optimum by that fraction. Its rows may miss by about 1e-6 of their largest number: memory is
    counted again exactly, and where the units on a device overfill it, the program is solved again with a row
    that keeps them from sharing it (up to 20 rounds, within ``time_limit`` in all); a problem HiGHS refuses may
    still fit to the byte (contiguous placers decide memory exactly). HiGHS also drops coefficients below 1e-9 of
    the largest, so where seconds span more than that (a microsecond op beside a cut of hours) its answer is
    compared with PipeDream's contiguous split in the same model and the faster one returned.

    HiGHS prints a line of its own to file descriptor 1 on some time-limited solves, whatever its settings
    (ERGO-Code/HiGHS#2783): while it solves, fd 1 goes to the DEBUG log, as while METIS runs. That is process-wide:
    what other threads print to stdout in those seconds goes there too, a program one of them starts keeps that
    file as its stdout, and two solves in two threads (or a solve and METIS) run one after the other.

    Raises:
        ValueError: a bad setting, naming it (a ``time_limit`` that is not a number above 0 was passed to HiGHS,
            which ignored a negative or NaN one and failed on a string with its own ``TypeError``).
        ProblemTooLargeError: over ``max_variables``, or numbers HiGHS refuses.
        PlacementInfeasibleError: no assignment fits the stage devices' memory, or none found in time.
    """

    name = "ilp"
    contiguous = False

    def __init__(self, kind: str | None = "gpu", microbatches: int = 1, max_variables: int = 5000,
                 time_limit: float = 10.0, overlap: bool = True, *, join_gradients: bool = False) -> None:
        super().__init__(kind, microbatches, overlap, join_gradients=join_gradients)
        check_sizes(type(self).__name__, max_variables=max_variables)
        if time_limit != math.inf:  # no limit (HiGHS' own default)
            check_positive(type(self).__name__, time_limit=time_limit)
        self.max_variables = max_variables
        self.time_limit = time_limit

    def stages(self, problem: StageProblem) -> np.ndarray:
        cuts: list[tuple[np.ndarray, int]] = []
        deadline = time.monotonic() + self.time_limit
        for _ in range(MAX_MEMORY_ROUNDS + 1):
            assignment = self._solve(problem, cuts, max(deadline - time.monotonic(), 0.1))
            overfull = _overfull_sets(problem, assignment)
            if not overfull:
                return _no_worse_than_a_chain_split(problem, assignment)
            if time.monotonic() >= deadline:
                break
            cuts += overfull
        raise PlacementInfeasibleError(
            f"pipeline ILP for graph {problem.graph.name!r}: HiGHS' assignments still exceed a stage device's memory "
            f"(within its tolerance) after {len(cuts)} rows that each kept the units of an overfilled device from "
            "sharing it; a contiguous placer such as ideal_dp decides memory exactly")

    def _solve(self, problem: StageProblem, cuts: list[tuple[np.ndarray, int]], time_left: float) -> np.ndarray:
        """The unit -> stage device assignment (P,) HiGHS finds in ``time_left`` seconds, with ``cuts``: sets of
        units that may not all be on the stage device given with each."""
        from scipy.optimize import Bounds, milp

        p, s = problem.num_units, problem.num_stages
        if p * s + 1 > self.max_variables:  # before the unit pairs are listed (k^2 around a k-wide pinned op)
            raise ProblemTooLargeError(
                f"pipeline ILP for graph {problem.graph.name!r}: {p} units on {s} devices need at least "
                f"{p * s + 1} variables, over max_variables={self.max_variables}")
        (a, b), seconds = _unit_pairs(problem)
        e = len(seconds)
        size = (p + 2 * e) * s + 1
        if size > self.max_variables:
            raise ProblemTooLargeError(
                f"pipeline ILP for graph {problem.graph.name!r}: {p} units and {e} unit pairs on {s} devices need "
                f"{size} variables, over max_variables={self.max_variables}")
        x = np.arange(p * s).reshape(p, s)
        sent = p * s + np.arange(e * s).reshape(e, s)  # the transfer a -> b leaves device s
        received = sent + e * s  # ... arrives at device s
        t = size - 1
        rows = _Rows()
        rows.add(x, np.ones((p, s)), 1.0, 1.0)  # each unit on one device
        for z, here, there in ((sent, a, b), (received, b, a)):  # z[e, s] >= x[here, s] - x[there, s]
            cols = np.stack([z.ravel(), x[here].ravel(), x[there].ravel()], 1)
            rows.add(cols, np.ones((e * s, 3)) * [1.0, -1.0, 1.0], 0.0, np.inf)
        # seconds in units of the largest: HiGHS drops coefficients below 1e-9 and lets rows miss by 1e-7, so
        # microsecond costs stopped binding T (a split 1.7x slower than the DP's, without a word)
        unit = max(float(problem.cost.max(initial=0.0)), float(seconds.max(initial=0.0))) or 1.0
        per_edge = -np.broadcast_to(seconds / unit, (s, e))
        terms = [(x.T, -problem.cost.T / unit), (sent.T, per_edge), (received.T, per_edge)]
        for group in ([terms[0]], [terms[1]], [terms[2]]) if problem.overlap else ([*terms],):  # T >= load
            rows.add(np.hstack([np.full((s, 1), t), *[c for c, _ in group]]),
                     np.hstack([np.ones((s, 1)), *[v for _, v in group]]), 0.0, np.inf)
        rows.add(x.T, problem.memory.T.astype(np.float64), -np.inf, problem.capacity.astype(np.float64))
        for units, device in cuts:
            rows.add(x[units, device][None, :], np.ones((1, units.size)), -np.inf, units.size - 1.0)
        hi = np.concatenate([np.where(problem.allowed, 1.0, 0.0).ravel(), np.ones(2 * e * s), [np.inf]])
        lo = np.zeros(size)
        if _alike(problem):
            lo[x[0, 0]] = 1.0
        objective = np.zeros(size)
        objective[-1] = 1.0
        integrality = np.concatenate([np.ones(p * s), np.zeros(2 * e * s + 1)])
        with c_stdout_to_debug_log(log, "HiGHS"):  # "HighsMipSolverData::... tmpSolver.run();" whatever "disp"
            result = milp(objective, constraints=rows.constraint(size),
                          integrality=integrality, bounds=Bounds(lo, hi),
                          options={"time_limit": time_left, "disp": False})
        if result.x is None and "Model error" in result.message:
            raise ProblemTooLargeError(
                f"pipeline ILP for graph {problem.graph.name!r}: HiGHS refused the model ({result.message}); its "
                f"largest byte count is {int(problem.memory.max(initial=0)):,}")
        if result.x is None:
            why = f"; memory: {_no_packing(problem)}" if result.status == 2 else ""
            raise PlacementInfeasibleError(f"pipeline ILP for graph {problem.graph.name!r}: {result.message}{why}")
        if result.status != 0:
            log.warning("pipeline ILP for %s stopped before proving optimality (%s); its best placement so far is "
                        "used: more time_limit (gplace place budget=SECONDS) may find a faster one",
                        problem.graph.name, result.message)
        return np.argmax(result.x[: p * s].reshape(p, s), axis=1)


def _no_worse_than_a_chain_split(problem: StageProblem, assignment: np.ndarray) -> np.ndarray:
    """``assignment``, or PipeDream's contiguous split where that has the smaller bottleneck: the program holds
    every contiguous split, but HiGHS drops coefficients below 1e-9 of the largest (seconds 1e-14 of a huge cut's),
    so its optimum could be up to 2x slower than the DP's in the same model."""
    try:
        chain = chain_split(problem, CHAIN_BLOCKS)
    except PlacementInfeasibleError:
        return assignment
    if problem.bottleneck(chain) < problem.bottleneck(assignment):
        log.debug("pipeline ILP for %s: PipeDream's contiguous split beats HiGHS' answer in the model; taken",
                  problem.graph.name)
        return chain
    return assignment


def _overfull_sets(problem: StageProblem, assignment: np.ndarray) -> list[tuple[np.ndarray, int]]:
    """The units of each stage device ``assignment`` (P,) overfills, counted exactly, with every stage device they
    would overfill as well (HiGHS' rows may miss by about 1e-6 of their largest number)."""
    found = []
    for stage in np.unique(assignment):
        units = np.flatnonzero(assignment == stage)
        held = [sum(int(b) for b in problem.memory[units, d]) for d in range(problem.num_stages)]
        if held[stage] > int(problem.capacity[stage]):
            found += [(units, d) for d in range(problem.num_stages) if held[d] > int(problem.capacity[d])]
    return found


def _no_packing(problem: StageProblem) -> str:
    """Why the units fit no stage devices (the only constraint that can fail: each unit may run on one)."""
    shortfall = problem.memory_shortfall()
    if shortfall is not None:
        return shortfall
    unit_bytes = problem.memory[:, 0]  # the same on every stage device: any assignment is held to gpipe's memory
    return (f"no assignment of the {problem.num_units} units ({int(unit_bytes.sum()):,} bytes in all, the "
            f"largest {int(unit_bytes.max()):,}) fits the stage devices' capacities "
            f"{[int(c) for c in problem.capacity]}")


class _Rows:
    """Sparse constraint rows ``lo <= A x <= hi``, added a family at a time."""

    def __init__(self) -> None:
        self.rows, self.cols, self.coefs, self.lower, self.upper = [], [], [], [], []
        self.count = 0

    def add(self, cols: np.ndarray, coefs: np.ndarray, lo: float | np.ndarray, hi: float | np.ndarray) -> None:
        """One row per line of ``cols`` (R, K) variable indices with ``coefs`` (R, K)."""
        r, k = cols.shape
        self.rows.append(np.repeat(self.count + np.arange(r), k))
        self.cols.append(cols.ravel())
        self.coefs.append(np.asarray(coefs, dtype=np.float64).ravel())
        self.lower.append(np.broadcast_to(lo, (r,)))
        self.upper.append(np.broadcast_to(hi, (r,)))
        self.count += r

    def constraint(self, size: int) -> LinearConstraint:
        """The rows as one SciPy constraint over ``size`` variables."""
        from scipy.optimize import LinearConstraint
        from scipy.sparse import coo_array

        matrix = coo_array((np.concatenate(self.coefs), (np.concatenate(self.rows), np.concatenate(self.cols))),
                           shape=(self.count, size)).tocsr()
        return LinearConstraint(matrix, np.concatenate(self.lower), np.concatenate(self.upper))


def _unit_pairs(problem: StageProblem) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """Ordered pairs (a, b) of pipelined units joined by edges a -> b, and their summed transfer seconds (E,)."""
    a, b = problem.edge_src, problem.edge_dst
    keys, inverse = np.unique(a * problem.num_units + b, return_inverse=True)
    seconds = np.bincount(inverse, weights=problem.edge_seconds, minlength=keys.size)
    return (keys // max(problem.num_units, 1), keys % max(problem.num_units, 1)), seconds


def _alike(problem: StageProblem) -> bool:
    """Whether every stage device is interchangeable (same costs, memory and allowed units)."""
    return bool((problem.cost == problem.cost[:, :1]).all() and (problem.capacity == problem.capacity[0]).all()
                and (problem.allowed == problem.allowed[:, :1]).all())
