"""Over-provision groups, stop when the step's groups are finished, continue unfinished completions later (APRIL).

Paper: *APRIL: Active Partial Rollouts in Reinforcement Learning to Tame Long-tail Generation*
(2025, the seed list; integrated in the authors' slime framework).

The code: component.py (ActivePartialRollouts).
"""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Checked, Component


class APRILKnobs(Knobs):
    oversample: float = Field(
        2.0,
        ge=1,
        le=8,
        description="Groups in flight per group trained on: the pool is topped up with new prompts to "
        "ceil(oversample x prompts) groups (the paper's over-provisioned rollout batch).",
    )
    check_every: int = Field(1, ge=1, le=1024, description="Tokens between two checks of how many groups are finished.")


COMPONENT = Component(
    "april",
    "component:ActivePartialRollouts",
    knobs=APRILKnobs,
    reuses_samples=True,
    checked=Checked(
        presets="april",
        paper="APRIL 2025",
        how="documented choice: the group is the unit; the pool first-in first-out",
        card="april.md",
        quote="**The unit is the group**",
    ),
)
