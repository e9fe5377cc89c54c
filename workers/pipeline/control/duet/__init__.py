"""A surrogate sets each prompt's rollouts at a fixed total; long rollouts without an answer marker abort (DUET).

Paper: *DUET: Optimize Token-Budget Allocation for Reinforcement Learning with Verifiable Rewards*
(2025, the seed list).

The code: component.py (DualTokenAllocation).
"""

from __future__ import annotations

from pydantic import Field

from workers.knobs import Knobs
from workers.pipeline.control.shared import check_mean_within_bounds
from workers.registry import Checked, Component


class DUETKnobs(Knobs):
    min_group: int = Field(2, ge=2, le=256, description="Fewest rollouts a prompt gets.")
    max_group: int = Field(16, ge=2, le=256, description="Most rollouts a prompt gets.")
    abort_after: float = Field(
        0.75,
        gt=0,
        le=1,
        description="Share of a rollout's length limit after which, without the marker, it is aborted.",
    )
    marker: str = Field(
        "", max_length=64, description="Text whose tokens show a rollout has begun its answer ('': no gate)."
    )
    min_survivors: int = Field(2, ge=1, le=256, description="Rollouts of a group never aborted (the last ones left).")


def check_duet(cfg) -> None:
    """DUET divides rollouts among prompts at a fixed mean, rollout.group_size: it must lie within the bounds."""
    check_mean_within_bounds(cfg, "DUET")


COMPONENT = Component(
    "duet",
    "component:DualTokenAllocation",
    knobs=DUETKnobs,
    check=check_duet,
    checked=Checked(
        presets="duet",
        paper="DUET 2025 (abstract)",
        how="documented choice: a √(p(1−p)) surrogate, Neyman's split at a fixed total",
        card="duet.md",
        quote="allocation is Neyman's (sizes ∝ predicted std)",
    ),
)
