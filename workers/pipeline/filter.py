"""Filter stage: which groups go on to training."""

from __future__ import annotations

from workers.pipeline.batch import RolloutBatch
from workers.registry import Registry

FILTERS: Registry[type] = Registry("filter component")


@FILTERS.register("none")
class KeepAll:
    """Every group is trained on, informative or not (GRPO)."""

    max_rounds = 1

    def __init__(self, cfg):
        pass

    def __call__(self, batch: RolloutBatch) -> list[int]:
        batch.note("filter", "kept")
        return list(range(batch.num_groups))


@FILTERS.register("dynamic-sampling")
class DynamicSampling:
    """Drop groups whose rewards are all equal and sample more prompts until the batch is full.

    DAPO (Yu et al. 2025, sec. 3.2, eq. 11): keep only groups with
    0 < #correct < G, since a group of equal rewards has zero advantage
    everywhere and only dilutes the gradient. The trainer runs up to
    filter.max_rounds generation rounds per step; if the batch is still short,
    it trains on the groups it has, and never on a zero-variance one.
    Knobs: filter.max_rounds.
    """

    def __init__(self, cfg):
        self.max_rounds = cfg.filter.max_rounds

    def __call__(self, batch: RolloutBatch) -> list[int]:
        rewards = batch.group(batch.rewards)  # (P, n)
        informative = (rewards.max(-1).values > rewards.min(-1).values).tolist()
        kept = [g for g, keep in enumerate(informative) if keep]
        dropped = [g for g, keep in enumerate(informative) if not keep]
        batch.note("filter", "kept", kept)
        batch.note("filter", "dropped: all rewards equal", dropped)
        return kept
