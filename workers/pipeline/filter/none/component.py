"""`none`: the filter stage's default: every group is trained on."""

from __future__ import annotations

from workers.pipeline.batch import RolloutBatch
from workers.pipeline.filter.base import GroupFilter
from workers.pipeline.stages import StageContext


class KeepAll(GroupFilter):
    """Every group is trained on, informative or not (GRPO)."""

    def keep(self, batch: RolloutBatch, ctx: StageContext) -> list[int]:
        batch.note("filter", "kept")
        return list(range(batch.num_groups))
