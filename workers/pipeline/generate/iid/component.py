"""`iid`: the generate stage's default: G independent samples per prompt from the rollout backend."""

from __future__ import annotations

from workers.knobs import Knobs
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.generate.base import sample_groups
from workers.pipeline.stages import Budget, GenerateStage, StageContext
from workers.tasks import Example


class IndependentGroups(GenerateStage):
    """G independent samples per prompt (GRPO: Shao et al. 2024, DeepSeekMath, sec. 4.1).

    Knobs: rollout.group_size (G), rollout.max_new_tokens, sampling temperature/top_p/top_k.
    """

    Knobs = Knobs

    def __init__(self, cfg):
        pass

    def __call__(self, ctx: StageContext, examples: list[Example], budget: Budget) -> RolloutBatch:
        batch = sample_groups(ctx, examples, budget)
        for g, size in enumerate(batch.group_sizes):
            batch.note("generate", f"sampled 1 of {size}", [g])
        return batch
