"""GiGPO: an episode's group-relative advantage plus each turn's, relative to the turns taken from the same state.

Paper: Feng et al. 2025, *Group-in-Group Policy Optimization for LLM Agent Training*, sec. 3: the episode-level
advantage is GRPO's over a group of complete episodes; anchor-state grouping then gathers, within the group, the
turns taken from an identical environment state, and a turn's step-level advantage is its discounted return
relative to that step group's; a token's advantage is A_episode + omega * A_step.

The code: component.py (GroupInGroup). Needs multi-turn episodes (an environment).
"""

from __future__ import annotations

from pydantic import Field

from workers.pipeline.advantage.shared import NormalizationKnobs, check_environment
from workers.registry import Checked, Component


class GiGPOKnobs(NormalizationKnobs):
    step_weight: float = Field(
        1.0, ge=0, le=100, description="omega: the weight of the step-level advantage beside the episode's."
    )
    discount: float = Field(
        0.95,
        ge=0,
        le=1,
        description="gamma: a turn's return is its reward part plus gamma times the next turn's return.",
    )


def check(cfg) -> None:
    check_environment(cfg, "gigpo")


COMPONENT = Component(
    "gigpo",
    "component:GroupInGroup",
    knobs=GiGPOKnobs,
    check=check,
    checked=Checked(
        presets="gigpo",
        paper="Feng et al. 2025, sec. 3 (episode-level and anchor-state step-level advantages)",
        how="paper form",
        card="gigpo.md",
        quote="a token's advantage is A_episode + ω · A_step",
    ),
)
