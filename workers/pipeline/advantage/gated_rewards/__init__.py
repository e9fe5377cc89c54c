"""Gated rewards (G-RA): an episode's immediate rewards count only when its outcome meets a threshold, then GRPO.

Paper: Sun et al. 2025, *Stabilizing Long-term Multi-turn Reinforcement Learning with Gated Rewards*: immediate
(step-verification) rewards misaligned with the long-term goal are hacked when they are simply added to the
outcome (direct reward accumulation, D-RA); Gated Reward Accumulation adds them only when the high-level
(outcome) reward meets a threshold: R = r_high + 1[r_high >= delta] * sum_t r_low_t.

The code: component.py (GatedRewardAccumulation). Needs multi-turn episodes (an environment).
"""

from __future__ import annotations

from pydantic import Field

from workers.pipeline.advantage.shared import NormalizationKnobs
from workers.registry import Checked, Component


class GatedRewardsKnobs(NormalizationKnobs):
    threshold: float = Field(
        1.0,
        ge=-1e6,
        le=1e6,
        description="delta: the outcome (the reward part of an episode's last turn) at or above which the "
        "episode's immediate rewards are added to it; below every outcome, every episode adds them (the "
        "paper's ungated baseline, D-RA).",
    )
    format_weight: float = Field(
        0.1,
        ge=0,
        le=100,
        description="The immediate reward of each well-formed turn before the last (an action the environment "
        "could execute: the paper's rule-based step verification).",
    )
    part_weight: float = Field(
        1.0,
        ge=0,
        le=100,
        description="The weight of the reward parts of the turns before the last (an environment's own per-step "
        "rewards, e.g. a box placed) among the immediate rewards.",
    )


def check(cfg) -> None:
    if cfg.environment.name == "none":
        raise ValueError(
            "environment.name: advantage gated-rewards gates the immediate rewards of multi-turn episodes; choose "
            "an environment (e.g. calculator)"
        )


COMPONENT = Component(
    "gated-rewards",
    "component:GatedRewardAccumulation",
    knobs=GatedRewardsKnobs,
    check=check,
    checked=Checked(
        presets="gated-rewards",
        paper="Sun et al. 2025, G-RA (R = r_high + 1[r_high ≥ δ] · Σ r_low)",
        how="documented choice: immediate rewards are well-formed turns and non-final reward parts; "
        "δ = 1, format weight 0.1",
        card="gated-rewards.md",
        quote="an episode's return is R = r_high + 1[r_high ≥ δ] · Σ r_low",
    ),
)
