"""Rounds of extra rollouts go to the prompts whose t-interval of the mean reward shrinks most (XRPO).

Paper: Bamba et al. 2025, *XRPO: Pushing the limits of GRPO with Targeted Exploration and
Exploitation* (arXiv 2510.06672), the hierarchical rollout planner.

The code: component.py (UncertaintyAllocation).
"""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Checked, Component


class XRPOKnobs(Knobs):
    extra_budget: float = Field(
        1.0,
        gt=0,
        le=16,
        description="Most extra rollouts of a step, as a multiple of its base budget "
        "(rollout.prompts_per_step x rollout.group_size, the first stage of rollout.group_size per prompt).",
    )
    round_size: int = Field(
        0, ge=0, le=65536, description="Extra rollouts handed out per stage (0 = rollout.prompts_per_step)."
    )
    stages: int = Field(
        5, ge=2, le=64, description="Rollout stages per round: the first, then up to stages - 1 rounds of extras."
    )
    confidence: float = Field(
        0.95, gt=0.5, lt=1, description="1 - alpha: the level of the t confidence interval of a mean reward."
    )
    bonus: float = Field(
        0.05,
        ge=0,
        le=10,
        description="c of the exploration bonus c sqrt(ln N / n_q) for prompts sampled less often (0: none).",
    )


COMPONENT = Component(
    "xrpo",
    "component:UncertaintyAllocation",
    knobs=XRPOKnobs,
    checked=Checked(
        presets="xrpo",
        paper="Bamba et al. 2025 (XRPO)",
        how="documented choice: the UCB bonus counts the run's history; no in-context seeding",
        card="xrpo.md",
        quote="The bonus is UCB-shaped and counts the run's history as well as this step",
    ),
)
