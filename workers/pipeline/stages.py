"""The protocol of each pipeline stage, and the context a stage is called with.

Every component of a stage takes the same arguments, so the trainer has one
call site per stage and never assembles arguments by method.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from workers.pipeline.batch import RolloutBatch
from workers.tasks import Example


@dataclass(frozen=True)
class Budget:
    """What the control stage grants the next generation."""

    prompts: int
    group_size: int
    max_new_tokens: int


@dataclass
class StageContext:
    policy: object  # workers.models.Policy
    backend: object  # workers.rollout.RolloutBackend
    generator: torch.Generator  # the sampling RNG of this run
    temperature: float
    top_p: float
    top_k: int
    step: int


class GenerateStage(Protocol):
    def __call__(self, ctx: StageContext, examples: list[Example], budget: Budget) -> RolloutBatch: ...


class FilterStage(Protocol):
    max_rounds: int  # generation rounds the trainer may run to fill a batch

    def __call__(self, batch: RolloutBatch) -> list[int]:
        """Indices of the groups that go on to training; notes the fate of every sample.

        Also sets batch.in_loss (N,): the samples that may carry gradient (the advantage
        stage can only narrow it further)."""
        ...


class ControlStage(Protocol):
    def plan(self, step: int) -> Budget: ...

    def observe(self, batch: RolloutBatch) -> None:
        """See every scored group of a step (kept or not), to plan the next."""
        ...


class ReplayStage(Protocol):
    def mix(self, batch: RolloutBatch, step: int) -> RolloutBatch:
        """The batch to train on: the fresh groups plus any replayed ones."""
        ...

    def store(self, batch: RolloutBatch, step: int) -> None:
        """Offer the trained batch to the buffer."""
        ...


class AdvantageStage(Protocol):
    def __call__(self, rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """rewards (P, n) -> advantages (P, n), in_loss (P, n) bool."""
        ...


@dataclass
class LossInputs:
    logprobs: torch.Tensor  # (B, T) current policy, differentiable
    old_logprobs: torch.Tensor  # (B, T) sampling policy
    advantages: torch.Tensor  # (B,)
    mask: torch.Tensor  # (B, T) 1 on completion tokens of samples in the loss
    aggregate: Callable[[torch.Tensor], torch.Tensor]  # (B, T) token values -> scalar, per objective.aggregation


@dataclass
class LossOutput:
    loss: torch.Tensor  # scalar
    stats: dict[str, float]  # e.g. policy/clip_ratio/low


class ObjectiveStage(Protocol):
    def __call__(self, inputs: LossInputs) -> LossOutput: ...


@dataclass
class Stages:
    generate: GenerateStage
    filter: FilterStage
    control: ControlStage
    replay: ReplayStage
    advantage: AdvantageStage
    objective: ObjectiveStage
