"""Drop groups that carry no learning signal and sample more prompts until the batch is full.

Paper: Yu et al. 2025, *DAPO: An Open-Source LLM Reinforcement Learning System at Scale*, sec. 3.2,
eq. 11 (dynamic sampling); filter.overlong is its sec. 3.4 (overlong filtering).

The code: component.py (DynamicSampling).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workers.pipeline.filter.shared import FilterKnobs
from workers.registry import Checked, Component


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


COMPONENT = Component(
    "dynamic-sampling",
    "component:DynamicSampling",
    knobs=DynamicSamplingKnobs,
    checked=Checked(
        presets="dapo, dars",
        paper="Yu et al. 2025 (DAPO), sec. 3.2, eq. 11; the DARS authors' code",
        how="paper form (`signal: correct`); dars: one round, no refill, as the authors' code",
        card="dapo.md",
        quote="`filter.signal: correct` now follows the paper",
    ),
)
