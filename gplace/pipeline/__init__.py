"""Pipeline parallelism: micro-batched training and inference of a placed graph.

``pipe-v3`` (:class:`PipelineSimulator`) simulates one mini-batch under the ``gpipe`` or ``1f1b`` schedule;
``pipe-steady-v1`` (:class:`SteadyStateScore`, :func:`steady_state_loads`) is its cheap steady-state score and
:func:`pipeline_bytes_moved` its bytes sent between devices;
:func:`write_pipeline_trace` writes a simulated mini-batch as a Chrome trace; :mod:`gplace.pipeline.stages`
turns a placement into stages and a ``torch.distributed.pipelining`` split spec; :func:`stage_orders` gives each
device the order of its stages' passes (for a device holding several stages).
"""

from gplace.pipeline.simulator import SCHEDULES, PipelineSchedule, PipelineSimulator
from gplace.pipeline.stage_order import StagePass, stage_orders
from gplace.pipeline.steady import SteadyStateScore, pipeline_bytes_moved, steady_state_loads
from gplace.pipeline.trace import write_pipeline_trace

__all__ = ["SCHEDULES", "PipelineSchedule", "PipelineSimulator", "StagePass", "SteadyStateScore",
           "pipeline_bytes_moved", "stage_orders", "steady_state_loads", "write_pipeline_trace"]
