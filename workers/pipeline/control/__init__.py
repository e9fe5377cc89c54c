"""Control stage: which prompts a step trains on and where its rollout budget goes.

A control component answers five calls, each with a default in `Controller`:

    plan(ctx)                          -> Budget   how many prompts, how many candidates to draw for them
    select(ctx, candidates, count)     -> list     which `count` of the drawn candidates to roll out
    allocate(ctx, examples, budget)    -> Budget   per-prompt group sizes and length limits
    extend(ctx, batch, stage)          -> list     after scoring: more rollouts per group (multi-stage rollout)
    observe(batch)                                 every scored group of the step, kept or not

`extend` is asked only while a round has fewer than `max_stages` rollout stages (1 by
default: never), so a component that does not extend costs nothing and draws nothing.

Components read what the run knows of each prompt from `ctx.history` (PromptHistory).
Each method lives in its own module here and registers itself.
"""

from __future__ import annotations

from workers.knobs import Knobs
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import Budget, StageContext
from workers.registry import Registry
from workers.tasks import Example

CONTROLLERS: Registry[type] = Registry("control component")


class Controller:
    """The defaults: the rollout section's budget, every candidate drawn is used, nothing is learned."""

    Knobs = Knobs
    candidates_per_prompt = 1  # candidates drawn per prompt the step trains on
    max_stages = 1  # rollout stages per round; more lets `extend` add rollouts to scored groups

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

    def observe(self, batch: RolloutBatch) -> None:
        pass

    def metrics(self) -> dict[str, float]:
        """pipeline/control/...: what the component did this step."""
        return {}


@CONTROLLERS.register("fixed")
class FixedBudget(Controller):
    """The same budget every step: rollout.prompts_per_step x rollout.group_size, rollout.max_new_tokens."""


from workers.pipeline.control import dars, dots, duet, gdro, mopps, siri, vade, xrpo  # noqa: E402, F401  (registration)
