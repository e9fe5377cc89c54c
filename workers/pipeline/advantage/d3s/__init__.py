"""GRPO advantages; train only each group's max-variance rollouts and their top |A|·H tokens, relaxing (D³S).

Paper: *Learning More with Less: A Dynamic Dual-Level Down-Sampling Framework for Efficient Policy
Optimization* (D³S, 2025, the seed list).

The code: component.py (DualLevelDownSampling).
"""

from __future__ import annotations

from pydantic import Field

from workers.pipeline.advantage.shared import GroupEstimatorKnobs
from workers.registry import Checked, Component


class D3SKnobs(GroupEstimatorKnobs):
    sample_share: float = Field(0.5, gt=0, le=1, description="Share of each group kept at the start of the schedule.")
    token_share: float = Field(
        0.5, gt=0, le=1, description="Share of the kept rollouts' tokens kept at the start of the schedule."
    )
    relax_steps: int = Field(
        200, ge=1, le=1_000_000, description="Steps over which both shares rise linearly to 1 (keep everything)."
    )


COMPONENT = Component(
    "d3s",
    "component:DualLevelDownSampling",
    knobs=D3SKnobs,
    checked=Checked(
        presets="d3s",
        paper="D³S 2025 (abstract)",
        how="documented choice: the start shares (0.5) and the relaxation",
        card="d3s.md",
        quote="the start shares (0.5) and the relaxation (200 of 300 steps)",
    ),
)
