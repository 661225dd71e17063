"""Baseline placers: single device, round-robin, random, human expert, HEFT, Baechi's m-TOPO / m-ETF / m-SCT, METIS.

Every placer is a :class:`Placer`: plain constructor arguments, a ``name``, and
``place(graph, cluster) -> Placement``. All respect pinned kinds and never split a colocation group;
HEFT, m-TOPO, m-ETF and m-SCT are memory-aware. :func:`step_time_lower_bound` bounds the step time any
placement can reach.
"""

from gplace.baselines._common import PlacementInfeasibleError
from gplace.baselines.base import Placer
from gplace.baselines.expert import (
    Expert,
    FamilyExpert,
    InceptionExpert,
    expert_for,
    inception_expert,
    nmt_expert,
    rnnlm_expert,
)
from gplace.baselines.heft import HEFT
from gplace.baselines.lower_bound import step_time_lower_bound
from gplace.baselines.m_etf import METF
from gplace.baselines.m_sct import MSCT
from gplace.baselines.m_topo import MTopo
from gplace.baselines.metis import METIS
from gplace.baselines.random_placer import RandomPlacer
from gplace.baselines.round_robin import RoundRobin
from gplace.baselines.single import SingleDevice

__all__ = [
    "HEFT", "METF", "METIS", "MSCT", "MTopo", "Placer", "PlacementInfeasibleError", "RandomPlacer",
    "RoundRobin", "SingleDevice", "step_time_lower_bound",
    "Expert", "FamilyExpert", "InceptionExpert", "expert_for", "inception_expert", "nmt_expert", "rnnlm_expert",
]
