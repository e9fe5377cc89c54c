"""The filter stage's components: each picks groups, then the shared overlong mask applies (see __init__)."""

from __future__ import annotations

import torch

from workers.pipeline.batch import RolloutBatch
from workers.pipeline.filter.knobs import DynamicSamplingKnobs, FilterKnobs
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


class KeepAll(GroupFilter):
    """Every group is trained on, informative or not (GRPO)."""

    def keep(self, batch: RolloutBatch, ctx: StageContext) -> list[int]:
        batch.note("filter", "kept")
        return list(range(batch.num_groups))


class DynamicSampling(GroupFilter):
    """Drop groups that carry no learning signal and sample more prompts until the batch is full.

    DAPO (Yu et al. 2025, sec. 3.2, eq. 11): keep only groups with 0 < #correct < G,
    since a group that is all right or all wrong has the same verdict everywhere and only
    dilutes the gradient. With filter.signal = reward the test is instead that the
    rewards differ (a length penalty then keeps an all-wrong group alive). The trainer
    runs up to filter.max_rounds generation rounds per step; if the batch is still
    short, it trains on the groups it has and reports the shortfall.
    Knobs: filter.signal, filter.max_rounds.
    """

    Knobs = DynamicSamplingKnobs

    def __init__(self, cfg):
        super().__init__(cfg)
        self.max_rounds, self.signal = cfg.filter.max_rounds, cfg.filter.signal

    def keep(self, batch: RolloutBatch, ctx: StageContext) -> list[int]:
        values = batch.correct.float() if self.signal == "correct" else batch.rewards  # (N,)
        informative = (batch.group_reduce(values, "amax") > batch.group_reduce(values, "amin")).tolist()  # (P,)
        kept = [g for g, keep in enumerate(informative) if keep]
        dropped = [g for g, keep in enumerate(informative) if not keep]
        reason = "all correct or all wrong" if self.signal == "correct" else "all rewards equal"
        batch.note("filter", "kept", kept)
        batch.note("filter", f"dropped: {reason}", dropped)
        return kept
