"""Over-sample, predict partial rollouts' success with a head trained online, prune groups to G balanced (arrol).

Paper: *Prune as You Generate: Online Rollout Pruning for Faster and Better RLVR* (arrol, 2025,
the seed list).

The code: component.py (OnlineRolloutPruning).
"""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.registry import Checked, Component


class ArrolKnobs(Knobs):
    oversample: float = Field(2.0, ge=1, le=8, description="Rollouts started per rollout kept (of each group).")
    check_at: int = Field(
        2, ge=2, le=4096, description="Tokens after which the head judges the partial rollouts and the group is pruned."
    )
    head_lr: float = Field(0.05, gt=0, le=10, description="Learning rate of the quality head (Adam).")
    head_steps: int = Field(20, ge=1, le=1000, description="Gradient steps of the head after each scored step.")
    warmup_steps: int = Field(5, ge=0, le=10_000, description="Steps the head trains before its predictions prune.")


COMPONENT = Component(
    "arrol",
    "component:OnlineRolloutPruning",
    knobs=ArrolKnobs,
    checked=Checked(
        presets="arrol",
        paper="Prune as You Generate (arrol) 2025",
        how="documented choice: one early check (2 tokens), a linear head on the last hidden state",
        card="arrol.md",
        quote="Choices where the paper leaves room: one check, early",
    ),
)
