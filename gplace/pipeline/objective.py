"""The objective a search minimises, as the runtime that measures it (Hydra group ``objective``).

``step`` is the configured runtime itself (the time of one step); ``pipeline`` is :class:`PipelineSimulator`
(the time of one mini-batch of ``microbatches`` micro-batches under ``schedule``); ``pipeline_steady`` is
:class:`SteadyStateScore`. The trainers need nothing else: a runtime is a runtime.

Example:
    >>> from gplace.runtime import Simulator
    >>> objective_runtime(Simulator(), "pipeline", microbatches=8, schedule="gpipe").id
    'pipe-v3/gpipe/m8'
"""

from __future__ import annotations

import logging

from gplace.defaults import MICROBATCHES, SCHEDULE
from gplace.pipeline.simulator import PipelineSimulator
from gplace.pipeline.steady import SteadyStateScore
from gplace.runtime.base import Runtime
from gplace.runtime.simulator import Simulator
from gplace.runtime.wrapper import innermost

log = logging.getLogger(__name__)

__all__ = ["OBJECTIVES", "objective_runtime"]

OBJECTIVES = ("step", "pipeline", "pipeline_steady")


def objective_runtime(runtime: Runtime, name: str = "step", *, microbatches: int | None = None,
                      schedule: str | None = None) -> Runtime:
    """The runtime that measures objective ``name``; ``runtime`` (the configured one) serves ``step``, and a
    pipeline objective given any other runtime than the plain simulator says (a WARNING) that it is not used.
    ``microbatches`` (default: 4) is for the pipeline objectives, ``schedule`` (default: ``"1f1b"``) for
    ``pipeline`` alone.

    Raises:
        ValueError: an unknown objective, schedule or micro-batch count, or one the objective does not take
            (``+objective.microbatches=16`` with ``objective=step`` measured steps without a word).
    """
    unused = {"microbatches": microbatches, "schedule": schedule} if name == "step" else (
        {"schedule": schedule} if name == "pipeline_steady" else {})
    given = {key: value for key, value in unused.items() if value is not None}
    if given:
        settings = ", ".join(f"{key}={value}" for key, value in given.items())
        hint = ("the pipeline objectives (objective=pipeline, pipeline_steady) take them" if name == "step" else
                "its score has no schedule; objective=pipeline simulates one")
        raise ValueError(f"objective {name} takes no {' or '.join(given)} (given: {settings}): {hint}")
    microbatches = MICROBATCHES if microbatches is None else microbatches
    schedule = SCHEDULE if schedule is None else schedule
    if name == "step":
        return runtime
    if name in OBJECTIVES and runtime is not None and type(runtime) is not Simulator:
        model = PipelineSimulator.semantics if name == "pipeline" else "pipe-steady-v1"
        if type(innermost(runtime)) is Simulator:
            log.warning("objective %s measures with its own model (%s), bare: the configured runtime's %s around "
                        "sim-v1 is not applied to it", name, model, type(runtime).__name__)
        else:
            log.warning("objective %s measures with its own model (%s); the configured runtime %s (%s) is not used "
                        "(for real pipelined runs: objective=step runtime=torch_pipeline)", name, model,
                        type(runtime).__name__, runtime.id)
    if name == "pipeline":
        return PipelineSimulator(microbatches, schedule)
    if name == "pipeline_steady":
        return SteadyStateScore(microbatches)
    raise ValueError(f"objective must be one of {OBJECTIVES}, got {name!r}")
