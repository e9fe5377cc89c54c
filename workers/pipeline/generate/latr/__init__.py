"""Branch at uncertain tokens into other candidates, look ahead, prune branches that stay alike (LATR).

Paper: *Lookahead Tree-Based Rollouts for Enhanced Trajectory-Level Exploration in Reinforcement
Learning with Verifiable Rewards* (LATR, 2025, the seed list).

The code: component.py (LookaheadTreeRollouts).
"""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Checked, Component


class LATRKnobs(Knobs):
    branch_threshold: float = Field(
        0.2, gt=0, le=1, description="Branch where the most likely other token has at least this probability."
    )
    lookahead: int = Field(2, ge=1, le=1024, description="Tokens a new branch is decoded before it is compared.")
    similarity: float = Field(
        1.0, gt=0, le=1, description="Prune a branch whose lookahead tokens match its sibling's at this share or more."
    )
    roots: int = Field(1, ge=1, le=256, description="Sequences each tree starts from (at most the group size).")


COMPONENT = Component(
    "latr",
    "component:LookaheadTreeRollouts",
    knobs=LATRKnobs,
    checked=Checked(
        presets="latr",
        paper="LATR 2025 (abstract)",
        how="documented choice: uncertainty is the best alternative token's probability",
        card="latr.md",
        quote="uncertainty is the probability of the best alternative token",
    ),
)
