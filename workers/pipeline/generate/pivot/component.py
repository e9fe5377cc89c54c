"""`pivot`: G+1 independent samples per prompt; the extra one is the median pivot of MC-GRPO's advantage."""

from __future__ import annotations

from workers.knobs import Knobs
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.generate.base import sample_groups
from workers.pipeline.stages import Budget, GenerateStage, StageContext
from workers.tasks import Example


class PivotGroups(GenerateStage):
    """G+1 samples per prompt, so an odd group has one exact median (MC-GRPO: Kim 2026, sec. 3).

    The extra sample is the median reference; the group-median advantage leaves
    it out of the loss, so G samples per prompt still carry gradient.
    Knobs: rollout.group_size (G; G+1 are drawn).
    """

    Knobs = Knobs

    def __init__(self, cfg):
        pass

    def __call__(self, ctx: StageContext, examples: list[Example], budget: Budget) -> RolloutBatch:
        batch = sample_groups(ctx, examples, budget, extra=1)
        for g, size in enumerate(batch.group_sizes):
            batch.note("generate", f"sampled 1 of {size - 1}+1", [g])
        return batch
