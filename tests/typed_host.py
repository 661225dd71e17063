"""A host's typed code over gplace's public API, checked with mypy --strict by test_typed_host.py (never run)."""
from __future__ import annotations

from typing import Any

import onnx
import torch
from torch.distributed.pipelining import Pipe

from gplace.conformance import check_trainer
from gplace.export.onnx import annotate_onnx, split_onnx
from gplace.export.torch import pipeline_from_file
from gplace.interfaces import Policy, TrainablePlacer
from gplace.ir import Cluster, OpGraph, Placement
from gplace.pipeline.simulator import PipelineSimulator
from gplace.pipeline.stage_order import StagePass, stage_orders
from gplace.placer import PlacerSample
from gplace.policies import MLPPolicy, Seq2SeqPolicy
from gplace.policies.base import PolicyOutput
from gplace.runtime.base import Measurement
from gplace.search_result import TrainResult
from gplace.training import ReinforceTrainer


class UniformPolicy(torch.nn.Module):
    """A policy of one's own that reads no keyword inputs."""

    @property
    def capabilities(self) -> Any:
        from gplace.interfaces import PolicyCapabilities

        return PolicyCapabilities()

    def sample(self, states: torch.Tensor, allowed: torch.Tensor, num_samples: int,
               generator: torch.Generator | None = None) -> PolicyOutput:
        raise NotImplementedError

    def greedy(self, states: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def evaluate(self, states: torch.Tensor, allowed: torch.Tensor,
                 devices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError


def policies() -> list[Policy]:
    return [Seq2SeqPolicy(3, hidden_size=32), MLPPolicy(3), UniformPolicy()]


def settings(sim: PipelineSimulator) -> tuple[float, str]:
    return 1.0 / sim.microbatches, sim.schedule.upper()


def orders(names: list[str]) -> dict[str, list[StagePass]]:
    return stage_orders(names, microbatches=2, schedule="1f1b")


def annotated(g: OpGraph, c: Cluster, p: Placement) -> onnx.ModelProto:
    return annotate_onnx(g, c, p)


def part(g: OpGraph, c: Cluster, p: Placement) -> onnx.ModelProto:
    return split_onnx(g, c, p)[0].model


def checked(g: OpGraph, c: Cluster) -> TrainResult:
    return check_trainer(ReinforceTrainer(), g, c)


def drawn(placer: TrainablePlacer) -> PlacerSample:
    return placer.sample(8)


def piped(path: str, module: torch.nn.Module, x: torch.Tensor) -> Pipe:
    return pipeline_from_file(path, module, (x,))


def failed() -> Measurement:
    return Measurement.failure("mine", "too large", transient=True)
