"""Control stage: where the rollout budget of the next step goes."""

from __future__ import annotations

from workers.knobs import Knobs
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import Budget, StageContext
from workers.registry import Registry
from workers.tasks import Example

CONTROLLERS: Registry[type] = Registry("control component")


@CONTROLLERS.register("fixed")
class FixedBudget:
    """The same budget every step: rollout.prompts_per_step x rollout.group_size, rollout.max_new_tokens."""

    Knobs = Knobs

    def __init__(self, cfg):
        r = cfg.rollout
        self.budget = Budget(prompts=r.prompts_per_step, group_size=r.group_size, max_new_tokens=r.max_new_tokens)

    def plan(self, ctx: StageContext) -> Budget:
        return self.budget

    def allocate(self, ctx: StageContext, examples: list[Example], budget: Budget) -> Budget:
        return budget

    def observe(self, batch: RolloutBatch) -> None:
        pass
