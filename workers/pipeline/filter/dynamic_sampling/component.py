"""`dynamic-sampling`: DAPO's dynamic sampling: groups without learning signal are dropped, more are sampled."""

from __future__ import annotations

from workers.pipeline.batch import RolloutBatch
from workers.pipeline.filter.base import GroupFilter
from workers.pipeline.filter.dynamic_sampling import DynamicSamplingKnobs
from workers.pipeline.stages import StageContext


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
