"""Prompts below an accuracy threshold get extra rollouts in further stages, the harder the more (DARS).

Paper: Yang et al. 2025, *Depth-Breadth Synergy in RLVR: Unlocking LLM Reasoning Gains with Adaptive
Exploration* (arXiv 2508.13755), the DARS section, and the authors' code.

The code: component.py (DifficultyAdaptiveRollouts).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Checked, Component


class DARSKnobs(Knobs):
    schedule: Literal["equal-treatment", "hardness-weighted"] = Field(
        "equal-treatment",
        description="equal-treatment: each low-accuracy prompt gets the rollouts that bring its cumulative "
        "advantage up to that of a G-group at accuracy 0.5; hardness-weighted: that mass times 2 (1 - accuracy), "
        "so the harder the prompt, the more rollouts.",
    )
    threshold: float = Field(
        0.5, gt=0, le=0.5, description="Prompts whose accuracy so far is below this get extra rollouts."
    )
    max_extra: int = Field(12, ge=1, le=1024, description="Most extra rollouts one prompt gets in a step.")
    extra_budget: float = Field(
        1.0,
        gt=0,
        le=16,
        description="Most extra rollouts of a step, as a multiple of its base budget "
        "(rollout.prompts_per_step x rollout.group_size).",
    )
    stages: int = Field(
        3, ge=2, le=16, description="Rollout stages per round: the first, then up to stages - 1 of extras."
    )
    mass: Literal["without-std", "with-std"] = Field(
        "without-std",
        description="The cumulative advantage |A| summed over a group of n at accuracy a that the schedules "
        "balance: without-std, 2 n a (1 - a), the advantage r - mean (the authors' experiments, "
        "grpo_use_std=False); with-std, 2 n sqrt(a (1 - a)), GRPO's advantage divided by the group's std.",
    )


COMPONENT = Component(
    "dars",
    "component:DifficultyAdaptiveRollouts",
    knobs=DARSKnobs,
    checked=Checked(
        presets="dars",
        paper="Yang et al. 2025 (DARS) and the authors' code",
        how="paper form, from the authors' code: no-std mass, one stage of extras, an all-wrong prompt at 0.5/G",
        card="dars.md",
        quote="**the authors' experiments** (every script sets",
    ),
)
