"""The control stage's base: `Controller`, the defaults every control component subclasses; see __init__."""

from __future__ import annotations

from workers.knobs import Knobs
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import Budget, ControlStage, StageContext
from workers.tasks import Example


class Controller(ControlStage):
    """The defaults: the rollout section's budget, every candidate drawn is used, nothing is learned."""

    Knobs = Knobs
    candidates_per_prompt = 1  # candidates drawn per prompt the step trains on
    # max_stages (1: `extend` is never asked), observe (nothing) and metrics ({}): ControlStage's defaults

    def __init__(self, cfg):
        r = cfg.rollout
        self.budget = Budget(
            prompts=r.prompts_per_step,
            group_size=r.group_size,
            max_new_tokens=r.max_new_tokens,
            candidates=r.prompts_per_step * self.candidates_per_prompt,
        )

    def plan(self, ctx: StageContext) -> Budget:
        return self.budget

    def select(self, ctx: StageContext, candidates: list[Example], count: int) -> list[Example]:
        return candidates[:count]

    def allocate(self, ctx: StageContext, examples: list[Example], budget: Budget) -> Budget:
        return budget

    def extend(self, ctx: StageContext, batch: RolloutBatch, stage: int) -> list[int]:
        return []
