"""A_i = (r_i - mean(r)) / (std(r) + eps) over the group (GRPO: Shao et al. 2024, eq. 3).

Paper: Shao et al. 2024, *DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language
Models*, eq. 3 (GRPO); advantage.scale = none is Dr. GRPO's (Liu et al. 2025, *Understanding
R1-Zero-Like Training: A Critical Perspective*, sec. 3.2).

The code: component.py (GroupMean).
"""

from __future__ import annotations

from workers.pipeline.advantage.shared import GroupEstimatorKnobs
from workers.registry import Checked, Component

COMPONENT = Component(
    "group-mean",
    "component:GroupMean",
    knobs=GroupEstimatorKnobs,
    checked=Checked(
        presets="grpo, and most presets; `scale: none` in dr-grpo, dars",
        paper="Shao et al. 2024, eq. 3; Liu et al. 2025 (Dr. GRPO), sec. 3.2",
        how="paper form",
        card="grpo.md",
        quote="divided by the group's standard deviation (`advantage: group-mean`",
    ),
)
