"""GRPO's correctness advantage; correct ones share theirs by exp(length reward / lambda) among themselves (DRPO).

Paper: *DRPO: Efficient Reasoning via Decoupled Reward Policy Optimization* (the seed list,
abstract).

The code: component.py (DecoupledLengthReward).
"""

from __future__ import annotations

from pydantic import Field

from workers.pipeline.advantage.shared import GroupEstimatorKnobs, check_reward_part
from workers.registry import Checked, Component


class DecoupledLengthKnobs(GroupEstimatorKnobs):
    kl_lambda: float = Field(
        0.2,
        gt=0,
        le=100,
        description="lambda: the KL weight of the optimal positive distribution; a correct completion's weight "
        "among its group's correct ones is proportional to exp(preference reward / lambda), so smaller lambda "
        "favours the shortest more sharply (large: every correct one alike, GRPO).",
    )
    preference: str = Field(
        "length",
        max_length=64,
        description="The reward function (a name in reward.weights) that ranks correct completions among "
        "themselves, weighted as reward.weights says; it never enters the correctness advantage.",
    )
    solved_advantage: float = Field(
        1.0,
        ge=0,
        le=10,
        description="Mean advantage of the correct completions of a group with no wrong one, shared by the same "
        "weights (GRPO gives such a group 0; 0 here: such groups train nothing).",
    )


def check_drpo(cfg) -> None:
    """The preference reward must be one of the run's, and some other reward must give the correctness advantage."""
    check_reward_part(cfg, "preference", "drpo")


COMPONENT = Component(
    "drpo",
    "component:DecoupledLengthReward",
    knobs=DecoupledLengthKnobs,
    check=check_drpo,
    checked=Checked(
        presets="drpo",
        paper="DRPO 2025 (abstract)",
        how="documented choice: the weights redistribute GRPO's positive advantage; λ = 0.2",
        card="drpo.md",
        quote="The abstract does not say how the importance weights enter the loss.",
    ),
)
