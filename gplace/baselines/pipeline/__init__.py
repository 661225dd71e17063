"""Placers for the pipeline objective: split a graph into stages fed with a stream of micro-batches.

All minimise (or balance) the bottleneck of :mod:`gplace.baselines.pipeline.stages`, the per-micro-batch load of
the busiest device, respecting pins, colocation groups and memory: :class:`GPipePartitioner` (balanced
contiguous split), :class:`PipeDreamPartitioner` (DP over a topological order), :class:`IdealDPPartitioner`
(exact DP over the graph's ideals) and :class:`PipelineILPPlacer` (non-contiguous, small graphs).
:class:`PipelineLocalSearch` polishes a split against the ``pipe-v3`` simulator itself, within a budget.
:func:`pipeline_lower_bound` bounds the mini-batch time of any pipeline.
"""

from gplace.baselines.pipeline.contiguous import GPipePartitioner, IdealDPPartitioner, PipeDreamPartitioner
from gplace.baselines.pipeline.ilp import PipelineILPPlacer, ProblemTooLargeError
from gplace.baselines.pipeline.local_search import PipelineLocalSearch
from gplace.baselines.pipeline.stages import StageProblem, pipeline_lower_bound

__all__ = [
    "GPipePartitioner", "IdealDPPartitioner", "PipeDreamPartitioner", "PipelineILPPlacer", "PipelineLocalSearch",
    "ProblemTooLargeError", "StageProblem", "pipeline_lower_bound",
]
