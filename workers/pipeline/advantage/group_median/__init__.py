"""A_i = (r_i - median(r)) / (spread + eps); the median sample (the pivot) is left out of the loss.

Paper: Kim 2026, *MC-GRPO: Median-Centered Group Relative Policy Optimization for Small-Rollout
Reinforcement Learning* (arXiv 2601.22582), sec. 3, and the authors' code.

The code: component.py (GroupMedian).
"""

from __future__ import annotations

from workers.pipeline.advantage.shared import GroupEstimatorKnobs
from workers.registry import Checked, Component

COMPONENT = Component(
    "group-median",
    "component:GroupMedian",
    knobs=GroupEstimatorKnobs,
    checked=Checked(
        presets="mc-grpo",
        paper="Kim 2026 (MC-GRPO), sec. 3, and the authors' code",
        how="paper form; the MAD scale from the authors' code",
        card="mc-grpo.md",
        quote="The scale follows the authors' code",
    ),
)
