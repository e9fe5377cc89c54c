"""SALT: GRPO's episode advantages, each turn's replaced by the mean over the episodes of its group that took the
same step (the same transition in the group's trajectory graph).

Paper: Li et al. 2025, *SALT: Step-level Advantage Assignment for Long-horizon Agents via Trajectory Graph* (EACL
2026 Findings; abstract): a graph built from the trajectories of one prompt quantifies each step's quality from the
outcome rewards alone, as a plug-and-play module over group-based RL (no change to the rollouts). The method
section could not be read here: the form (the mean of the GRPO advantages of the trajectories through an edge) is
taken from a later paper's account of SALT, and the card says so.

The code: component.py (TrajectoryGraphAdvantage). Needs multi-turn episodes (an environment).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from workers.pipeline.advantage.shared import NormalizationKnobs, check_environment
from workers.registry import Checked, Component


class SALTKnobs(NormalizationKnobs):
    edge: Literal["transition", "states"] = Field(
        "transition",
        description="What makes two turns the same step, an edge of the graph. transition: the same state before, "
        "the same text written and the same state after (s, a, s'); states: the same states before and after "
        "only (for an environment whose state key already tells what was done).",
    )


def check(cfg) -> None:
    check_environment(cfg, "salt")


COMPONENT = Component(
    "salt",
    "component:TrajectoryGraphAdvantage",
    knobs=SALTKnobs,
    check=check,
    checked=Checked(
        presets="salt",
        paper="Li et al. 2025 (SALT), abstract; the edge-mean form as a later paper describes it",
        how="documented choice: the step's quality is the mean GRPO advantage of the episodes through its edge",
        card="salt.md",
        quote="A(i, t) = mean of A_j over the episodes j of the group that took edge e(i, t)",
    ),
)
