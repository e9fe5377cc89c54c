"""`GroupFilter`, the part every filter shares: the component picks groups, then the overlong mask applies."""

from __future__ import annotations

import torch

from workers.pipeline.batch import RolloutBatch
from workers.pipeline.filter.shared import FilterKnobs
from workers.pipeline.stages import FilterStage, StageContext


class GroupFilter(FilterStage):
    """The part every filter shares: run the component's group choice, then mask overlong samples.

    filter.overlong (DAPO, Yu et al. 2025, sec. 3.4 and Table 1, "overlong filtering"): a
    truncated completion keeps its reward in the group's baseline, but is left out of the loss
    (`batch.in_loss` False), since its reward says it ran out of room, not that it reasoned badly.
    """

    Knobs = FilterKnobs
    max_rounds = 1

    def __init__(self, cfg):
        self.overlong = cfg.filter.overlong

    def __call__(self, batch: RolloutBatch, ctx: StageContext) -> list[int]:
        kept = self.keep(batch, ctx)
        in_loss = torch.ones(batch.num_samples, dtype=torch.bool)
        if self.overlong:
            truncated = batch.truncated.cpu()
            in_loss &= ~truncated
            for row in truncated.nonzero().flatten().tolist():
                batch.notes[row]["filter"] += "; truncated: left out of the loss"
        batch.in_loss = in_loss
        return kept

    def keep(self, batch: RolloutBatch, ctx: StageContext) -> list[int]:
        raise NotImplementedError
