"""The filter stage's components as RunConfig knows them: names, summaries and knobs (no torch here)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Registry

FILTERS: Registry[type] = Registry("filter component")


class FilterKnobs(Knobs):
    overlong: bool = Field(
        False,
        description="Overlong filtering (DAPO, Table 1): truncated completions stay in their group's "
        "baseline but are left out of the loss, so a completion cut off mid-answer is never pushed down.",
    )


FILTERS.declare(
    "none",
    "workers.pipeline.filter.base:KeepAll",
    summary="Every group is trained on, informative or not (GRPO).",
    knobs=FilterKnobs,
)


class DynamicSamplingKnobs(FilterKnobs):
    max_rounds: int = Field(
        4,
        ge=1,
        le=64,
        description="Most generation rounds per step; a batch still short after them is trained on as it "
        "is, and the shortfall is reported (pipeline/filter/missing_groups) and logged.",
    )
    signal: Literal["correct", "reward"] = Field(
        "correct",
        description="What must vary within a group for it to be kept. correct: its accuracy is strictly "
        "between 0 and 1 (DAPO eq. 11); reward: its rewards are not all equal (a length penalty alone "
        "then keeps an all-wrong group).",
    )


FILTERS.declare(
    "dynamic-sampling",
    "workers.pipeline.filter.base:DynamicSampling",
    summary="Drop groups that carry no learning signal and sample more prompts until the batch is full.",
    knobs=DynamicSamplingKnobs,
)
