"""Filter stage: which groups go on to training, and which samples of them carry gradient.

Every filter component picks groups (`keep`); the stage then applies the
sample-level filters that any method may switch on (filter.overlong), so a
knob like DAPO's overlong filtering works with every group filter alike.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from workers.knobs import Knobs
from workers.pipeline.batch import RolloutBatch
from workers.pipeline.stages import StageContext
from workers.registry import Registry

FILTERS: Registry[type] = Registry("filter component")


class FilterKnobs(Knobs):
    overlong: bool = Field(
        False,
        description="Overlong filtering (DAPO, Table 1): truncated completions stay in their group's "
        "baseline but are left out of the loss, so a completion cut off mid-answer is never pushed down.",
    )


class GroupFilter:
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


@FILTERS.register("none")
class KeepAll(GroupFilter):
    """Every group is trained on, informative or not (GRPO)."""

    def keep(self, batch: RolloutBatch, ctx: StageContext) -> list[int]:
        batch.note("filter", "kept")
        return list(range(batch.num_groups))


class DynamicSamplingKnobs(FilterKnobs):
    max_rounds: int = Field(
        4,
        ge=1,
        description="Most generation rounds per step; a batch still short after them is trained on as it "
        "is, and the shortfall is reported (pipeline/filter/missing_groups) and logged.",
    )
    signal: Literal["correct", "reward"] = Field(
        "correct",
        description="What must vary within a group for it to be kept. correct: its accuracy is strictly "
        "between 0 and 1 (DAPO eq. 11); reward: its rewards are not all equal (a length penalty alone "
        "then keeps an all-wrong group).",
    )


@FILTERS.register("dynamic-sampling")
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
