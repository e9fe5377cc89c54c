"""GRPO's advantage with the length penalty only in groups whose pass rate reaches a threshold (GRPO-lambda).

Paper: *Stable Reinforcement Learning for Efficient Reasoning* (GRPO-λ; the seed list, abstract).

The code: component.py (AccuracyGatedPenalty).
"""

from __future__ import annotations

from pydantic import Field

from workers.pipeline.advantage.shared import GroupEstimatorKnobs, check_reward_part
from workers.registry import Checked, Component


class AccuracyGatedKnobs(GroupEstimatorKnobs):
    accuracy_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description="A group whose share of correct completions is at least this is scored with the penalty "
        "reward as well; below it, by the other rewards alone (0: every group, the plain length penalty; "
        "1: only groups that are all correct).",
    )
    penalty: str = Field(
        "length",
        max_length=64,
        description="The reward function (a name in reward.weights) that counts only in groups at or above "
        "the accuracy threshold, weighted as reward.weights says.",
    )


def check_grpo_lambda(cfg) -> None:
    """The gated reward must be one of the run's, and some other reward must score the groups below the gate."""
    check_reward_part(cfg, "penalty", "grpo-lambda")


COMPONENT = Component(
    "grpo-lambda",
    "component:AccuracyGatedPenalty",
    knobs=AccuracyGatedKnobs,
    check=check_grpo_lambda,
    checked=Checked(
        presets="grpo-lambda",
        paper="GRPO-λ 2025 (abstract)",
        how="documented choice: the threshold 0.5 and the penalty's weight 0.5",
        card="grpo-lambda.md",
        quote="The abstract does not fix the threshold",
    ),
)
